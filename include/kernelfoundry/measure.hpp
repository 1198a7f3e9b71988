// Runtime measurement — the one timing loop of KernelFoundry, and the statistics of its samples.
//
// Contract:
//  * MeasureRuntime(target, sync, options) times `target` the way the reference's `measure_runtime` does
//    (reference spec §4.6, steps 4–7) and returns one sample per timed trial, always in MILLISECONDS per
//    call (the reference returned seconds under ncu, bug B19; we never do).
//  * The loop is written once, here. Python tasks reach it through the pybind11 module
//    `kernelfoundry._measure` (target/sync are Python callables); native task code calls it directly with
//    a device-synchronisation hook as `sync`.
//  * `sync` is called before every start and stop timestamp, so asynchronous devices are timed to
//    completion. On a CPU it may be a no-op.
//  * Exceptions thrown by target, sync or the hooks propagate unchanged; the timed-phase end hook still runs.
//  * Statistics use the population standard deviation (numpy's default `np.std`, which the reference's
//    `get_timing_stats` uses: golden probes.json "scoring" → [1.0, 1.0, 1.02] has std 0.00943, [2.0, 2.2]
//    has std 0.1) and numpy's median (mean of the two middle values for even counts).
//  * Thread-safety: the functions keep no global state; concurrent calls are independent (timings will
//    interfere, of course).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kf {

/// A duration in seconds, as a double (the unit of every *_s value of the timing loops).
inline double ToSeconds(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) * 1e-9; }

/// How an external profiler wraps the process being timed (spec §4.6 steps 1, 4, 6).
enum class ProfilerMode {
  kNone,      ///< no profiler: full warm-up and trial counts
  kSampling,  ///< unitrace / vtune (records the timed phase): inner clamped to [5, 20], one trial
  kReplay,    ///< ncu (replays every kernel many times): only the single test call is made and reported
};

/// Returns "none", "sampling" or "replay".
std::string_view ProfilerModeName(ProfilerMode mode);
/// Parses ProfilerModeName's output. Throws kf::Error(kInvalidArgument) on anything else.
ProfilerMode ParseProfilerMode(std::string_view name);

/// Names the profiler wrapping this process, from the environment (spec §4.6 step 1):
/// KERNELFOUNDRY_PROFILER (its value) if non-empty, else "unitrace" if UNITRACE_VERSION is set, else "ncu"
/// if NV_NSIGHT_INJECTION_PORT_BASE is set, else nullopt. `getenv` is injectable for tests.
std::optional<std::string> DetectProfiler(
    const std::function<const char*(const char*)>& getenv = nullptr);

/// The mode for a detected profiler name: "ncu" → kReplay, any other name → kSampling, nullopt → kNone.
ProfilerMode ProfilerModeFor(const std::optional<std::string>& profiler);

/// Knobs of the timing loop. Defaults are the reference's `measure_runtime` keyword defaults (spec §4.6,
/// "Defaults:" line). Times are in seconds.
struct MeasureOptions {
  double warmup_min_time_s = 1.0;       ///< warm-up lasts about this long (spec §4.6: warmup_min_time 1.0 s)
  int64_t warmup_min_iters = 10;        ///< at least this many warm-up calls (warmup_min_iters 10)
  double inner_loop_min_time_s = 0.01;  ///< one trial's inner loop lasts about this long (inner_loop_min_time)
  int64_t perf_trials_min_iters = 10;   ///< at least this many timed trials (perf_trials_min_iters 10)
  double perf_trials_min_time_s = 1.0;  ///< the timed trials together last about this long (perf_trials_min_time)
  int64_t test_trials = 5;              ///< individually timed probe calls (spec §4.6 step 4: 5)
  /// What the profiler does; set from DetectProfiler when the caller allows reduced iterations
  /// (the reference's reduce_iterations_for_external_profiler, default True).
  ProfilerMode profiler_mode = ProfilerMode::kNone;
  int64_t profiler_inner_min = 5;       ///< kSampling clamps inner to [min, max] (spec §4.6 step 6: 5, 20)
  int64_t profiler_inner_max = 20;

