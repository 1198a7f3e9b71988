// Internal helpers shared by the pipeline stages: infrastructure errors (issue 10), the isolation note, the
// test stage's config check.
#pragma once

#include <optional>
#include <string>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/scoring.hpp"

namespace kf {

/// The verdict when OUR environment failed (issue 10 fault 5): status infrastructure_error (perf 0,
/// reference-compatible "error"), detail = `what` (names the path), the log holds the process output if any.
EvalResult InfrastructureErrorResult(const std::string& what, const std::optional<ProcessResult>& process);

/// The first build of `builds` that failed because of our environment, as a verdict; nullopt when none.
std::optional<EvalResult> InfrastructureFailure(const BuildStageResult& builds);

/// Records in a verdict's `isolation` how build and test children were isolated and which tree limits they ran
/// under (`limits`: {"memory", "processes"}: "17.6 GiB (cgroup v1)", "none" or "… not applied: …"), from
/// `limits` (HarnessLimits::FromConfig of the task; nullptr when they could not be read: not recorded). What was
/// NOT applied (issue 10: "the verdict says so") also gets a line in eval_log and a note in status_detail.
void NoteIsolation(EvalResult& result, const HarnessLimits* limits);

}  // namespace kf
