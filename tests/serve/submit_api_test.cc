// kf serve's submission API over real HTTP: an in-process kf::Server with SubmitOptions on a free 127.0.0.1 port,
// tokens stored through the Store, a real pure-Python task evaluated by the pool. Authentication (401), other
// users' jobs (404), limits (413, 429), hostile and invalid archives (400, nothing stored), cancellation of a
// running job (its processes killed, CANCELED, no kernel), a job that survives a restart, and the browse API
// behind tokens.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/serve.hpp"
#include "kernelfoundry/store.hpp"
#include "test_util.hpp"

namespace kf {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// The test task tests/mcp/py_sum_squares as a zip, with `delay_s` in its EVOLVE block.
std::string TaskZip(double delay_s = 0) {
  MemoryFileMap files = MemoryFileMap::FromDisk(testing::SourceDir() / "tests" / "mcp" / "py_sum_squares");
  std::string kernel = *files.Get("kernel.py");
  kernel.replace(kernel.find("DELAY_S = 0.0"), 13, "DELAY_S = " + std::to_string(delay_s));
  files.Set("kernel.py", kernel);
  return files.ToArchive(ArchiveFormat::kZip);
}

la_ssize_t Append(archive*, void* out, const void* buf, size_t n) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}

/// A zip with one member `name` (a symlink to `link` when given), written by libarchive (ToArchive refuses
/// such names).
std::string HostileZip(const std::string& name, const std::string& link = {}) {
  archive* a = archive_write_new();
  archive_write_set_format_zip(a);
  std::string out;
  archive_write_open(a, &out, nullptr, Append, nullptr);
  for (const auto& [n, data] : {std::pair<std::string, std::string>{"config.yaml", "task_name: x\n"}, {name, "boom"}}) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, n.c_str());
    archive_entry_set_filetype(e, !link.empty() && n == name ? AE_IFLNK : AE_IFREG);
    archive_entry_set_perm(e, 0644);
    if (!link.empty() && n == name) archive_entry_set_symlink(e, link.c_str());
    const bool regular = link.empty() || n != name;
    archive_entry_set_size(e, regular ? static_cast<la_int64_t>(data.size()) : 0);
    archive_write_header(a, e);
    if (regular) archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

/// Submission options: `workers` evaluations at once, the pool started when `run`; `limits` as given.
SubmitOptions Options(int workers, bool run, SubmitLimits limits = {}) {
  SubmitOptions o;
  o.workers = workers;
  o.run_jobs = run;
  o.limits = limits;
  o.cancel_poll = 200ms;
  return o;
}

SubmitLimits Limits(int64_t archive_bytes, int active, int rpm) {
  SubmitLimits l;
  l.max_archive_bytes = archive_bytes;
  l.max_active_jobs = active;
  l.requests_per_minute = rpm;
  return l;
}

class SubmitApi : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = (dir_.path() / "kernels.sqlite3").string();
    auto store = OpenStore(db_);
    for (const auto& [user, admin] : {std::pair{"alice", false}, std::pair{"bob", false}, std::pair{"root", true}}) {
      tokens_[user] = NewApiToken();
      store->AddApiToken(user, ApiTokenHash(tokens_[user]), admin);
    }
  }
  void TearDown() override { StopServer(); }

  void StartServer(SubmitOptions o) {
    ServeOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.submit = std::move(o);
    server_ = std::make_unique<Server>(OpenStore(db_), so);
    server_->Bind();
    thread_ = std::thread([this] { server_->Run(); });
  }
  void StopServer() {
    if (!server_) return;
    server_->Stop();
    thread_.join();
    server_.reset();
  }

  httplib::Client Client(const std::string& user) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(60s);
    if (!user.empty()) c.set_bearer_token_auth(tokens_.count(user) ? tokens_[user] : user);
    return c;
  }

  httplib::Result Submit(const std::string& user, const std::string& zip, const std::string& parent = {}) {
    httplib::MultipartFormDataItems items = {{"file", zip, "task.zip", "application/zip"}, {"idsid", user, "", ""}};
    if (!parent.empty()) items.push_back({"parent_uuid", parent, "", ""});
    return Client(user).Post("/api/validate_job", items);
  }

  std::string WaitStatus(const std::string& user, int64_t job, const std::set<std::string>& want,
                         std::chrono::seconds timeout = 180s) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    std::string status;
    while (std::chrono::steady_clock::now() < end) {
      auto r = Client(user).Get("/api/job/" + std::to_string(job));
      if (r && r->status == 200) status = ParseJson(r->body, "job")["status"].get<std::string>();
      if (want.count(status)) return status;
      std::this_thread::sleep_for(100ms);
    }
    return status;
  }

  int64_t Jobs() { return OpenStore(db_, {.read_only = true})->CountJobs({}); }

  testing::TempDir dir_;
  std::string db_;
  std::map<std::string, std::string> tokens_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

