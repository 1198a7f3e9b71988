// kf mcp's protocol (kf::mcp::Session) fed JSON-RPC messages as a client sends them: version negotiation,
// malformed input, unknown methods and tools, invalid params, tool errors as isError results, folders outside
// the roots, cancellation of a running evaluation (its job CANCELED, no kernel stored), and the configuration
// and lineage files as the reference reads and writes them.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/mcp.hpp"
#include "test_util.hpp"

namespace kf::mcp {
namespace {
namespace fs = std::filesystem;

/// The test task of kf mcp (tests/mcp/py_sum_squares), copied into `dir`, with `delay_s` in its EVOLVE block.
fs::path CopyTask(const fs::path& dir, double delay_s) {
  const fs::path out = dir / "py_sum_squares";
  fs::copy(testing::SourceDir() / "tests" / "mcp" / "py_sum_squares", out, fs::copy_options::recursive);
  std::string kernel = testing::ReadFile(out / "kernel.py");
  kernel.replace(kernel.find("DELAY_S = 0.0"), 13, "DELAY_S = " + std::to_string(delay_s));
  testing::WriteFile(out / "kernel.py", kernel);
  return out;
}

class McpSession : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }

  void Start() {
    McpOptions o;
    o.roots = {dir_.path()};
    o.db = (dir_.path() / "kernels.sqlite3").string();
    o.client = ClientConfig{};  // local mode, whatever the machine's environment says
    session_ = std::make_unique<Session>(o, [this](const std::string& m) {
      std::lock_guard lock(mu_);
      out_.push_back(ParseJson(m, "<out>"));
      cv_.notify_all();
    });
  }

  void Send(const Json& message) { session_->Handle(message.dump()); }

  /// The response to request `id`, waiting up to `timeout`.
  Json Response(const Json& id, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock lock(mu_);
    Json found;
    cv_.wait_for(lock, timeout, [&] {
      for (const Json& m : out_) {
        if (m.contains("id") && m["id"] == id && !m.contains("method")) {
          found = m;
          return true;
        }
      }
      return false;
    });
    return found;
  }

  Json Call(int id, const std::string& tool, const Json& args, const std::string& version = "2025-06-18") {
    Send({{"jsonrpc", "2.0"}, {"id", 0}, {"method", "initialize"},
          {"params", {{"protocolVersion", version}, {"capabilities", Json::object()},
                      {"clientInfo", {{"name", "test"}, {"version", "1"}}}}}});
    Send({{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"},
          {"params", {{"name", tool}, {"arguments", args}}}});
    return Response(id);
  }

  testing::TempDir dir_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Json> out_;
  std::unique_ptr<Session> session_;
};

TEST_F(McpSession, InitializeNegotiatesTheVersion) {
  for (const std::string v : {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}) {
    Send({{"jsonrpc", "2.0"}, {"id", v}, {"method", "initialize"}, {"params", {{"protocolVersion", v}}}});
    Json r = Response(v);
    EXPECT_EQ(r["result"]["protocolVersion"], v);
    EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
    EXPECT_EQ(r["result"]["serverInfo"]["name"], "kernelfoundry");
  }
  // A revision we do not speak gets our newest (the client decides whether it can go on).
  Send({{"jsonrpc", "2.0"}, {"id", 9}, {"method", "initialize"}, {"params", {{"protocolVersion", "2023-01-01"}}}});
  EXPECT_EQ(Response(9)["result"]["protocolVersion"], kProtocolVersions[0]);
  Send({{"jsonrpc", "2.0"}, {"id", 10}, {"method", "initialize"}, {"params", Json::object()}});
  EXPECT_EQ(Response(10)["error"]["code"], -32602);
}

TEST_F(McpSession, MalformedInputIsAnErrorNotACrash) {
  session_->Handle("{not json");
  session_->Handle("[1, 2]");
  session_->Handle(R"({"id": 3, "method": "ping"})");  // no "jsonrpc": "2.0"
  session_->Handle(R"({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"})");
  std::lock_guard lock(mu_);
  ASSERT_EQ(out_.size(), 4u);
  EXPECT_EQ(out_[0]["error"]["code"], -32700);
  EXPECT_TRUE(out_[0]["id"].is_null());
  EXPECT_EQ(out_[1]["error"]["code"], -32600);
  EXPECT_EQ(out_[2]["error"]["code"], -32600);
  EXPECT_EQ(out_[2]["id"], 3);
  EXPECT_EQ(out_[3]["error"]["code"], -32600);
}

