// The shared flow of `kf run` and `kf validate --run`: evaluate a loaded task (kf::LoadTaskForRun), record it
// in the store chosen by --db (kf::OpenStore; the record module's kf::EvaluateWithVerdictCache writes the job,
// tasks, kernels and job_logs rows), and report through an EvaluationReporter (ConsoleReporter, JsonReporter).
#pragma once

#include <optional>
#include <string>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/store.hpp"
#include "kernelfoundry/task.hpp"
#include "kernelfoundry/verdict_cache.hpp"

namespace kf::cli {

/// What to evaluate and where the result goes.
struct RunRequest {
  std::optional<BlockUpdate> candidate;  ///< nullopt = the task's own EVOLVE code
  EvaluateOptions options;               ///< progress / output-line callbacks are set by RunAndReport
  bool output_lines = false;             ///< stream child output lines to the reporter (-v)
  bool reference_check = false;          ///< kf validate --run: VALIDATING/VALIDATED, pass = reference_only
  bool store = true;                     ///< record the run (--no-store: false)
  std::string db;                        ///< --db; empty = kf::DefaultStoreUrl()
  /// Reuse / store verdicts in the verdict cache (kernelfoundry/verdict_cache.hpp); --no-verdict-cache: false.
  /// Never used for a reference check.
  bool verdict_cache = false;
  Lineage lineage;  ///< lineage columns of the kernels row (--parent, --lineage)
};

/// The help text of every verb's --db option (a SQLite path or URL, kf::OpenStore).
inline constexpr const char* kDbOptionHelp =
    "Results database: a SQLite path, sqlite:///path or postgresql://user@host:port/db "
    "(default: $KF_DB, else runs/kernels.sqlite3)";

/// The store URL of a --db value: the value, or kf::DefaultStoreUrl() when empty.
std::string StoreUrlOf(const std::string& db);

/// Opens the store (before anything runs, so a bad --db fails fast), evaluates `task`, records it, reports
/// the context, phases and verdict to `reporter`, and returns the exit code: kExitOk when the candidate is
/// correct (reference check: when the reference passes its own tests), else kExitVerdictFailed (also for
/// a job canceled from outside). With request.verdict_cache, a verdict cache hit is reported (and recorded as a
/// new job whose kernels row holds the stored verdict) without building or testing; a fresh cacheable verdict
/// is stored. Throws kf::Error for unusable input or an unusable store.
int RunAndReport(const Task& task, RunRequest request, EvaluationReporter& reporter);

}  // namespace kf::cli
