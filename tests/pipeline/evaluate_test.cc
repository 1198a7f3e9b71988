// Evaluate() on a small pure-Python task (no compile step, so it is quick): correct with a speedup, value
// mismatch (perf 4) and shape mismatch (perf 3) as typed statuses, template variants with typed parameters,
// runtime hyperparameters, no reference (never NaN), reference-only runs (B20), extraction failures.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <tuple>
#include <utility>
#include <vector>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/store.hpp"
#include "pipeline_util.hpp"

namespace kf {
namespace {

using testing::TempDir;
using testing::WriteFile;

const char* kTaskPy = R"PY(import pytest

from kernelfoundry import TestBase

import kernel


def reference_scale(xs, factor=2):
    # [REFERENCE_START]
    return [factor * x for x in xs]
    # [REFERENCE_END]


@pytest.fixture(scope="session")
def impl(use_reference, template_args_wrapper, runtime_params):
    if use_reference:
        return reference_scale
    assert runtime_params.get("expected") == "yes", runtime_params
    return template_args_wrapper(kernel.scale)


class TestScale(TestBase):
    def test_output_shapes_match(self, impl):
        assert len(impl([1, 2, 3])) == 3

    def test_values(self, impl):
        assert impl([1, 2, 3]) == [2, 4, 6]

    @pytest.mark.performance
    def test_benchmark(self, impl, measure_runtime):
        measure_runtime(impl, lambda: None, args=([1.0] * 64,), auto_replicate_inputs_size=0)
)PY";

class PyScale : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::UseTestCache();
    dir_ = tmp_.path() / "py_scale";
    WriteFile(dir_ / "config.yaml",
              "task_name: py_scale\njob_name: py_scale_test\ntask_origin: custom\nlanguage: python\n"
              "gpu_arch: cpu\nhas_build_step: false\nhas_reference_build_step: false\ntest_reference: true\n"
              "test_timeout: 120\n"
              "hyperparameters:\n  runtime:\n    expected: \"yes\"\n"
              "eval_config:\n  warmup_min_time: 0.05\n  perf_trials_min_time: 0.2\n");
    WriteFile(dir_ / "conftest.py", "from kernelfoundry.conftest import *\n");
    WriteFile(dir_ / "kernel.py",
              "# [EVOLVE_START]\ndef scale(xs):\n    return [2 * x for x in xs]\n# [EVOLVE_END]\n");
    WriteFile(dir_ / "task.py", kTaskPy);
    task_ = testing::LoadTestTask(dir_);
  }
  Evaluation Run(const std::string& code, EvaluateOptions o = {}) {
    o.work_root = tmp_.path() / "work";
    return Evaluate(task_, BlockUpdate{BlockUpdateShort{{"EVOLVE", code}}}, o);
  }

  TempDir tmp_;
  std::filesystem::path dir_;
  Task task_;
};