TEST_F(SubmitApi, TokensAreNeededAndOtherUsersJobsAreInvisible) {
  StartServer(Options(1, false));
  EXPECT_EQ(Client("").Get("/api/job/1")->status, 401);
  EXPECT_EQ(Client("").Get("/api/job/1")->get_header_value("WWW-Authenticate"), "Bearer realm=\"kf\"");
  EXPECT_EQ(Client("kf_wrong").Get("/api/job/1")->status, 401);
  EXPECT_EQ(Client("").Get("/api/tasks")->status, 401);  // the browse API too
  auto r = Submit("alice", TaskZip());
  ASSERT_EQ(r->status, 200) << r->body;
  const int64_t job = ParseJson(r->body, "submit")["job_id"].get<int64_t>();
  EXPECT_EQ(ParseJson(Client("alice").Get("/api/job/" + std::to_string(job))->body, "job")["status"], "INIT");
  const std::string id = std::to_string(job);
  for (const std::string& path : {"/api/job/" + id, "/api/kernels_by_job?job_id=" + id, "/api/jobs/logs?job_id=" + id}) {
    EXPECT_EQ(Client("bob").Get(path)->status, 404) << path;
    EXPECT_EQ(Client("root").Get(path)->status, 200) << path;  // admin
  }
  EXPECT_EQ(Client("bob").Post("/api/job/" + id + "/cancel")->status, 404);
  EXPECT_EQ(Client("alice").Get("/api/job/99999")->status, 404);
  // idsid must be the token's user.
  httplib::MultipartFormDataItems items = {{"file", TaskZip(), "t.zip", "application/zip"}, {"idsid", "alice", "", ""}};
  EXPECT_EQ(Client("bob").Post("/api/validate_job", items)->status, 403);
  // A revoked token no longer works.
  OpenStore(db_)->RevokeApiTokens("bob", std::nullopt);
  EXPECT_EQ(Client("bob").Get("/api/whoami")->status, 401);
  EXPECT_EQ(ParseJson(Client("root").Get("/api/whoami")->body, "w")["admin"], true);
  // Users see their own kernels only; the aggregate pages need an admin.
  EXPECT_EQ(Client("alice").Get("/api/tasks")->status, 403);
  EXPECT_EQ(Client("root").Get("/api/tasks")->status, 200);
  EXPECT_EQ(Client("alice").Get("/api/kernels")->status, 200);
}

TEST_F(SubmitApi, LimitsAnswer413And429WithNothingStored) {
  StartServer(Options(1, false, Limits(4000, 2, 1000)));
  const std::string zip = TaskZip();
  ASSERT_LT(zip.size(), 4000u);
  auto big = Submit("alice", zip + std::string(5000, 'x'));
  EXPECT_EQ(big->status, 413) << big->body;
  EXPECT_EQ(Jobs(), 0);
  EXPECT_EQ(Submit("alice", zip)->status, 200);
  EXPECT_EQ(Submit("alice", zip)->status, 200);
  auto third = Submit("alice", zip);
  EXPECT_EQ(third->status, 429) << third->body;
  EXPECT_FALSE(third->get_header_value("Retry-After").empty());
  EXPECT_EQ(Submit("bob", zip)->status, 200);  // the limit is per user
  EXPECT_EQ(Jobs(), 3);
  StopServer();
  StartServer(Options(1, false, Limits(32 << 20, 20, 3)));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Client("alice").Get("/api/whoami")->status, 200);
  auto limited = Client("alice").Get("/api/whoami");
  EXPECT_EQ(limited->status, 429);
  EXPECT_GE(std::stoi(limited->get_header_value("Retry-After")), 1);
  EXPECT_EQ(Client("bob").Get("/api/whoami")->status, 200);
}

TEST_F(SubmitApi, HostileAndInvalidArchivesAreRefusedAndNothingIsStored) {
  StartServer(Options(1, false));
  for (const auto& [zip, what] : {std::pair{HostileZip("../evil.py"), "traversal"},
                                  std::pair{HostileZip("link.py", "/etc/passwd"), "symlink"},
                                  std::pair{std::string("PK\x03\x04garbage"), "corrupt"},
                                  std::pair{HostileZip("kernel.py"), "invalid task"}}) {
    auto r = Submit("alice", zip);
    EXPECT_EQ(r->status, 400) << what << ": " << r->body;
    EXPECT_TRUE(ParseJson(r->body, "r").contains("error")) << what;
  }
  EXPECT_FALSE(fs::exists(dir_.path().parent_path() / "evil.py"));
  EXPECT_EQ(Jobs(), 0);
  auto no_file = Client("alice").Post("/api/validate_job", "{}", "application/json");
  EXPECT_EQ(no_file->status, 400);
}

