// kf serve's JSON API over real HTTP: an in-process kf::Server on a free 127.0.0.1 port over a SQLite database
// filled through the Store's write API (demo_db.cc), queried with cpp-httplib's client; plus `kf serve` as a
// child process (binding, read-only opening, signals).
#include <gtest/gtest.h>
#include <httplib.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <thread>

#include "kernelfoundry/serve.hpp"
#include "kernelfoundry/store.hpp"
#include "serve/demo_db.hpp"
#include "test_util.hpp"

extern char** environ;

namespace kf {
namespace {

using testing::kHostile;

/// Percent-encodes every byte but unreserved characters (RFC 3986 §2.3).
std::string PercentEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

class ServeApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    db_path_ = (dir_->path() / "kernels.sqlite3").string();
    {
      auto store = OpenStore(db_path_);
      demo_ = new testing::DemoDb(testing::FillDemoDb(*store, testing::SourceDir().string(), 40, true));
    }
    server_ = new Server(OpenStore(db_path_, {.read_only = true}), ServeOptions{.host = "127.0.0.1", .port = 0});
    server_->Bind();
    thread_ = new std::thread([] { server_->Run(); });
  }
  static void TearDownTestSuite() {
    server_->Stop();
    thread_->join();
    delete thread_;
    delete server_;
    delete demo_;
    delete dir_;
  }

  /// GET path; expects `status`; returns the parsed body.
  static Json Get(const std::string& path, int status = 200) {
    httplib::Client client("127.0.0.1", server_->port());
    auto res = client.Get(path, {{"Accept-Encoding", "br, gzip, deflate"}});  // as browsers send it
    EXPECT_TRUE(res) << path;
    if (!res) return nullptr;
    EXPECT_EQ(res->status, status) << path << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json; charset=utf-8") << path;
    EXPECT_EQ(res->get_header_value("Content-Encoding"), "");  // see kf::kJsonType
    EXPECT_NE(res->get_header_value("Content-Security-Policy").find("script-src 'self'"), std::string::npos);
    return Json::parse(res->body);
  }

  static testing::TempDir* dir_;
  static std::string db_path_;
  static testing::DemoDb* demo_;
  static Server* server_;
  static std::thread* thread_;
};
testing::TempDir* ServeApiTest::dir_ = nullptr;
std::string ServeApiTest::db_path_;
testing::DemoDb* ServeApiTest::demo_ = nullptr;
Server* ServeApiTest::server_ = nullptr;
std::thread* ServeApiTest::thread_ = nullptr;

TEST_F(ServeApiTest, TasksHaveCountsByStatusAndBestSpeedup) {
  Json j = Get("/api/tasks");
  ASSERT_EQ(j["tasks"].size(), 3u);
  const Json* omp = nullptr;
  for (const Json& t : j["tasks"]) if (t["task_name"] == "omp_reduction") omp = &t;
  ASSERT_NE(omp, nullptr);
  // 40 evaluations, task row_softmax for n % 3 == 2 (13 of them), omp_reduction the other 27.
  EXPECT_EQ((*omp)["kernels"], 27);
  int64_t sum = 0;
  for (const auto& [k, v] : (*omp)["by_kf_status"].items()) sum += v.get<int64_t>();
  EXPECT_EQ(sum, 27);
  // Best correct speedup of omp_reduction, from the store's own list.
  auto store = OpenStore(db_path_, {.read_only = true});
  auto rows = store->ListKernels({.task_name = "omp_reduction", .kf_status = "correct", .limit = 1,
                                  .sort = KernelSort::kSpeedup, .descending = true});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ((*omp)["best_speedup"].get<double>(), rows[0]["improve_over_native"].get<double>());
  EXPECT_GT((*omp)["best_speedup"].get<double>(), 2.0);
}

