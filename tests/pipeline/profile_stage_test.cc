// Profiler passes in the test stage (issue 14): which variants get passes, the entries of profilers that
// cannot run (never a crash, never a changed verdict — B8), the timing lease held during a pass, and a real
// pytest task whose templated, runtime-parameterised benchmark runs under perf (B7: argv, runtime params
// passed; the reference's shell string broke templated kernels and dropped the runtime params).
#include <gtest/gtest.h>

#include <mutex>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/profile.hpp"
#include "fake_task.hpp"
#include "pipeline_util.hpp"

namespace kf {
namespace {

using testing::Passed;
using testing::TempDir;
using testing::WriteFile;


/// A harness whose runs are scripted; its profiling command is a shell script writing a passing report.
class ProfilingFake final : public Harness {
 public:
  std::function<PhaseRun(const TestRequest&)> correctness = [](const TestRequest&) { return Passed(); };
  bool can_profile = true;
  DeviceSlots* slots = nullptr;
  mutable std::mutex mu;
  mutable std::vector<std::pair<int, int>> host_holders;  // DeviceSlots::Holders("host") seen by each pass
  mutable std::vector<std::string> profiled;              // variant keys

  std::string_view Name() const override { return "fake"; }
  BuildRun Build(const BuildRequest&) const override {
    BuildRun b;
    b.result.result = ProcessResult{0, "", "", std::string("Build completed successfully"), std::nullopt};
    b.result.artifacts = MemoryFileMap{};
    return b;
  }
  PhaseRun Correctness(const TestRequest& req) const override { return correctness(req); }
  PhaseRun Performance(const TestRequest& req) const override {
    PhaseRun r = Passed();
    const double ms = req.variant.reference ? 4.0 : 2.0;
    r.result.output_data = Json{{"runtimes", Json{{"task.py::TestX::test_bench", Json::array({ms, ms, ms})}}}};
    return r;
  }
  std::optional<ProcessOptions> ProfileCommand(const TestRequest& req) const override {
    if (!can_profile) return std::nullopt;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (slots) host_holders.push_back(slots->Holders("host"));
      profiled.push_back(req.variant.key);
    }
    ProcessOptions o;
    o.argv = {"/bin/sh", "-c",
              "printf '%s' '{\"tests\":[{\"name\":\"TestX::test_bench\",\"kind\":\"performance\",\"status\":\"passed\"}],"
              "\"runtimes\":{},\"timed_calls\":40}' >&6"};
    o.result_pipe = true;
    o.wall_timeout = std::chrono::milliseconds{30'000};
    return o;
  }
};

Task MakeProfileTask(const std::string& extra_config) {
  return testing::MakeFakeTask("task_name: fake\njob_name: fake_job\nhas_reference_build_step: false\n" +
                               extra_config);
}

class ProfileStage : public ::testing::Test {
 protected:
  Evaluation Run(const Task& task, std::optional<bool> profile) {
    EvaluateOptions o;
    o.harness = &harness_;
    o.work_root = tmp_.path();
    o.slots = &slots_;
    o.profile = profile;
    harness_.slots = &slots_;
    return Evaluate(task, std::nullopt, o);
  }
  static const ProcessResult* Trace(const std::optional<TestResult>& t, const std::string& key) {
    if (!t) return nullptr;
    for (const auto& [k, r] : t->trace_results) {
      if (k == key) return &r;
    }
    return nullptr;
  }
  TempDir tmp_;
  DeviceSlots slots_;
  ProfilingFake harness_;
};

TEST_F(ProfileStage, PerfPassHoldsTheTimingSlotAndTheVerdictIsUnchanged) {
  if (auto why = ProfilerUnavailableReason("perf")) GTEST_SKIP() << *why;
  const Task task = MakeProfileTask("gpu_arch: cpu\nlanguage: cpp\n");
  Evaluation off = Run(task, false);
  Evaluation on = Run(task, true);
  EXPECT_EQ(on.result.status, off.result.status);
  EXPECT_EQ(on.result.perf_score, off.result.perf_score);
  EXPECT_DOUBLE_EQ(on.result.runtime_improvement, off.result.runtime_improvement);
  EXPECT_TRUE(off.task.test_result->trace_results.empty());
  // Both sides profiled (forced), each pass holding "host" exclusively (a CPU arch's timing slot).
  EXPECT_EQ(harness_.profiled, (std::vector<std::string>{"custom", "reference"}));
  EXPECT_EQ(harness_.host_holders, (std::vector<std::pair<int, int>>{{0, 1}, {0, 1}}));
  const ProcessResult* perf = Trace(on.task.test_result, "perf.000");
  ASSERT_NE(perf, nullptr);
  EXPECT_EQ(perf->returncode, 0) << perf->message.value_or("");
  EXPECT_EQ((*perf->output_data)["timed_calls"], 40);
  EXPECT_EQ((*perf->output_data)["tool"], "perf stat");
  // The script never switched the counters on: the entry says so instead of reporting zeros.
  EXPECT_NE(perf->message.value_or("").find("perf counted nothing"), std::string::npos);
  ASSERT_NE(Trace(on.task.test_result_reference, "perf.000"), nullptr);
  // Parsed outputs reach the verdict's profiler_data ("perf", "perf_ref"), raw reports left out.
  EXPECT_TRUE(on.result.profiler_data.contains("perf")) << on.result.profiler_data.dump();
  EXPECT_TRUE(on.result.profiler_data.contains("perf_ref"));
  EXPECT_FALSE(on.result.profiler_data["perf"].contains("perf_stat.csv"));
  // Logged and timed like the other phases.
  bool logged = false;
  for (const ProcessLog& l : on.logs) logged = logged || l.name == "test custom cpu profile perf.000";
  EXPECT_TRUE(logged);
  bool timed = false;
  for (const PhaseTiming& t : on.timings) timed = timed || t.name == "profile custom cpu";
  EXPECT_TRUE(timed);
}

TEST_F(ProfileStage, ConfigDecidesWhichSidesArePassedByDefault) {
  if (auto why = ProfilerUnavailableReason("perf")) GTEST_SKIP() << *why;
  Evaluation ev = Run(MakeProfileTask("gpu_arch: cpu\n"), std::nullopt);  // base.yaml: candidate yes, reference no
  EXPECT_EQ(harness_.profiled, (std::vector<std::string>{"custom"}));
  EXPECT_NE(Trace(ev.task.test_result, "perf.000"), nullptr);
  EXPECT_TRUE(ev.task.test_result_reference->trace_results.empty());
  harness_.profiled.clear();
  Run(MakeProfileTask("gpu_arch: cpu\neval_config:\n  profile_custom_model: false\n  profile_original_model: true\n"),
      std::nullopt);
  EXPECT_EQ(harness_.profiled, (std::vector<std::string>{"reference"}));
}

TEST_F(ProfileStage, FailedCorrectnessIsNotProfiled) {
  harness_.correctness = [](const TestRequest& req) {
    PhaseRun r = Passed();
    if (!req.variant.reference) {
      r.result.returncode = 1;
      r.verdict = {EvalStatus::kValueMismatch, "wrong"};
    }
    return r;
  };
  Evaluation ev = Run(MakeProfileTask("gpu_arch: cpu\n"), true);
  EXPECT_EQ(ev.result.status, EvalStatus::kValueMismatch);
  EXPECT_TRUE(ev.task.test_result->trace_results.empty());
  EXPECT_EQ(harness_.profiled, (std::vector<std::string>{"reference"}));
}

// B8: the reference crashed the whole test task with a NameError when no profiler could be made. Every such
// case here is an entry that says why, and the verdict is the same as without profiling.
TEST_F(ProfileStage, UnusableProfilersAreEntriesNeverCrashes) {
  struct Case {
    std::string config;
    std::string key;
    std::string reason_prefix;
  };
  std::vector<Case> cases = {
      {"gpu_arch: bmg\nlanguage: fortran\n", "profiler.000", "no profiler for language 'fortran' on gpu_arch 'bmg'"},
      {"gpu_arch: cpu\nprofiler_kernel: gprof\n", "gprof.000", "unknown profiler 'gprof'"},
      {"gpu_arch: cpu\nprofiler_kernel: 7\n", "profiler.000", "config.yaml: profiler_kernel: expected"},
      {"gpu_arch: cpu\nprofiler_settings: {perf: {colour: red}}\n", "perf.000", "config.yaml: profiler_settings.perf"
                                                                                 ".colour: expected one of the keys"},
  };
  // A profile flag that is not true/false is refused before anything is built (2026-12-05; it used to become a
  // profiler entry after the whole evaluation).
  try {
    Run(MakeProfileTask("gpu_arch: cpu\neval_config: {profile_custom_model: maybe}\n"), std::nullopt);
    ADD_FAILURE() << "profile_custom_model: maybe was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.yaml: eval_config.profile_custom_model: expected true or false"),
              std::string::npos)
        << e.what();
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.config);
    Evaluation off = Run(MakeProfileTask(c.config), false);
    Evaluation ev = Run(MakeProfileTask(c.config), std::nullopt);
    EXPECT_EQ(ev.result.status, off.result.status);
    EXPECT_EQ(ev.result.perf_score, off.result.perf_score);
    const ProcessResult* t = Trace(ev.task.test_result, c.key);
    ASSERT_NE(t, nullptr) << ev.task.test_result->Encode().dump();
    EXPECT_EQ(t->returncode, -1);
    const std::string reason = (*t->output_data)["reason"].get<std::string>();
    EXPECT_EQ(reason.find(c.reason_prefix), 0u) << reason;
    EXPECT_EQ(t->message.value_or(""), "profiler unavailable: " + reason);
    EXPECT_EQ((*t->output_data)["available"], false);
  }
  // A harness without a profiling command.
  harness_.can_profile = false;
  Evaluation ev = Run(MakeProfileTask("gpu_arch: cpu\n"), true);
  if (!ProfilerUnavailableReason("perf")) {
    const ProcessResult* t = Trace(ev.task.test_result, "perf.000");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(*t->message, "profiler unavailable: the fake harness has no profiling command");
  }
  EXPECT_EQ(ev.result.status, EvalStatus::kCorrect);
}