TEST_F(McpSession, MethodsPingAndNotifications) {
  Send({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "resources/read"}, {"params", Json::object()}});
  EXPECT_EQ(Response(1)["error"]["code"], -32601);
  Send({{"jsonrpc", "2.0"}, {"id", "p"}, {"method", "ping"}});
  EXPECT_EQ(Response("p")["result"], Json::object());
  Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  Send({{"jsonrpc", "2.0"}, {"method", "notifications/unknown"}});
  Send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}});
  const Json tools = Response(2)["result"]["tools"];
  std::vector<std::string> names;
  for (const Json& t : tools) {
    names.push_back(t["name"]);
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t["name"];
  }
  EXPECT_EQ(names, (std::vector<std::string>{"build_and_test", "evaluate_candidate", "get_result", "list_results",
                                             "validate_task"}));
  std::lock_guard lock(mu_);
  EXPECT_EQ(out_.size(), 3u);  // the notifications got no answer
}

TEST_F(McpSession, InvalidParamsAndUnknownTools) {
  EXPECT_EQ(Call(1, "no_such_tool", Json::object())["error"]["code"], -32602);
  EXPECT_EQ(Call(2, "build_and_test", Json::object())["error"]["code"], -32602);  // folder_path missing
  EXPECT_EQ(Call(3, "build_and_test", {{"folder_path", 7}})["error"]["code"], -32602);
  EXPECT_EQ(Call(4, "build_and_test", {{"folder_path", "x"}, {"extra", 1}})["error"]["code"], -32602);
  EXPECT_EQ(Call(5, "get_result", Json::object())["error"]["code"], -32602);  // neither kernel_id nor uuid
  Send({{"jsonrpc", "2.0"}, {"id", 6}, {"method", "tools/call"}, {"params", {{"arguments", Json::object()}}}});
  EXPECT_EQ(Response(6)["error"]["code"], -32602);
  Send({{"jsonrpc", "2.0"}, {"id", 7}, {"method", "tools/call"}, {"params", {{"name", "list_results"}, {"arguments", 3}}}});
  EXPECT_EQ(Response(7)["error"]["code"], -32602);
}

TEST_F(McpSession, ToolFailuresAreIsErrorResults) {
  // A folder outside the roots (and through a symlink that leads out) is refused before anything is read.
  testing::TempDir outside;
  fs::create_directory(outside.path() / "task");
  fs::create_directory_symlink(outside.path() / "task", dir_.path() / "link");
  for (const fs::path& p : {outside.path() / "task", dir_.path() / "link"}) {
    Json r = Call(1, "build_and_test", {{"folder_path", p.string()}});
    ASSERT_TRUE(r.contains("result")) << r.dump();
    EXPECT_EQ(r["result"]["isError"], true);
    EXPECT_NE(r["result"]["content"][0]["text"].get<std::string>().find("outside the folders kf mcp may read"),
              std::string::npos);
    std::lock_guard lock(mu_);
    out_.clear();
  }
  Json missing = Call(2, "build_and_test", {{"folder_path", (dir_.path() / "nope").string()}});
  EXPECT_EQ(missing["result"]["isError"], true);
  EXPECT_NE(missing["result"]["content"][0]["text"].get<std::string>().find("no such file"), std::string::npos);
  // An invalid package: a clear message, nothing stored.
  fs::create_directory(dir_.path() / "empty");
  testing::WriteFile(dir_.path() / "empty" / "config.yaml", "task_name: t\n");
  Json invalid = Call(3, "build_and_test", {{"folder_path", (dir_.path() / "empty").string()}});
  EXPECT_EQ(invalid["result"]["isError"], true);
  EXPECT_FALSE(fs::exists(dir_.path() / "empty" / ".kernelfoundry"));
}

TEST_F(McpSession, StructuredContentFromRevision20250618) {
  Json old = Call(1, "list_results", Json::object(), "2024-11-05");
  EXPECT_FALSE(old["result"].contains("structuredContent"));
  EXPECT_EQ(ParseJson(old["result"]["content"][0]["text"].get<std::string>(), "text")["kernels"], Json::array());
  Json now = Call(2, "list_results", Json::object(), "2025-06-18");
  EXPECT_EQ(now["result"]["structuredContent"]["kernels"], Json::array());
  EXPECT_EQ(now["result"]["isError"], false);
}

