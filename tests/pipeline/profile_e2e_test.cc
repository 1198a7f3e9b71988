// Profiler passes end to end through `kf run` (issue 14): bias_relu (pytest, language cpp) with --profile has
// perf traces for the candidate and the reference with parsed counters, in the reference's wire shapes; the
// native omp_reduction task (language cpp, profiling on by default) is profiled through the SDK's
// measure_runtime; the CUDA task on a machine without a GPU records why ncu did not run and keeps its verdict.
#include <gtest/gtest.h>

#include "harness/native_protocol.hpp"
#include "kernelfoundry/profile.hpp"
#include "pipeline_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::RunShell;
using testing::TempDir;

fs::path Example(const std::string& kind, const std::string& name) { return testing::SourceDir() / "examples" / kind / name; }

// `kf run` on a copy of examples/tasks/<task> (config.yaml + `config_append`), candidate
// examples/candidates/<task>/<file>, `extra` options; returns (exit code, stdout+stderr, the --json document).
std::tuple<int, std::string, Json> KfRun(const TempDir& tmp, const std::string& task, const std::string& file,
                                         const std::string& extra, const std::string& config_append = "") {
  testing::UseTestCache();
  const fs::path dir = tmp.path() / (task + std::to_string(std::hash<std::string>{}(extra + config_append)));
  testing::CopyTree(Example("tasks", task), dir);
  if (!config_append.empty()) testing::WriteFile(dir / "config.yaml", ReadFile(dir / "config.yaml") + config_append);
  const fs::path out = dir.string() + ".json";
  const std::string cmd = "TMPDIR='" + tmp.path().string() + "' KF_CACHE_DIR='" + std::getenv("KF_CACHE_DIR") +
                          "' '" + (testing::BinaryDir() / "kf").string() + "' run '" + dir.string() + "' --candidate '" +
                          Example("candidates", task).string() + "/" + file + "' --no-store --no-verdict-cache --json '" +
                          out.string() + "' " + extra + " 2>&1";
  auto [rc, text] = RunShell(cmd);
  Json j = fs::exists(out) ? ParseJson(ReadFile(out), out.string()) : Json();
  return {rc, text, j};
}

// Every ProcessResult on the wire has exactly the reference's five keys.
void ExpectProcessResultShape(const Json& pr) {
  ASSERT_TRUE(pr.is_object());
  std::vector<std::string> keys;
  for (const auto& [k, v] : pr.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"returncode", "stdout", "stderr", "message", "output_data"}));
}

TEST(ProfileE2E, BiasReluWithProfileHasPerfTracesForBothSides) {
  if (auto why = ProfilerUnavailableReason("perf")) GTEST_SKIP() << *why;
  TempDir tmp;
  auto [rc, out, j] = KfRun(tmp, "bias_relu", "fast.cpp", "--profile");
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(testing::CorrectAndTimed(j["status"])) << out;
  for (const char* side : {"test_result", "test_result_reference"}) {
    SCOPED_TRACE(side);
    const Json& traces = j[side]["trace_results"];
    ASSERT_TRUE(traces.contains("perf.000")) << traces.dump();
    const Json& pass = traces["perf.000"];
    ExpectProcessResultShape(pass);
    EXPECT_EQ(pass["returncode"], 0) << pass["message"];
    const Json& data = pass["output_data"];
    EXPECT_GT(data["timed_calls"].get<int64_t>(), 0) << data.dump();
    for (const char* event : {"task-clock", "page-faults", "context-switches"}) {
      EXPECT_EQ(data["counters"][event]["status"], "counted") << event;
      EXPECT_TRUE(data["counters"][event].contains("per_call")) << event;
    }
    EXPECT_EQ(data["counters"]["task-clock"]["unit"], "ms");
    EXPECT_GT(data["derived"]["task_clock_ms_per_call"]["value"].get<double>(), 0);
    EXPECT_EQ(data["hardware_counters"].get<bool>(), data["counters"].contains("instructions"));
  }
  // Parsed profiles in the verdict (the reference's profiler_data keys) and one line per side in the table.
  EXPECT_TRUE(j["result"]["profiler_data"].contains("perf")) << j["result"]["profiler_data"].dump();
  EXPECT_TRUE(j["result"]["profiler_data"].contains("perf_ref"));
  EXPECT_NE(out.find("profile candidate: perf"), std::string::npos) << out;
  EXPECT_NE(out.find("profile reference: perf"), std::string::npos) << out;
  EXPECT_NE(out.find("page-faults "), std::string::npos) << out;
  // Profiling time is not in the runtimes: the pass is a phase of its own.
  bool profile_phase = false;
  for (const Json& p : j["timings"]["phases"]) profile_phase = profile_phase || p["phase"] == "profile custom cpu";
  EXPECT_TRUE(profile_phase) << j["timings"].dump();
}

