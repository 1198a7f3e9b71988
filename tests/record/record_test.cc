// The record module without running pytest: loading for a run (overrides.yml over config.yaml, validation,
// encoded tasks), the kernels / job_logs rows and the evaluation document, and RecordRun's job lifecycle on
// every store backend — COMPLETE, VALIDATED, FAIL, and CANCELED before the start and while running (the
// watcher requests stop through the run's token).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/record.hpp"
#include "store/store_backends.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Backend;
using testing::ExpectError;
using testing::TempDir;
using testing::WriteFile;

/// A small package (not run here, so no tests are discovered).
std::filesystem::path WritePackage(const std::filesystem::path& dir, const std::string& overrides) {
  WriteFile(dir / "config.yaml",
            "task_name: tiny\njob_name: tiny_job\ntask_origin: custom\nlanguage: python\ngpu_arch: cpu\n"
            "test_timeout: 100\nhas_build_step: false\n");
  WriteFile(dir / "kernel.py", "# [EVOLVE_START]\ndef f(x):\n    return x\n# [EVOLVE_END]\n");
  WriteFile(dir / "task.py", "def test_a():\n    pass\n");
  WriteFile(dir / "conftest.py", "\n");
  if (!overrides.empty()) WriteFile(dir / "overrides.yml", overrides);
  return dir;
}

TEST(LoadTaskForRun, OverridesWinOverTheTaskConfig) {
  TempDir tmp;
  auto dir = WritePackage(tmp.path() / "pkg", "gpu_arch: ovr_arch\ntest_timeout: 77\nhas_build_step: true\n");
  LoadForRunOptions o;
  o.discover_tests = false;
  TaskForRun plain = LoadTaskSource(dir.string(), o);
  EXPECT_EQ(plain.task.config["gpu_arch"], "cpu");
  EXPECT_EQ(plain.metadata["overrides"]["gpu_arch"], "ovr_arch");
  ApplyOverrides(plain.task, plain.metadata);
  EXPECT_EQ(plain.task.config["gpu_arch"], "ovr_arch");
  EXPECT_EQ(plain.task.config["test_timeout"], 77);
  EXPECT_EQ(plain.task.config["job_name"], "tiny_job");  // untouched keys stay
  EXPECT_TRUE(plain.task.has_build_step);                  // ApplyConfig copies the flags
  EXPECT_FALSE(plain.task.task_data.Contains("overrides.yml"));
}

TEST(LoadTaskForRun, InvalidTaskIsRefusedBeforeAnyRun) {
  TempDir tmp;
  auto dir = WritePackage(tmp.path() / "pkg", "");
  LoadForRunOptions o;
  o.discover_tests = false;  // no tests collected: Validate lists the missing tests
  Error e = ExpectError(ErrorKind::kInvalidArgument, [&] { LoadTaskForRun(dir.string(), o); });
  EXPECT_NE(std::string(e.what()).find("no correctness test"), std::string::npos) << e.what();
}

TEST(LoadTaskForRun, EncodedTasksAndMissingPaths) {
  TempDir tmp;
  auto dir = WritePackage(tmp.path() / "pkg", "");
  LoadForRunOptions o;
  o.discover_tests = false;
  Task task = LoadTaskSource(dir.string(), o).task;
  task.correctness_tests = {"task.py::test_a"};
  task.profile_tests = {"task.py::test_a"};
  std::string text = DumpJson(task.Encode());
  TaskForRun from_text = LoadTaskForRun(text);
  EXPECT_TRUE(from_text.from_json);
  EXPECT_EQ(from_text.task.HashId(), task.HashId());
  WriteFile(tmp.path() / "task.json", text);
  EXPECT_EQ(LoadTaskForRun((tmp.path() / "task.json").string()).task.HashId(), task.HashId());
  Error missing = ExpectError(ErrorKind::kNotFound, [&] { LoadTaskForRun((tmp.path() / "none").string()); });
  EXPECT_EQ(missing.file(), (tmp.path() / "none").string());
  Error broken = ExpectError(ErrorKind::kParse, [&] { LoadTaskForRun("{\"task_data\": 1", {.json_source = "<stdin>"}); });
  EXPECT_EQ(broken.file(), "<stdin>");
}

