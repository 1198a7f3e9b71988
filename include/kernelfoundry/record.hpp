// Record — what every front end (kf run, kf validate --run, a farm worker, kf serve, the Python bindings) does
// around Evaluate; the one module that writes rows (jobs, tasks, kernels, job_logs). It loads a task for a run
// (create, validate, merge overrides.yml — reference spec §1.5), records the run in a Store (the job lifecycle
// and the tasks / kernels / job_logs rows — spec §5.5–§5.6) and a farm worker's jobs, stops an
// evaluation whose job was CANCELED, builds the evaluation JSON document, and reports progress and the verdict
// through one reporter interface (Google Benchmark's BenchmarkReporter is the model: the runner produces
// values, reporters present them; the CLI's console and JSON output are two reporters).
//
// Contract:
//  * LoadTaskForRun is the one loading path of every verb that evaluates: a package's overrides.yml always
//    wins over its config.yaml, and a task that fails Task::Validate never runs.
//  * RecordRun writes the job INIT -> RUN -> COMPLETE (validate: INIT -> VALIDATING -> VALIDATED), or FAIL when
//    the run throws. It honours CANCELED: a job canceled before the run starts is not run; while it runs, a
//    watcher reads the job's status every RecordOptions::cancel_poll and requests stop on the token handed to
//    the run (Evaluate then kills the running tree, EvaluateOptions::stop); a canceled job stays CANCELED and
//    gets no kernels row.
//  * The kernels row keeps the reference's columns plus our typed kf_status (the EvalStatus name); the first
//    line of eval_log is still "kf status: <our status>[ (<detail>)]" for people reading it in the
//    reference's tools (nothing of ours reads it back). The lineage columns (parent_uuid, trial, version,
//    prompt, answer, language_model, agent_session_id, db_user) are written when given (Lineage).
//  * job_logs rows are written as the reference's Evaluator writes them (RawProcessLog): level RAW, message =
//    the log's name ("build", "test_custom_correctness", …), the output text in extra["log"].
//  * No other module writes rows: a farm worker hands each finished job to RecordWorkerJob, and every front
//    end reaches the verdict cache through this module too (verdict_cache.hpp, EvaluateWithVerdictCache).
//
// Thread safety: all functions may be called concurrently (on different Store objects, or on one Store,
// which serialises internally). EvaluationReporter hooks ReportPhase and ReportOutputLine are called from
// worker threads and must be thread-safe; ReportContext and ReportVerdict are called on the caller's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/store.hpp"
#include "kernelfoundry/task.hpp"

