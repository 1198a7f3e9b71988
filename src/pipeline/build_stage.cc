// Build stage (reference spec §4.3): candidate and reference builds in parallel, each in its own fresh work
// dir with the task materialised, through the task's harness. Also the gpu_arch helpers.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <future>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/worker_info.hpp"
#include "core/temp_dir.hpp"

namespace kf {
namespace fs = std::filesystem;

std::vector<std::string> SplitGpuArchs(std::string_view gpu_arch) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= gpu_arch.size()) {
    size_t comma = gpu_arch.find(',', start);
    std::string_view part = gpu_arch.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                                    : comma - start);
    size_t b = part.find_first_not_of(" \t\r\n");
    if (b != std::string_view::npos) {
      size_t e = part.find_last_not_of(" \t\r\n");
      out.emplace_back(part.substr(b, e - b + 1));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> ResolveGpuArchs(const Task& task, const EvaluateOptions& options) {
  std::string value;
  if (options.gpu_arch) {
    value = *options.gpu_arch;
  } else if (task.config.is_object() && task.config.contains("gpu_arch")) {
    const Json& v = task.config["gpu_arch"];
    if (!v.is_string()) {
      throw Error(ErrorKind::kInvalidArgument, "expected a string such as \"cpu\" or \"lnl,bmg\", got " + DumpJson(v),
                  "config.yaml", "gpu_arch");
    }
    value = v.get<std::string>();
  }
  std::vector<std::string> archs = SplitGpuArchs(value);
  if (archs.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "no GPU architecture given (set gpu_arch in config.yaml or pass --gpu-arch)", "config.yaml",
                "gpu_arch");
  }
  return archs;
}

namespace {

// A build that never started because the evaluation was cancelled while it waited for the host.
BuildRun CanceledBuild(const fs::path& task_dir) {
  BuildRun run;
  run.reason = TerminationReason::kCanceled;
  run.task_dir = task_dir;
  run.result.result = ProcessResult{-9, "", "", std::string("Process canceled"), std::nullopt};
  return run;
}

// Environment every child of an evaluation gets from the stage.
std::map<std::string, std::string> StageEnv() {
  return {{"KF_CACHE_DIR", std::filesystem::absolute(DefaultCacheDir()).string()}};
}

BuildRun BuildOne(const Harness& harness, const Task& task, BuildTarget target, const std::string& arch_list,
                  const EvaluateOptions& options, std::vector<fs::path>* kept) {
  const Phase phase = target == BuildTarget::kCandidate ? Phase::kBuildCandidate : Phase::kBuildReference;
  TempDir dir(options.work_root, std::string("kf_build_") + BuildTargetName(target) + "_", options.keep_workdir);
  if (options.keep_workdir) kept->push_back(dir.path());
  BuildRequest req;
  req.target = target;
  req.work_dir = dir.path();
  req.task_dir = dir.path() / "task_data";
  task.task_data.ToDisk(req.task_dir);
  req.gpu_arch = arch_list;
  req.hyperparameters = task.hyperparameters;
  req.limits = HarnessLimits::FromConfig(task.config);
  req.env = StageEnv();
  req.on_line = options.on_output_line;
  req.stop = options.stop;
  DeviceSlots& slots = options.slots ? *options.slots : ProcessDeviceSlots();
  DeviceSlots::Lease lease = slots.ForBuild(options.stop);
  if (!lease.held()) return CanceledBuild(req.task_dir);
  if (options.progress) options.progress(PhaseEvent{phase, BuildTargetName(target), arch_list, false, false, 0, ""});
  BuildRun run = harness.Build(req);
  run.task_dir = req.task_dir;
  run.result.worker_info = GetWorkerInfo(harness.Name());
  if (options.progress) {
    std::string note;
    if (!run.result.Ok()) note = run.result.result && run.result.result->message ? *run.result.result->message : "";
    options.progress(PhaseEvent{phase, BuildTargetName(target), arch_list, true, run.result.Ok(), run.wall_s, note});
  }
  return run;
}

}  // namespace

BuildStageResult RunBuildStage(const Harness& harness, Task& task, const BuildPlan& plan,
                               const EvaluateOptions& options) {
  BuildStageResult out;
  std::vector<fs::path> kept_candidate, kept_reference;
  // The reference builds in its own thread while the candidate builds in this one (RunProcess is
  // thread-safe; each build has its own tree).
  std::future<BuildRun> reference;
  if (plan.reference) {
    reference = std::async(std::launch::async, [&] {
      return BuildOne(harness, task, BuildTarget::kReference, plan.arch_list, options, &kept_reference);
    });
  }
  std::exception_ptr candidate_error;
  if (plan.candidate) {
    try {
      out.candidate = BuildOne(harness, task, BuildTarget::kCandidate, plan.arch_list, options, &kept_candidate);
    } catch (...) {
      candidate_error = std::current_exception();
    }
  }
  if (reference.valid()) out.reference = reference.get();  // rethrows the reference build's error
  if (candidate_error) std::rethrow_exception(candidate_error);
  if (out.candidate) task.build_result = out.candidate->result;
  if (out.reference) task.build_result_reference = out.reference->result;
  out.kept_dirs = kept_candidate;
  out.kept_dirs.insert(out.kept_dirs.end(), kept_reference.begin(), kept_reference.end());
  return out;
}

BuildStageResult LocalStageRunner::Build(Task& task, const BuildPlan& plan, const EvaluateOptions& options) {
  return RunBuildStage(harness_, task, plan, options);
}

}  // namespace kf