/// An evaluation as Evaluate would return it for a wrong candidate (no child processes needed).
Evaluation WrongEvaluation(const Task& task) {
  Evaluation ev;
  ev.task = task;
  ev.archs = {"cpu", "cpu2"};
  ev.input_code = "def f(x):\n    return x\n";
  ev.output_code = "def f(x):\n    return -x\n";
  ev.result.status = EvalStatus::kValueMismatch;
  ev.result.status_detail = "cpu: tests failed although the output shapes match";
  ev.result.perf_score = 4;
  ev.result.compiled = true;
  ev.result.eval_log = "E   assert -1 == 1\n";
  ev.result.metadata = {{"cpu", {{"eval_worker_info", {{"hostname", "h1"}}}}}, {"error", "x"}};
  ProcessLog log{"test custom cpu correctness", ProcessResult::Create(1, "out", "err", "note"), {{"hostname", "h1"}},
                 "test_custom_correctness"};
  ev.logs.push_back(log);
  ev.timings = {{"correctness custom cpu", 1.5}};
  return ev;
}

// Stranger test, 2026-12-05: a speedup read back from the database had lost its interval and the conditions it
// was measured under (runtime_stats keeps the reference's keys only). They go with each arch's eval_worker_info.
TEST(Rows, KernelRowKeepsEachArchsTimingIntervalAndConditions) {
  TempDir tmp;
  Task task = LoadTaskSource(WritePackage(tmp.path() / "pkg", "").string(), {.discover_tests = false}).task;
  Evaluation ev = WrongEvaluation(task);
  ev.archs = {"cpu"};
  ev.result.timing = Json::parse(R"({"paired": {"t.py::b": {"paired": true, "status": "noisy", "speedup": 2.69,
      "ci": [2.60, 2.79], "rel_half_width": 0.036, "rounds": 883, "processes": 24, "candidate_ms": [1.2]}},
      "conditions": {"threads": 2, "allocator": "glibc", "load_before": 1.6}})");
  Json row = KernelRow(ev, "u-1", "tid", 7);
  const Json& timing = row["eval_worker_info"]["cpu"]["timing"];
  EXPECT_EQ(row["eval_worker_info"]["cpu"]["hostname"], "h1");  // the reference's keys stay
  EXPECT_EQ(timing["benchmarks"]["t.py::b"],
            Json::parse(R"({"speedup": 2.69, "ci": [2.60, 2.79], "rel_half_width": 0.036, "status": "noisy",
                            "rounds": 883, "processes": 24})"));
  EXPECT_EQ(timing["conditions"]["threads"], 2);
  EXPECT_EQ(timing["conditions"]["load_before"], 1.6);

  // Several archs: EvalResult::timing is keyed by arch; an arch without a worker info gets one.
  ev.archs = {"cpu", "cpu2"};
  ev.result.timing = Json{{"cpu2", Json::parse(R"({"paired": {"b": {"speedup": 1.5, "ci": [1.4, 1.6]}},
                                                  "conditions": {"threads": 1}})")}};
  row = KernelRow(ev, "u-1", "tid", 7);
  EXPECT_FALSE(row["eval_worker_info"]["cpu"].contains("timing"));
  EXPECT_EQ(row["eval_worker_info"]["cpu2"]["timing"]["benchmarks"]["b"]["ci"], Json::parse("[1.4, 1.6]"));
  // No paired timing: the column is the reference's.
  ev.result.timing = Json::object();
  EXPECT_EQ(KernelRow(ev, "u-1", "tid", 7)["eval_worker_info"], (Json{{"cpu", {{"hostname", "h1"}}}}));
}