TEST_F(McpSession, CancellationKillsTheEvaluationAndCancelsTheJob) {
  const fs::path task = CopyTask(dir_.path(), 600);
  Send({{"jsonrpc", "2.0"}, {"id", 0}, {"method", "initialize"}, {"params", {{"protocolVersion", "2025-06-18"}}}});
  Send({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"},
        {"params", {{"name", "build_and_test"}, {"arguments", {{"folder_path", task.string()}}},
                    {"_meta", {{"progressToken", "tok"}}}}}});
  // Wait until a test phase runs (the candidate then sleeps in its correctness test).
  {
    std::unique_lock lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(120), [&] {
      for (const Json& m : out_) {
        if (m.value("method", "") == "notifications/progress" &&
            m["params"]["message"].get<std::string>().find("correctness") != std::string::npos) {
          EXPECT_EQ(m["params"]["progressToken"], "tok");
          return true;
        }
      }
      return false;
    }));
  }
  const auto t0 = std::chrono::steady_clock::now();
  Send({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 1}, {"reason", "test"}}}});
  session_->Drain();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));  // not the 600 s of the candidate
  EXPECT_TRUE(Response(1, std::chrono::seconds(1)).is_null());  // a canceled request gets no response
  auto store = OpenStore((dir_.path() / "kernels.sqlite3").string(), {.read_only = true});
  const auto jobs = store->ListJobs({});
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["status"], "CANCELED");
  EXPECT_EQ(store->CountKernels({}), 0);
  EXPECT_FALSE(fs::exists(task / ".kernelfoundry" / "kernels.json"));
}

TEST(McpConfig, ReadAsTheReferenceReadsIt) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "config.yml";
  EXPECT_EQ(ReadClientConfig(file, {}).server_url, "");  // no file, no variables: local mode
  testing::WriteFile(file, "server_url: https://kf.example/\nuser: alice\ntoken: t1\npoll_interval: 2\n");
  ClientConfig c = ReadClientConfig(file, {{"KERNELFOUNDRY_TOKEN", "t2"}, {"KERNELFOUNDRY_MAX_WAIT", "60"}});
  EXPECT_EQ(c.server_url, "https://kf.example");
  EXPECT_EQ(c.user, "alice");
  EXPECT_EQ(c.token, "t2");  // the variable wins over the file
  EXPECT_EQ(c.poll_interval_s, 2);
  EXPECT_EQ(c.max_wait_s, 60);
  EXPECT_EQ(c.timeout_s, 1200);
  // An empty KERNELFOUNDRY_SERVER_URL turns a configured server off (create-config's local mode).
  EXPECT_EQ(ReadClientConfig(file, {{"KERNELFOUNDRY_SERVER_URL", ""}}).server_url, "");
  Error e = testing::ExpectError(ErrorKind::kInvalidArgument, [&] {
    ReadClientConfig({}, {{"KERNELFOUNDRY_SERVER_URL", "http://h"}, {"KERNELFOUNDRY_USER", "u"}});
  });
  EXPECT_EQ(e.field(), "token");
  e = testing::ExpectError(ErrorKind::kInvalidArgument, [&] {
    ReadClientConfig(file, {{"KERNELFOUNDRY_TIMEOUT", "soon"}});
  });
  EXPECT_EQ(e.file(), "KERNELFOUNDRY_TIMEOUT");
  testing::WriteFile(file, "- a\n- b\n");
  testing::ExpectError(ErrorKind::kInvalidArgument, [&] { ReadClientConfig(file, {}); });
}

TEST(McpConfig, LineageFileAndClientConfigs) {
  testing::TempDir dir;
  EXPECT_EQ(LastKernelUuid(dir.path()), std::nullopt);
  AppendKernelUuids(dir.path(), {"u1"});
  AppendKernelUuids(dir.path(), {"u2", "u3"});
  EXPECT_EQ(LastKernelUuid(dir.path()), "u3");
  EXPECT_EQ(ParseJson(testing::ReadFile(dir.path() / ".kernelfoundry" / "kernels.json"), "f"),
            Json({"u1", "u2", "u3"}));
  testing::WriteFile(dir.path() / ".kernelfoundry" / "kernels.json", "{\"not\": \"a list\"}");
  testing::ExpectError(ErrorKind::kParse, [&] { LastKernelUuid(dir.path()); });

  const Json vscode = ClientConfigFile("vscode", "/usr/bin/kf", {"mcp"}, {{"KERNELFOUNDRY_SERVER_URL", ""}});
  EXPECT_EQ(vscode["servers"]["kernelfoundry-mcp"]["type"], "stdio");
  EXPECT_EQ(vscode["servers"]["kernelfoundry-mcp"]["command"], "/usr/bin/kf");
  EXPECT_EQ(vscode["servers"]["kernelfoundry-mcp"]["env"]["KERNELFOUNDRY_SERVER_URL"], "");
  const Json generic = ClientConfigFile("mcp", "/usr/bin/kf", {"mcp"}, {});
  EXPECT_EQ(generic["mcpServers"]["kernelfoundry-mcp"]["args"], Json({"mcp"}));
  testing::ExpectError(ErrorKind::kInvalidArgument, [&] { ClientConfigFile("emacs", "kf", {}, {}); });
}

}  // namespace
}  // namespace kf::mcp
