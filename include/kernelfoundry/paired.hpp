// Paired timing — the candidate and the reference timed in the same process, interleaved, on the same inputs,
// and the speedup as the median of per-round ratios with a 95 % confidence interval.
//
// Why: two sides timed in different processes at different moments measure the machine's load as much as
// the kernels (the same candidate scored 0.31×, 1.91× and 0.43× in three runs). Interleaving puts both sides
// under the same conditions within each round; the ratio of a round cancels what the round's conditions did to
// both; the median over rounds resists the rounds a burst of load hit.
//
// Contract:
//  * A round runs two samples per side in the order ABBA, A drawn at random (seeded) per round: a drift of the
//    machine's speed that is linear over the round costs both sides the same; the side's time in the round is
//    its two windows over their calls. Per sample: `prepare(load)` (fresh inputs, outside the timed window; load
//    2 × round for each side's first sample of the round, 2 × round + 1 for its second: both sides get the same
//    values in the same position, and a side's two samples get different values), then the
//    timed window `sync; t0; call × n; sync; t1` where n (calls per sample) is chosen once so that a sample
//    lasts ≥ min_sample_s and varies by ±50 % per sample when n > 1 (so a kernel that does real work only every
//    Nth call cannot align with the window), then a quiet wait: until the process's other threads use no CPU
//    (at most quiesce_max_s), their CPU time in that wait counted as "after-return CPU" of the side (work left
//    running in a background thread after returning is measured, and never overlaps the next window).
//  * Warm-up: rounds are run unrecorded until both sides' per-call medians over the last warmup_window rounds
//    moved by ≤ warmup_tolerance against the window before (steady allocator and caches), or the warm-up
//    budget ran out.
//  * Measurement: rounds until the 95 % CI of the median ratio reaches the target (ReachesTarget: half-width ≤
//    target_rel_half_width × median after at least min_rounds rounds), or the time budget ran out (the verdict
//    is then noisy, paired_record.hpp), or `check` reported a problem.
//  * `check(load)` is called after both sides ran in a checked round (the probe round that sizes the batches, the
//    first three measured rounds, then a check_fraction share drawn at random), outside every window, with the
//    load of the round's last samples (2 × round + 1): it compares outputs and inputs. A returned problem ends the
//    measurement with that problem (after the probe: with the probe as the record's one round).
//  * Times are per call, milliseconds. Ratios are reference / candidate (> 1: the candidate is faster).
//  * Statistics: the median's distribution-free confidence interval from order statistics (MedianWithCI).
//  * A process's memory and code layout shifts its speed by a few per cent for its whole life; the pipeline
//    repeats the measurement in several processes and builds the interval at the process level
//    (pipeline/paired_processes.hpp, eval_config.timing.processes, GroupedMedianCI).
//  * The quiet wait is one rule for every side (WaitQuiet): this process's other threads here, an executor
//    process in kernelfoundry.executor (through kernelfoundry._measure) and in the SDK's remote.hpp.
//  * Exceptions of the callbacks propagate. Not thread-safe per call; concurrent calls are independent (and
//    interfere: callers serialise timed phases per device, device_slots.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernelfoundry/measure.hpp"

namespace kf {

/// Knobs of MeasurePaired. Times in seconds.
struct PairedOptions {
  double target_rel_half_width = 0.02;  ///< stop once the CI half-width ≤ this × the median ratio
  double budget_s = 30;                 ///< the whole measurement (warm-up included) ends after this
  double warmup_budget_fraction = 0.3;  ///< at most this share of the budget is warm-up
  int64_t min_rounds = 12;              ///< never stop on the target before this many measured rounds
  int64_t max_rounds = 1'000'000;
  int64_t warmup_min_rounds = 3;
  int64_t warmup_window = 2;            ///< rounds per window of the warm-up stability test
  double warmup_tolerance = 0.25;       ///< relative change of each side's window median that counts as stable
  double min_sample_s = 2e-4;           ///< calls are batched so that one timed sample lasts at least this
  double quiesce_max_s = 0.05;          ///< longest wait for other threads to go idle after a side's calls
  double check_fraction = 0.2;          ///< share of measured rounds checked (besides the first three)
  uint64_t seed = 1;                    ///< round order, checked rounds, batch sizes
  // The verdict (JudgePaired, paired_record.hpp); the loop itself does not read them.
  double after_return_cpu_ratio = 0.25;  ///< after-return CPU beyond the reference's, vs the candidate's windows
  double suspicious_speedup = 10.0;     ///< speedups above this are measured again and must hold