// B8: a `language: cpp` task with profiling on (omp_reduction's config leaves eval_config at its defaults:
// the candidate is profiled) runs, and the native SDK's measure_runtime switches perf on for the trials.
TEST(ProfileE2E, NativeCppTaskIsProfiledThroughTheSdk) {
  if (auto why = ProfilerUnavailableReason("perf")) GTEST_SKIP() << *why;
  TempDir tmp;
  auto [rc, out, j] = KfRun(tmp, "omp_reduction", "fast.cpp", "");
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_TRUE(testing::CorrectAndTimed(j["status"])) << out;
  const Json& pass = j["test_result"]["trace_results"]["perf.000"];
  ExpectProcessResultShape(pass);
  EXPECT_EQ(pass["returncode"], 0) << pass.dump();
  EXPECT_GT(pass["output_data"]["timed_calls"].get<int64_t>(), 0);
  EXPECT_EQ(pass["output_data"]["counters"]["task-clock"]["status"], "counted") << pass["output_data"].dump();
  EXPECT_TRUE(j["test_result_reference"]["trace_results"].empty());  // profile_original_model defaults to false
  EXPECT_NE(out.find("profile candidate: perf"), std::string::npos) << out;
}

TEST(ProfileE2E, CudaTaskWithoutGpuRecordsWhyAndKeepsItsVerdict) {
  if (native::FindNvcc() == "nvcc") GTEST_SKIP() << "no nvcc on this machine";
  if (!NoCudaDeviceReason()) GTEST_SKIP() << "a CUDA device is present: ncu would run";
  TempDir tmp;
  auto [rc, out, j] = KfRun(tmp, "cuda_softmax", "fast.cu", "");
  auto [rc_off, out_off, j_off] =
      KfRun(tmp, "cuda_softmax", "fast.cu", "", "eval_config:\n  profile_custom_model: false\n");
  ASSERT_TRUE(j.is_object() && j_off.is_object()) << out << out_off;
  EXPECT_EQ(rc, rc_off);
  EXPECT_EQ(j["status"], "skipped") << out;
  EXPECT_EQ(j["status"], j_off["status"]);
  EXPECT_EQ(j["status_detail"], j_off["status_detail"]);
  EXPECT_EQ(j["perf_score"], j_off["perf_score"]);
  const Json& pass = j["test_result"]["trace_results"]["ncu.000"];
  ExpectProcessResultShape(pass);
  EXPECT_EQ(pass["returncode"], -1);
  EXPECT_EQ(pass["message"].get<std::string>().rfind("profiler unavailable: no CUDA device", 0), 0u) << pass.dump();
  EXPECT_EQ(pass["output_data"]["reason"].get<std::string>().rfind("no CUDA device", 0), 0u) << pass.dump();
  EXPECT_EQ(pass["output_data"]["profiler"], "ncu");
  EXPECT_TRUE(j_off["test_result"]["trace_results"].empty());
  EXPECT_NE(out.find("profile candidate: ncu: not run (no CUDA device"), std::string::npos) << out;
}

}  // namespace
}  // namespace kf