TEST_F(PyScale, CorrectCandidateHasSpeedupAndPerfScore5) {
  Json config = task_.config;  // one timed process (the repetition has its own test below)
  config["eval_config"]["timing"] = Json{{"processes", 1}};
  task_.ApplyConfig(config);
  std::vector<PhaseEvent> events;
  EvaluateOptions o;
  o.progress = [&](const PhaseEvent& e) { events.push_back(e); };
  Evaluation ev = Run("def scale(xs):\n    return [x + x for x in xs]\n", o);
  EXPECT_TRUE(IsCorrectFamily(ev.result.status)) << ev.result.status_detail << "\n" << ev.result.eval_log;
  EXPECT_EQ(ev.result.perf_score, 5);
  EXPECT_TRUE(ev.result.compiled && ev.result.correctness);
  EXPECT_GT(ev.result.runtime_improvement, 0);
  EXPECT_TRUE(std::isfinite(ev.result.runtime_improvement));
  EXPECT_GT(ev.combined_score, 5.0);
  ASSERT_EQ(ev.result.benchmarks.size(), 1u);
  EXPECT_EQ(ev.result.benchmarks[0].name, "task.py::TestScale::test_benchmark");
  EXPECT_GT(ev.result.benchmarks[0].reference_mean_ms, 0);
  // The combined (per-arch) shape of the reference: runtime_stats and metadata keyed by arch.
  EXPECT_TRUE(ev.result.runtime_stats.contains("cpu"));
  EXPECT_TRUE(ev.result.metadata["cpu"].contains("eval_worker_info"));
  // Both variants ran, each with worker_info and runtimes.
  ASSERT_TRUE(ev.task.test_result && ev.task.test_result_reference);
  EXPECT_TRUE(ev.task.test_result->worker_info.has_value());
  EXPECT_TRUE((*ev.task.test_result_reference->performance_result->output_data)["runtimes"].contains(
      "task.py::TestScale::test_benchmark"));
  EXPECT_EQ(ev.input_code, "def scale(xs):\n    return [2 * x for x in xs]\n");
  EXPECT_EQ(ev.output_code, "def scale(xs):\n    return [x + x for x in xs]\n");
  // Progress: correctness of custom and reference, then one paired performance run timing both (then the
  // candidate's profiler pass, profile_custom_model defaults to true: a phase of its own, counted apart).
  std::vector<std::string> finished;
  for (const PhaseEvent& e : events)
    if (e.finished && e.ok && e.phase != Phase::kProfile) finished.push_back(std::string(e.phase == Phase::kCorrectness ? "c:" : "p:") + e.variant);
  std::sort(finished.begin(), finished.end());
  EXPECT_EQ(finished, (std::vector<std::string>{"c:custom", "c:reference", "p:custom+reference"}));
  EXPECT_EQ(ev.task.test_result->trace_results.size(), 1u);  // perf.000 (or why perf cannot run here)
  EXPECT_EQ(ev.logs.size(), 5u);  // build, 2 correctness, paired performance, the profiler pass
  EXPECT_TRUE(testing::ProcessesUnder(tmp_.path() / "work").empty());
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() / "work") &&
               !std::filesystem::is_empty(tmp_.path() / "work"));  // work dirs removed
}

TEST_F(PyScale, WrongValuesIsValueMismatch) {
  Evaluation ev = Run("def scale(xs):\n    return [3 * x for x in xs]\n");
  EXPECT_EQ(ev.result.status, EvalStatus::kValueMismatch);
  EXPECT_EQ(ev.result.perf_score, 4);
  EXPECT_EQ(ev.result.ReferenceStatus(), "compiled");
  EXPECT_FALSE(ev.result.correctness);
  EXPECT_FALSE(ev.task.test_result->performance_result.has_value());
}

TEST_F(PyScale, WrongShapeIsShapeMismatch) {
  EvaluateOptions o;
  o.test_reference = false;
  Evaluation ev = Run("def scale(xs):\n    return [2 * x for x in xs][:-1]\n", o);
  EXPECT_EQ(ev.result.status, EvalStatus::kShapeMismatch);
  EXPECT_EQ(ev.result.perf_score, 3);
  EXPECT_FALSE(ev.task.test_result_reference.has_value());
}

// A crash of the test process (SIGSEGV-like: os.abort) is typed, not a test failure.
TEST_F(PyScale, CrashIsTyped) {
  EvaluateOptions o;
  o.test_reference = false;
  Evaluation ev = Run("import os\ndef scale(xs):\n    os.abort()\n", o);
  EXPECT_EQ(ev.result.status, EvalStatus::kCrash) << ev.result.status_detail;
  EXPECT_EQ(ev.result.perf_score, 2);
}

// No reference: correct, "no reference" status, speedup -1, never NaN.
TEST_F(PyScale, NoReferenceIsTypedNotNaN) {
  EvaluateOptions o;
  o.test_reference = false;
  Evaluation ev = Run("def scale(xs):\n    return [x * 2 for x in xs]\n", o);
  EXPECT_EQ(ev.result.status, EvalStatus::kNoReference);
  EXPECT_EQ(ev.result.perf_score, 5);
  EXPECT_EQ(ev.result.runtime_improvement, -1);
  EXPECT_GT(ev.combined_score, 5.0);
  EXPECT_TRUE(std::isfinite(ev.combined_score));
}

