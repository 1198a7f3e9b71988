// MCP — `kf mcp`: a Model Context Protocol server over stdio, so a coding agent (Copilot, Claude Code, Cursor)
// evaluates task folders through kf and gets the verdict back as data (the reference's
// kernelfoundry/mcp_server: tool build_and_test, its return contract and configuration).
//
// Protocol (JSON-RPC 2.0, one message per line on stdin/stdout; nothing else is ever written to stdout, logs
// go to stderr):
//  * initialize: the client's protocolVersion is answered with itself when we speak it (kProtocolVersions,
//    down to 2024-11-05), else with our newest; capabilities {tools: {listChanged: false}, logging: {}}.
//  * tools/list, tools/call, ping, logging/setLevel; notifications/initialized and notifications/cancelled.
//    A request with an unknown method answers -32601, malformed JSON -32700, a message that is not a request
//    -32600, bad params -32602. A tool that fails (bad folder, invalid task, server error) answers a result
//    with isError: true and the message as text: the server never stops on bad input.
//  * tools/call runs on its own thread: while a tool runs, further requests (ping, other calls, cancellation)
//    are answered. With params._meta.progressToken the tool sends notifications/progress. A
//    notifications/cancelled for a running call stops it: the evaluation's processes are killed, its job is
//    CANCELED (locally in the store; on a server through POST /api/job/<id>/cancel), and no response is sent.
//  * Results carry the tool's JSON object as text content and, from protocol 2025-06-18 on, as
//    structuredContent.
// Tools (ToolDefinitions): build_and_test(folder_path), evaluate_candidate(task_path, code | blocks,
// parent_uuid?), get_result(kernel_id | uuid), list_results(task?, limit?), validate_task(folder_path, run?).
// Mode: local (the store of McpOptions::db) unless a server is configured (ClientConfig: exactly as the
// reference reads it), then build_and_test / evaluate_candidate / get_result / list_results go to that kf
// serve --submit (or the reference's server) over HTTP(S) with the bearer token. Lineage as the reference
// keeps it: the task folder's .kernelfoundry/kernels.json lists the uuids of its evaluations, the last is the
// parent of the next.
// Folders: every path a tool reads must lie (after resolving symlinks) inside one of McpOptions::roots.
//
// Thread safety: a Session may receive messages from one thread while its tool threads run.
#pragma once

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/serve.hpp"

namespace kf::mcp {

/// The protocol revisions kf mcp speaks, newest first.
inline constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

/// The revision to answer an initialize that asked for `requested`: itself when spoken, else the newest.
std::string NegotiateVersion(std::string_view requested);

// ------------------------------------------------------------------------------------- configuration

/// Where build_and_test sends its work, read as the reference reads it: ~/.config/kernelfoundry/config.yml
/// (a YAML mapping with server_url, user, token, timeout, poll_interval, max_wait), each key overridden by
/// KERNELFOUNDRY_SERVER_URL, _USER, _TOKEN, _TIMEOUT, _POLL_INTERVAL, _MAX_WAIT. No server_url = local mode.
struct ClientConfig {
  std::string server_url;       ///< "" = local mode; else without a trailing '/'
  std::string user, token;      ///< required with a server_url
  double timeout_s = 1200;      ///< per HTTP request
  double poll_interval_s = 5;   ///< between status polls
  double max_wait_s = 3600;     ///< for one job
};

/// Reads the configuration from `config_file` (absent: none) and `env` (variable -> value). Throws
/// kf::Error(kInvalidArgument) naming the file or variable for a file that is not a mapping, a number that is
/// not one, or a server_url without user or token.
ClientConfig ReadClientConfig(const std::filesystem::path& config_file, const std::map<std::string, std::string>& env);
/// ReadClientConfig of ~/.config/kernelfoundry/config.yml and the process environment.
ClientConfig LoadClientConfig();

/// The last uuid of `folder`/.kernelfoundry/kernels.json (the parent of the next evaluation), nullopt when the
/// file is absent or empty. Throws kf::Error(kParse) naming the file when it is not a JSON list.
std::optional<std::string> LastKernelUuid(const std::filesystem::path& folder);
/// Appends `uuids` to that list (creating the folder and file), written atomically.
void AppendKernelUuids(const std::filesystem::path& folder, const std::vector<std::string>& uuids);

/// The client configurations `kf mcp create-config` writes: `kind` "vscode" gives VS Code's mcp.json
/// ({"servers": {name: {"type": "stdio", "command", "args", "env"}}}), "mcp" the .mcp.json of other clients
/// ({"mcpServers": {…}}). `env` holds the KERNELFOUNDRY_* variables (empty server URL = local mode).
Json ClientConfigFile(std::string_view kind, const std::string& kf_path, const std::vector<std::string>& args,
                      const std::map<std::string, std::string>& env);

// ------------------------------------------------------------------------------------- the server

/// Validates a task folder for validate_task: {"valid", "problems", "harness", …}; with `run` also the
/// reference's own run and the low-signal check (as kf validate --run).
using ValidateFn = std::function<Json(const std::string& folder, bool run)>;

/// Options of a Session.
struct McpOptions {
  /// Folders the tools may read (resolved); empty = the current directory.
  std::vector<std::filesystem::path> roots;
  std::string db;            ///< local mode: the results database (empty = kf::DefaultStoreUrl())
  EvaluateOptions evaluate;  ///< local mode: options of every evaluation (gpu_arch, …)
  RecordJobFn record;        ///< local mode: evaluation + recording (empty = kf::EvaluateAndRecord)
  ValidateFn validate;       ///< validate_task (empty = loading and Task::Validate only)
  /// The server configuration; nullopt = LoadClientConfig() at every call (so edits apply at once).
  std::optional<ClientConfig> client;
  std::string version = "0";  ///< serverInfo.version
};

/// The tool list of tools/list: [{"name", "title", "description", "inputSchema"}].
Json ToolDefinitions();

/// One MCP connection. Feed it messages; it writes every response and notification through `write` (one
/// JSON text per call, no newline; serialised).
class Session {
 public:
  using WriteFn = std::function<void(const std::string& message)>;
  Session(McpOptions options, WriteFn write);
  /// Waits for the running tool calls.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Handles one message (a JSON-RPC request, notification or batch). Never throws.
  void Handle(std::string_view message);
  /// Waits until no tool call is running.
  void Drain();
  /// Drain for at most `timeout`; true when no call is running any more.
  bool Drain(std::chrono::milliseconds timeout);
  /// Cancels every running tool call as notifications/cancelled would (no responses are sent for them).
  void CancelAll();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Runs a Session over `in` / `out` (newline-delimited JSON-RPC) until `in` ends, then gives running calls 5 s
/// to answer and cancels the rest (their evaluations killed, their jobs CANCELED); returns 0.
int ServeStdio(McpOptions options, std::FILE* in, std::FILE* out);

}  // namespace kf::mcp