TEST_F(ProfileStage, SkippedTestsOfACudaTaskSayWhyNcuDidNotRun) {
  harness_.correctness = [](const TestRequest&) {
    PhaseRun r = Passed();
    r.verdict = {EvalStatus::kSkipped, "every test was skipped (no CUDA device: driver too old)"};
    return r;
  };
  Evaluation ev = Run(MakeProfileTask("gpu_arch: \"90\"\nlanguage: cuda\n"), std::nullopt);
  EXPECT_EQ(ev.result.status, EvalStatus::kSkipped);
  const ProcessResult* t = Trace(ev.task.test_result, "ncu.000");
  ASSERT_NE(t, nullptr);
  if (NoCudaDeviceReason()) {
    EXPECT_EQ(t->message->rfind("profiler unavailable: no CUDA device", 0), 0u) << *t->message;
  } else {
    EXPECT_NE(t->message->find("not run"), std::string::npos) << *t->message;  // ncu missing, or skipped tests
  }
  EXPECT_TRUE(harness_.profiled.empty());  // nothing was started
}

// ---- a real pytest task: the benchmark is templated and needs its runtime parameters (B7) ----

const char* kTemplatedTaskPy = R"PY(import pytest

from kernelfoundry import TestBase

import kernel


def reference_affine(xs, factor=2, offset=1):
    return [factor * x + offset for x in xs]