TEST(Rows, KernelRowKeepsTheReferenceColumnsAndOurStatus) {
  TempDir tmp;
  Task task = LoadTaskSource(WritePackage(tmp.path() / "pkg", "").string(), {.discover_tests = false}).task;
  Evaluation ev = WrongEvaluation(task);
  Json row = KernelRow(ev, "u-1", "tid", 7);
  EXPECT_EQ(row["status"], "compiled");
  EXPECT_EQ(row["score"], 4);
  EXPECT_EQ(row["gpu_arch"], "cpu,cpu2");
  EXPECT_EQ(row["task_name"], "tiny");
  EXPECT_EQ(row["job_id"], 7);
  EXPECT_EQ(row["eval_worker_info"], (Json{{"cpu", {{"hostname", "h1"}}}}));
  EXPECT_EQ(row["eval_log"],
            "kf status: value_mismatch (cpu: tests failed although the output shapes match)\nE   assert -1 == 1\n");
  EXPECT_EQ(row["kf_status"], "value_mismatch");  // typed: nothing reads it back out of eval_log
  for (const char* key : kLineageKeys) EXPECT_FALSE(row.contains(key)) << key;  // no lineage given: NULL

  // As the reference's Evaluator + DatabaseLogHandler write them: the name in message, the text in extra.
  std::vector<JobLog> logs = ProcessLogs(ev, 7, "u-1");
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].level, "RAW");
  EXPECT_EQ(logs[0].hostname, "h1");
  EXPECT_EQ(logs[0].kernel_uuid, "u-1");
  EXPECT_FALSE(logs[0].agent_session_id.has_value());
  EXPECT_EQ(logs[0].message, "test_custom_correctness");
  EXPECT_EQ(logs[0].extra,
            (Json{{"log", "Return code: 1\nMessage: note\n------ Standard Output ------\nout\n"
                          "------ Standard Error ------\nerr\n"},
                  {"output_data", nullptr},
                  {"worker_info", {{"hostname", "h1"}}},
                  {"trial", 0},
                  {"version", 0},
                  {"iteration", 0},
                  {"branch", 0}}));

  RecordedRun rec{.job_id = 3, .kernel_id = 9, .kernel_uuid = "u-1", .canceled = false, .store = "k.sqlite3"};
  Json doc = EvaluationDocument(ev, &rec);
  EXPECT_EQ(doc["status"], "value_mismatch");
  EXPECT_EQ(doc["reference_status"], "compiled");
  EXPECT_EQ(doc["correct"], false);
  EXPECT_EQ(doc["db"], "k.sqlite3");
  EXPECT_EQ(doc["job_id"], 3);
  EXPECT_EQ(doc["timings"]["phases"][0]["seconds"], 1.5);
  EXPECT_FALSE(doc.contains("canceled"));
  EXPECT_EQ(doc["cached"], false);  // a fresh evaluation (verdict_cache.hpp); no "cached_from"
  EXPECT_FALSE(doc.contains("cached_from"));
  EXPECT_FALSE(EvaluationDocument(ev, nullptr).contains("job_id"));
  const std::vector<std::string> keys = {"task", "gpu_arch", "status", "reference_status", "status_detail",
                                         "perf_score", "speedup", "runtime_ms", "combined_score", "correct", "result",
                                         "build_result", "build_result_reference", "test_result",
                                         "test_result_reference", "timings", "db", "job_id", "kernel_uuid",
                                         "cached", "work_dirs"};
  std::vector<std::string> actual;
  for (const auto& [k, v] : doc.items()) actual.push_back(k);
  EXPECT_EQ(actual, keys);
  EXPECT_EQ(NewUuid4().size(), 36u);
  EXPECT_NE(NewUuid4(), NewUuid4());
}

class RecordRunTest : public testing::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    task_ = LoadTaskSource(WritePackage(tmp_.path() / "pkg", "").string(), {.discover_tests = false}).task;
    task_.correctness_tests = {"task.py::test_a"};
    task_.profile_tests = {"task.py::test_a"};
  }
  TempDir tmp_;
  Task task_;
};