// Template variants: one run per forward_templated<…>; parameters reach the kernel as typed values (B21);
// the best variant wins.
TEST_F(PyScale, TemplateVariantsPickTheCorrectOne) {
  EvaluateOptions o;
  o.test_reference = false;
  Evaluation ev = Run("# forward_templated<3> forward_templated<2>\ndef scale(xs, factor):\n"
                      "    assert isinstance(factor, int)\n    return [factor * x for x in xs]\n", o);
  EXPECT_EQ(ev.result.perf_score, 5) << ev.result.eval_log;
  EXPECT_EQ(ev.result.metadata["cpu"]["template_parameters"], Json::parse("[2]"));
  EXPECT_EQ(ev.result.template_results.size(), 2u);
  int tests = 0;
  for (const ProcessLog& l : ev.logs) tests += l.name.find("custom_3") != std::string::npos;
  EXPECT_EQ(tests, 1);  // custom_3 failed correctness: no performance run
}

// Several archs (B6: split and stripped): every arch tested, results merged per variant (results_per_gpu),
// the verdict combined over archs.
TEST_F(PyScale, SeveralArchsAreTestedAndCombined) {
  EvaluateOptions o;
  o.test_reference = false;
  o.gpu_arch = "cpu, cpu2";
  Evaluation ev = Run("def scale(xs):\n    return [x * 2 for x in xs]\n", o);
  EXPECT_EQ(ev.archs, (std::vector<std::string>{"cpu", "cpu2"}));
  EXPECT_EQ(ev.result.perf_score, 5);
  EXPECT_TRUE(ev.result.metadata.contains("cpu") && ev.result.metadata.contains("cpu2"));
  EXPECT_TRUE(ev.result.runtime_stats.contains("cpu2"));
  ASSERT_TRUE(ev.task.test_result && ev.task.test_result->results_per_gpu);
  ASSERT_EQ(ev.task.test_result->results_per_gpu->size(), 2u);
  EXPECT_EQ((*ev.task.test_result->results_per_gpu)[1].first, "cpu2");
  EXPECT_TRUE(ev.task.test_result->worker_info->contains("cpu2"));  // {arch: info}
  EXPECT_EQ(ev.logs.size(), 6u);  // the build and, per arch, correctness, performance and the profiler pass
}

// B20: the reference returned None when only the reference was tested; `kf validate --run` gets a verdict.
TEST_F(PyScale, ReferenceOnlyRunHasAVerdict) {
  EvaluateOptions o;
  o.test_candidate = false;
  o.work_root = tmp_.path() / "work";
  Evaluation ev = Evaluate(task_, std::nullopt, o);
  EXPECT_EQ(ev.result.status, EvalStatus::kReferenceOnly);
  EXPECT_EQ(ev.result.perf_score, 5);
  EXPECT_FALSE(ev.task.test_result.has_value());
  ASSERT_TRUE(ev.task.test_result_reference.has_value());
}

// The None path of with_blocks (code could not be extracted): perf 0 without running anything.
TEST_F(PyScale, ExtractionFailureIsPerf0) {
  BlockUpdateShort update{{"EVOLVE", std::nullopt}};
  EvaluateOptions o;
  Evaluation ev = Evaluate(task_, BlockUpdate{update}, o);
  EXPECT_EQ(ev.result.status, EvalStatus::kExtractionFailed);
  EXPECT_EQ(ev.result.perf_score, 0);
  EXPECT_TRUE(ev.logs.empty());
}

TEST_F(PyScale, BlockUpdateThatDoesNotFitThrows) {
  BlockUpdateShort update{{"NOPE", std::string("x")}};
  EXPECT_THROW(Evaluate(task_, BlockUpdate{update}, {}), Error);
}