TEST_F(ServeApiTest, KernelsArePagedFilteredAndSorted) {
  Json all = Get("/api/kernels?task=omp_reduction&limit=10");
  EXPECT_EQ(all["total"], 27);
  ASSERT_EQ(all["kernels"].size(), 10u);
  EXPECT_FALSE(all["kernels"][0].contains("output_code"));  // pages carry no code or logs
  Json tail = Get("/api/kernels?task=omp_reduction&limit=10&offset=20");
  EXPECT_EQ(tail["kernels"].size(), 7u);
  EXPECT_LT(all["kernels"][9]["id"].get<int64_t>(), tail["kernels"][0]["id"].get<int64_t>());

  Json bad = Get("/api/kernels?status=build_error&limit=1000");
  EXPECT_EQ(bad["total"], demo_->per_status.at("build_error"));
  for (const Json& k : bad["kernels"]) EXPECT_EQ(k["kf_status"], "build_error");
  Json ref = Get("/api/kernels?ref_status=error");
  EXPECT_EQ(ref["total"], demo_->per_status.at("build_error"));

  Json fast = Get("/api/kernels?sort=speedup&order=desc&limit=3");
  ASSERT_EQ(fast["kernels"].size(), 3u);
  EXPECT_GE(fast["kernels"][0]["improve_over_native"].get<double>(), fast["kernels"][1]["improve_over_native"].get<double>());
  EXPECT_GE(fast["kernels"][1]["improve_over_native"].get<double>(), fast["kernels"][2]["improve_over_native"].get<double>());
}

TEST_F(ServeApiTest, JobsAndHistory) {
  Json jobs = Get("/api/jobs?task=row_softmax&status=COMPLETE&limit=5");
  EXPECT_EQ(jobs["total"], 13);
  ASSERT_EQ(jobs["jobs"].size(), 5u);
  EXPECT_EQ(jobs["jobs"][0]["status"], "COMPLETE");
  EXPECT_EQ(jobs["jobs"][0]["task_name"], "row_softmax");
  EXPECT_EQ(Get("/api/jobs?status=RUN")["total"], 0);

  Json h = Get("/api/history?task=row_softmax");
  ASSERT_EQ(h["points"].size(), 13u);
  const int64_t third = h["points"][2]["id"].get<int64_t>();
  EXPECT_EQ(Get("/api/history?task=row_softmax&after_id=" + std::to_string(third))["points"].size(), 10u);
}

TEST_F(ServeApiTest, BadParametersAnswer400NamingTheParameter) {
  for (const auto& [query, param] : std::vector<std::pair<std::string, std::string>>{
           {"/api/kernels?limit=0", "limit"},
           {"/api/kernels?limit=1001", "limit"},
           {"/api/kernels?limit=ten", "limit"},
           {"/api/kernels?offset=-1", "offset"},
           {"/api/kernels?sort=color", "sort"},
           {"/api/kernels?order=up", "order"},
           {"/api/kernels?job=x", "job"},
           {"/api/jobs?status=running", "status"},
           {"/api/jobs?limit=5&limit=6", "limit"},
           {"/api/history", "task"},
           {"/api/kernels/abc", "id"}}) {
    Json j = Get(query, 400);
    EXPECT_EQ(j["parameter"], param) << query;
    EXPECT_NE(j["error"].get<std::string>().find(param), std::string::npos) << query;
  }
  EXPECT_TRUE(Get("/api/kernels/999999", 404).contains("error"));
  EXPECT_TRUE(Get("/api/nothing", 404).contains("error"));
}

