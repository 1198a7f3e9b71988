// The timing loop (reference spec §4.6 steps 4–7) and profiler detection (§4.6 step 1).
#include "kernelfoundry/measure.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>

#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

using std::chrono::nanoseconds;

/// Largest loop count we ever compute (about 11 days of 1 ns calls); guards the double → int conversion.
constexpr double kMaxCount = 1e15;
/// Smallest duration we divide by: a clock that reports 0 must not make the counts infinite.
constexpr double kMinDurationS = 1e-9;

/// int(x) for x ≥ 0, saturating at kMaxCount; NaN and negatives give 0.
int64_t TruncCount(double x) {
  if (!(x > 0)) return 0;
  if (x >= kMaxCount) return static_cast<int64_t>(kMaxCount);
  return static_cast<int64_t>(x);
}


void Call(const std::function<void()>& fn) {
  if (fn) fn();
}

/// Runs hooks.timed_end when the timed phase is left, also by an exception (then errors of the hook itself
/// are swallowed so the original exception wins).
class TimedPhase {
 public:
  explicit TimedPhase(const MeasureHooks& hooks) : hooks_(hooks) {
    Call(hooks_.timed_begin);
    active_ = true;
  }
  ~TimedPhase() {
    if (!active_) return;
    try {
      Call(hooks_.timed_end);
    } catch (...) {  // only reached while unwinding: Finish() clears active_ on the normal path
    }
  }
  TimedPhase(const TimedPhase&) = delete;
  TimedPhase& operator=(const TimedPhase&) = delete;
  /// Normal exit: runs the end hook and lets its exceptions propagate.
  void Finish() {
    active_ = false;
    Call(hooks_.timed_end);
  }

 private:
  const MeasureHooks& hooks_;
  bool active_ = false;
};

void RequireFiniteNonNegative(double v, const char* field) {
  if (!std::isfinite(v) || v < 0) {
    throw Error(ErrorKind::kInvalidArgument, "expected a finite time >= 0 seconds", "MeasureOptions", field);
  }
}

void RequireAtLeast(int64_t v, int64_t lo, const char* field) {
  if (v < lo) {
    throw Error(ErrorKind::kInvalidArgument, "expected an integer >= " + std::to_string(lo) + ", got " +
                                                 std::to_string(v),
                "MeasureOptions", field);
  }
}

}  // namespace

std::string_view ProfilerModeName(ProfilerMode mode) {
  switch (mode) {
    case ProfilerMode::kNone: return "none";
    case ProfilerMode::kSampling: return "sampling";
    case ProfilerMode::kReplay: return "replay";
  }
  return "none";
}

ProfilerMode ParseProfilerMode(std::string_view name) {
  if (name == "none") return ProfilerMode::kNone;
  if (name == "sampling") return ProfilerMode::kSampling;
  if (name == "replay") return ProfilerMode::kReplay;
  throw Error(ErrorKind::kInvalidArgument,
              "expected \"none\", \"sampling\" or \"replay\", got \"" + std::string(name) + "\"",
              "MeasureOptions", "profiler_mode");
}

std::optional<std::string> DetectProfiler(const std::function<const char*(const char*)>& getenv) {
  auto get = [&](const char* name) -> const char* { return getenv ? getenv(name) : std::getenv(name); };
  if (const char* p = get("KERNELFOUNDRY_PROFILER"); p != nullptr && *p != '\0') return std::string(p);
  if (get("UNITRACE_VERSION") != nullptr) return std::string("unitrace");
  if (get("NV_NSIGHT_INJECTION_PORT_BASE") != nullptr) return std::string("ncu");
  return std::nullopt;
}

ProfilerMode ProfilerModeFor(const std::optional<std::string>& profiler) {
  if (!profiler) return ProfilerMode::kNone;
  return *profiler == "ncu" ? ProfilerMode::kReplay : ProfilerMode::kSampling;
}

