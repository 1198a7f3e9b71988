// The profiler passes of the test stage (see profile_stage.hpp).
#include "pipeline/profile_stage.hpp"

#include <chrono>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/profile.hpp"

namespace kf {

namespace {

using Traces = std::vector<std::pair<std::string, ProcessResult>>;

// One entry per profiler (or a single "profiler.000" when none could be chosen), each saying `why`.
Traces AllUnavailable(const std::vector<std::string>& profilers, const std::string& why) {
  Traces out;
  if (profilers.empty()) {
    out.emplace_back(TraceKey("profiler", 0), UnavailableTrace("profiler", why));
    return out;
  }
  for (size_t i = 0; i < profilers.size(); ++i) {
    out.emplace_back(TraceKey(profilers[i], i), UnavailableTrace(profilers[i], why));
  }
  return out;
}

}  // namespace

Traces ProfileVariant(const Harness& harness, const Task& task, const TestRequest& request, const VariantRun& run,
                      const EvaluateOptions& options, DeviceSlots& slots, double* wall_s) {
  *wall_s = 0;
  if (!run.correctness || options.stop.stop_requested()) return {};
  const EvalStatus correctness = run.correctness->status;
  if (correctness != EvalStatus::kCorrect && correctness != EvalStatus::kSkipped) return {};
  try {
    if (!ShouldProfileVariant(task.config, request.variant.key, options.profile)) return {};
  } catch (const Error& e) {
    return AllUnavailable({}, e.what());
  }
  const ProfilerSelection selection = SelectProfilers(task.config, request.variant.reference, request.gpu_arch);
  if (!selection.problem.empty()) return AllUnavailable({}, selection.problem);
  ProfileRequest pr;
  try {
    pr.settings = ProfilerSettings::FromConfig(task.config);
  } catch (const Error& e) {
    return AllUnavailable(selection.profilers, e.what());
  }
  if (correctness == EvalStatus::kSkipped) {
    Traces out;
    for (size_t i = 0; i < selection.profilers.size(); ++i) {
      const std::string& name = selection.profilers[i];
      std::optional<std::string> why = ProfilerUnavailableReason(name);
      out.emplace_back(TraceKey(name, i),
                       UnavailableTrace(name, why.value_or("not run: " + run.correctness->detail)));
    }
    return out;
  }
  DeviceSlots::Lease lease = slots.ForTiming(request.gpu_arch, options.stop);
  if (!lease.held()) return {};
  pr.test = request;
  pr.test.expected_tests = task.profile_tests;
  pr.profilers = selection.profilers;
  pr.output_root = request.work_dir;
  if (options.progress) {
    options.progress(PhaseEvent{Phase::kProfile, request.variant.key, request.gpu_arch, false, false, 0, ""});
  }
  const auto t0 = std::chrono::steady_clock::now();
  Traces out;
  try {
    out = RunProfilerPasses(harness, pr);
  } catch (const Error& e) {
    out = AllUnavailable(selection.profilers, std::string("the profiler pass could not start: ") + e.what());
  }
  *wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (options.progress) {
    bool ok = !out.empty();
    std::string note;
    for (const auto& [key, r] : out) {
      if (r.returncode == 0) continue;
      ok = false;
      std::string why = r.message.value_or("");
      note += (note.empty() ? "" : "; ") + key + ": " + why.substr(0, why.find('\n'));
    }
    options.progress(PhaseEvent{Phase::kProfile, request.variant.key, request.gpu_arch, true, ok, *wall_s, note});
  }
  return out;
}

}  // namespace kf