TEST_F(SubmitApi, JobRunsAndTheReferenceClientFlowReadsIt) {
  StartServer(Options(1, true));
  auto r = Submit("alice", TaskZip());
  ASSERT_EQ(r->status, 200) << r->body;
  const int64_t job = ParseJson(r->body, "submit")["job_id"].get<int64_t>();
  ASSERT_EQ(WaitStatus("alice", job, {"COMPLETE", "FAIL"}), "COMPLETE");
  const Json kernels = ParseJson(Client("alice").Get("/api/kernels_by_job?job_id=" + std::to_string(job))->body, "k");
  ASSERT_EQ(kernels["kernels"].size(), 1u);
  const Json& k = kernels["kernels"][0];
  EXPECT_EQ(k["db_user"], "alice");
  EXPECT_TRUE(testing::CorrectAndTimed(k["kf_status"])) << k.dump();
  const Json log = ParseJson(Client("alice").Get(fmt::format("/api/kernels/{}/eval_log", k["id"].get<int64_t>()))->body, "l");
  EXPECT_TRUE(log["speedup"].is_number()) << log.dump();
  EXPECT_TRUE(log["runtime_stats"].is_object());
  EXPECT_FALSE(log["eval_log"].get<std::string>().empty());
  ASSERT_TRUE(log["speedup_ci"].is_array()) << log.dump();
  EXPECT_LE(log["speedup_ci"][0].get<double>(), log["speedup_ci"][1].get<double>());
  EXPECT_EQ(Client("bob").Get(fmt::format("/api/kernels/{}/eval_log", k["id"].get<int64_t>()))->status, 404);
  const Json logs = ParseJson(Client("alice").Get("/api/jobs/logs?job_id=" + std::to_string(job))->body, "logs");
  ASSERT_FALSE(logs["logs"].empty());
  EXPECT_FALSE(logs["logs"][0]["raw_log"].get<std::string>().empty());
  // A second submission names the first as its parent: lineage is stored.
  r = Submit("alice", TaskZip(0.0001), k["uuid"].get<std::string>());
  const int64_t child = ParseJson(r->body, "submit")["job_id"].get<int64_t>();
  ASSERT_EQ(WaitStatus("alice", child, {"COMPLETE", "FAIL"}), "COMPLETE");
  const Json ck = ParseJson(Client("alice").Get("/api/kernels_by_job?job_id=" + std::to_string(child))->body, "k");
  EXPECT_EQ(ck["kernels"][0]["parent_uuid"], k["uuid"]);
  const Json lineage = ParseJson(Client("alice").Get("/api/lineage?uuid=" + ck["kernels"][0]["uuid"].get<std::string>())->body, "l");
  ASSERT_EQ(lineage["ancestors"].size(), 1u);
  EXPECT_EQ(lineage["ancestors"][0]["uuid"], k["uuid"]);
  // Regression (stranger test): bob named alice's kernel as his parent and then saw it (id, score, db_user) among
  // his kernel's ancestors, and alice saw his among her children. A parent must be the submitter's own: 400, no job.
  const int64_t jobs = Jobs();
  r = Submit("bob", TaskZip(), k["uuid"].get<std::string>());
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find(k["uuid"].get<std::string>() + " is not a kernel of bob"), std::string::npos) << r->body;
  EXPECT_EQ(Jobs(), jobs);
}

TEST_F(SubmitApi, CancelKillsARunningJob) {
  StartServer(Options(1, true));
  auto r = Submit("alice", TaskZip(600));
  const int64_t job = ParseJson(r->body, "submit")["job_id"].get<int64_t>();
  ASSERT_EQ(WaitStatus("alice", job, {"RUN"}, 60s), "RUN");
  std::this_thread::sleep_for(1500ms);  // into the candidate's sleep
  const auto t0 = std::chrono::steady_clock::now();
  auto c = Client("alice").Post("/api/job/" + std::to_string(job) + "/cancel");
  ASSERT_EQ(c->status, 200) << c->body;
  EXPECT_EQ(ParseJson(c->body, "c")["status"], "CANCELED");
  // The evaluation ends (its processes killed) long before the candidate's 600 s: the pool is free again.
  auto next = Submit("alice", TaskZip());
  const int64_t job2 = ParseJson(next->body, "submit")["job_id"].get<int64_t>();
  EXPECT_EQ(WaitStatus("alice", job2, {"COMPLETE", "FAIL"}), "COMPLETE");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 150s);
  EXPECT_EQ(WaitStatus("alice", job, {"CANCELED"}, 1s), "CANCELED");
  KernelQuery q;
  q.job_id = job;
  EXPECT_EQ(OpenStore(db_, {.read_only = true})->CountKernels(q), 0);
}

TEST_F(SubmitApi, QueuedAndRunningJobsSurviveARestart) {
  StartServer(Options(1, false));
  auto r = Submit("alice", TaskZip());
  const int64_t queued = ParseJson(r->body, "submit")["job_id"].get<int64_t>();
  r = Submit("bob", TaskZip());
  const int64_t running = ParseJson(r->body, "submit")["job_id"].get<int64_t>();
  StopServer();  // both are INIT in the database; the second as if the server had died while running it
  (void)OpenStore(db_)->UpdateJob(running, JobUpdate{.status = JobStatus::kRun, .started = true});
  StartServer(Options(1, true));
  EXPECT_EQ(WaitStatus("alice", queued, {"COMPLETE", "FAIL"}), "COMPLETE");
  EXPECT_EQ(WaitStatus("bob", running, {"COMPLETE", "FAIL"}), "COMPLETE");
  KernelQuery q;
  q.job_id = running;
  EXPECT_EQ(OpenStore(db_, {.read_only = true})->CountKernels(q), 1);  // run once, stored once
}

}  // namespace
}  // namespace kf
