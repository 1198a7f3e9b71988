// Store — persistence of tasks, jobs, evaluated kernels and job logs in the reference's tables (reference
// spec §5.6). The tables, column names and declared types are those SQLAlchemy creates for the reference's
// models, so the reference's tools can read a database we write and we can append to one they created.
//
// Contract:
//  * Store is an interface; SqliteStore is the default backend (PostgreSQL can be added beside it).
//  * Every write runs in one transaction: it either lands completely or not at all.
//  * Values are checked against the column types before they are written; a wrong type, an unknown column
//    or a too-long VARCHAR(n) value throws kf::Error(kInvalidArgument) naming "table.column".
//  * Rows cross the API as kf::Json objects keyed by column name. JSON columns hold any JSON value (null =
//    SQL NULL); BOOLEAN columns are JSON booleans (stored 0/1); DATETIME columns are UTC text
//    "YYYY-MM-DD HH:MM:SS.ffffff" (SQLAlchemy's SQLite DateTime format).
//  * Job lifecycle: INIT, RUN, VALIDATING are active; COMPLETE, FAIL, CANCELED, VALIDATED are terminal.
//    Reaching a terminal status sets finished_at when it is empty; COMPLETE sets progress to 1.0; progress
//    is clamped to [0, 1]. A CANCELED job is never changed again: UpdateJob reports kCanceled to the caller
//    (the reference exits the process instead).
//  * Differences from the reference: kernels.task_id may be NULL in databases we create (the reference
//    declares it NOT NULL although kernels can exist without a stored task); opening an existing database
//    also checks declared type affinities, not only column presence.
//
// Thread safety: all methods of a SqliteStore may be called concurrently (calls are serialised
// internally). Several processes (or several SqliteStore objects) may write one database file at once: it
// runs in WAL mode and waits up to the busy timeout for the write lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"

namespace kf {

/// Status of a row in `jobs` (stored as the upper-case name, e.g. "RUN").
enum class JobStatus { kInit, kRun, kValidating, kComplete, kFail, kCanceled, kValidated };

/// "INIT", "RUN", "VALIDATING", "COMPLETE", "FAIL", "CANCELED", "VALIDATED".
std::string_view JobStatusName(JobStatus status);
/// Parses a status name (exact, upper case). Throws kf::Error(kInvalidArgument) on anything else.
JobStatus ParseJobStatus(std::string_view name);
/// True for COMPLETE, FAIL, CANCELED, VALIDATED.
bool IsTerminal(JobStatus status);

/// Fields to change in a job. Unset fields are left as they are.
struct JobUpdate {
  std::optional<JobStatus> status{};
  std::optional<double> progress{};    ///< fraction done; clamped to [0, 1]; NaN is rejected
  std::optional<std::string> task_id{};  ///< the tasks.id hash, at most 64 characters
  std::optional<Json> config{};        ///< replaces jobs.config
  bool started = false;                ///< sets started_at to now when it is empty
};

/// What UpdateJob did.
enum class JobUpdateOutcome {
  kUpdated,   ///< the update was written
  kCanceled,  ///< the job is CANCELED; nothing was written and the caller should stop working on it
};

/// One row for `job_logs`. Empty optionals are stored as NULL.
struct JobLog {
  int64_t job_id = 0;
  std::optional<std::string> hostname{};
  std::optional<std::string> kernel_uuid{};
  std::optional<std::string> agent_session_id{};  ///< at most 64 characters
  std::string level = "INFO";                   ///< at most 16 characters (INFO, DEBUG, WARNING, RAW, …)
  std::string message{};
  Json extra = nullptr;     ///< any JSON value; null = NULL
  std::string timestamp{};  ///< "YYYY-MM-DD HH:MM:SS.ffffff" UTC; empty = now
};

/// Filter for ListKernels. All set filters must match.
struct KernelQuery {
  std::optional<std::string> task_name{};
  std::optional<int64_t> job_id{};
  int64_t last_n = 0;                ///< only the newest N rows (by id); 0 = all
  std::vector<std::string> columns{};  ///< kernels columns to return, in this order; empty = all
};

/// The kernels profiler columns made from an EvalResult.profiler_data object (spec §5.6). Each is null
/// when it would be empty.
struct ProfilerDataColumns {
  Json profiler_data = nullptr;                   ///< candidate entries, minus timeline/lineinfo
  Json profiler_data_reference = nullptr;         ///< entries whose key ends in "_ref", suffix removed
  Json profiler_data_detail = nullptr;            ///< {name: {timeline?, lineinfo?}} of the candidate
  Json profiler_data_detail_reference = nullptr;  ///< the same for the reference entries
};

/// Splits profiler data for the kernels row: keys ending in "_ref" go to the reference columns (without
/// the suffix); the non-null sub-keys "timeline" and "lineinfo" of object entries move to the *_detail*
/// columns. A non-object input gives all nulls.
ProfilerDataColumns SplitProfilerData(const Json& profiler_data);

/// The kernels worker-info columns made from EvalResult.metadata ({arch: {compile_worker_info?,
/// eval_worker_info?, …}, "error": "…"}). Each is {arch: info} over the object-valued entries that have a
/// non-empty info; other entries (strings such as "error") are ignored. Empty results are {} as in the
/// reference.
struct WorkerInfoColumns {
  Json compile_worker_info = Json::object();
  Json eval_worker_info = Json::object();
};
WorkerInfoColumns SplitWorkerInfos(const Json& metadata);

/// The current time as stored in DATETIME columns: UTC "YYYY-MM-DD HH:MM:SS.ffffff".
std::string NowTimestamp();
/// The default of kernels.db_user: the OS user name as Python's getpass.getuser() finds it (LOGNAME, USER,
/// LNAME, USERNAME, then the password database), cut to 128 characters; "unknown" if none.
std::string DefaultDbUser();
/// The results database path: $KF_DB when set and non-empty, else "runs/kernels.sqlite3" (relative to the
/// current directory, as the reference's default sqlite:///runs/kernels.sqlite3).
std::filesystem::path DefaultDbPath();

/// Persistence of pipeline results. See the file comment for the contract.
class Store {
 public:
  virtual ~Store() = default;