TEST_F(ServeApiTest, KernelDetailHasVerdictBenchmarksCodeBestAndLogs) {
  // The last correct omp_reduction kernel: its best earlier candidate is the best correct one before it.
  auto store = OpenStore(db_path_, {.read_only = true});
  auto rows = store->ListKernels({.task_name = "omp_reduction", .kf_status = "correct"});
  ASSERT_GE(rows.size(), 3u);
  const Json& last = rows.back();
  double best = 0;
  int64_t best_id = 0;
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    if (rows[i]["improve_over_native"].get<double>() > best) {
      best = rows[i]["improve_over_native"].get<double>();
      best_id = rows[i]["id"].get<int64_t>();
    }
  }
  Json k = Get("/api/kernels/" + std::to_string(last["id"].get<int64_t>()));
  EXPECT_EQ(k["verdict"]["status"], "correct");
  EXPECT_EQ(k["verdict"]["reference_status"], "correct");
  EXPECT_EQ(k["verdict"]["score"], 5);
  EXPECT_DOUBLE_EQ(k["verdict"]["speedup"].get<double>(), last["improve_over_native"].get<double>());
  ASSERT_EQ(k["benchmarks"].size(), 1u);
  const Json& b = k["benchmarks"][0];
  EXPECT_EQ(b["name"], "bench_sum");
  EXPECT_EQ(b["arch"], "cpu");
  EXPECT_NEAR(b["reference_ms"].get<double>() / b["candidate_ms"].get<double>(), b["speedup"].get<double>(), 1e-9);
  EXPECT_GT(b["std_ms"].get<double>(), 0);
  EXPECT_EQ(b["num_trials"], 20);
  EXPECT_TRUE(k["runtime_samples"].contains("test_custom_correctness"));
  EXPECT_EQ(k["code"]["output"], last.value("output_code", Json(nullptr)).is_null()
                                     ? (*store->GetKernel(last["id"].get<int64_t>()))["output_code"]
                                     : last["output_code"]);
  EXPECT_NE(k["code"]["input"].get<std::string>().find("kf_sum_squares"), std::string::npos);
  ASSERT_TRUE(k["best"].is_object());
  EXPECT_EQ(k["best"]["id"], best_id);
  EXPECT_DOUBLE_EQ(k["best"]["speedup"].get<double>(), best);
  ASSERT_EQ(k["logs"].size(), 2u);
  EXPECT_EQ(k["logs"][0]["name"], "build");
  EXPECT_EQ(k["logs"][1]["name"], "test_custom_correctness");
  EXPECT_EQ(k["logs"][1]["returncode"], 0);
  EXPECT_NE(k["logs"][1]["message"].get<std::string>().find("2 passed"), std::string::npos);

  // An early kernel: its best earlier candidate is found whether or not it is among the fastest rows.
  Json early = Get("/api/kernels/" + std::to_string(rows[1]["id"].get<int64_t>()));
  ASSERT_TRUE(early["best"].is_object());
  EXPECT_EQ(early["best"]["id"], rows[0]["id"]);
  EXPECT_TRUE(Get("/api/kernels/" + std::to_string(rows[0]["id"].get<int64_t>()))["best"].is_null());

  // A failed build: detail from the status line, no benchmarks, no test log.
  Json f = Get("/api/kernels?status=build_error&limit=1");
  Json fk = Get("/api/kernels/" + std::to_string(f["kernels"][0]["id"].get<int64_t>()));
  EXPECT_EQ(fk["verdict"]["status"], "build_error");
  EXPECT_EQ(fk["verdict"]["detail"].get<std::string>().rfind("demo build_error #", 0), 0u);
  EXPECT_TRUE(fk["verdict"]["speedup"].is_null());
  EXPECT_TRUE(fk["benchmarks"].empty());
  ASSERT_EQ(fk["logs"].size(), 1u);
  EXPECT_EQ(fk["logs"][0]["returncode"], 1);
  EXPECT_NE(fk["logs"][0]["message"].get<std::string>().find("\x1b[1;31merror:"), std::string::npos);
}

TEST_F(ServeApiTest, CandidateMarkupComesBackAsExactJsonStrings) {
  Json k = Get("/api/kernels/" + std::to_string(demo_->hostile_id));
  EXPECT_EQ(k["task_name"], "hostile " + kHostile);
  EXPECT_EQ(k["code"]["output"], "// " + kHostile + "\nint x = 1;\n");
  EXPECT_NE(k["eval_log"].get<std::string>().find(kHostile + "\n"), std::string::npos);
  EXPECT_NE(k["logs"][0]["message"].get<std::string>().find(kHostile), std::string::npos);
  // The body itself holds the markup only inside JSON strings; the task list names the task verbatim.
  bool found = false;
  const Json tasks = Get("/api/tasks");
  for (const Json& t : tasks["tasks"]) found |= t["task_name"] == "hostile " + kHostile;
  EXPECT_TRUE(found);
  httplib::Client client("127.0.0.1", server_->port());
  auto res = client.Get("/api/kernels?task=" + PercentEncode("hostile " + kHostile));
  ASSERT_TRUE(res);
  EXPECT_EQ(Json::parse(res->body)["total"], 1);
}

