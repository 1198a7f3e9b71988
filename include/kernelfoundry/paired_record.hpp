// The verdict of paired timing — one typed record per benchmark and the one policy that judges it.
//
// Contract:
//  * PairedRecord is what a paired measurement of one benchmark says: the speedup and its 95 % interval, the
//    per-round times, the integrity evidence (after-return CPU, the clock cross-check, a re-measurement) and the
//    status. Every producer builds it the same way — the pytest plugin (python/kernelfoundry/paired.py, through
//    kernelfoundry._measure), the native SDK (sdk/task_sdk.hpp) and the merge of several processes' records
//    (pipeline/paired_processes.hpp) — and every consumer reads it typed (the harnesses' JudgeTiming, scoring).
//    JSON is its wire form only (the result fd of a test run, Celery bodies, the store): paired_wire.hpp. This
//    header has no JSON, so the policy compiles into the native SDK's paired.cc without a JSON library.
//  * JudgePaired is the only place that decides correct / noisy / suspicious (grep for kNoisy). The rules, in
//    order, for one measurement (a merged record only gets rule 4; its processes were judged one by one):
//      1. a problem its output/input checks reported decides (input_mutated, output_changed_under_timing);
//      2. suspicious when other threads used more CPU after the candidate's calls returned than after the
//         reference's by more than max(after_return_cpu_ratio × the candidate's timed windows, 5 ms) (work
//         left running in a background thread), or when the loop's clock and a raw clock_gettime syscall
//         disagree by more than 5 % + 50 ms over the measurement (a patched clock);
//      3. a speedup above suspicious_speedup is measured again (new seed and input values): the second
//         measurement's problem decides, else suspicious unless the two speedups agree within [0.75, 1.33];
//      4. noisy when the interval does not reach the target (ReachesTarget), else correct.
//  * Thread-safe (pure functions). Implemented in src/measure/paired.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernelfoundry/paired.hpp"

namespace kf {

/// The status of a benchmark's timing record.
enum class PairedStatus {
  kCorrect,                   ///< the interval reached the target and nothing was caught
  kNoisy,                     ///< correct, but the interval is wider than the target
  kSuspicious,                ///< the timing cannot be trusted (after-return CPU, clock, a speedup that did not hold)
  kInputMutated,              ///< the candidate wrote into its inputs during timed calls
  kOutputChangedUnderTiming,  ///< outputs of timed calls differ from the reference's for the same inputs
  kError,                     ///< the candidate's benchmark failed when it was run for timing
};

/// The wire name: "correct", "noisy", "suspicious", "input_mutated", "output_changed_under_timing", "error".
std::string_view PairedStatusName(PairedStatus status);
/// Inverse of PairedStatusName; nullopt for another name.
std::optional<PairedStatus> PairedStatusFromName(std::string_view name);

/// A benchmark's speedup measured a second time (rule 3 of JudgePaired).
struct PairedRemeasured {
  double speedup = 0;
  MedianCI ci;  ///< ci.median == speedup
  int64_t rounds = 0;
};

/// One benchmark's paired timing (see the file comment). Times in ms per call unless a name says _s.
struct PairedRecord {
  bool paired = true;                   ///< false: the candidate was timed alone (candidate_ms, detail says why)
  PairedStatus status = PairedStatus::kCorrect;
  std::string detail;                   ///< why the status; a producer's note (e.g. how it paired) before judging
  MedianCI speedup;                     ///< median per-round ratio reference / candidate and its 95 % interval
  double rel_half_width = 0;            ///< (high − low) / 2 / median
  int64_t rounds = 0;                   ///< measured rounds (all processes)
  int64_t warmup_rounds = 0;
  int64_t calls_per_sample = 1;
  int64_t checked_rounds = 0;
  std::string stop;                     ///< target | budget | max_rounds | check | processes (informational)
  std::vector<double> candidate_ms;     ///< per round (unpaired: the candidate's trials)
  std::vector<double> reference_ms;
  double elapsed_s = 0;                 ///< the measurement's steady-clock seconds, warm-up included
  double elapsed_raw_s = 0;             ///< the same read with a raw clock_gettime syscall
  double candidate_window_s = 0;        ///< sum of the candidate's timed windows (measured rounds)
  double reference_window_s = 0;
  double candidate_after_cpu_s = 0;     ///< other threads' CPU after the candidate's calls returned
  double reference_after_cpu_s = 0;
  int64_t value_sets = 1;               ///< distinct input value sets the rounds rotated over
  std::optional<PairedRemeasured> remeasured;
  std::string mode;                     ///< "" (call by call) or "test_calls" (custom benchmarks, paired_plugin.py)
  // Several processes (pipeline/paired_processes.hpp); processes == 1 for one.
  int64_t processes = 1;
  std::optional<int64_t> process;       ///< the process whose record won the merge (a caught problem)
  std::vector<int64_t> process_rounds;  ///< measured rounds per process, in order (splits the per-round lists)
  std::vector<MedianCI> process_speedups;  ///< each process's own speedup and interval
  std::vector<PairedRecord> more;       ///< further measurements of the same benchmark in one test
};

/// The record of a finished MeasurePaired: its numbers, and the status of the problem its check reported
/// ("<status>: <detail>", e.g. "input_mutated: input 0 was written …"; a problem without a known status prefix is
/// kError with the whole text). Not judged yet: pass it to JudgePaired.
PairedRecord RecordOf(const PairedResult& result);

/// Measures the pair again with a new seed and new input values (rule 3) and returns RecordOf that measurement.
using PairedRemeasure = std::function<PairedRecord()>;

/// Judges a measured record (see the file comment for the rules) and returns it with status and detail set
/// (a producer's note in `measured.detail` is kept after the verdict's own words) and, after rule 3,
/// `remeasured`. Unpaired records and records whose status a check already decided come back unchanged. Without
/// a `remeasure`, a speedup above suspicious_speedup is suspicious ("could not be measured again").
PairedRecord JudgePaired(PairedRecord measured, const PairedOptions& options, const PairedRemeasure& remeasure = {});

}  // namespace kf