// `kf run` exit codes: 1 for a negative verdict (with the typed status in the table); `kf validate --run`
// checks the reference against its own tests.
// The timed processes' allocator (issue "Trustworthy speed signal"): jemalloc where installed (a random offset
// per large allocation, so the buffers' layout is sampled afresh on every call instead of being fixed per
// process), glibc with the two thresholds when asked or when jemalloc is missing; recorded with the verdict.
TEST_F(PyScale, TimedProcessesRunOnTheDeclaredAllocator) {
  const std::string code = "def scale(xs):\n    return [x + x for x in xs]\n";
  Evaluation ev = Run(code);
  ASSERT_TRUE(ev.result.timing.is_object()) << ev.result.eval_log;
  const Json& c = ev.result.timing["conditions"];
  const std::string allocator = c.value("allocator", "");
  if (std::filesystem::exists("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")) {
    EXPECT_EQ(allocator, "jemalloc /usr/lib/x86_64-linux-gnu/libjemalloc.so.2") << c.dump();
    // What the test process itself saw (kernelfoundry.conftest reports its environment).
    EXPECT_EQ(c["env"]["LD_PRELOAD"], "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2") << c.dump();
    EXPECT_EQ(c["env"]["MALLOC_CONF"], "dirty_decay_ms:-1,muzzy_decay_ms:-1") << c.dump();
  } else {
    EXPECT_EQ(allocator, "glibc") << c.dump();
  }
  EXPECT_EQ(c["env"]["MALLOC_MMAP_THRESHOLD_"], "1073741824") << c.dump();
  // The default thread count: every usable CPU (stranger test, 2026-12-05: with one CPU left spare, a candidate
  // that ignored the declared count and ran two OpenMP threads scored 3.77x where the honest one scores 2.4x).
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  ASSERT_EQ(sched_getaffinity(0, sizeof cpus, &cpus), 0);
  const std::string threads = std::to_string(std::max(1, CPU_COUNT(&cpus)));
  EXPECT_EQ(c["env"]["OMP_NUM_THREADS"], threads) << c.dump();
  EXPECT_EQ(c["env"]["KF_THREADS"], threads) << c.dump();

  Json config = task_.config;
  config["eval_config"]["allocator"] = "glibc";
  task_.ApplyConfig(config);
  ev = Run(code);
  ASSERT_TRUE(ev.result.timing.is_object()) << ev.result.eval_log;
  EXPECT_EQ(ev.result.timing["conditions"]["allocator"], "glibc");
  EXPECT_TRUE(ev.result.timing["conditions"]["env"]["LD_PRELOAD"].is_null()) << ev.result.timing.dump();

  config["eval_config"]["allocator"] = "tcmalloc";
  task_.ApplyConfig(config);
  try {
    Run(code);
    ADD_FAILURE() << "an unknown allocator was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("eval_config.allocator"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected auto, jemalloc or glibc, got 'tcmalloc'"), std::string::npos)
        << e.what();
  }
}

// A stage runner that only counts builds (config checks must refuse before the first).
struct CountingRunner final : StageRunner {
  int builds = 0;
  BuildStageResult Build(Task&, const BuildPlan&, const EvaluateOptions&) override {
    ++builds;
    return {};
  }
  TestStageResult Test(const Task&, const std::vector<TestVariant>&, const std::vector<std::string>&,
                       const EvaluateOptions&) override {
    return {};
  }
};

