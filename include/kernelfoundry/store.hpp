// Store — persistence of tasks, jobs, evaluated kernels and job logs in the reference's tables (reference
// spec §5.6). The tables, column names and declared types are those SQLAlchemy creates for the reference's
// models, so the reference's tools can read a database we write and we can append to one they created.
//
// Contract:
//  * OpenStore(url) hands out the backend chosen by the URL: SQLite (a file path, sqlite:///relative,
//    sqlite:////absolute) or PostgreSQL (postgresql://user[:password]@host[:port]/db, also postgres://).
//    The backend classes are private; callers see only Store.
//  * Every write runs in one transaction: it either lands completely or not at all.
//  * Values are checked against the column types before they are written (the same checks for every
//    backend): a wrong type, an unknown column, a missing required field or a too-long VARCHAR(n) value
//    throws kf::Error(kInvalidArgument) naming "table.column".
//  * Rows cross the API as kf::Json objects keyed by column name. JSON columns hold any JSON value (null =
//    SQL NULL); BOOLEAN columns are JSON booleans; DATETIME columns are UTC text
//    "YYYY-MM-DD HH:MM:SS.ffffff" on every backend (SQLAlchemy's SQLite format; PostgreSQL stores them as
//    TIMESTAMP WITH TIME ZONE). Rows written by the reference's SQLite server default may lack the fraction.
//  * Job lifecycle: INIT, RUN, VALIDATING are active; COMPLETE, FAIL, CANCELED, VALIDATED are terminal.
//    Reaching a terminal status sets finished_at when it is empty; COMPLETE sets progress to 1.0; progress
//    is clamped to [0, 1]. A CANCELED job is never changed again: UpdateJob reports kCanceled to the caller
//    (the reference exits the process instead).
//  * "Our status" of a kernel is the typed column kernels.kf_status (VARCHAR(32)): the EvalStatus name of its
//    verdict (kf::EvalStatusName, e.g. "value_mismatch"), written with the row (kf::KernelRow); NULL for rows
//    the reference wrote. Summaries and filters read the column, never eval_log.
//  * Differences from the reference: kernels.task_id may be NULL in databases we create (the reference
//    declares it NOT NULL although kernels can exist without a stored task); opening an existing database
//    also checks declared types, not only column presence; kernels has our column kf_status after the
//    reference's, and read-write opens add indexes named kf_ix_*, so the read APIs stay fast with 100,000
//    kernels. The reference's models ignore both. A database written before kf_status existed (by the
//    reference or an older kf) is migrated by its first read-write open, once, in one transaction: the column
//    is added and filled from the first line of eval_log as older kf versions wrote it ("kf status: <name>"),
//    and our former table kf_kernel_status is dropped. Opened read-only, such a database reads kf_status as
//    NULL.
//  * Passwords in URLs never appear in errors: the `file` of a kf::Error is the path or RedactStoreUrl(url).
//
// Thread safety: all methods of one Store may be called concurrently (calls are serialised internally).
// Several processes or Store objects may write one database at once. SQLite runs in WAL mode and waits up to
// StoreOptions::busy_timeout for the write lock. PostgreSQL runs each write in a transaction (READ COMMITTED;
// UpdateJob locks the job row), inserting an already stored task id is not an error, and concurrent first
// opens of an empty database create the tables once (under an advisory lock).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
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
  /// Explicit times ("YYYY-MM-DD HH:MM:SS.ffffff" UTC), written as given (the reference's update_job_status
  /// arguments): started_at wins over `started`; finished_at replaces the time a terminal status would set.
  std::optional<std::string> started_at{};
  std::optional<std::string> finished_at{};
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

/// Sort keys of ListKernels.
enum class KernelSort {
  kId,         ///< insertion order
  kTimestamp,  ///< kernels.timestamp
  kScore,      ///< kernels.score (perf_score)
  kRuntime,    ///< kernels.runtime (ms)
  kSpeedup,    ///< kernels.improve_over_native
};
/// Parses "id", "timestamp", "score", "runtime", "speedup". Throws kf::Error(kInvalidArgument) otherwise.
KernelSort ParseKernelSort(std::string_view name);

