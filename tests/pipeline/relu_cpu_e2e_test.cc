// `kf run` end to end on the relu_cpu fixture (a C++ torch extension built by the task's build() hook),
// against golden e2e_relu_cpu.json: correct with a speedup and perf_score 5, job + task + kernel + job_logs
// rows in SQLite, a second identical run reuses the compiled extension; a candidate that does not compile
// is a build error with perf 1 and the compiler output kept.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/store.hpp"
#include "pipeline_util.hpp"

namespace kf {
namespace {

using testing::ReadFile;
using testing::RunShell;
using testing::TempDir;
using testing::WriteFile;

int64_t CountRows(const std::filesystem::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  int64_t n = -1;
  if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return n;
}

// `kf run ARGS`, always a fresh evaluation (--no-verdict-cache): the test checks the phases and the build cache.
std::string KfRun(const std::string& args) {
  testing::UseTestCache();
  return "KF_CACHE_DIR='" + std::string(std::getenv("KF_CACHE_DIR")) + "' '" +
         (testing::BinaryDir() / "kf").string() + "' run --no-verdict-cache " + args;
}

TEST(ReluCpuE2E, CorrectWithSpeedupStoredAndSecondRunUsesTheBuildCache) {
  TempDir tmp;
  std::filesystem::path task = testing::CopyFixture("relu_cpu", tmp.path());
  std::filesystem::path db = tmp.path() / "runs" / "kernels.sqlite3";
  // The candidate equivalent to the reference (golden "candidate_reference_equivalent").
  Json golden = testing::Golden("e2e_relu_cpu");
  std::string code = "torch::Tensor relu_forward(torch::Tensor x) {\n"
                     "    TORCH_CHECK(x.device().is_cpu(), \"relu_forward expects a CPU tensor\");\n"
                     "    TORCH_CHECK(x.scalar_type() == torch::kFloat32, \"relu_forward expects float32\");\n"
                     "    return torch::relu(x);\n}\n";
  WriteFile(tmp.path() / "candidate.cpp", code);
  const std::string args = "'" + task.string() + "' --candidate '" + (tmp.path() / "candidate.cpp").string() +
                           "' --db '" + db.string() + "'";
  auto [rc, out] = RunShell(KfRun(args + " --json '" + (tmp.path() / "out.json").string() + "'"));
  ASSERT_EQ(rc, 0) << out;
  // Live progress on stderr, then the table.
  EXPECT_NE(out.find("build candidate ..."), std::string::npos) << out;
  EXPECT_NE(out.find("correctness custom (cpu) passed"), std::string::npos) << out;
  EXPECT_NE(out.find("performance custom+reference (cpu) passed"), std::string::npos) << out;
  EXPECT_NE(out.find("task.py::TestReluCpu::test_benchmark"), std::string::npos) << out;
  EXPECT_NE(out.find("overall speedup (geomean):"), std::string::npos) << out;
  // The table's ms are means, the paired speedup a median of ratios: said under the table (stranger test).
  EXPECT_NE(out.find("(ms: mean per call; a paired speedup is the median of the rounds' ratios"), std::string::npos)
      << out;
  // A noisy status comes with what to do about it.
  EXPECT_EQ(out.find("status: noisy") != std::string::npos,
            out.find("noisy: the candidate is correct, but the speedup's interval is wider") != std::string::npos)
      << out;
  EXPECT_TRUE(testing::HasCorrectVerdictLine(out)) << out;

  Json j = Json::parse(ReadFile(tmp.path() / "out.json"));
  EXPECT_TRUE(testing::CorrectAndTimed(j["status"])) << out;
  EXPECT_EQ(j["perf_score"], golden["candidate_reference_equivalent"]["score"]["exec_result"]["perf_score"]);
  EXPECT_GT(j["speedup"].get<double>(), 0.0);
  EXPECT_EQ(j["result"]["runtime_stats"]["cpu"]["task.py::TestReluCpu::test_benchmark"].size(),
            golden["candidate_reference_equivalent"]["score"]["exec_result"]["runtime_stats"]
                  ["task.py::TestReluCpu::test_benchmark"].size());
  // BuildResult shape of the golden: message, artifact relu_kernel.so (mode 0755) keyed in the task tree.
  const Json& build = j["build_result"];
  // (When an earlier test run stored this build, it comes from kf's build cache: the message then names it.)
  EXPECT_EQ(build["result"]["message"].get<std::string>().rfind("Build completed successfully", 0), 0u);
  EXPECT_EQ(build["result"]["returncode"], 0);
  ASSERT_TRUE(build["artifacts"].contains("relu_kernel.so"));
  EXPECT_EQ(build["artifacts"]["relu_kernel.so"]["mode"], 493);
  EXPECT_EQ(j["build_result_reference"], nullptr);  // has_reference_build_step: false
  EXPECT_EQ(j["test_result"]["correctness_result"]["returncode"], 0);
  EXPECT_TRUE(j["test_result"]["performance_result"]["output_data"]["runtimes"].contains(
      "task.py::TestReluCpu::test_benchmark"));
  EXPECT_EQ(j["test_result_reference"]["trace_results"], Json::object());

  // SQLite: one COMPLETE job, the task, one kernel row, the process logs.
  {
    auto store = OpenStore(db.string(), {.read_only = true});
    std::vector<Json> kernels = store->ListKernels({});
    ASSERT_EQ(kernels.size(), 1u);
    const Json& k = kernels[0];
    EXPECT_TRUE(testing::CorrectAndTimed(k["status"]));
    EXPECT_EQ(k["score"], 5);
    EXPECT_EQ(k["task_name"], "relu_cpu");
    EXPECT_EQ(k["job_name"], "relu_cpu_fixture");
    EXPECT_EQ(k["output_code"], code);
    EXPECT_NE(k["input_code"].get<std::string>().find("return torch::relu(x);"), std::string::npos);
    EXPECT_EQ(k["gpu_arch"], "cpu");
    EXPECT_GT(k["improve_over_native"].get<double>(), 0.0);
    EXPECT_TRUE(k["eval_worker_info"].contains("cpu"));
    // The stored row keeps the paired speedup's interval and the timing conditions.
    const Json& timing = k["eval_worker_info"]["cpu"]["timing"];
    ASSERT_TRUE(timing["benchmarks"].contains("task.py::TestReluCpu::test_benchmark")) << k["eval_worker_info"];
    EXPECT_EQ(timing["benchmarks"]["task.py::TestReluCpu::test_benchmark"]["ci"].size(), 2u);
    EXPECT_GE(timing["conditions"]["threads"].get<int>(), 1);
    EXPECT_TRUE(k["compile_worker_info"].contains("cpu"));
    EXPECT_EQ(k["job_status"], "COMPLETE");
    Json job = store->GetJob(k["job_id"].get<int64_t>());
    EXPECT_EQ(job["status"], "COMPLETE");
    EXPECT_EQ(job["task_id"], k["task_id"]);
    EXPECT_TRUE(store->GetTask(k["task_id"].get<std::string>()).has_value());
  }
  // build custom + correctness/performance for custom and reference.
  EXPECT_EQ(CountRows(db, "SELECT COUNT(*) FROM job_logs"), 5);

  // Second run of the identical candidate: the extension comes from the build cache.
  auto [rc2, out2] = RunShell(KfRun(args + " --no-reference --json '" + (tmp.path() / "out2.json").string() + "'"));
  ASSERT_EQ(rc2, 0) << out2;
  Json j2 = Json::parse(ReadFile(tmp.path() / "out2.json"));
  EXPECT_EQ(j2["status"], "no_reference");
  // kf's own build cache (issue 10): no build process ran; the hit is named in the message and output_data.
  EXPECT_NE(j2["build_result"]["result"]["message"].get<std::string>().find("(kf build cache: the identical build of"),
            std::string::npos)
      << j2["build_result"]["result"]["message"];
  EXPECT_EQ(j2["build_result"]["result"]["output_data"]["build_cache"]["hit"], true);
  EXPECT_TRUE(j2["build_result"]["artifacts"].contains("relu_kernel.so"));
  EXPECT_EQ(j2["speedup"], -1);
  EXPECT_EQ(CountRows(db, "SELECT COUNT(*) FROM jobs WHERE status = 'COMPLETE'"), 2);
  EXPECT_EQ(CountRows(db, "SELECT COUNT(*) FROM tasks"), 1);  // same task id: stored once
}

TEST(ReluCpuE2E, NonCompilingCandidateIsBuildErrorPerf1) {
  TempDir tmp;
  std::filesystem::path dir = testing::CopyFixture("relu_cpu", tmp.path());
  Task task = testing::LoadTestTask(dir);
  EvaluateOptions o;
  o.work_root = tmp.path() / "work";
  const std::string broken = "torch::Tensor relu_forward(torch::Tensor x) {\n    return this_does_not_compile(x);\n}\n";
  Evaluation ev = Evaluate(task, BlockUpdate{BlockUpdateShort{{"EVOLVE", broken}}}, o);
  EXPECT_EQ(ev.result.status, EvalStatus::kBuildError) << ev.result.status_detail;
  EXPECT_EQ(ev.result.perf_score, 1);
  EXPECT_FALSE(ev.result.compiled);
  EXPECT_EQ(ev.result.ReferenceStatus(), "error");
  ASSERT_TRUE(ev.task.build_result && ev.task.build_result->result);
  const ProcessResult& b = *ev.task.build_result->result;
  EXPECT_NE(b.returncode, 0);
  EXPECT_NE(b.message->find("Build failed with non-zero return code"), std::string::npos);
  EXPECT_NE((b.stdout_text + b.stderr_text).find("this_does_not_compile"), std::string::npos);  // B14: output kept
  EXPECT_NE(ev.result.eval_log.find("this_does_not_compile"), std::string::npos);
  EXPECT_FALSE(ev.task.test_result.has_value());  // nothing tested after a failed build
  EXPECT_TRUE(ev.task.build_result->worker_info.has_value());
  EXPECT_TRUE(testing::ProcessesUnder(tmp.path() / "work").empty());
}

}  // namespace
}  // namespace kf