// Regression (stop 20): a bad eval_config.allocator was reported only after the candidate's build (the test
// stage reads it). Every config field the test stage reads is checked before the build now.
TEST_F(PyScale, TestStageConfigIsCheckedBeforeAnyBuild) {
  const std::vector<std::pair<std::string, Json>> bad = {
      {"allocator", Json("tcmalloc")}, {"threads", Json(0)},
      // Stranger test, 2026-12-05: threads: 100000 was valid and both sides then hung until the inactivity timeout.
      {"threads", Json(100000)}, {"timing", Json{{"mode", "both"}}},
      {"timing", Json{{"layouts", 0}}}, {"timing", Json{{"layouts", 1.5}}}, {"timing", Json{{"layouts", 65}}},
      {"timing", Json{{"layout_block", 0}}}, {"timing", Json{{"processes", 0}}}, {"timing", Json{{"processes", 17}}},
      {"timing", Json{{"l2_flush", "yes"}}},
      // Regression (2026-12-05): a YAML line `threads:1` (no space) under `profile_original_model: false` makes it
      // the string "false threads:1"; kf run and kf validate took it.
      {"profile_original_model", Json("false threads:1")}, {"profile_custom_model", Json(0)},
      // 2026-12-05: where the candidate runs in correctness runs (executor or test_process).
      {"candidate_process", Json("sandbox")}, {"candidate_process", Json(true)}};
  for (const auto& [field, value] : bad) {
    Task task = task_;
    Json config = task.config;
    config["eval_config"][field] = value;
    task.ApplyConfig(config);
    CountingRunner runner;
    EvaluateOptions o;
    o.runner = &runner;
    try {
      Evaluate(task, std::nullopt, o);
      ADD_FAILURE() << field << " = " << value.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("config.yaml"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("eval_config." + field), std::string::npos) << e.what();
    }
    EXPECT_EQ(runner.builds, 0) << field << " = " << value.dump();
  }
  // The machine-wide default of processes and cap of the budget are checked too (used when the config does not
  // say). Regression (stranger test, 2026-12-04): KF_TIMING_BUDGET_S=-1 was silently ignored.
  for (const auto& [name, refused] : {std::pair<const char*, std::vector<const char*>>{
                                      "KF_TIMING_PROCESSES", {"two", "0", "17", " 3", "3 ", "+3", "3x"}},
                                  {"KF_TIMING_BUDGET_S", {"-1", "0", "five", "5s", "nan", "inf", " 5", "0x10", "1e999"}}}) {
    const char* before = std::getenv(name);
    const std::string saved = before ? before : "";
    for (const char* env : refused) {
      setenv(name, env, 1);
      CountingRunner runner;
      EvaluateOptions o;
      o.runner = &runner;
      try {
        Evaluate(task_, std::nullopt, o);
        ADD_FAILURE() << name << "='" << env << "' was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(std::string("got '") + env + "'"), std::string::npos) << e.what();
      }
      EXPECT_EQ(runner.builds, 0) << name << "='" << env << "'";
    }
    if (before) setenv(name, saved.c_str(), 1);
    else unsetenv(name);
  }
  Task task = task_;
  Json config = task.config;
  config["eval_config"]["timing"] = Json{{"processes", 2}, {"max_processes", 4}, {"budget_s", 3}};
  task.ApplyConfig(config);
  CountingRunner runner;
  EvaluateOptions o;
  o.runner = &runner;
  Evaluate(task, std::nullopt, o);
  EXPECT_EQ(runner.builds, 1);
}