/// Filter, order and page of ListKernels / CountKernels. All set filters must match.
struct KernelQuery {
  std::optional<std::string> task_name{};
  std::optional<int64_t> job_id{};
  std::optional<std::string> status{};     ///< kernels.status, the reference's status (correct/compiled/error)
  std::optional<std::string> kf_status{};  ///< kernels.kf_status, our status (file comment), e.g. "value_mismatch"
  std::optional<std::string> uuid{};         ///< kernels.uuid (lineage: one kernel by its uuid)
  std::optional<std::string> parent_uuid{};  ///< kernels.parent_uuid (lineage: the children of a kernel)
  std::optional<std::string> db_user{};      ///< kernels.db_user (who stored it; kf serve --submit's users)
  /// Only the newest N rows (by id), returned oldest first; 0 = all. Cannot be combined with limit/offset.
  int64_t last_n = 0;
  int64_t limit = 0;   ///< page size; 0 = no limit
  int64_t offset = 0;  ///< rows skipped before the page (needs no limit)
  /// Page order; ties are broken by id in the same direction; NULL sorts as the smallest value (first when
  /// ascending, last when descending — on every backend).
  KernelSort sort = KernelSort::kId;
  bool descending = false;
  /// kernels columns to return, in this order; empty = every column.
  std::vector<std::string> columns{};
};

/// Filter and page of ListJobs / CountJobs.
struct JobQuery {
  std::optional<std::string> task_name{};  ///< tasks.task_name of the job's task (jobs.task_id)
  std::optional<JobStatus> status{};
  int64_t limit = 0;   ///< page size; 0 = no limit
  int64_t offset = 0;  ///< rows skipped before the page
};

/// What ListTaskSummaries reports per task_name of the kernels table.
struct TaskSummary {
  std::string task_name;                         ///< "" for kernels without a task_name
  int64_t kernels = 0;                           ///< number of kernels rows
  std::map<std::string, int64_t> by_kf_status;   ///< our status -> rows ("" = not recorded by kf)
  std::map<std::string, int64_t> by_status;      ///< kernels.status -> rows ("" = NULL)
  /// Largest improve_over_native over correct rows (score 5) with a real speedup (> 1e-9, so neither the
  /// "not measured" -1 nor the "no reference" 9.999e-10 of the reference); nullopt when none.
  std::optional<double> best_speedup;
  std::string last_timestamp;                    ///< newest kernels.timestamp (UTC text)

  /// {"task_name", "kernels", "by_kf_status", "by_status", "best_speedup" (null when none), "last_timestamp"}.
  Json ToJson() const;
};

/// Which kernels KernelHistory returns: the rows of one task, oldest first.
struct HistoryQuery {
  std::string task_name;
  int64_t after_id = 0;  ///< only ids greater than this (for polling new points)
  int64_t limit = 0;     ///< at most this many points (the oldest ones after after_id); 0 = all
};

/// One point of a task's history (for speedup-over-time plots).
struct KernelPoint {
  int64_t id = 0;
  std::string timestamp;                 ///< UTC text
  std::string status;                    ///< kernels.status ("" = NULL)
  std::string kf_status;                 ///< our status ("" = not recorded by kf)
  std::optional<double> speedup;         ///< improve_over_native
  std::optional<int64_t> score;          ///< perf_score

  /// {"id", "timestamp", "status", "kf_status", "speedup", "score"} (null for unset values).
  Json ToJson() const;
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

/// The n of VARCHAR(n) column `table`.`column` (characters), 0 for a column without a length. Throws
/// kf::Error(kInvalidArgument) naming "table.column" when the store has no such column.
int ColumnMaxChars(std::string_view table, std::string_view column);

/// The store's tables as data, for bindings that map them (the Python API's SQLAlchemy models):
/// [{"name": table, "columns": [{"name", "type" ("integer", "float", "varchar", "text", "boolean", "datetime",
/// "json"), "length" (VARCHAR(n); 0 = none), "not_null", "primary_key", "server_now" (server default: the
/// current time), "autoincrement", "kf_own" (ours, beside the reference's columns)}]}], tables and columns in
/// creation order.
Json StoreSchema();

/// The current time as stored in DATETIME columns: UTC "YYYY-MM-DD HH:MM:SS.ffffff".
std::string NowTimestamp();
/// The default of kernels.db_user: the OS user name as Python's getpass.getuser() finds it (LOGNAME, USER,
/// LNAME, USERNAME, then the password database), cut to 128 characters; "unknown" if none.
std::string DefaultDbUser();
/// The results database path: $KF_DB when set and non-empty, else "runs/kernels.sqlite3" (relative to the
/// current directory, as the reference's default sqlite:///runs/kernels.sqlite3). $KF_DB may also hold a
/// URL; use DefaultStoreUrl() where a URL is accepted.
std::filesystem::path DefaultDbPath();
/// The results database for OpenStore: $KF_DB when set and non-empty (a path or URL), else
/// "runs/kernels.sqlite3".
std::string DefaultStoreUrl();

/// `url` with the password of a postgresql:// URL replaced by "***" (user, host, port, database and query
/// are kept); any other value unchanged. Use it wherever a store URL is printed or logged.
std::string RedactStoreUrl(std::string_view url);

/// One bearer token of kf serve's submission API (table kf_api_tokens), without its hash.
struct ApiToken {
  int64_t id = 0;
  std::string user;                        ///< the user the token authenticates (kernels.db_user of their jobs)
  bool admin = false;                      ///< sees every job, not only the user's own
  std::string created_at;                  ///< UTC text
  std::optional<std::string> revoked_at{}; ///< UTC text; set = the token no longer authenticates