  /// Inserts a `tasks` row (the object from Task::ToDatabaseTask: id, task_name, task_origin, config,
  /// task_data, has_build_step, correctness_tests, profile_tests, the blocks and the hyperparameters; any
  /// subset of the tasks columns). Returns false, writing nothing, when a task with that id is stored
  /// already. Throws kf::Error(kInvalidArgument) on an unknown key, a wrong type or a missing required
  /// field (id, task_name, task_origin, has_build_step).
  virtual bool InsertTask(const Json& row) = 0;

  /// Creates a job (status INIT, progress 0, created_at now, token counts 0) and returns its id.
  virtual int64_t CreateJob(const std::string& task_origin, const Json& config) = 0;

  /// Applies `update` to job `id` following the lifecycle (file comment). Returns kCanceled, writing
  /// nothing, when the job is CANCELED. Throws kf::Error(kNotFound) for an unknown id,
  /// kf::Error(kInvalidArgument) for NaN progress or an over-long task_id.
  [[nodiscard]] virtual JobUpdateOutcome UpdateJob(int64_t id, const JobUpdate& update) = 0;

  /// Inserts a `kernels` row from any subset of the kernels columns and returns its id. Defaults:
  /// timestamp = now, db_user = DefaultDbUser(). Throws kf::Error(kInvalidArgument) naming the key for
  /// an unknown column, a wrong type or an over-long VARCHAR(n) value.
  virtual int64_t InsertKernel(const Json& row) = 0;

  /// Inserts all `logs` in one transaction (all or none).
  virtual void InsertJobLogs(const std::vector<JobLog>& logs) = 0;

  /// Kernel rows matching `query`, oldest first, each with the requested columns plus "job_status" (the
  /// status of the row's job, or null). JSON columns come back parsed. Throws kf::Error(kInvalidArgument)
  /// for an unknown column name.
  virtual std::vector<Json> ListKernels(const KernelQuery& query) = 0;

  /// The `jobs` row `id` with every column. Throws kf::Error(kNotFound) for an unknown id.
  virtual Json GetJob(int64_t id) = 0;

  /// The `tasks` row `id`, or nullopt when there is none.
  virtual std::optional<Json> GetTask(const std::string& id) = 0;
};

/// Options for SqliteStore::Open.
struct SqliteOptions {
  /// Open without writing: no directory, file or table is created and writes fail with kf::Error(kIO).
  bool read_only = false;
  /// How long a write waits for another writer's lock before failing with kf::Error(kIO).
  std::chrono::milliseconds busy_timeout{10000};
};

/// The SQLite backend.
class SqliteStore final : public Store {
 public:
  /// Opens (creating the parent directories, the file and any missing table unless read_only) the
  /// database at `path` in WAL mode, then checks every table: a missing table or column, or a column whose
  /// declared type has another affinity, throws kf::Error(kInvalidArgument) naming "table.column" and
  /// saying the database file is stale. A missing file with read_only throws kf::Error(kNotFound); a file
  /// that is not a SQLite database throws kf::Error(kParse); other failures kf::Error(kIO).
  static std::unique_ptr<SqliteStore> Open(const std::filesystem::path& path, const SqliteOptions& options = {});

  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  bool InsertTask(const Json& row) override;
  int64_t CreateJob(const std::string& task_origin, const Json& config) override;
  [[nodiscard]] JobUpdateOutcome UpdateJob(int64_t id, const JobUpdate& update) override;
  int64_t InsertKernel(const Json& row) override;
  void InsertJobLogs(const std::vector<JobLog>& logs) override;
  std::vector<Json> ListKernels(const KernelQuery& query) override;
  Json GetJob(int64_t id) override;
  std::optional<Json> GetTask(const std::string& id) override;

  /// The database file.
  const std::filesystem::path& path() const;

 private:
  struct Impl;
  explicit SqliteStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kf
