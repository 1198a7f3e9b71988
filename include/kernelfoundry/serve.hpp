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
//  * Every candidate-controlled string (code, logs, names) leaves the server only inside JSON strings; the
//    page inserts them with textContent, and every response carries a Content-Security-Policy that allows
//    scripts only from the server itself.
//
// Thread safety: a Server answers requests on a pool of threads; the Store serialises its calls. Stop() may
// be called from any thread (e.g. a signal-watching one).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "kernelfoundry/json.hpp"
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

/// Options of Server.
struct ServeOptions {
  std::string host = "127.0.0.1";  ///< address to bind; "0.0.0.0" exposes the results to the network
  int port = 8080;                 ///< TCP port; 0 = any free port (see Server::port())
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