TEST_P(RecordRunTest, CompleteRunStoresJobTaskKernelAndLogs) {
  Evaluation ev;
  std::string status_while_running;
  RecordedRun rec = RecordRun(
      *store_, task_,
      [&](std::stop_token) {
        status_while_running = Open()->GetJob(1)["status"].get<std::string>();
        return WrongEvaluation(task_);
      },
      {}, &ev);
  EXPECT_EQ(status_while_running, "RUN");
  EXPECT_FALSE(rec.canceled);
  EXPECT_EQ(rec.job_id, 1);
  EXPECT_EQ(rec.kernel_id, 1);
  EXPECT_EQ(rec.store, store_->Describe());
  Json job = store_->GetJob(rec.job_id);
  EXPECT_EQ(job["status"], "COMPLETE");
  EXPECT_EQ(job["progress"], 1.0);
  EXPECT_EQ(job["task_id"], task_.HashId());
  EXPECT_FALSE(job["started_at"].is_null());
  EXPECT_EQ(job["config"]["task_origin"], "custom");
  auto kernel = store_->GetKernel(rec.kernel_id);
  ASSERT_TRUE(kernel.has_value());
  EXPECT_EQ((*kernel)["uuid"], rec.kernel_uuid);
  EXPECT_EQ((*kernel)["kf_status"], "value_mismatch");
  EXPECT_EQ(store_->ListJobLogs(rec.job_id).size(), 1u);
  EXPECT_TRUE(store_->GetTask(task_.HashId()).has_value());
  EXPECT_EQ(ev.result.status, EvalStatus::kValueMismatch);

  // A second run of the same task keeps the stored task and validates: VALIDATING -> VALIDATED.
  RecordedRun v = RecordRun(
      *store_, task_,
      [&](std::stop_token) {
        status_while_running = Open()->GetJob(2)["status"].get<std::string>();
        return WrongEvaluation(task_);
      },
      {.validate = true}, &ev);
  EXPECT_EQ(status_while_running, "VALIDATING");
  EXPECT_EQ(store_->GetJob(v.job_id)["status"], "VALIDATED");
  EXPECT_EQ(db_->Value("SELECT count(*) FROM tasks"), "1");
}

// The lineage columns an optimisation loop gives (kf run --parent / --lineage, evaluate(parent_uuid=...)) land in
// the kernels row and, for the agent session, trial and version, in its job logs; db_user defaults to the OS user.
TEST_P(RecordRunTest, LineageColumnsAreWrittenWhenGiven) {
  Evaluation ev;
  Lineage lineage = LineageFromJson({{"parent_uuid", "p-1"}, {"trial", 3}, {"version", 2}, {"prompt", "make it fast"},
                                     {"answer", "```cpp\n...```"}, {"language_model", "m-7"},
                                     {"agent_session_id", "s-9"}, {"db_user", nullptr}},
                                    "test");
  RecordedRun rec = RecordRun(*store_, task_, [&](std::stop_token) { return WrongEvaluation(task_); },
                              {.cancel_poll = std::chrono::milliseconds(0), .lineage = lineage}, &ev);
  Json k = *store_->GetKernel(rec.kernel_id);
  EXPECT_EQ(k["parent_uuid"], "p-1");
  EXPECT_EQ(k["trial"], 3);
  EXPECT_EQ(k["version"], 2);
  EXPECT_EQ(k["prompt"], "make it fast");
  EXPECT_EQ(k["answer"], "```cpp\n...```");
  EXPECT_EQ(k["language_model"], "m-7");
  EXPECT_EQ(k["agent_session_id"], "s-9");
  EXPECT_EQ(k["db_user"], DefaultDbUser());
  std::vector<Json> logs = store_->ListJobLogs(rec.job_id);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0]["message"], "test_custom_correctness");
  EXPECT_EQ(logs[0]["agent_session_id"], "s-9");
  EXPECT_EQ(logs[0]["kernel_uuid"], rec.kernel_uuid);
  EXPECT_EQ(logs[0]["extra"]["trial"], 3);
  EXPECT_EQ(logs[0]["extra"]["version"], 2);
  EXPECT_EQ(logs[0]["extra"]["iteration"], 3);
  EXPECT_EQ(logs[0]["extra"]["branch"], 2);

  lineage.db_user = "loop-bot";
  RecordedRun second = RecordRun(*store_, task_, [&](std::stop_token) { return WrongEvaluation(task_); },
                                 {.cancel_poll = std::chrono::milliseconds(0), .lineage = lineage}, &ev);
  EXPECT_EQ((*store_->GetKernel(second.kernel_id))["db_user"], "loop-bot");
  EXPECT_EQ(LineageToJson(lineage).size(), 8u);
  EXPECT_EQ(LineageToJson(Lineage{}), Json::object());
}

