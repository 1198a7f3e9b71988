// Tests of the timing loop (spec §4.6) with a fake clock, and of the timing statistics (spec §4.9).
#include "kernelfoundry/measure.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernelfoundry/error.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using std::chrono::nanoseconds;

/// A clock that only moves when a fake target "runs"; counts every call and sync.
struct FakeDevice {
  nanoseconds t{0};
  nanoseconds per_call{1'000'000};  // 1 ms
  int64_t calls = 0;
  int64_t syncs = 0;
  std::function<void()> Target() {
    return [this] {
      t += per_call;
      ++calls;
    };
  }
  std::function<void()> Sync() {
    return [this] { ++syncs; };
  }
  MeasureClock Clock() {
    return [this] { return t; };
  }
};

TEST(MeasureRuntime, CountsFollowTheReferenceFormulas) {
  FakeDevice dev;
  MeasureResult r = MeasureRuntime(dev.Target(), dev.Sync(), MeasureOptions{}, {}, dev.Clock());
  // m = 1 ms: warmup = max(10, int(1.0/0.001)) = 1000; inner = max(1, int(0.01/0.001)) = 10;
  // warmup_time = 1 s → trials = max(10, int(1.0/1.0*1000/10)) = 100.
  EXPECT_DOUBLE_EQ(r.plan.min_test_trial_s, 0.001);
  EXPECT_EQ(r.plan.warmup_iters, 1000);
  EXPECT_EQ(r.plan.inner_iters, 10);
  EXPECT_DOUBLE_EQ(r.plan.warmup_time_s, 1.0);
  EXPECT_EQ(r.plan.trials, 100);
  ASSERT_EQ(r.trial_ms.size(), 100u);
  for (double ms : r.trial_ms) EXPECT_DOUBLE_EQ(ms, 1.0);  // always milliseconds per call
  EXPECT_EQ(dev.calls, 5 + 1000 + 100 * 10);
  // sync: 2 per probe, 1 after the warm-up, 2 per trial.
  EXPECT_EQ(dev.syncs, 5 * 2 + 1 + 100 * 2);
}

TEST(MeasureRuntime, SlowTargetUsesMinimumCounts) {
  FakeDevice dev;
  dev.per_call = nanoseconds(500'000'000);  // 0.5 s per call
  MeasureResult r = MeasureRuntime(dev.Target(), nullptr, MeasureOptions{}, {}, dev.Clock());
  EXPECT_EQ(r.plan.warmup_iters, 10);  // max(10, int(2)) = 10
  EXPECT_EQ(r.plan.inner_iters, 1);    // max(1, int(0.02)) = 1
  EXPECT_EQ(r.plan.trials, 10);        // max(10, int(1/5 * 10 / 1)) = max(10, 2)
  ASSERT_EQ(r.trial_ms.size(), 10u);
  EXPECT_DOUBLE_EQ(r.trial_ms[0], 500.0);
}

TEST(MeasureRuntime, ProbeMinimumDrivesTheCounts) {
  // The first probe is slow (cold), later ones fast: m is the minimum.
  FakeDevice dev;
  int64_t n = 0;
  auto target = [&] {
    dev.t += n++ == 0 ? nanoseconds(100'000'000) : nanoseconds(2'000'000);
  };
  MeasureResult r = MeasureRuntime(target, nullptr, MeasureOptions{}, {}, dev.Clock());
  EXPECT_DOUBLE_EQ(r.plan.min_test_trial_s, 0.002);
  EXPECT_EQ(r.plan.warmup_iters, 500);
  EXPECT_EQ(r.plan.inner_iters, 5);
  EXPECT_EQ(r.plan.trials, 100);  // 1.0 / 1.0 * 500 / 5
}