TEST_F(ServeApiTest, PageAndScriptAreServedWithAPolicy) {
  httplib::Client client("127.0.0.1", server_->port());
  auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<script src=\"app.js\""), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'none'"), std::string::npos);
  auto js = client.Get("/app.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->body.find("innerHTML"), std::string::npos);  // text only, never markup
  EXPECT_EQ(js->body.find("insertAdjacentHTML"), std::string::npos);
  auto missing = client.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // DNS rebinding: a request for another host name is refused.
  auto rebound = client.Get("/api/tasks", {{"Host", "evil.example:8080"}});
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 403);
  EXPECT_EQ(rebound->body.find("task_name"), std::string::npos);
  auto local = client.Get("/api/tasks", {{"Host", "localhost:8080"}});
  ASSERT_TRUE(local);
  EXPECT_EQ(local->status, 200);
  auto post = client.Post("/api/tasks", "", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_NE(post->status, 200);
}

// /api/tasks is answered from a cache that folds in new rows: it must equal the store's full aggregation after
// rows arrive from another writer, including a new task and a new best speedup; history pages say "more".
// job_logs rows in the reference's format (the name in message, the text in extra["log"]: what kf writes and
// what the reference's evaluator writes) and in the format of older kf versions (the name in extra["log"], the
// text in message, extra["returncode"]) both show with their name, text and exit code.
TEST(ServeLogs, ReferenceAndOlderRowsShowNameTextAndReturnCode) {
  testing::TempDir dir;
  auto store = OpenStore((dir.path() / "k.sqlite3").string());
  int64_t job = store->CreateJob("custom", nullptr);
  int64_t id = store->InsertKernel({{"uuid", "u"}, {"job_id", job}, {"task_name", "t"}});
  store->InsertJobLogs(
      {{.job_id = job, .kernel_uuid = "u", .level = "RAW", .message = "build_reference",
        .extra = {{"log", "Return code: -11\nMessage: boom\n"}, {"output_data", nullptr}, {"worker_info", nullptr},
                  {"trial", 0}, {"version", 0}}},
       {.job_id = job, .kernel_uuid = "u", .level = "RAW", .message = "old text",
        .extra = {{"log", "build custom"}, {"returncode", 0}}},
       {.job_id = job, .kernel_uuid = "u", .level = "INFO", .message = "a general line"},
       {.job_id = job, .kernel_uuid = "other", .level = "RAW", .message = "build"}});
  Json logs = (*KernelDetail(*store, id))["logs"];
  ASSERT_EQ(logs.size(), 3u);
  EXPECT_EQ(logs[0]["name"], "build_reference");
  EXPECT_EQ(logs[0]["returncode"], -11);
  EXPECT_EQ(logs[0]["message"], "Return code: -11\nMessage: boom\n");
  EXPECT_EQ(logs[1]["name"], "build custom");
  EXPECT_EQ(logs[1]["returncode"], 0);
  EXPECT_EQ(logs[1]["message"], "old text");
  EXPECT_EQ(logs[2]["name"], "");
  EXPECT_TRUE(logs[2]["returncode"].is_null());
  EXPECT_EQ(logs[2]["message"], "a general line");
}

