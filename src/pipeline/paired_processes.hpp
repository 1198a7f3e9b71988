// Paired timing repeated in several test processes (eval_config.timing.processes; issue "Trustworthy speed
// signal"). Internal to the pipeline module (used by the test stage).
//
// A process's code and memory layout shifts its speed by a few per cent for its whole life, so the rounds of
// one paired run agree with each other more than with the rounds of the next process: one process's interval
// is right about its rounds and misses that offset (identical sides: ±2 % intervals around 0.96 in one
// process, 1.04 in the next). Running the performance phase in K processes, each with 1/K of the time
// budget, and building the interval at the process level (GroupedMedianCI over the processes) makes the
// offset part of the sampled variance, for every pair: both sides in the test process (a torch extension, the
// usual pytest task) as well as executors. Each process draws its own input values (seed + process index).
#pragma once

#include <cstdint>
#include <vector>

#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/paired_wire.hpp"

namespace kf::paired_processes {

/// The plan of a paired performance phase: what each timed process does and how many run.
struct ProcessPlan {
  /// The loop and verdict knobs (paired_record.hpp). budget_s is the whole phase's loop time (process starts
  /// not counted): each process gets ProcessBudget(); seed is the first process's (process i uses seed + i).
  PairedOptions timing;
  int64_t processes = 4;       ///< timed processes that always run
  int64_t max_processes = 12;  ///< more run while the merged interval misses the target and the budget lasts

  /// Seconds of timing loop per process: budget_s / max_processes (at least 0.5), so that max_processes fit
  /// in the budget. Many short processes beat few long ones: the interval's width is set by the spread between
  /// processes (where each process's buffers lie in memory moved bias_relu fast.cpp by ±2 % per process, more
  /// than 50 rounds of its own noise), divided by √processes and multiplied by Student's t(processes - 1)
  /// (bias_relu fast.cpp, 20 s, 2026-12-03: 3 processes ±2.0–4.7 %, 8 processes ±2.0–2.3 %, 12 ±1.4–1.8 %).
  double ProcessBudget() const;

  /// From the test stage's timing options (eval_config.timing after its caps and checks; where it says nothing, the
  /// defaults a test process uses: kernelfoundry/timing_keys.hpp). Throws kf::Error like PairedOptionsFromJson.
  static ProcessPlan FromJson(const Json& timing_options);
};

/// One benchmark's paired records from K processes merged into one record: the speedup is the median of every
/// round's reference_ms / candidate_ms, the interval GroupedMedianCI with the process as the group, the status
/// JudgePaired's for a merged record (correct, or noisy when the interval misses `options`' target); rounds,
/// warm-up and checked rounds, elapsed and window seconds and the after-return CPU are summed, the per-round
/// lists concatenated; processes = K, process_rounds and process_speedups keep each process's own result. A
/// record that is not a paired correct/noisy one (a caught cheat, an error, an unpaired benchmark) wins instead,
/// unchanged but for processes = K and process (its 0-based index). One record: returned unchanged. Throws
/// kf::Error(kInvalidArgument) for an empty list or per-round lists of different lengths or with values ≤ 0.
PairedRecord MergeRecords(const std::vector<PairedRecord>& records, const PairedOptions& options);

/// K paired performance runs of one candidate (PhaseRun with timing) as one: records merged with MergeRecords,
/// the runtimes lists of both sides (output_data.runtimes) and the outputs (stdout, stderr, under a "timed
/// process i of K" line) concatenated, wall_s summed, the verdict the worst record's status (as the harness
/// judges one run). The first run whose verdict is not in the correct family, or that has no timing, is
/// returned as it is (a failure in any process is the candidate's verdict); records that cannot be merged give
/// the first run with verdict test_error ("protocol error: …"). Throws kf::Error for an empty list.
PhaseRun MergeRuns(std::vector<PhaseRun> runs, const PairedOptions& options);

/// True when the paired performance runs so far need no further process: one of them is not a paired run in
/// the correct family (that run is the verdict), or no benchmark's merged record (MergeRecords) is noisy, or
/// the records cannot be merged (MergeRuns reports that).
bool ReachedTarget(const std::vector<PhaseRun>& runs, const PairedOptions& options);

}  // namespace kf::paired_processes
