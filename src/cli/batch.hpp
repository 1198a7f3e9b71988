// Many candidates of one task (kf run --candidates, kf submit): evaluated concurrently, each verdict stored,
// a progress line while they run and a summary table sorted by speedup at the end.
//
// Concurrency: `parallel` evaluations run at once in this process. Locally their builds and correctness runs
// overlap, while every timed phase holds its device alone (the process's DeviceSlots: a timed phase never
// overlaps a build or another timed phase on the same CPU/GPU); with a farm runner the stages run on workers.
// Candidates with the same content are evaluated once when the verdict cache is on (BatchOptions::verdict_cache).
#pragma once

#include <string>
#include <vector>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/store.hpp"
#include "kernelfoundry/task.hpp"

namespace kf::cli {

/// How RunBatch runs and reports.
struct BatchOptions {
  std::string verb = "kf run";  ///< prefix of the progress line
  int parallel = 2;             ///< evaluations in flight at once (>= 1)
  EvaluateOptions evaluate;     ///< for every candidate (a farm's runner is set by the caller)
  Store* store = nullptr;       ///< every verdict is recorded here (null: not stored)
  std::string json;             ///< one JSON entry per candidate to this file ("-": stdout; "": none)
  /// Reuse and store verdicts in the verdict cache (kernelfoundry/verdict_cache.hpp; not with a farm runner).
  /// Copies of one candidate in the batch then run once: the copies wait for the first and reuse its verdict
  /// (a `noisy` one too, which the cache does not keep for later runs; other uncacheable verdicts such as
  /// timeouts are evaluated again).
  bool verdict_cache = false;
  Lineage lineage;  ///< lineage columns of every kernels row (kf run --parent / --lineage)
};

/// The candidate files of --candidates: files as given, directories contribute their regular files sorted by
/// name. Throws kf::Error(kNotFound, field "--candidates") for a path that is neither, kInvalidArgument when
/// nothing is left.
std::vector<std::string> ExpandCandidates(const std::vector<std::string>& args);

/// Evaluates each file's content as the task's EVOLVE block (see the file comment), prints the progress line
/// on stderr (done / running / queued / failed, elapsed, ETA; one updating line on a terminal) and the summary
/// table (sorted by speedup, fastest correct first; then the rest) on stdout (stderr when json is "-").
/// "failed" counts candidates without a verdict (an error of kf or the farm); a negative verdict is a verdict.
/// Returns kExitOk when every candidate got a verdict, else kExitVerdictFailed. Throws kf::Error when a file
/// cannot be read before anything ran.
int RunBatch(const Task& task, const std::vector<std::string>& files, const BatchOptions& options);

}  // namespace kf::cli