  /// {"id", "user", "admin", "created_at", "revoked_at" (null when active)}.
  Json ToJson() const;
};

/// One job submitted through kf serve's API (table kf_submissions; its id is the jobs.id): enough to run it
/// after a restart of the server.
struct Submission {
  int64_t job_id = 0;
  std::string user;               ///< who submitted it (from the token)
  std::string task;               ///< the validated task, encoded (Task::EncodeToString); "" when not read
  Json lineage = Json::object();  ///< kf::LineageToJson of the lineage given with it
  int64_t archive_bytes = 0;      ///< size of the uploaded archive
  std::string created_at;         ///< UTC text
  /// What the kernels row cannot hold, set when the job ended (kf::VerdictExtras): {"kernel_uuid",
  /// "benchmarks" (with the paired intervals), "cached"}; null before.
  Json result = nullptr;
};

/// Persistence of pipeline results. See the file comment for the contract.
class Store {
 public:
  virtual ~Store() = default;

  /// Inserts a `tasks` row (the object from Task::ToDatabaseTask: id, task_name, task_origin, config,
  /// task_data, has_build_step, correctness_tests, profile_tests, the blocks and the hyperparameters; any
  /// subset of the tasks columns). Returns false, writing nothing, when a task with that id is stored
  /// already (also when another writer stores it at the same moment). Throws kf::Error(kInvalidArgument)
  /// on an unknown key, a wrong type or a missing required field (id, task_name, task_origin,
  /// has_build_step).
  virtual bool InsertTask(const Json& row) = 0;

  /// Creates a job (status INIT, progress 0, created_at now, token counts 0) and returns its id.
  virtual int64_t CreateJob(const std::string& task_origin, const Json& config) = 0;

  /// Applies `update` to job `id` following the lifecycle (file comment). Returns kCanceled, writing
  /// nothing, when the job is CANCELED. Throws kf::Error(kNotFound) for an unknown id,
  /// kf::Error(kInvalidArgument) for NaN progress or an over-long task_id.
  [[nodiscard]] virtual JobUpdateOutcome UpdateJob(int64_t id, const JobUpdate& update) = 0;

  /// Inserts a `kernels` row from any subset of the kernels columns (kf_status included) and returns its id.
  /// Defaults:
  /// timestamp = now, db_user = DefaultDbUser(). Throws kf::Error(kInvalidArgument) naming the key for
  /// an unknown column, a wrong type or an over-long VARCHAR(n) value.
  virtual int64_t InsertKernel(const Json& row) = 0;

  /// Inserts all `logs` in one transaction (all or none).
  virtual void InsertJobLogs(const std::vector<JobLog>& logs) = 0;

  /// Kernel rows matching `query`, in its order (default: oldest first), each with the requested columns
  /// plus "job_status" (the status of the row's job, or null). JSON columns come back parsed. Throws
  /// kf::Error(kInvalidArgument) for an unknown column name, a negative limit/offset, or last_n combined
  /// with limit/offset.
  virtual std::vector<Json> ListKernels(const KernelQuery& query) = 0;

  /// Number of kernel rows matching the filters of `query` (its last_n, limit, offset and order ignored).
  virtual int64_t CountKernels(const KernelQuery& query) = 0;

  /// The `kernels` row `id` with every column (kf_status included) plus "job_status"; nullopt when none.
  virtual std::optional<Json> GetKernel(int64_t id) = 0;

  /// Jobs matching `query`, newest first: every jobs column plus "task_name" (of the job's stored task, or
  /// null) and "kernels" (its number of kernels rows). Throws kf::Error(kInvalidArgument) for a negative
  /// limit/offset.
  virtual std::vector<Json> ListJobs(const JobQuery& query) = 0;

  /// Number of jobs matching the filters of `query` (limit and offset ignored).
  virtual int64_t CountJobs(const JobQuery& query) = 0;