TEST(Rows, LineageFromJsonNamesTheBadKey) {
  Error unknown = ExpectError(ErrorKind::kInvalidArgument, [] { LineageFromJson({{"parent", "x"}}, "--lineage"); });
  EXPECT_EQ(unknown.file(), "--lineage");
  EXPECT_EQ(unknown.field(), "parent");
  Error type = ExpectError(ErrorKind::kInvalidArgument, [] { LineageFromJson({{"trial", "3"}}, "l.json"); });
  EXPECT_EQ(type.field(), "trial");
  EXPECT_NE(type.message().find("expected an integer"), std::string::npos) << type.message();
  Error long_id = ExpectError(ErrorKind::kInvalidArgument,
                              [] { LineageFromJson({{"agent_session_id", std::string(65, 'a')}}, "l.json"); });
  EXPECT_EQ(long_id.field(), "agent_session_id");
  EXPECT_NE(long_id.message().find("at most 64"), std::string::npos) << long_id.message();
  ExpectError(ErrorKind::kInvalidArgument, [] { LineageFromJson(Json::array(), "l.json"); });
  EXPECT_EQ(LineageFromJson({{"db_user", std::string(128, 'u')}}, "l.json").db_user->size(), 128u);
}

TEST_P(RecordRunTest, ExceptionMarksTheJobFailAndIsRethrown) {
  Evaluation ev;
  EXPECT_THROW(RecordRun(
                   *store_, task_, [](std::stop_token) -> Evaluation { throw Error(ErrorKind::kIO, "disk gone"); }, {},
                   &ev),
               Error);
  EXPECT_EQ(store_->GetJob(1)["status"], "FAIL");
  EXPECT_FALSE(store_->GetJob(1)["finished_at"].is_null());
  EXPECT_EQ(store_->CountKernels({}), 0);
  // The FAIL row says why (stranger test, 2026-12-03: a config refused before any build left a FAIL job with
  // an empty log).
  const std::vector<Json> logs = store_->ListJobLogs(1);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0]["level"], "ERROR");
  EXPECT_NE(logs[0]["message"].get<std::string>().find("disk gone"), std::string::npos) << logs[0].dump();
}

// Reference bug: RecordRun ignored UpdateJob's kCanceled. A job canceled before the start is not run.
TEST_P(RecordRunTest, JobCanceledBeforeTheStartIsNotRun) {
  int64_t job = store_->CreateJob("custom", nullptr);
  ASSERT_EQ(store_->UpdateJob(job, {.status = JobStatus::kCanceled}), JobUpdateOutcome::kUpdated);
  bool ran = false;
  Evaluation ev;
  RecordedRun rec = RecordRun(
      *store_, task_,
      [&](std::stop_token) {
        ran = true;
        return WrongEvaluation(task_);
      },
      {.job_id = job}, &ev);
  EXPECT_FALSE(ran);
  EXPECT_TRUE(rec.canceled);
  EXPECT_EQ(rec.job_id, job);
  EXPECT_EQ(rec.kernel_id, 0);
  EXPECT_EQ(store_->GetJob(job)["status"], "CANCELED");
  EXPECT_EQ(store_->CountKernels({}), 0);
}