TEST(MeasureRuntime, CustomOptions) {
  FakeDevice dev;
  MeasureOptions o;
  o.warmup_min_time_s = 0.1;
  o.inner_loop_min_time_s = 0.004;
  o.perf_trials_min_time_s = 0.5;
  o.perf_trials_min_iters = 3;
  o.test_trials = 2;
  MeasureResult r = MeasureRuntime(dev.Target(), nullptr, o, {}, dev.Clock());
  EXPECT_EQ(r.plan.warmup_iters, 100);
  EXPECT_EQ(r.plan.inner_iters, 4);
  EXPECT_EQ(r.plan.trials, 125);  // 0.5 / 0.1 * 100 / 4
  EXPECT_EQ(dev.calls, 2 + 100 + 125 * 4);
}

TEST(MeasureRuntime, SamplingProfilerClampsInnerAndRunsOneTrial) {
  FakeDevice dev;
  dev.per_call = nanoseconds(1'000);  // 1 µs → inner would be 10000
  MeasureOptions o;
  o.profiler_mode = ProfilerMode::kSampling;
  MeasureResult r = MeasureRuntime(dev.Target(), nullptr, o, {}, dev.Clock());
  EXPECT_EQ(r.plan.inner_iters, 20);
  EXPECT_EQ(r.plan.trials, 1);
  ASSERT_EQ(r.trial_ms.size(), 1u);
  EXPECT_DOUBLE_EQ(r.trial_ms[0], 0.001);

  FakeDevice slow;
  slow.per_call = nanoseconds(50'000'000);  // inner would be 1 → clamped up to 5
  r = MeasureRuntime(slow.Target(), nullptr, o, {}, slow.Clock());
  EXPECT_EQ(r.plan.inner_iters, 5);
  EXPECT_EQ(r.trial_ms.size(), 1u);
}

TEST(MeasureRuntime, ReplayProfilerReturnsOneCallInMilliseconds_B19) {
  FakeDevice dev;
  dev.per_call = nanoseconds(1'500);  // 1.5 µs — the reference reported 1.5e-06 (seconds) here
  MeasureOptions o;
  o.profiler_mode = ProfilerMode::kReplay;
  MeasureResult r = MeasureRuntime(dev.Target(), nullptr, o, {}, dev.Clock());
  EXPECT_EQ(dev.calls, 1);
  ASSERT_EQ(r.trial_ms.size(), 1u);
  EXPECT_DOUBLE_EQ(r.trial_ms[0], 0.0015);
}

TEST(MeasureRuntime, HooksWrapOnlyTheTimedPhase) {
  FakeDevice dev;
  std::vector<std::string> events;
  MeasureHooks hooks;
  hooks.timed_begin = [&] { events.push_back("begin@" + std::to_string(dev.calls)); };
  hooks.timed_end = [&] { events.push_back("end@" + std::to_string(dev.calls)); };
  MeasureRuntime(dev.Target(), nullptr, MeasureOptions{}, hooks, dev.Clock());
  EXPECT_EQ(events, (std::vector<std::string>{"begin@1005", "end@2005"}));
}

TEST(MeasureRuntime, TargetExceptionPropagatesAndEndHookRuns) {
  FakeDevice dev;
  int64_t n = 0;
  auto target = [&] {
    dev.t += nanoseconds(1'000'000);
    if (++n == 1100) throw std::runtime_error("kernel failed");
  };
  bool ended = false;
  MeasureHooks hooks;
  hooks.timed_end = [&] { ended = true; };
  EXPECT_THROW(MeasureRuntime(target, nullptr, MeasureOptions{}, hooks, dev.Clock()), std::runtime_error);
  EXPECT_TRUE(ended);
}

TEST(MeasureRuntime, ZeroDurationClockStillTerminates) {
  // A clock that never moves must not give infinite counts (m is clamped to 1 ns).
  int64_t calls = 0;
  MeasureOptions o;
  o.warmup_min_time_s = 1e-6;
  o.inner_loop_min_time_s = 1e-8;
  o.perf_trials_min_time_s = 1e-6;
  MeasureResult r = MeasureRuntime([&] { ++calls; }, nullptr, o, {}, [] { return nanoseconds(0); });
  EXPECT_DOUBLE_EQ(r.plan.min_test_trial_s, 1e-9);
  EXPECT_EQ(r.plan.warmup_iters, 999);  // int(1e-6 / 1e-9) = int(999.9999999999999)
  EXPECT_EQ(r.plan.inner_iters, 10);
  EXPECT_LE(r.plan.trials, 100'000);
  EXPECT_EQ(r.trial_ms.size(), static_cast<size_t>(r.plan.trials));
  for (double ms : r.trial_ms) EXPECT_EQ(ms, 0.0);
}

TEST(MeasureRuntime, InvalidOptionsAreRejected) {
  FakeDevice dev;
  MeasureOptions o;
  o.test_trials = 0;
  try {
    MeasureRuntime(dev.Target(), nullptr, o, {}, dev.Clock());
    FAIL() << "expected kf::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.field(), "test_trials");
  }
  o = {};
  o.warmup_min_time_s = -1;
  EXPECT_THROW(MeasureRuntime(dev.Target(), nullptr, o, {}, dev.Clock()), Error);
  o = {};
  o.profiler_inner_max = 2;
  EXPECT_THROW(MeasureRuntime(dev.Target(), nullptr, o, {}, dev.Clock()), Error);
  EXPECT_THROW(MeasureRuntime(nullptr, nullptr), Error);
  EXPECT_EQ(dev.calls, 0);
}

TEST(MeasureRuntime, RealClockSmoke) {
  // A target of known duration on the steady clock; only structural checks and a generous upper bound.
  MeasureOptions o;
  o.warmup_min_time_s = 0.02;
  o.inner_loop_min_time_s = 0.002;
  o.perf_trials_min_time_s = 0.02;
  auto start = std::chrono::steady_clock::now();
  MeasureResult r = MeasureRuntime([] { std::this_thread::sleep_for(std::chrono::microseconds(200)); },
                                   [] {}, o);
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(r.plan.trials, 10);
  EXPECT_EQ(r.trial_ms.size(), static_cast<size_t>(r.plan.trials));
  for (double ms : r.trial_ms) EXPECT_GE(ms, 0.2);  // sleep_for never returns early
  EXPECT_LT(elapsed, std::chrono::seconds(30));
}

TEST(DetectProfiler, EnvironmentPrecedence) {
  auto env = [](std::map<std::string, std::string> vars) {
    return [vars](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  };
  EXPECT_EQ(DetectProfiler(env({})), std::nullopt);
  EXPECT_EQ(DetectProfiler(env({{"UNITRACE_VERSION", "2.1"}})), "unitrace");
  EXPECT_EQ(DetectProfiler(env({{"NV_NSIGHT_INJECTION_PORT_BASE", "49152"}})), "ncu");
  EXPECT_EQ(DetectProfiler(env({{"KERNELFOUNDRY_PROFILER", "vtune"}, {"UNITRACE_VERSION", "2"}})), "vtune");
  EXPECT_EQ(DetectProfiler(env({{"KERNELFOUNDRY_PROFILER", ""}, {"UNITRACE_VERSION", "2"}})), "unitrace");
  EXPECT_EQ(ProfilerModeFor(std::nullopt), ProfilerMode::kNone);
  EXPECT_EQ(ProfilerModeFor("ncu"), ProfilerMode::kReplay);
  EXPECT_EQ(ProfilerModeFor("unitrace"), ProfilerMode::kSampling);
  EXPECT_EQ(ParseProfilerMode(ProfilerModeName(ProfilerMode::kReplay)), ProfilerMode::kReplay);
  EXPECT_THROW(ParseProfilerMode("fast"), Error);
}

// ---- statistics ----

TEST(TimingStats, PopulationStdAndMedian) {
  // Golden probes.json scoring.get_timing_stats: mean 4, std 3.16, min 1, max 10, median 3, 5 trials.
  const std::vector<double> v{10.0, 1.0, 3.0, 2.0, 4.0};
  TimingStats s = ComputeTimingStats(v);
  EXPECT_DOUBLE_EQ(s.mean, 4.0);
  EXPECT_DOUBLE_EQ(s.std, 3.1622776601683795);  // sqrt(10): population, not sample (sqrt(12.5))
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 10.0);
  EXPECT_DOUBLE_EQ(s.median, 3.0);
  EXPECT_EQ(s.num_trials, 5);
  TimingStats r = RoundTimingStats(s);
  EXPECT_DOUBLE_EQ(r.std, 3.16);
  EXPECT_DOUBLE_EQ(r.mean, 4.0);
}

TEST(TimingStats, MatchesGoldenScoringRuntimeStats) {
  const Json golden = testing::Golden("probes")["scoring"];
  const Json& rt = golden["correct_with_reference"]["test_result"]["performance_result"]["output_data"]["runtimes"];
  const Json& expected = golden["correct_with_reference"]["exec_result"]["runtime_stats"];
  ASSERT_FALSE(rt.empty());
  for (const auto& [id, samples] : rt.items()) {
    TimingStats r = RoundTimingStats(ComputeTimingStats(samples.get<std::vector<double>>()));
    const Json& e = expected[id];
    EXPECT_DOUBLE_EQ(r.mean, e["mean"].get<double>()) << id;
    EXPECT_DOUBLE_EQ(r.std, e["std"].get<double>()) << id;
    EXPECT_DOUBLE_EQ(r.min, e["min"].get<double>()) << id;
    EXPECT_DOUBLE_EQ(r.max, e["max"].get<double>()) << id;
    EXPECT_DOUBLE_EQ(r.median, e["median"].get<double>()) << id;
    EXPECT_EQ(r.num_trials, e["num_trials"].get<int64_t>()) << id;
  }
  const Json& r3 = golden["correct_rounding_3_sig"];
  TimingStats r = RoundTimingStats(ComputeTimingStats(
      r3["test_result"]["performance_result"]["output_data"]["runtimes"]["task.py::T::test_bench[a]"]
          .get<std::vector<double>>()));
  EXPECT_DOUBLE_EQ(r.std, 1.5e-06);
  EXPECT_DOUBLE_EQ(r.mean, 0.123);
}

TEST(TimingStats, EvenCountMedianIsMeanOfMiddle) {
  const std::vector<double> v{4.0, 1.0, 3.0, 2.0};
  EXPECT_DOUBLE_EQ(ComputeTimingStats(v).median, 2.5);
  const std::vector<double> one{0.25};
  TimingStats s = ComputeTimingStats(one);
  EXPECT_DOUBLE_EQ(s.std, 0.0);
  EXPECT_DOUBLE_EQ(s.median, 0.25);
}

TEST(TimingStats, EmptySamplesAreAnError_B18) {
  // The reference crashed later with "zero-size array to reduction operation minimum" (probes.json
  // scoring.empty_runtime_list_B18); we reject the empty list up front with a clear error.
  try {
    ComputeTimingStats(std::vector<double>{});
    FAIL() << "expected kf::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("never measured"), std::string::npos);
  }
  const std::vector<double> nan{1.0, std::nan("")};
  EXPECT_THROW(ComputeTimingStats(nan), Error);
}

TEST(RoundSignificant, LikePythonG3) {
  // Expected values from Python: float(f"{x:.3g}").
  EXPECT_DOUBLE_EQ(RoundSignificant(9.999e10), 1e11);
  EXPECT_DOUBLE_EQ(RoundSignificant(2.675), 2.67);  // 2.675 is below 2.675 in binary
  EXPECT_DOUBLE_EQ(RoundSignificant(0.0001235), 0.000123);
  EXPECT_DOUBLE_EQ(RoundSignificant(-1234567), -1230000.0);
  EXPECT_DOUBLE_EQ(RoundSignificant(1.0066666666666666), 1.01);
  EXPECT_DOUBLE_EQ(RoundSignificant(0.10000000000000009), 0.1);
  EXPECT_DOUBLE_EQ(RoundSignificant(0.009428090415820642), 0.00943);
  EXPECT_DOUBLE_EQ(RoundSignificant(123456.0, 5), 123460.0);
  EXPECT_EQ(RoundSignificant(0.0), 0.0);
  EXPECT_TRUE(std::isinf(RoundSignificant(INFINITY)));
  EXPECT_TRUE(std::isnan(RoundSignificant(NAN)));
}

}  // namespace
}  // namespace kf