TEST(ServeLiveTest, TaskSummariesFollowNewRowsAndHistoryPages) {
  testing::TempDir dir;
  const std::string db = (dir.path() / "k.sqlite3").string();
  auto writer = OpenStore(db);
  testing::FillDemoDb(*writer, testing::SourceDir().string(), 30, false);
  Server server(OpenStore(db, {.read_only = true}), ServeOptions{.port = 0});
  server.Bind();
  std::thread thread([&] { server.Run(); });
  httplib::Client client("127.0.0.1", server.port());
  auto tasks = [&] {
    auto res = client.Get("/api/tasks");
    EXPECT_TRUE(res && res->status == 200);
    return res ? Json::parse(res->body) : Json(nullptr);
  };
  auto expected = [&] {
    Json j = Json::array();
    for (const TaskSummary& s : writer->ListTaskSummaries()) j.push_back(s.ToJson());
    return Json{{"tasks", j}};
  };
  EXPECT_EQ(tasks(), expected());
  writer->InsertKernel({{"task_name", "omp_reduction"}, {"status", "correct"}, {"score", 5},
                        {"improve_over_native", 99.5}, {"eval_log", "kf status: correct\n"}, {"kf_status", "correct"}});
  writer->InsertKernel({{"task_name", "brand_new"}, {"status", "error"}, {"score", 1},
                        {"eval_log", "kf status: build_error (x)\n"}, {"kf_status", "build_error"}});
  writer->InsertKernel({{"status", "compiled"}});  // no task name, no kf status
  Json now = tasks();
  EXPECT_EQ(now, expected());
  ASSERT_EQ(now["tasks"].size(), 4u);
  EXPECT_EQ(now["tasks"][2]["task_name"], "omp_reduction");
  EXPECT_EQ(now["tasks"][2]["best_speedup"], 99.5);

  auto history = [&](const std::string& q) { return Json::parse(client.Get("/api/history?" + q)->body); };
  Json page = history("task=omp_reduction&limit=7");
  EXPECT_EQ(page["points"].size(), 7u);
  EXPECT_EQ(page["more"], true);
  Json rest = history("task=omp_reduction&limit=100&after_id=" + std::to_string(page["points"][6]["id"].get<int64_t>()));
  EXPECT_EQ(rest["more"], false);
  EXPECT_EQ(page["points"].size() + rest["points"].size(), 21u);  // 20 demo rows + the one above
  EXPECT_EQ(history("task=omp_reduction&limit=10001")["parameter"], "limit");
  server.Stop();
  thread.join();
}

TEST(ServeCliTest, ServesReadOnlyOnLoopbackAndStopsOnSigterm) {
  testing::TempDir dir;
  const std::string db = (dir.path() / "k.sqlite3").string();
  {
    auto store = OpenStore(db);
    testing::FillDemoDb(*store, testing::SourceDir().string(), 5, false);
  }
  const auto size_before = std::filesystem::file_size(db);
  const std::string out = (dir.path() / "out.txt").string();
  const std::string kf = (testing::BinaryDir() / "kf").string();
  // Start on a free port (in the background), read the bound address from the first line, query, SIGTERM.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<std::string> args = {kf, "serve", "--db", db, "--port", "0"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, kf.c_str(), &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  std::string first;
  for (int i = 0; i < 100 && first.find('\n') == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    first = testing::ReadFile(out);
  }
  ASSERT_EQ(first.rfind("kf serve: http://127.0.0.1:", 0), 0u) << first;
  const int port = std::stoi(first.substr(std::string("kf serve: http://127.0.0.1:").size()));
  EXPECT_NE(first.find(db), std::string::npos) << first;
  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/api/tasks");
  ASSERT_TRUE(res);
  EXPECT_EQ(Json::parse(res->body)["tasks"].size(), 2u);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gone = waitpid(pid, &status, WNOHANG) == pid;
  }
  EXPECT_TRUE(gone) << "kf serve still runs 5 s after SIGTERM";
  if (!gone) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(std::filesystem::file_size(db), size_before);  // read-only: nothing written
  EXPECT_FALSE(std::filesystem::exists(db + "-wal") && std::filesystem::file_size(db + "-wal") > 0);

  auto [rc2, missing] = testing::RunShell(kf + " serve --db " + (dir.path() / "none.sqlite3").string() + " --port 0");
  EXPECT_EQ(rc2, 4) << missing;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "none.sqlite3"));
}

}  // namespace
}  // namespace kf