// Keys of removed mechanisms (timing.mode: separate, process layouts) are refused before anything is built, naming
// what replaced them: a task that asked for them must not get paired timing in one process silently.
TEST_F(PyScale, RemovedTimingKeysAreRefusedNamingTheReplacement) {
  for (const auto& [key, value, says] : {std::tuple<std::string, Json, std::string>{"mode", "separate", "always paired"},
                                         {"mode", "paired", "always paired"},
                                         {"layouts", 2, "timing.processes"},
                                         {"layout_block", 8, "layouts were removed"}}) {
    Task task = task_;
    Json config = task.config;
    config["eval_config"]["timing"] = Json{{key, value}};
    task.ApplyConfig(config);
    CountingRunner runner;
    EvaluateOptions o;
    o.runner = &runner;
    try {
      Evaluate(task, std::nullopt, o);
      ADD_FAILURE() << key << " = " << value.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("eval_config.timing." + key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_EQ(runner.builds, 0);
  }
}

// eval_config.timing.processes: the paired phase in several test processes, merged at the process level
// (pipeline/paired_processes.hpp): one record per benchmark with each process's own result kept.
TEST_F(PyScale, PairedTimingRepeatedInSeveralProcessesIsMergedPerBenchmark) {
  Json config = task_.config;
  // max_processes 3: no process beyond the three for the interval (RunPairedProcesses), so the count is fixed.
  config["eval_config"]["timing"] = Json{{"processes", 3}, {"max_processes", 3}, {"budget_s", 1.5}, {"min_rounds", 6}};
  task_.ApplyConfig(config);
  std::vector<PhaseEvent> events;
  EvaluateOptions o;
  o.progress = [&](const PhaseEvent& e) { events.push_back(e); };
  Evaluation ev = Run("def scale(xs):\n    return [x + x for x in xs]\n", o);
  ASSERT_TRUE(ev.result.timing.is_object()) << ev.result.eval_log;
  const Json& paired = ev.result.timing["paired"];
  ASSERT_EQ(paired.size(), 1u) << paired.dump();
  const Json& r = paired.begin().value();
  EXPECT_EQ(r["processes"], 3) << r.dump();
  ASSERT_EQ(r["process_speedups"].size(), 3u) << r.dump();
  ASSERT_EQ(r["process_cis"].size(), 3u) << r.dump();
  EXPECT_EQ(r["stop"], "processes");
  EXPECT_EQ(r["candidate_ms"].size(), r["reference_ms"].size());
  EXPECT_GE(r["rounds"].get<int64_t>(), 3 * 6) << r.dump();
  EXPECT_EQ(r["candidate_ms"].size(), r["rounds"].get<size_t>()) << r.dump();
  // The interval covers every process's own median (the spread between processes is part of it).
  for (const Json& s : r["process_speedups"]) {
    EXPECT_LE(r["ci"][0].get<double>(), s.get<double>()) << r.dump();
    EXPECT_GE(r["ci"][1].get<double>(), s.get<double>()) << r.dump();
  }
  EXPECT_TRUE(r["status"] == "correct" || r["status"] == "noisy") << r.dump();
  // Three timed phases, each announced (start and end) with its number.
  std::vector<std::string> performance;
  for (const PhaseEvent& e : events) {
    if (e.phase == Phase::kPerformance && e.finished) performance.push_back(e.variant);
  }
  EXPECT_EQ(performance, (std::vector<std::string>{"custom+reference [1/3]", "custom+reference [2/3]",
                                                   "custom+reference [3/3]"}));
  // The reference-compatible fields stay filled.
  EXPECT_TRUE(IsCorrectFamily(ev.result.status)) << ev.result.status_detail;
  EXPECT_GT(ev.result.runtime_improvement, 0);
  ASSERT_TRUE(ev.task.test_result && ev.task.test_result_reference);
  EXPECT_FALSE((*ev.task.test_result_reference->performance_result->output_data)["runtimes"]
                   ["task.py::TestScale::test_benchmark"].empty());
}

TEST_F(PyScale, CliRunAndValidateRun) {
  WriteFile(tmp_.path() / "wrong.py", "def scale(xs):\n    return [3 * x for x in xs]\n");
  auto [rc, out] = testing::RunShell(testing::KfCommand("run '" + dir_.string() + "' --no-reference --no-store --no-verdict-cache --candidate '" +
                                        (tmp_.path() / "wrong.py").string() + "'"));
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("status: value_mismatch - cpu: tests failed although the output shapes match   (reference-compatible status: compiled)"), std::string::npos) << out;
  EXPECT_NE(out.find("perf_score: 4"), std::string::npos) << out;

  std::filesystem::path db = tmp_.path() / "v.sqlite3";
  auto [rc2, out2] = testing::RunShell(testing::KfCommand("validate '" + dir_.string() + "' --run --db '" + db.string() + "'"));
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_NE(out2.find("reference run: PASSED (reference_only)"), std::string::npos) << out2;
  auto store = OpenStore(db.string(), {.read_only = true});
  std::vector<Json> kernels = store->ListKernels({});
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0]["job_status"], "VALIDATED");

  // A task whose reference fails its own tests.
  std::string broken = kTaskPy;
  broken.replace(broken.find("[factor * x"), 11, "[factor + x");
  WriteFile(dir_ / "task.py", broken);
  auto [rc3, out3] = testing::RunShell(testing::KfCommand("validate '" + dir_.string() + "' --run --no-store"));
  EXPECT_EQ(rc3, 1) << out3;
  EXPECT_NE(out3.find("reference run: FAILED (reference_failed)"), std::string::npos) << out3;
}

}  // namespace
}  // namespace kf