void MeasureOptions::Validate() const {
  RequireFiniteNonNegative(warmup_min_time_s, "warmup_min_time");
  RequireFiniteNonNegative(inner_loop_min_time_s, "inner_loop_min_time");
  RequireFiniteNonNegative(perf_trials_min_time_s, "perf_trials_min_time");
  RequireAtLeast(warmup_min_iters, 0, "warmup_min_iters");
  RequireAtLeast(perf_trials_min_iters, 0, "perf_trials_min_iters");
  RequireAtLeast(test_trials, 1, "test_trials");
  RequireAtLeast(profiler_inner_min, 1, "profiler_inner_min");
  RequireAtLeast(profiler_inner_max, profiler_inner_min, "profiler_inner_max");
}

nanoseconds SteadyNow() {
  return std::chrono::duration_cast<nanoseconds>(std::chrono::steady_clock::now().time_since_epoch());
}

MeasureResult MeasureRuntime(const std::function<void()>& target, const std::function<void()>& sync,
                             const MeasureOptions& options, const MeasureHooks& hooks,
                             const MeasureClock& clock) {
  options.Validate();
  if (!target) throw Error(ErrorKind::kInvalidArgument, "target must be callable", "", "target");
  const MeasureClock now = clock ? clock : MeasureClock(SteadyNow);
  MeasureResult result;
  MeasurePlan& plan = result.plan;

  // Step 4: probe calls, each timed on its own. Under a replaying profiler (ncu) one call is all we make,
  // and its time is the only sample — in ms (B19: the reference returned seconds here).
  const int64_t probes = options.profiler_mode == ProfilerMode::kReplay ? 1 : options.test_trials;
  double m = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < probes; ++i) {
    Call(sync);
    const nanoseconds start = now();
    target();
    Call(sync);
    m = std::min(m, ToSeconds(now() - start));
  }
  m = std::max(m, kMinDurationS);
  plan.min_test_trial_s = m;
  if (options.profiler_mode == ProfilerMode::kReplay) {
    result.trial_ms.push_back(m * 1000.0);
    return result;
  }

  // Step 5: warm-up sized from the fastest probe, timed as a whole.
  plan.warmup_iters = std::max(options.warmup_min_iters, TruncCount(options.warmup_min_time_s / m));
  plan.inner_iters = std::max<int64_t>(1, TruncCount(options.inner_loop_min_time_s / m));
  {
    const nanoseconds start = now();
    for (int64_t i = 0; i < plan.warmup_iters; ++i) target();
    Call(sync);
    plan.warmup_time_s = ToSeconds(now() - start);
  }
  // Same operation order as the reference: perf_trials_min_time / warmup_time * warmup / inner.
  const double warmup_time = std::max(plan.warmup_time_s, kMinDurationS);
  plan.trials = std::max(
      options.perf_trials_min_iters,
      TruncCount(options.perf_trials_min_time_s / warmup_time * static_cast<double>(plan.warmup_iters) /
                 static_cast<double>(plan.inner_iters)));
  plan.trials = std::max<int64_t>(plan.trials, 1);  // never return an empty sample list

  // Step 6: a sampling profiler records the whole timed phase; keep it short.
  if (options.profiler_mode == ProfilerMode::kSampling) {
    plan.inner_iters = std::clamp(plan.inner_iters, options.profiler_inner_min, options.profiler_inner_max);
    plan.trials = 1;
  }

  // Step 7: the timed trials.
  result.trial_ms.reserve(static_cast<size_t>(std::min<int64_t>(plan.trials, 1 << 20)));
  TimedPhase phase(hooks);
  for (int64_t t = 0; t < plan.trials; ++t) {
    Call(sync);
    const nanoseconds start = now();
    for (int64_t i = 0; i < plan.inner_iters; ++i) target();
    Call(sync);
    const nanoseconds stop = now();
    result.trial_ms.push_back(ToSeconds(stop - start) / static_cast<double>(plan.inner_iters) * 1000.0);
  }
  phase.Finish();
  return result;
}

}  // namespace kf
