// The MCP protocol of kf mcp (include/kernelfoundry/mcp.hpp): JSON-RPC 2.0 messages, initialize with version
// negotiation, the methods, tool calls on their own threads with progress and cancellation.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <list>
#include <mutex>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/mcp.hpp"
#include "mcp/tools.hpp"

namespace kf::mcp {
namespace {

// JSON-RPC 2.0 error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

/// The protocol revision from which results carry structuredContent.
bool HasStructuredContent(const std::string& version) { return version >= "2025-06-18"; }

}  // namespace

struct Session::Impl {
  McpOptions options;
  WriteFn write;
  std::mutex write_mu;
  std::unique_ptr<Tools> tools;
  /// Whether results carry structuredContent (the negotiated revision is 2025-06-18 or newer); set by
  /// initialize on the reading thread, read by the tool threads.
  std::atomic<bool> structured{true};

  struct Call {
    Json id;
    std::stop_source stop;
    std::shared_ptr<CallContext> ctx;
    bool canceled = false;
    std::thread thread;
    bool done = false;
  };
  std::mutex calls_mu;
  std::condition_variable calls_cv;
  std::list<Call> calls;

  void Send(const Json& message) {
    const std::string text = Dump(message);
    std::lock_guard lock(write_mu);
    write(text);
  }
  void Reply(const Json& id, Json result) { Send({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}); }
  void Fail(const Json& id, int code, const std::string& message) {
    Send({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
  }

  void Request(const Json& id, const std::string& method, const Json& params);
  void Notification(const std::string& method, const Json& params);
  void StartCall(const Json& id, const Json& params);
  Json ToolResult(const Json& value, bool is_error) const;
  void Reap();
  /// REQUIRES: calls_mu held.
  bool AllDone() const {
    for (const auto& c : calls) {
      if (!c.done) return false;
    }
    return true;
  }
};

Json Session::Impl::ToolResult(const Json& value, bool is_error) const {
  Json r = {{"content", Json::array({{{"type", "text"}, {"text", value.is_string() ? value.get<std::string>() : value.dump(2)}}})},
            {"isError", is_error}};
  if (!is_error && value.is_object() && structured.load()) r["structuredContent"] = value;
  return r;
}

void Session::Impl::Request(const Json& id, const std::string& method, const Json& params) {
  if (method == "initialize") {
    const std::string asked = params.is_object() && params.contains("protocolVersion") && params["protocolVersion"].is_string()
                                  ? params["protocolVersion"].get<std::string>()
                                  : "";
    if (asked.empty()) return Fail(id, kInvalidParams, "params.protocolVersion: required");
    const std::string version = NegotiateVersion(asked);
    structured.store(HasStructuredContent(version));
    std::fprintf(stderr, "kf mcp: initialize (client asked %s, speaking %s)\n", asked.c_str(), version.c_str());
    return Reply(id, {{"protocolVersion", version},
                      {"capabilities", {{"tools", {{"listChanged", false}}}, {"logging", Json::object()}}},
                      {"serverInfo", {{"name", "kernelfoundry"}, {"title", "KernelFoundry (kf)"}, {"version", options.version}}},
                      {"instructions",
                       "Tools for evaluating KernelFoundry task folders: build_and_test(folder_path) builds, tests and "
                       "times the folder's EVOLVE code against its reference and returns the verdict and speedup."}});
  }
  if (method == "ping") return Reply(id, Json::object());
  if (method == "tools/list") return Reply(id, {{"tools", ToolDefinitions()}});
  if (method == "tools/call") return StartCall(id, params);
  if (method == "logging/setLevel") return Reply(id, Json::object());
  Fail(id, kMethodNotFound, fmt::format("method not found: {}", method));
}

void Session::Impl::Notification(const std::string& method, const Json& params) {
  if (method != "notifications/cancelled") return;  // initialized, roots/list_changed, …: nothing to do
  if (!params.is_object() || !params.contains("requestId")) return;
  const Json& rid = params["requestId"];
  std::shared_ptr<CallContext> ctx;
  {
    std::lock_guard lock(calls_mu);
    for (Call& c : calls) {
      if (c.id == rid && !c.done) {
        c.canceled = true;
        c.stop.request_stop();
        ctx = c.ctx;
      }
    }
  }
  if (ctx) {
    std::fprintf(stderr, "kf mcp: request %s canceled by the client\n", Dump(rid).c_str());
    ctx->RunCancelHook();
  }
}

void Session::Impl::StartCall(const Json& id, const Json& params) {
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
    return Fail(id, kInvalidParams, "params.name: expected the tool's name");
  }
  const Json args = params.contains("arguments") ? params["arguments"] : Json::object();
  if (!args.is_object()) return Fail(id, kInvalidParams, "params.arguments: expected an object");
  Json token = nullptr;
  if (params.contains("_meta") && params["_meta"].is_object() && params["_meta"].contains("progressToken")) {
    token = params["_meta"]["progressToken"];
  }
  Reap();
  std::lock_guard lock(calls_mu);
  Call& call = calls.emplace_back();
  call.id = id;
  auto progress = token.is_null() ? std::function<void(double, const std::string&)>()
                                  : [this, token](double p, const std::string& message) {
                                      Send({{"jsonrpc", "2.0"},
                                            {"method", "notifications/progress"},
                                            {"params", {{"progressToken", token}, {"progress", p}, {"total", 100},
                                                        {"message", message}}}});
                                    };
  call.ctx = std::make_shared<CallContext>(call.stop.get_token(), progress);
  const std::string name = params["name"].get<std::string>();
  call.thread = std::thread([this, &call, name, args] {
    Json response;
    try {
      const Json value = tools->Call(name, args, *call.ctx);
      response = {{"jsonrpc", "2.0"}, {"id", call.id}, {"result", ToolResult(value, false)}};
    } catch (const InvalidParams& e) {
      response = {{"jsonrpc", "2.0"}, {"id", call.id}, {"error", {{"code", kInvalidParams}, {"message", e.message}}}};
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kf mcp: %s: %s\n", name.c_str(), e.what());
      response = {{"jsonrpc", "2.0"}, {"id", call.id}, {"result", ToolResult(Json(e.what()), true)}};
    }
    std::lock_guard l(calls_mu);
    // A canceled request gets no response (the client has forgotten it).
    if (!call.canceled) Send(response);
    call.done = true;
    calls_cv.notify_all();
  });
}

void Session::Impl::Reap() {
  std::lock_guard lock(calls_mu);
  for (auto it = calls.begin(); it != calls.end();) {
    if (it->done) {
      it->thread.join();
      it = calls.erase(it);
    } else {
      ++it;
    }
  }
}

Session::Session(McpOptions options, WriteFn write) : impl_(std::make_unique<Impl>()) {
  impl_->write = std::move(write);
  impl_->tools = std::make_unique<Tools>(options);
  impl_->options = std::move(options);
}

Session::~Session() {
  Drain();
  impl_->Reap();
}

void Session::Drain() {
  std::unique_lock lock(impl_->calls_mu);
  impl_->calls_cv.wait(lock, [&] { return impl_->AllDone(); });
}

bool Session::Drain(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->calls_mu);
  return impl_->calls_cv.wait_for(lock, timeout, [&] { return impl_->AllDone(); });
}

void Session::CancelAll() {
  std::vector<std::shared_ptr<CallContext>> running;
  {
    std::lock_guard lock(impl_->calls_mu);
    for (auto& c : impl_->calls) {
      if (c.done) continue;
      c.canceled = true;
      c.stop.request_stop();
      running.push_back(c.ctx);
    }
  }
  for (auto& ctx : running) ctx->RunCancelHook();
}

void Session::Handle(std::string_view message) {
  Impl& s = *impl_;
  Json m;
  try {
    m = ParseJson(message, "<message>");
  } catch (const std::exception& e) {
    return s.Fail(nullptr, kParseError, fmt::format("parse error: {}", e.what()));
  }
  if (m.is_array()) return s.Fail(nullptr, kInvalidRequest, "JSON-RPC batches are not supported");
  if (!m.is_object() || m.value("jsonrpc", "") != "2.0") {
    return s.Fail(m.is_object() && m.contains("id") ? m["id"] : Json(nullptr), kInvalidRequest,
                  "expected a JSON-RPC 2.0 object ({\"jsonrpc\": \"2.0\", …})");
  }
  const bool has_id = m.contains("id");
  if (has_id && !m["id"].is_string() && !m["id"].is_number_integer()) {
    return s.Fail(nullptr, kInvalidRequest, "id: expected a string or an integer");
  }
  if (!m.contains("method")) return;  // a response to a request of ours (we send none): ignored
  if (!m["method"].is_string()) return s.Fail(has_id ? m["id"] : Json(nullptr), kInvalidRequest, "method: expected a string");
  const std::string method = m["method"].get<std::string>();
  const Json params = m.contains("params") ? m["params"] : Json::object();
  try {
    if (has_id) {
      s.Request(m["id"], method, params);
    } else {
      s.Notification(method, params);
    }
  } catch (const std::exception& e) {
    if (has_id) s.Fail(m["id"], kInternalError, e.what());
  }
}

int ServeStdio(McpOptions options, std::FILE* in, std::FILE* out) {
  Session session(std::move(options), [out](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), out);
    std::fputc('\n', out);
    std::fflush(out);
  });
  std::string line;
  for (int c = std::fgetc(in);; c = std::fgetc(in)) {
    if (c == EOF || c == '\n') {
      if (line.find_first_not_of(" \t\r") != std::string::npos) session.Handle(line);
      line.clear();
      if (c == EOF) break;
    } else {
      line += static_cast<char>(c);
    }
  }
  // The client closed its end: quick calls still answer; what runs longer than a grace period is canceled
  // (its processes killed, its job CANCELED) rather than left running for nobody.
  if (!session.Drain(std::chrono::seconds(5))) session.CancelAll();
  session.Drain();
  return 0;
}

}  // namespace kf::mcp
