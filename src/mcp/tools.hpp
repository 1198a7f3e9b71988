// The tools of kf mcp (contract: include/kernelfoundry/mcp.hpp), local (tools.cc) and against a server
// (remote.cc). Internal to the mcp module.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "kernelfoundry/mcp.hpp"

namespace kf::mcp {

/// Arguments that do not fit a tool's inputSchema: JSON-RPC -32602.
struct InvalidParams {
  std::string message;
};

/// What a running tool call can do besides computing its result.
class CallContext {
 public:
  CallContext(std::stop_token stop, std::function<void(double, const std::string&)> progress)
      : stop_(std::move(stop)), progress_(std::move(progress)) {}
  /// Requested when the client cancels the call.
  const std::stop_token& stop() const { return stop_; }
  /// Reports progress (0..100) with a message (sent only when the client asked for progress).
  void Progress(double percent, const std::string& message) const {
    if (progress_) progress_(percent, message);
  }
  /// What cancelling must do besides the stop (e.g. mark the job CANCELED); called at once when the call was
  /// canceled already. Replaces an earlier hook.
  void OnCancel(std::function<void()> hook);
  /// Called by the session when the client cancels: requests nothing itself, runs the hook.
  void RunCancelHook();

 private:
  std::stop_token stop_;
  std::function<void(double, const std::string&)> progress_;
  std::mutex mu_;
  std::function<void()> hook_;
  bool canceled_ = false;
};

/// The tools over one configuration.
class Tools {
 public:
  explicit Tools(McpOptions options);
  ~Tools();
  /// Runs tool `name` with `args`; returns its result object. Throws InvalidParams for an unknown tool or
  /// arguments that do not fit, kf::Error or std::exception when the tool fails (a result with isError).
  Json Call(const std::string& name, const Json& args, CallContext& ctx);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// ---- server mode (remote.cc): the reference's HTTP flow against kf serve --submit or the reference's server

/// Zips `folder` (without its .kernelfoundry/) and evaluates it on the server: POST /api/validate_job, polls
/// /api/job/<id>, then /api/kernels_by_job and /api/kernels/<id>/eval_log (or /api/jobs/logs when no kernel
/// came). Appends the kernels' uuids to the folder's lineage file. The result has the reference's keys plus
/// ours (status, speedup_ci, benchmarks, kernel_uuid, kernel_id, parent_uuid).
Json RemoteBuildAndTest(const ClientConfig& c, const std::filesystem::path& folder, CallContext& ctx);
/// Submits the archive bytes `zip` named `name` with form fields `form` and waits for the outcome as above
/// (nothing is written to a folder).
Json RemoteEvaluate(const ClientConfig& c, const std::string& zip, const std::string& name,
                    const std::map<std::string, std::string>& form, CallContext& ctx);
/// GET `path` (with query `params`) from the server with the token; the parsed JSON body. Throws
/// kf::Error(kIO) with the server's message for an answer >= 400.
Json RemoteGet(const ClientConfig& c, const std::string& path, const std::multimap<std::string, std::string>& params);

}  // namespace kf::mcp
