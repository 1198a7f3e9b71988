// Serve — `kf serve`: a local HTTP server over a Store with a JSON API and an offline web page (the page and
// its script are embedded into the binary at build time; nothing is fetched from the network).
//
// Contract:
//  * The server only reads: callers open the store read-only (StoreOptions::read_only) and the server calls
//    no write method. It binds ServeOptions::host, 127.0.0.1 unless told otherwise; bound to a loopback address
//    it answers only requests whose Host header names a loopback host (403 otherwise: DNS rebinding).
//  * JSON API (GET only; every answer is application/json, UTF-8; invalid UTF-8 in stored text is replaced
//    by U+FFFD):
//      /api/tasks                      {"tasks": [TaskSummary::ToJson()…]}
//      /api/jobs?task=&status=&limit=&offset=
//                                      {"total", "limit", "offset", "jobs": [Store::ListJobs rows]}
//      /api/kernels?task=&status=&ref_status=&job=&sort=&order=&limit=&offset=
//                                      {"total", "limit", "offset", "kernels": [summary columns]}; status is
//                                      our status (kf_status), ref_status the reference's kernels.status,
//                                      sort one of id|timestamp|score|runtime|speedup, order asc|desc
//      /api/history?task=&after_id=&limit=
//                                      {"task", "points": [KernelPoint::ToJson()…], "more"} oldest first, at
//                                      most limit (default 2000, 1..10000) points with ids > after_id; "more"
//                                      is true when the page is full (ask again after its last id)
//      /api/kernels/<id>               one evaluation: verdict, benchmarks (reference/candidate ms, speedup,
//                                      spread, CI when paired), runtime_stats, code (input = the task's EVOLVE
//                                      block, output = the candidate's), best earlier correct candidate of the
//                                      task, eval_log and the job_logs rows of the kernel (see KernelDetail).
//    limit (of jobs and kernels) defaults to 50 and must be 1..1000; offset >= 0. A malformed parameter answers 400 with
//    {"error": message, "parameter": name}; an unknown kernel or path 404 {"error"}; a store failure 500.
//      /api/lineage?uuid=              KernelLineage (ancestors, children) of one kernel
//      /api/graph?task=&limit=         TaskGraph: the task's kernels as parent -> child nodes and edges
//  * The submission API (ServeOptions::submit, `kf serve --submit`; the reference server's endpoints, used
//    unchanged by the reference's MCP server in server mode). Every /api/ request then needs
//    "Authorization: Bearer <token>" (kf token add; 401 without a valid one); an admin token sees everything,
//    a user's token only their own jobs and kernels (another user's job or kernel answers 404 as if it did not
//    exist; /api/tasks, /api/jobs, /api/history, /api/graph answer 403):
//      POST /api/validate_job          multipart: file (zip/tar archive of a task package), idsid (must be the
//                                      token's user unless admin), optional parent_uuid, trial, version,
//                                      prompt, answer, language_model, agent_session_id -> {"job_id", "status"}
//      GET  /api/job/<id>              {"id", "job_id", "status" (INIT/RUN/COMPLETE/FAIL/CANCELED/…), "progress",
//                                      "created_at", "started_at", "finished_at", "user", "task_id"}
//      POST /api/job/<id>/cancel       marks the job CANCELED; a running evaluation is killed -> {"job_id", "status"}
//      GET  /api/kernels_by_job?job_id={"job_id", "kernels": [{"id", "uuid", "parent_uuid", "status",
//                                      "kf_status", "score", "runtime", "speedup", "trial", "version",
//                                      "timestamp", "output_code", "runtime_stats"}]}
//      GET  /api/kernels/<id>/eval_log KernelEvalLog with the job's VerdictExtras folded in: {"id", "eval_log",
//                                      "runtime_stats", "speedup" (number or "N/A"), "speedup_ci", "status",
//                                      "benchmarks", "cached", …}
//      GET  /api/jobs/logs?job_id=     {"job_id", "logs": [{"id", "level", "message", "timestamp",
//                                      "kernel_uuid", "raw_log"}]}
//      GET  /api/whoami                {"user", "admin"}
//    Limits (SubmitLimits): 413 for an archive too large, 429 (with Retry-After) beyond the request rate or
//    the number of active jobs. A hostile archive (traversal, links, devices, bombs: kf's archive checks)
//    answers 400, an invalid task 400 listing the problems; nothing is stored for either. Accepted jobs run
//    on a local pool (or the farm) through kf::RecordRun: a job survives a restart of the server (jobs still
//    INIT or RUN are run again at the next start).
//  * Every candidate-controlled string (code, logs, names) leaves the server only inside JSON strings; the
//    page inserts them with textContent, and every response carries a Content-Security-Policy that allows
//    scripts only from the server itself.
//
// Thread safety: a Server answers requests on a pool of threads; the Store serialises its calls. Stop() may
// be called from any thread (e.g. a signal-watching one).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/store.hpp"

