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

namespace kf::paired_processes {

/// One benchmark's paired records from K processes (kernelfoundry/paired.py records: "paired", "status",
/// "candidate_ms", "reference_ms" per measured round, …) merged into one record of the same shape: the
/// speedup is the median of every round's reference_ms / candidate_ms, the interval GroupedMedianCI with the
/// process as the group, status "correct" when its half-width is ≤ `target_rel_half_width` of the median and
/// "noisy" otherwise; rounds, warm-up and checked rounds, elapsed_s and the after-return CPU are summed, the
/// per-round lists concatenated; "processes" = K, "process_speedups" and "process_cis" keep each process's
/// own result. A record that is not a paired correct/noisy one (a caught cheat, an error, an unpaired
/// benchmark) wins instead, unchanged but for "processes" = K and "process" (its 0-based index). One record:
/// returned unchanged. Throws kf::Error(kInvalidArgument) for an empty list or per-round lists of different
/// lengths or with values ≤ 0.
Json MergeRecords(const std::vector<Json>& records, double target_rel_half_width, uint64_t seed);

/// K paired performance runs of one candidate (PhaseRun with timing {"paired": {benchmark: record},
/// "conditions"}) as one: records merged with MergeRecords, the runtimes lists of both sides
/// (output_data.runtimes) and the outputs (stdout, stderr, under a "timed process i of K" line) concatenated,
/// wall_s summed, the verdict the worst record's status (as the harness
/// judges one run). The first run whose verdict is not in the correct family, or that has no timing, is
/// returned as it is (a failure in any process is the candidate's verdict); records that cannot be merged give
/// the first run with verdict test_error ("protocol error: …"). Throws kf::Error for an empty list.
PhaseRun MergeRuns(std::vector<PhaseRun> runs, double target_rel_half_width, uint64_t seed);

/// True when the paired performance runs so far need no further process: one of them is not a paired run in
/// the correct family (that run is the verdict), or every benchmark's merged record (MergeRecords) reaches
/// `target_rel_half_width`, or the records cannot be merged (MergeRuns reports that).
bool ReachedTarget(const std::vector<PhaseRun>& runs, double target_rel_half_width, uint64_t seed);

}  // namespace kf::paired_processes