@pytest.fixture(scope="session")
def impl(use_reference, template_args_wrapper, runtime_params):
    # The profiler pass must get the same parameters as the timed run: runtime params AND the template
    # tuple as one argument (the reference split "(2, 1)" in a shell and dropped --runtime_params).
    assert runtime_params.get("expected") == "yes", runtime_params
    if use_reference:
        return reference_affine
    return template_args_wrapper(kernel.affine)


class TestAffine(TestBase):
    def test_output_shapes_match(self, impl):
        assert len(impl([1, 2, 3])) == 3

    def test_values(self, impl):
        assert impl([1, 2, 3]) == [3, 5, 7]

    @pytest.mark.performance
    def test_benchmark(self, impl, measure_runtime):
        measure_runtime(impl, lambda: None, args=([1.0] * 256,), auto_replicate_inputs_size=0)
)PY";

TEST(ProfilePytestE2E, TemplatedBenchmarkWithRuntimeParamsRunsUnderPerfB7) {
  if (auto why = ProfilerUnavailableReason("perf")) GTEST_SKIP() << *why;
  testing::UseTestCache();
  TempDir tmp;
  const auto dir = tmp.path() / "affine";
  WriteFile(dir / "config.yaml",
            "task_name: affine\njob_name: affine_test\ntask_origin: custom\nlanguage: python\ngpu_arch: cpu\n"
            "has_build_step: false\nhas_reference_build_step: false\ntest_reference: true\ntest_timeout: 120\n"
            "hyperparameters:\n  runtime:\n    expected: \"yes\"\n"
            "eval_config:\n  warmup_min_time: 0.05\n  perf_trials_min_time: 0.2\n  profile_original_model: true\n");
  WriteFile(dir / "conftest.py", "from kernelfoundry.conftest import *\n");
  WriteFile(dir / "kernel.py", "# [EVOLVE_START]\ndef affine(xs):\n    return xs\n# [EVOLVE_END]\n");
  WriteFile(dir / "task.py", kTemplatedTaskPy);
  Task task = testing::LoadTestTask(dir);
  EvaluateOptions o;
  o.work_root = tmp.path() / "work";
  Evaluation ev = Evaluate(task,
                           BlockUpdate{BlockUpdateShort{{"EVOLVE",
                                                         "# forward_templated<2, 1>\ndef affine(xs, factor, offset):\n"
                                                         "    return [factor * x + offset for x in xs]\n"}}},
                           o);
  ASSERT_EQ(ev.result.status, EvalStatus::kCorrect) << ev.result.status_detail << ev.result.eval_log;
  for (const auto* side : {&ev.task.test_result, &ev.task.test_result_reference}) {
    ASSERT_TRUE(side->has_value());
    ASSERT_EQ((*side)->trace_results.size(), 1u);
    const auto& [key, pass] = (*side)->trace_results.front();
    EXPECT_EQ(key, "perf.000");
    SCOPED_TRACE(pass.CombineOutput());
    EXPECT_EQ(pass.returncode, 0);
    EXPECT_FALSE(pass.message.value_or("").find("did not pass") != std::string::npos);
    const Json& data = *pass.output_data;
    EXPECT_GT(data["timed_calls"].get<int64_t>(), 0);
    EXPECT_EQ(data["counters"]["task-clock"]["status"], "counted") << data.dump(2);
    EXPECT_GT(data["derived"]["task_clock_ms_per_call"]["value"].get<double>(), 0);
    EXPECT_TRUE(data["derived"].contains("page_faults_per_call"));
    EXPECT_NE(data["perf_stat.csv"].get<std::string>().find("task-clock"), std::string::npos);
  }
  // A profile line per side for the verdict table.
  std::vector<std::string> lines = ProfileTableLines(ev.task.test_result, ev.task.test_result_reference);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("profile candidate: perf", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("page-faults "), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1].rfind("profile reference: perf", 0), 0u) << lines[1];
}

}  // namespace
}  // namespace kf