namespace kf {

/// The content type of every API answer. With the charset parameter cpp-httplib does not compress the body:
/// its Brotli at the default quality took about 1 s per 200 KB page, against a few ms to produce it; on a
/// local connection compression gains nothing.
inline constexpr const char* kJsonType = "application/json; charset=utf-8";

/// One answer of the API: HTTP status code, content type and body.
struct ApiResponse {
  int status = 200;
  std::string content_type = kJsonType;
  std::string body;
};

/// Answers one GET request of the JSON API (file comment) without HTTP: `path` such as "/api/jobs",
/// `params` the decoded query parameters. Unknown paths answer 404. Never throws for bad input (400) or store
/// failures (500, message in "error").
/// `summaries` (optional) answers /api/tasks from an incrementally updated cache instead of aggregating every
/// kernels row per request.
namespace serve {
class SummaryCache;
}
ApiResponse HandleApiRequest(Store& store, std::string_view path, const std::multimap<std::string, std::string>& params,
                             serve::SummaryCache* summaries = nullptr);

/// The evaluation document of /api/kernels/<id>, nullopt for an unknown id:
/// {"id", "uuid", "task_name", "job_id", "job_status", "timestamp", "gpu_arch",
///  "verdict": {"status" (ours), "detail", "reference_status", "score", "runtime_ms", "speedup"},
///  "benchmarks": [{"arch", "name", "reference_ms", "candidate_ms", "speedup", "std_ms", "min_ms", "max_ms",
///                  "median_ms", "num_trials", "paired", "speedup_ci" ([low, high] or null)}],
///  "runtime_stats", "code": {"input", "output", "language"}, "best": {"id", "speedup", "code"} or null,
///  "eval_log", "logs": [{"name", "level", "returncode", "timestamp", "message"}]}.
/// Times are milliseconds; speedup = reference / candidate (-1 or null when not measured). Throws kf::Error
/// from the store.
std::optional<Json> KernelDetail(Store& store, int64_t id);

// ------------------------------------------------------------------------------ lineage (lineage_api.cc)

/// One kernel as a node of a lineage graph: {"id", "uuid", "parent_uuid", "task_name", "job_id", "status"
/// (ours, kf_status), "reference_status", "score", "speedup" (null when not measured), "trial", "version",
/// "timestamp", "db_user", "language_model"}.
Json LineageNode(const Json& kernel_row);

/// The ancestry of kernel `uuid`: {"kernel": node, "ancestors": [nodes, the root first, the parent last],
/// "children": [nodes whose parent_uuid is uuid], "missing_parent": uuid of an ancestor's parent that is not
/// stored (or null)}. Walks at most `max_depth` parents; a cycle ends the walk. nullopt for an unknown uuid.
std::optional<Json> KernelLineage(Store& store, const std::string& uuid, int max_depth = 1000);

/// The generation graph of a task: {"task", "nodes": [LineageNode…] (the newest `limit` kernels, oldest
/// first), "edges": [{"parent": id, "child": id}] between those nodes, "truncated": bool}.
Json TaskGraph(Store& store, const std::string& task, int64_t limit);

// ------------------------------------------------------------------ submission API (submit_api.cc)

/// Per-user limits of the submission API (kf serve --submit). A request beyond a limit is answered 413 (an
/// archive too large) or 429 (too many requests, too many jobs), with nothing stored.
struct SubmitLimits {
  int64_t max_archive_bytes = 32 << 20;  ///< size of one uploaded archive
  int max_active_jobs = 20;              ///< queued + running jobs of one user
  int max_running_jobs = 2;              ///< running jobs of one user (more wait in the queue)
  int requests_per_minute = 600;         ///< authenticated API requests of one user (token bucket)
  int max_queued_total = 1000;           ///< queued + running jobs of all users
};

/// How a job is evaluated and recorded into its existing job (record.job_id is set): the contract of
/// kf::EvaluateAndRecord (the default). kf serve and kf mcp pass kf run's verdict-cached variant.
using RecordJobFn = std::function<RecordedRun(Store& store, const Task& task, const std::optional<BlockUpdate>& candidate,
                                              const EvaluateOptions& options, const RecordOptions& record,
                                              Evaluation* out)>;

/// A new bearer token: "kf_" + 64 hex digits of 32 random bytes (OpenSSL RAND_bytes). Shown once; only its
/// ApiTokenHash is stored. Throws kf::Error(kIO) when no random bytes are available.
std::string NewApiToken();
/// The stored form of a token: its SHA-256 as 64 lower-case hex digits.
std::string ApiTokenHash(std::string_view token);

/// Options of the submission API.
struct SubmitOptions {
  SubmitLimits limits;
  /// Jobs evaluated at once by the local pool (>= 1). Builds and correctness runs overlap; every timed phase
  /// holds its device alone (device_slots.hpp), as in kf run's batch mode.
  int workers = 2;
  /// Options of every evaluation: evaluate.runner set = the jobs' stages run on the farm (kf::QueueStageRunner).
  EvaluateOptions evaluate;
  RecordJobFn record;  ///< empty = kf::EvaluateAndRecord
  /// How often a running job's CANCELED status is looked for (RecordOptions::cancel_poll).
  std::chrono::milliseconds cancel_poll{500};
  /// Start the pool (false: jobs are queued but not run; tests of the queue and of restarts).
  bool run_jobs = true;
};

/// The outcome of one stored evaluation as the reference's /api/kernels/<id>/eval_log gives it, plus ours:
/// {"id", "uuid", "parent_uuid", "job_id", "eval_log", "runtime_stats" ({} when none), "speedup" (a number, or
/// "N/A" when not measured), "speedup_ci" ([low, high] of the one benchmark's paired interval, else null),
/// "status" (ours, kf_status), "reference_status", "score", "benchmarks" (as KernelDetail's), "output_code"}.
/// nullopt for an unknown id. Throws kf::Error from the store.
std::optional<Json> KernelEvalLog(Store& store, int64_t id);

/// What an evaluation knows that its kernels row does not keep (the paired intervals per benchmark, whether the
/// verdict came from the verdict cache): {"kernel_uuid", "benchmarks": EvalResult::ToJson's rows, "cached"}.
Json VerdictExtras(const Evaluation& ev, const std::string& kernel_uuid);

/// Folds VerdictExtras into a KernelEvalLog document of the same kernel: "speedup_ci" (of the one benchmark),
/// each benchmark's "speedup_ci" and "paired", and "cached". Nothing changes when `extras` is not an object or
/// belongs to another kernel.
void MergeVerdictExtras(Json& eval_log, const Json& extras);

/// Options of Server.
struct ServeOptions {
  std::string host = "127.0.0.1";  ///< address to bind; "0.0.0.0" exposes the results to the network
  int port = 8080;                 ///< TCP port; 0 = any free port (see Server::port())
  /// Set: the submission API (file comment of submit_api.hpp) is on; the store must be opened read-write.
  std::optional<SubmitOptions> submit{};
  /// TLS: PEM certificate chain and private key files; both set = HTTPS (cpp-httplib over OpenSSL).
  std::string tls_cert{}, tls_key{};
};

/// The HTTP server of `kf serve`: the API above plus the embedded page at "/".
class Server {
 public:
  /// Takes the store (open it read-only). Does not bind yet.
  Server(std::unique_ptr<Store> store, ServeOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds host:port and computes the task summaries once (later /api/tasks requests fold in only new rows).
  /// Throws kf::Error(kIO) naming "host:port" when the address cannot be bound.
  void Bind();
  /// The bound port (after Bind).
  int port() const;
  /// Answers requests until Stop(); Bind() must have been called.
  void Run();
  /// Makes Run() return. Thread-safe, idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kf