  /// Throws kf::Error(kInvalidArgument, field = the option name) unless every time is finite and ≥ 0,
  /// every count ≥ 1 (min iters may be 0) and profiler_inner_min ≤ profiler_inner_max.
  void Validate() const;
};

/// The loop counts chosen from the probe calls (spec §4.6 step 5), reported for logging.
struct MeasurePlan {
  double min_test_trial_s = 0;  ///< m: the fastest probe call, seconds (clamped to ≥ 1 ns)
  int64_t warmup_iters = 0;     ///< max(warmup_min_iters, int(warmup_min_time / m))
  double warmup_time_s = 0;     ///< wall time of the whole warm-up loop, seconds
  int64_t inner_iters = 0;      ///< max(1, int(inner_loop_min_time / m)), clamped under kSampling
  int64_t trials = 0;           ///< max(perf_trials_min_iters, int(perf_trials_min_time / warmup_time ×
                                ///< warmup / inner)); 1 under kSampling
};

/// The outcome of one MeasureRuntime call.
struct MeasureResult {
  std::vector<double> trial_ms;  ///< per-call average of each timed trial, milliseconds; never empty
  MeasurePlan plan;              ///< under kReplay only min_test_trial_s is set (one probe call, no loop)
};

/// Optional callbacks around the timed phase (profiler resume/pause, ITT task begin/end).
struct MeasureHooks {
  std::function<void()> timed_begin;  ///< called once right before the first timed trial
  std::function<void()> timed_end;    ///< called once after the last one (also when a trial throws)
};

/// A monotonic clock; returns the time since an arbitrary epoch. Injectable for deterministic tests.
using MeasureClock = std::function<std::chrono::nanoseconds()>;
/// std::chrono::steady_clock as a MeasureClock.
std::chrono::nanoseconds SteadyNow();

/// Times `target` (spec §4.6 steps 4–7):
///  4. `test_trials` probe calls, each `sync; start; target; sync; stop` (1 call under kReplay, whose time
///     is returned in ms as the only sample);
///  5. m = min probe time; warm-up of warmup_iters calls timed as a whole (sync at the end); inner and
///     trials as documented on MeasurePlan;
///  6. kSampling: inner = clamp(inner, 5, 20), trials = 1;
///  7. per trial: `sync; start; inner × target; sync; stop`, sample = (stop − start) / inner × 1000 ms.
/// `sync` may be empty (no-op). Throws kf::Error(kInvalidArgument) for invalid options or an empty target;
/// rethrows whatever target/sync/hooks throw.
MeasureResult MeasureRuntime(const std::function<void()>& target, const std::function<void()>& sync,
                             const MeasureOptions& options = {}, const MeasureHooks& hooks = {},
                             const MeasureClock& clock = SteadyNow);

/// Summary of timing samples (ms in, ms out), as the reference's `get_timing_stats` (spec §4.9).
struct TimingStats {
  double mean = 0;
  double std = 0;     ///< population standard deviation (divide by n)
  double min = 0;
  double max = 0;
  double median = 0;  ///< middle value; mean of the two middle values for an even count
  int64_t num_trials = 0;
};

/// Computes TimingStats of `samples`. Throws kf::Error(kInvalidArgument) when samples is empty — a
/// benchmark without samples is an error, not a crash later (bug B18) — or contains NaN.
TimingStats ComputeTimingStats(std::span<const double> samples);
/// Same for a vector or a braced list of samples.
inline TimingStats ComputeTimingStats(const std::vector<double>& samples) {
  return ComputeTimingStats(std::span<const double>(samples));
}

/// Rounds to `digits` significant digits like Python's float(f"{x:.{digits}g}") (round half to even on the
/// exact binary value). 0, ±inf and NaN are returned unchanged. REQUIRES: 1 ≤ digits ≤ 17.
double RoundSignificant(double value, int digits = 3);

/// Applies RoundSignificant(·, digits) to mean, std, min, max and median (the scoring display form).
TimingStats RoundTimingStats(const TimingStats& stats, int digits = 3);

}  // namespace kf