// A job canceled by someone else while it runs: the watcher requests stop through the run's token, the run
// ends early, the job stays CANCELED and gets no kernels row.
TEST_P(RecordRunTest, JobCanceledWhileRunningStopsTheRun) {
  Evaluation ev;
  auto t0 = std::chrono::steady_clock::now();
  std::thread canceller([&] {
    auto other = Open();
    // Wait until the job is RUN, then cancel it from this second connection.
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
      try {
        if (other->GetJob(1)["status"] == "RUN") break;
      } catch (const Error&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    (void)other->UpdateJob(1, {.status = JobStatus::kCanceled});
  });
  bool stopped = false;
  RecordedRun rec = RecordRun(
      *store_, task_,
      [&](std::stop_token stop) {
        std::mutex mu;
        std::condition_variable_any cv;
        std::unique_lock lock(mu);
        stopped = cv.wait_for(lock, stop, std::chrono::seconds(20), [] { return false; }) || stop.stop_requested();
        return WrongEvaluation(task_);
      },
      {.cancel_poll = std::chrono::milliseconds(50)}, &ev);
  canceller.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(stopped);
  EXPECT_LT(seconds, 10.0);
  EXPECT_TRUE(rec.canceled);
  EXPECT_EQ(rec.kernel_uuid, "");
  EXPECT_EQ(store_->GetJob(1)["status"], "CANCELED");
  EXPECT_EQ(store_->CountKernels({}), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, RecordRunTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         testing::BackendParamName());

/// A reporter that keeps what it was told (a consumer of the interface, as a web server would be).
class KeepingReporter : public EvaluationReporter {
 public:
  void ReportContext(const RunContext& c) override { context = c; }
  void ReportPhase(const PhaseEvent& e) override {
    std::lock_guard lock(mu);
    phases.push_back(e);
  }
  void ReportOutputLine(bool, const std::string& line) override {
    std::lock_guard lock(mu);
    lines.push_back(line);
  }
  void ReportVerdict(const Evaluation& ev, const RecordedRun* recorded) override {
    verdicts.push_back(std::string(EvalStatusName(ev.result.status)));
    job = recorded != nullptr ? recorded->job_id : -1;
  }
  std::mutex mu;
  RunContext context;
  std::vector<PhaseEvent> phases;
  std::vector<std::string> lines;
  std::vector<std::string> verdicts;
  int64_t job = 0;
};

TEST(Reporters, ListFansOutAndAttachWiresTheCallbacks) {
  KeepingReporter a, b;
  ReporterList list({&a, nullptr, &b});
  EvaluateOptions options;
  AttachReporter(list, options, /*output_lines=*/true);
  list.ReportContext({.task = "t", .reference_check = true, .store = "db"});
  PhaseEvent event;
  event.variant = "custom";
  event.gpu_arch = "cpu";
  options.progress(event);
  options.on_output_line(false, "hello");
  Evaluation ev;
  ev.result.status = EvalStatus::kCorrect;
  RecordedRun rec{.job_id = 5};
  list.ReportVerdict(ev, &rec);
  for (KeepingReporter* r : {&a, &b}) {
    EXPECT_EQ(r->context.task, "t");
    EXPECT_TRUE(r->context.reference_check);
    ASSERT_EQ(r->phases.size(), 1u);
    EXPECT_EQ(r->phases[0].variant, "custom");
    EXPECT_EQ(r->lines, (std::vector<std::string>{"hello"}));
    EXPECT_EQ(r->verdicts, (std::vector<std::string>{"correct"}));
    EXPECT_EQ(r->job, 5);
  }
  EvaluateOptions quiet;
  AttachReporter(a, quiet, /*output_lines=*/false);
  EXPECT_TRUE(static_cast<bool>(quiet.progress));
  EXPECT_FALSE(static_cast<bool>(quiet.on_output_line));
}

}  // namespace
}  // namespace kf