namespace kf {

// ------------------------------------------------------------------------------------------ loading

/// Options of LoadTaskSource / LoadTaskForRun.
struct LoadForRunOptions {
  /// Collect the pytest tests of a package (kf::PytestCollector, cached); off only for tools that need no
  /// test names. Encoded tasks carry their test lists.
  bool discover_tests = true;
  /// Directory of the discovery cache; empty = $KF_CACHE_DIR or ~/.cache/kernelfoundry.
  std::filesystem::path cache_dir{};
  /// The name used in errors for JSON text passed instead of a path (e.g. "<stdin>").
  std::string json_source = "<task json>";
};

/// A loaded task and where it came from.
struct TaskForRun {
  Task task;
  TaskMetadata metadata = Json::object();  ///< {"overrides": {...}} when the package has overrides.yml
  bool from_json = false;                  ///< an encoded task (tests and blocks came from the JSON)
};

/// Loads a task without validating it: `path_or_json` is JSON text of an encoded task (first non-blank
/// character '{'), a *.json file holding one, or a package (directory or zip/tar[.gz|.bz2|.xz] archive).
/// Errors are kf::Error whose file is placed under `path_or_json` ("pkg/config.yaml: …"); a missing path is
/// kNotFound.
TaskForRun LoadTaskSource(const std::string& path_or_json, const LoadForRunOptions& options = {});

/// Merges metadata["overrides"] over task.config (kf::MergeConfig; task config < overrides, spec §1.5) and
/// applies it with Task::ApplyConfig. No overrides: nothing changes.
void ApplyOverrides(Task& task, const TaskMetadata& metadata);

/// The task as `kf run` and `kf validate --run` evaluate it: LoadTaskSource, then Task::Validate with the
/// harness kinds (kf::HarnessTaskKinds; throws kf::Error(kInvalidArgument) listing every problem), then
/// ApplyOverrides.
TaskForRun LoadTaskForRun(const std::string& path_or_json, const LoadForRunOptions& options = {});

// ------------------------------------------------------------------------------------------ rows

/// A random RFC 4122 version-4 UUID ("xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx"). Thread-safe.
std::string NewUuid4();

/// Where a candidate came from: the lineage columns of its kernels row (spec §5.6), as an optimisation loop
/// (the reference's controller, an agent) records them. Unset fields stay NULL (db_user: the OS user).
struct Lineage {
  std::optional<std::string> parent_uuid{};       ///< kernels.uuid of the candidate this one was derived from
  std::optional<int64_t> trial{};                 ///< trial (iteration) of the loop
  std::optional<int64_t> version{};               ///< version (branch) within the trial
  std::optional<std::string> prompt{};            ///< the prompt given to the language model
  std::optional<std::string> answer{};            ///< its raw answer
  std::optional<std::string> language_model{};    ///< the model's name
  std::optional<std::string> agent_session_id{};  ///< agent session (at most 64 characters)
  std::optional<std::string> db_user{};           ///< who stored it (at most 128 characters); default: the OS user
};

/// The lineage keys, in column order: parent_uuid, trial, version, prompt, answer, language_model,
/// agent_session_id, db_user.
inline constexpr const char* kLineageKeys[] = {"parent_uuid", "trial",          "version",          "prompt",
                                               "answer",      "language_model", "agent_session_id", "db_user"};

/// Lineage from a JSON object holding any of kLineageKeys (null = unset; trial and version integers, the
/// others strings). Throws kf::Error(kInvalidArgument) with file `source` and field = the key for an unknown
/// key, a wrong type, or an agent_session_id / db_user longer than its column.
Lineage LineageFromJson(const Json& j, const std::string& source);

/// The set fields of `lineage` as a JSON object (kLineageKeys; unset ones omitted).
Json LineageToJson(const Lineage& lineage);

/// The `kernels` row of an evaluation (spec §5.6 mapping from EvalResult): uuid, task_name, job_name,
/// status (the reference's string), kf_status (our EvalStatus name), score, runtime (ms),
/// improve_over_native/_compile, runtime_stats (null when empty), template_results, eval_log (first line
/// "kf status: <status>[ (<detail>)]", then the log), gpu_arch (the archs joined by ","), eval/compile
/// worker_info (eval_worker_info[arch]["timing"]: the paired speedups with their intervals, timing verdicts,
/// rounds and processes, and the timing conditions, where the arch was timed paired), profiler columns, config, task_id, job_id, input_code (the task's EVOLVE block), output_code
/// (the evaluated EVOLVE content), input/output_language, and the set fields of `lineage`.
Json KernelRow(const Evaluation& ev, const std::string& uuid, const std::string& task_id,
               std::optional<int64_t> job_id, const Lineage& lineage = {});

/// "cached: verdict of job N from <UTC time>\n" for a verdict reused from the verdict cache
/// (Evaluation::cached; "an unrecorded run" when it had no job), "" for a fresh evaluation. KernelRow puts it
/// after the "kf status:" line; kf run prints it.
std::string CachedNote(const Evaluation& ev);

/// The text the reference logs for one process result (its log_process_result): "Return code: N\n", then
/// "Message: …\n" when there is a message, "------ Standard Output ------\n<stdout>\n" and
/// "------ Standard Error ------\n<stderr>\n" when they are not blank.
std::string RawLogText(const ProcessResult& result);

/// The `job_logs` row the reference writes for one process result (its Evaluator's log_process_result
/// through its database log handler): level "RAW", message = `name` (e.g. "build_reference",
/// "test_custom_correctness"), extra {log: RawLogText, output_data, worker_info, trial, version, iteration,
/// branch} (trial = iteration = lineage.trial, version = branch = lineage.version, 0 when unset), hostname =
/// worker_info["hostname"] or else this machine's host name, kernel_uuid, agent_session_id from `lineage`.
JobLog RawProcessLog(int64_t job_id, const std::string& name, const ProcessResult& result, const Json& worker_info,
                     const std::optional<std::string>& kernel_uuid, const Lineage& lineage = {});

/// One RawProcessLog per process result of the evaluation, in run order, named ProcessLog::log_name.
std::vector<JobLog> ProcessLogs(const Evaluation& ev, int64_t job_id, const std::string& kernel_uuid,
                                const Lineage& lineage = {});

/// True when the verdict counts as correct (perf_score 5 and correctness): kf run's exit code 0.
bool IsCorrectVerdict(const EvalResult& r);

// ------------------------------------------------------------------------------------------ farm worker jobs

/// Which Celery task body a farm worker ran (it decides the job's tasks row and RAW logs).
enum class WorkerBody {
  kBuild,  ///< build_custom_task(encoded_task)
  kTest,   ///< test_custom_task(encoded_task)
  kOther,  ///< any other task (test_sleep, an unregistered name answered with a failure)
};

/// How a farm worker's job ended, as it replied to the client.
enum class WorkerJobStatus { kSuccess, kFailure, kRevoked };

/// Celery's state name of `status` ("SUCCESS", "FAILURE", "REVOKED"), as replied and stored in job_logs.
std::string_view WorkerJobStatusName(WorkerJobStatus status);

/// Everything a farm worker knows about one finished job, for its store (RecordWorkerJob).
struct WorkerJob {
  WorkerBody body = WorkerBody::kOther;
  std::string task{};        ///< the Celery task name as received
  std::string task_short{};  ///< its short name for the summary line ("build_custom_task")
  std::string celery_id{};   ///< the Celery task id
  Json args = nullptr;       ///< the message's args; args[0] is the encoded Task of a build or test body
  std::string node{};        ///< the worker's node name ("kf@host")
  std::string queue{};       ///< the queue the message came from
  int delivery = 1;          ///< which delivery of the message this was (1 = first)
  WorkerJobStatus status = WorkerJobStatus::kFailure;
  Json result = nullptr;     ///< kSuccess: the body's value; otherwise Celery's exception dict
  double seconds = 0;        ///< wall seconds of the job
  /// The verdict cache entry a test body's value came from ({key, created_at}; verdict_cache.hpp), or null
  /// for a value computed by this job.
  Json cached = nullptr;
};

/// Records a farm worker's job in `store` (reference spec §5.6 tables): a jobs row (task_origin from the
/// encoded task's config, else "custom", or "celery" without a task; RUN, then COMPLETE for kSuccess, else
/// FAIL), the tasks row when args[0] decodes as a Task with a task_name, and job_logs rows: an INFO (ERROR
/// unless kSuccess) summary "celery <short> <id> on <node> from <queue> (delivery N): <STATUS> in S s[ - …]"
/// with the Celery facts in extra, then for a successful build or test body one RAW row per process result
/// (RawProcessLog, named as the reference names them). Never throws: a store error is returned as text
/// ("" = stored).
std::string RecordWorkerJob(Store& store, const WorkerJob& job);

// ------------------------------------------------------------------------------------------ recording

/// Options of RecordRun.
struct RecordOptions {
  /// A reference check (kf validate --run): VALIDATING / VALIDATED instead of RUN / COMPLETE.
  bool validate = false;
  /// Record into this existing job (created by a controller, e.g. a web view or a queue) instead of creating
  /// one. Its status and config are overwritten as for a new job, unless it is CANCELED.
  std::optional<int64_t> job_id{};
  /// How often the watcher reads the job's status while the run is going on; 0 = no watcher.
  std::chrono::milliseconds cancel_poll{2000};
  /// Lineage columns of the kernels row (and agent_session_id, trial, version of the job logs).
  Lineage lineage{};
};

/// What RecordRun stored.
struct RecordedRun {
  int64_t job_id = 0;
  int64_t kernel_id = 0;    ///< kernels.id; 0 when no row was stored (canceled)
  std::string kernel_uuid{};  ///< kernels.uuid; "" when no row was stored
  bool canceled = false;    ///< the job is CANCELED (before the start, during the run, or at the end)
  std::string store{};      ///< Store::Describe() (safe to print)
};

/// The evaluation a RecordRun wraps; it should return soon after `stop` is requested.
using RunFn = std::function<Evaluation(std::stop_token stop)>;

/// Records one run in `store` (file comment): creates the job (or takes options.job_id) with the task's
/// config (task_origin defaults to "custom"), stores the tasks row (an id stored already is kept), sets the
/// job's task_id and config (status INIT), then RUN / VALIDATING with started_at; runs `run` with a stop
/// token while the watcher polls; then inserts the kernels row and the process logs and marks the job
/// COMPLETE / VALIDATED. *out receives the evaluation (left untouched when the job was canceled before the
/// start). An exception from `run` or the store marks the job FAIL (unless CANCELED) and is rethrown.
RecordedRun RecordRun(Store& store, const Task& task, const RunFn& run, const RecordOptions& options,
                      Evaluation* out);

/// RecordRun around kf::Evaluate(task, candidate, options): the watcher's stop and options.stop both stop
/// the evaluation.
RecordedRun EvaluateAndRecord(Store& store, const Task& task, const std::optional<BlockUpdate>& candidate,
                              const EvaluateOptions& options, const RecordOptions& record, Evaluation* out);

/// The JSON document of `kf run --json` (and of a web view's evaluation page): task, gpu_arch, status,
/// reference_status, status_detail, perf_score, speedup, runtime_ms, combined_score, correct, result
/// (EvalResult::ToJson), build and test results (reference encodings), timings {build_s, test_s, wall_s,
/// phases}, "cached" (bool) and "cached_from" (Evaluation::cached, only when cached), and when recorded: db (RecordedRun::store), job_id, kernel_uuid (plus "canceled": true for a
/// canceled job); then work_dirs.
Json EvaluationDocument(const Evaluation& ev, const RecordedRun* recorded);

// ------------------------------------------------------------------------------------------ reporters

/// What a run is about, reported before it starts.
struct RunContext {
  std::string task{};        ///< config task_name ("" when the config has none)
  bool reference_check = false;  ///< kf validate --run (the reference alone is tested)
  std::string store{};       ///< Store::Describe() when the run is recorded, else ""
};

/// Receives the events of one evaluation. A console, a JSON file, a server-sent-events stream or Python
/// callbacks implement it; ReporterList fans out to several.
class EvaluationReporter {
 public:
  virtual ~EvaluationReporter() = default;
  /// Before the evaluation starts. Default: nothing.
  virtual void ReportContext(const RunContext& context);
  /// A phase started or finished (worker threads; must be thread-safe). Default: nothing.
  virtual void ReportPhase(const PhaseEvent& event);
  /// One output line of a child process (worker threads; must be thread-safe). Default: nothing.
  virtual void ReportOutputLine(bool is_stderr, const std::string& line);
  /// Once, after the evaluation and its recording ended: the evaluation and what was stored (nullptr when
  /// the run was not recorded). When recorded->canceled, `ev` may be empty (canceled before the start).
  virtual void ReportVerdict(const Evaluation& ev, const RecordedRun* recorded) = 0;
};

/// Forwards every hook to each reporter in order (nullptr entries are skipped).
class ReporterList final : public EvaluationReporter {
 public:
  explicit ReporterList(std::vector<EvaluationReporter*> reporters) : reporters_(std::move(reporters)) {}
  void ReportContext(const RunContext& context) override;
  void ReportPhase(const PhaseEvent& event) override;
  void ReportOutputLine(bool is_stderr, const std::string& line) override;
  void ReportVerdict(const Evaluation& ev, const RecordedRun* recorded) override;

 private:
  std::vector<EvaluationReporter*> reporters_;
};

/// Points options.progress (and, when output_lines, options.on_output_line) at `reporter`, which must
/// outlive the evaluation.
void AttachReporter(EvaluationReporter& reporter, EvaluateOptions& options, bool output_lines);

}  // namespace kf
