// The profiler passes of the test stage (reference spec §4.4 step 8; kernelfoundry/profile.hpp): which
// variants are profiled, with which profilers, under the device's timing slot. Internal to the pipeline.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernelfoundry/device_slots.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/task.hpp"

namespace kf {

/// The trace_results of one variant on one arch, run after its correctness and performance runs:
///  * nothing when the variant is not profiled (ShouldProfileVariant with options.profile) or its
///    correctness run failed (the reference skips profiling then) or did not run;
///  * when its tests were all skipped (e.g. no device): one entry per selected profiler saying why it did
///    not run (the profiler's own unavailability first, e.g. "no CUDA device");
///  * otherwise RunProfilerPasses while holding `slots.ForTiming(arch)` (a pass is never concurrent with a
///    timed phase on the same device), with progress events of Phase::kProfile.
/// `request` is the variant's test request (its expected tests are replaced by the task's profile_tests).
/// Never throws: configuration problems (profiler_settings, eval_config types, an unknown language) and
/// I/O failures become entries. `*wall_s` receives the passes' wall seconds (0 when none ran).
std::vector<std::pair<std::string, ProcessResult>> ProfileVariant(const Harness& harness, const Task& task,
                                                                  const TestRequest& request, const VariantRun& run,
                                                                  const EvaluateOptions& options, DeviceSlots& slots,
                                                                  double* wall_s);

}  // namespace kf