  /// Throws kf::Error(kInvalidArgument, "PairedOptions", field) unless the values are finite and in range.
  void Validate() const;
};

/// One side of a paired measurement.
struct PairedSide {
  /// Puts the values of `load` in place for the next sample (outside the timed window): the same load means
  /// the same values on both sides; consecutive loads are 2 × round and 2 × round + 1, asked for in order,
  /// each side twice per round (see the contract above). May be empty.
  std::function<void(int64_t load)> prepare;
  /// One call of the kernel.
  std::function<void()> call;
  /// Waits for the device (called before t0 and before t1). May be empty (CPU).
  std::function<void()> sync;
  /// When set, replaces the quiet wait after each sample (for a side that runs in another process, where this
  /// process's threads see nothing of its work): waits until the side is idle and returns the CPU seconds it
  /// used after its last call returned (counted as its after-return CPU). Called outside the timed window.
  std::function<double()> settle;
};

/// Called after both sides ran in a checked round, with the load of the round's last samples (the values both
/// sides' inputs should still hold): a problem (string) ends the measurement.
using PairedCheck = std::function<std::optional<std::string>(int64_t load)>;

/// The median of a sample and its confidence interval.
struct MedianCI {
  double median = 0;
  double low = 0;
  double high = 0;
};

/// The median and its distribution-free confidence interval from order statistics (Conover, Practical
/// Nonparametric Statistics, 3rd ed., §3.2, confidence interval for a quantile, p = 1/2): [x_(k), x_(n+1-k)]
/// with k the largest rank such that P(Binomial(n, 1/2) ≤ k − 1) ≤ (1 − confidence) / 2. For n < 6 no k
/// exists at 95 %: the interval is [min, max]. Throws kf::Error(kInvalidArgument) for an empty sample.
MedianCI MedianWithCI(std::vector<double> values, double confidence = 0.95);

/// The median of the pooled `values` and its percentile confidence interval from a two-level bootstrap over
/// the groups they came from (`groups[i]` is the group of values[i]; e.g. the process of a round): each
/// of `resamples` draws picks as many groups as there are, with replacement, then within each picked group as
/// many of its values as it holds, with replacement, and takes the median of the pooled draw (Davison &
/// Hinkley, Bootstrap Methods and their Application, 1997, §3.8, hierarchical data, resampling at both
/// stages). The interval is the draws' (1 − confidence)/2 and (1 + confidence)/2 quantiles; it reflects the
/// spread between groups, which the order-statistic interval of the pooled values ignores. Deterministic for a
/// given seed. Throws kf::Error(kInvalidArgument) for an empty sample, sizes that differ, or resamples < 1.
MedianCI HierarchicalMedianCI(const std::vector<double>& values, const std::vector<int64_t>& groups,
                              int64_t resamples, uint64_t seed, double confidence = 0.95);

/// The interval for a median of values that came from a few groups (processes) whose own offsets vary: the
/// union of MedianWithCI of the pooled values, HierarchicalMedianCI, and the interval of the 20 %-trimmed mean of
/// the groups' log-medians (Tukey & McLaughlin 1963; Yuen 1974, Biometrika 61: exp(m_t ± t(0.975, h − 1) ·
/// √(SSD_w / (h (h − 1)))), g groups, ⌊0.2 g⌋ trimmed per end, h kept, SSD_w the sum of squared deviations of the
/// winsorized log-medians; below 5 groups nothing is trimmed: Student's t interval of the mean). With few groups the
/// bootstrap's percentile interval is too narrow (3 groups whose offsets all fall on one side of the truth,
/// probability 1/4, give an interval that misses it); an interval over the groups is the standard remedy for a
/// random effect measured g times (Kalibera & Jones, "Rigorous Benchmarking in Reasonable Time", ISMM 2013, §3).
/// Trimmed rather than plain t: a process whose whole run the machine sped up (the README example, 2026-12-05:
/// 2 of 24 processes at 2.24x and 2.32x against 2.53-2.82x) widened the plain t interval to ±2.25 % where the
/// others agreed to ±1.3 %, and under such a tail the plain t interval covered the median in 65 % of simulated
/// merges of 24 processes, the trimmed one in 95.5 %, with the same width where offsets are normal
/// (bench/interval_bench). `median` is the pooled median. One group: MedianWithCI. Throws like
/// HierarchicalMedianCI; values must be > 0.
MedianCI GroupedMedianCI(const std::vector<double>& values, const std::vector<int64_t>& groups,
                         int64_t resamples, uint64_t seed);

/// Student's t quantile t(0.975, df) for df ≥ 1 (exact table to 30, then the Cornish–Fisher expansion
/// z + (z³ + z) / (4 df), error < 0.002). Throws kf::Error(kInvalidArgument) for df < 1.
double StudentT975(int64_t df);

/// The outcome of MeasurePaired.
struct PairedResult {
  std::vector<double> candidate_ms;  ///< per-call ms of each measured round
  std::vector<double> reference_ms;
  std::vector<double> ratios;        ///< reference_ms[i] / candidate_ms[i]
  MedianCI speedup;                  ///< median ratio and its 95 % CI (MedianWithCI)
  double rel_half_width = 0;         ///< (high − low) / 2 / median
  bool target_reached = false;
  int64_t warmup_rounds = 0;
  int64_t rounds = 0;                ///< measured rounds
  int64_t calls_per_sample = 1;
  int64_t checked_rounds = 0;
  double elapsed_s = 0;              ///< the whole measurement, warm-up included (steady clock)
  double elapsed_raw_s = 0;          ///< the same interval read with a raw clock_gettime syscall (cross-check)
  double candidate_window_s = 0;     ///< sum of the candidate's timed windows (measured rounds)
  double reference_window_s = 0;
  double candidate_after_cpu_s = 0;  ///< CPU used by other threads after the candidate's calls returned
  double reference_after_cpu_s = 0;
  std::string stop;                  ///< "target", "budget", "max_rounds" or "check"
  std::optional<std::string> problem;  ///< what the failed check said
};

/// Whether `ci` (a speedup's interval after `rounds` measured rounds) is precise enough for `options`: at least
/// min_rounds rounds and a half-width (high − low) / 2 ≤ target_rel_half_width × median. The loop stops there;
/// short of it the verdict is noisy (JudgePaired).
bool ReachesTarget(const MedianCI& ci, int64_t rounds, const PairedOptions& options);

/// The quiet wait (one rule for every side that waits for work left running after a call returned): every
/// 200 µs, reads `cpu_s()` (CPU seconds used so far by what is watched); done when it grew by less than 50 µs
/// and `runnable()` (its threads running or waiting for a CPU) was 0 in two slices in a row — a thread just
/// started may still wait for a CPU or a lock (the GIL) in the first slice —, or after `max_s`. Returns the last
/// `cpu_s()` reading (the first one when max_s ≤ 0: no wait).
double WaitQuiet(const std::function<double()>& cpu_s, const std::function<int()>& runnable, double max_s);

/// CPU seconds used so far by all threads of process `pid` (its kernel CPU clock, clock_getcpuclockid); 0 once it
/// is gone.
double ProcessCpuSeconds(int pid);

/// How many threads of process `pid` other than thread `except_tid` (0: none) are running or waiting for a CPU
/// (state R in /proc/<pid>/task/<tid>/stat; 0 when the process is gone).
int RunnableThreads(int pid, int except_tid = 0);

/// WaitQuiet over every thread of process `pid` (an executor): returns its CPU seconds at the end of the wait.
double WaitProcessQuiet(int pid, double max_s);

/// Runs the paired measurement (see the file comment). Throws kf::Error(kInvalidArgument) for invalid
/// options or an empty `call`; rethrows what the callbacks throw.
PairedResult MeasurePaired(const PairedSide& candidate, const PairedSide& reference, const PairedOptions& options,
                           const PairedCheck& check = {}, const MeasureClock& clock = SteadyNow);

}  // namespace kf