  /// The `job_logs` rows of job `job_id`, oldest first, every column (extra parsed); empty when none.
  virtual std::vector<Json> ListJobLogs(int64_t job_id) = 0;

  /// One summary per distinct kernels.task_name, ordered by task_name.
  virtual std::vector<TaskSummary> ListTaskSummaries() = 0;

  /// The kernels of one task for plots (see HistoryQuery), oldest first. Throws kf::Error(kInvalidArgument)
  /// for a negative limit.
  virtual std::vector<KernelPoint> KernelHistory(const HistoryQuery& query) = 0;

  /// The `jobs` row `id` with every column. Throws kf::Error(kNotFound) for an unknown id.
  virtual Json GetJob(int64_t id) = 0;

  /// The `tasks` row `id`, or nullopt when there is none.
  virtual std::optional<Json> GetTask(const std::string& id) = 0;

  /// Where the data lives, safe to print: the SQLite file path or the redacted PostgreSQL URL.
  virtual std::string Describe() const = 0;

  // --- kf serve's submission API (our tables kf_api_tokens and kf_submissions; a read-write store) ---

  /// Stores a token of `user` by its SHA-256 (64 lower-case hex digits; the token itself is never stored)
  /// and returns its id. Throws kf::Error(kInvalidArgument) for an empty or over-long user or a malformed
  /// hash.
  virtual int64_t AddApiToken(const std::string& user, const std::string& token_sha256, bool admin) = 0;
  /// The active (not revoked) tokens whose hash is `token_sha256`, with the stored hash in .second (the
  /// caller compares it in constant time); empty when none.
  virtual std::vector<std::pair<ApiToken, std::string>> FindApiTokens(const std::string& token_sha256) = 0;
  /// Every token (revoked ones too), oldest first.
  virtual std::vector<ApiToken> ListApiTokens() = 0;
  /// Revokes the active tokens of `user` (all of them, or only token `id`) and returns how many.
  virtual int64_t RevokeApiTokens(const std::string& user, std::optional<int64_t> id) = 0;

  /// Creates the job (status INIT, task_origin = the user, `job_config`) and its kf_submissions row in one
  /// transaction and returns the job id (`s.job_id` is ignored).
  virtual int64_t CreateSubmission(const Submission& s, const Json& job_config) = 0;
  /// The submission of job `job_id` (with the encoded task only when `with_task`); nullopt for a job that
  /// was not submitted through the API.
  virtual std::optional<Submission> GetSubmission(int64_t job_id, bool with_task) = 0;
  /// Stores `result` (Submission::result) with the submission of job `job_id`.
  virtual void SetSubmissionResult(int64_t job_id, const Json& result) = 0;
  /// Ids of the submissions whose job is still active (INIT, RUN, VALIDATING), oldest first: what a server
  /// resumes after a restart.
  virtual std::vector<int64_t> ActiveSubmissions() = 0;
};

/// Options of OpenStore.
struct StoreOptions {
  /// Open without writing: nothing (directory, file, database, table, index) is created and writes fail
  /// with kf::Error(kIO).
  bool read_only = false;
  /// How long a write waits for another writer's lock before failing with kf::Error(kIO) (SQLite's busy
  /// timeout; PostgreSQL's lock_timeout and, in whole seconds, at least 1, its connect_timeout).
  std::chrono::milliseconds busy_timeout{10000};
};

/// Opens the store named by `url`:
///  * a plain path (no "scheme://"), "sqlite:///relative/path" or "sqlite:////absolute/path": a SQLite file.
///    Unless read_only the parent directories, the file and missing tables are created; it runs in WAL
///    mode. A missing file with read_only throws kf::Error(kNotFound); a file that is not a SQLite database
///    kf::Error(kParse).
///  * "postgresql://user[:password]@host[:port]/db[?param=value…]" (also "postgres://" and SQLAlchemy's
///    "postgresql+driver://"): a PostgreSQL database through libpq (the query takes libpq's parameters,
///    e.g. sslmode). Unless read_only, a missing database is created when the user may, and missing tables
///    are created. A connection or authentication failure throws kf::Error(kIO); a missing database with
///    read_only kf::Error(kNotFound).
/// Then every table is checked: a missing table or column, or a column declared with another type, throws
/// kf::Error(kInvalidArgument) naming "table.column" and saying the database is stale. An unknown scheme or
/// a malformed URL throws kf::Error(kInvalidArgument) naming the (redacted) value; a postgresql:// URL in a
/// build without libpq throws kf::Error(kUnsupported).
std::unique_ptr<Store> OpenStore(const std::string& url, const StoreOptions& options = {});

}  // namespace kf
