// Build stage (reference spec §4.3): candidate and reference builds in parallel, each in its own fresh work
// dir with the task materialised, through the task's harness. Also the gpu_arch helpers.
// Issue 10: kf's build cache (build_cache.hpp) in front of every build, the task's build budget exported to
// nested compiles, the limit that ended a build named, and failures of our own environment (cache dir,
// work dir, interpreter) typed as infrastructure errors instead of build errors.
#include <time.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>

#include <fmt/format.h>

#include "core/temp_dir.hpp"
#include "harness/isolation.hpp"
#include "kernelfoundry/cache_dir.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/worker_info.hpp"
#include "pipeline/build_cache.hpp"
#include "pipeline/build_internal.hpp"
#include "pipeline/torch_pch.hpp"

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

double MonotonicSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string Seconds(std::chrono::milliseconds ms) { return fmt::format("{:g}", static_cast<double>(ms.count()) / 1000.0); }

// Environment every build child gets from the stage: the build budget (issue 10 fault 6), so nested
// compiles (compile_torch_extension) are governed by the task's build_timeout, not by their own default.
std::map<std::string, std::string> BuildEnv(const HarnessLimits& limits) {
  std::map<std::string, std::string> env;
  env["KF_BUILD_DEADLINE"] =
      fmt::format("{:.3f}", MonotonicSeconds() + static_cast<double>(limits.build_timeout.count()) / 1000.0);
  env["KF_BUILD_TIMEOUT"] = Seconds(limits.build_timeout);
  env["KF_BUILD_INACTIVITY_TIMEOUT"] =
      limits.build_inactivity_timeout ? Seconds(*limits.build_inactivity_timeout) : std::string("0");
  return env;
}

// A build that failed because of OUR environment (issue 10 fault 5): never the candidate's build error.
BuildRun InfrastructureRun(const std::string& what, std::optional<ProcessResult> process = std::nullopt) {
  BuildRun run;
  ProcessResult r = process.value_or(ProcessResult{});
  if (r.returncode == 0) r.returncode = -1;
  r.message = "infrastructure error: " + what;
  run.result.result = std::move(r);
  run.infrastructure_error = what;
  return run;
}

// Names the limit that ended a build (issue 10 fault 6): the task's build_timeout, its inactivity limit, or
// a limit inside the build (compile_torch_extension's timeout argument: build_target exits 124 with a
// "kernelfoundry: build timed out: <limit> of <n> s" line), which becomes a typed wall timeout.
void NameBuildLimit(BuildRun& run, const HarnessLimits& limits, const Json& config) {
  if (!run.result.result) return;
  ProcessResult& r = *run.result.result;
  std::string what;
  if (run.reason == TerminationReason::kWallTimeout) {
    what = fmt::format("the task's build_timeout of {} s ended the build ({})", Seconds(limits.build_timeout),
                       config.is_object() && config.contains("build_timeout")
                           ? "config.yaml build_timeout"
                           : "the default; set build_timeout in config.yaml");
  } else if (run.reason == TerminationReason::kInactivity && limits.build_inactivity_timeout) {
    what = fmt::format("no build output for {} s (config.yaml build_output_inactivity_timeout)",
                       Seconds(*limits.build_inactivity_timeout));
  } else if (run.reason == TerminationReason::kExited && r.returncode == 124) {
    static constexpr std::string_view kMarker = "kernelfoundry: build timed out: ";
    const std::string out = r.stderr_text + "\n" + r.stdout_text;
    if (size_t at = out.find(kMarker); at != std::string::npos) {
      size_t end = out.find('\n', at);
      what = "compile_torch_extension's " +
             out.substr(at + kMarker.size(), end == std::string::npos ? std::string::npos : end - at - kMarker.size()) +
             " ended the build";
      run.reason = TerminationReason::kWallTimeout;
    }
  }
  if (!what.empty()) r.message = "Build timed out: " + what + "\n" + r.message.value_or("");
}

BuildRun FromCache(const build_cache::Cache& cache, const std::string& key, const BuildResult& hit) {
  BuildRun run;
  run.result = hit;
  ProcessResult& r = *run.result.result;
  const std::string stored = cache.StoredAt(key);
  r.message = r.message.value_or("") + " (kf build cache: the identical build of " + (stored.empty() ? "earlier" : stored) +
              ", key " + key.substr(0, 16) + ")";
  if (!r.output_data || !r.output_data->is_object()) r.output_data = Json::object();
  (*r.output_data)["build_cache"] = Json{{"hit", true}, {"key", key}, {"stored_at", stored}};
  return run;
}

BuildRun BuildOne(const Harness& harness, const Task& task, BuildTarget target, const std::string& arch_list,
                  const EvaluateOptions& options, std::vector<fs::path>* kept) {
  const Phase phase = target == BuildTarget::kCandidate ? Phase::kBuildCandidate : Phase::kBuildReference;
  const HarnessLimits limits = HarnessLimits::FromConfig(task.config);
  auto emit = [&](BuildRun run) {
    run.result.worker_info = GetWorkerInfo(harness.Name());
    if (options.progress) {
      std::string note;
      if (!run.result.Ok()) note = run.result.result && run.result.result->message ? *run.result.result->message : "";
      options.progress(PhaseEvent{phase, BuildTargetName(target), arch_list, true, run.result.Ok(), run.wall_s, note});
    }
    return run;
  };

  // ---- kf's build cache (issue 10 fault 2): keyed by everything the compile can read ----
  std::optional<build_cache::Cache> cache;
  std::string key;
  build_cache::Cache::Lock lock;
  // One cache directory for the build cache and the precompiled torch headers (torch_pch.hpp).
  const bool use_pch = torch_pch::Enabled();
  const std::optional<CacheDirChoice> cache_dir =
      build_cache::Enabled() || use_pch ? std::optional<CacheDirChoice>(ResolveCacheDir()) : std::nullopt;
  if (build_cache::Enabled()) {
    if (!cache_dir->usable()) {
      if (options.progress) options.progress(PhaseEvent{phase, BuildTargetName(target), arch_list, false, false, 0, ""});
      return emit(InfrastructureRun("the cache directory (" + cache_dir->source + ") is not usable: " + cache_dir->problem));
    }
    cache.emplace(cache_dir->path / "builds" / "v1");
    key = build_cache::BuildKey(task, target, arch_list, harness.Name(), build_cache::ToolchainFingerprint(harness.Name()));
    if (auto hit = cache->Lookup(key)) {
      if (options.progress) options.progress(PhaseEvent{phase, BuildTargetName(target), arch_list, false, false, 0, ""});
      return emit(FromCache(*cache, key, *hit));
    }
  }

  std::optional<TempDir> dir;
  BuildRequest req;
  try {
    dir.emplace(options.work_root, std::string("kf_build_") + BuildTargetName(target) + "_", options.keep_workdir);
    if (options.keep_workdir) kept->push_back(dir->path());
    req.work_dir = dir->path();
    req.task_dir = dir->path() / "task_data";
    task.task_data.ToDisk(req.task_dir);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kIO) throw;  // kUnsafe / kLimit: the task's own problem
    if (options.progress) options.progress(PhaseEvent{phase, BuildTargetName(target), arch_list, false, false, 0, ""});
    return emit(InfrastructureRun(std::string("cannot prepare the build's work directory: ") + e.what()));
  }
  req.target = target;
  req.gpu_arch = arch_list;
  req.hyperparameters = task.hyperparameters;
  req.limits = limits;
  req.on_line = options.on_output_line;
  req.stop = options.stop;
  DeviceSlots& slots = options.slots ? *options.slots : ProcessDeviceSlots();
  DeviceSlots::Lease lease = slots.ForBuild(options.stop);
  if (!lease.held()) return CanceledBuild(req.task_dir);
  if (options.progress) options.progress(PhaseEvent{phase, BuildTargetName(target), arch_list, false, false, 0, ""});
  if (cache) {
    // One compile per key: a concurrent build of the same key finishes first, then we find its entry.
    lock = cache->Acquire(key, limits.build_timeout + std::chrono::seconds(30));
    if (auto hit = cache->Lookup(key)) return emit(FromCache(*cache, key, *hit));
  }
  req.env = BuildEnv(limits);  // the deadline counts from now
  // Precompiled torch headers (torch_pch.hpp): the child may use published ones and asks for missing ones.
  std::optional<fs::path> pch_root;
  const fs::path pch_requests = req.work_dir / "kf_pch_requests";
  std::string pch_unusable;
  if (use_pch && cache_dir->usable()) {
    pch_root = torch_pch::RootForChildren(cache_dir->path, &pch_unusable);
    if (pch_root) {
      torch_pch::AddBuildEnv(req.env, *pch_root, pch_requests);
      req.readable.push_back(*pch_root);  // read-only to the child (issue 25: it reads nothing else of the cache)
    }
  }
  BuildRun run;
  try {
    run = harness.Build(req);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kIO) throw;
    return emit(InfrastructureRun(std::string("cannot write the build's inputs: ") + e.what()));
  }
  run.task_dir = req.task_dir;
  if (run.reason == TerminationReason::kSpawnFailed) {
    const std::string why = run.result.result ? run.result.result->message.value_or("") : "";
    return emit(InfrastructureRun("the build could not be started: " + why, run.result.result));
  }
  NameBuildLimit(run, limits, task.config);
  if (!pch_unusable.empty() && run.result.result) {
    run.result.result->stdout_text += "\nkf: precompiled torch headers not used: " + pch_unusable + "\n";
  }
  if (pch_root && run.reason == TerminationReason::kExited && run.result.result) {
    // Built after the compile, still under the build slot (never beside a timed phase).
    for (const std::string& note : torch_pch::BuildRequested(*pch_root, pch_requests, limits.build_timeout,
                                                            options.stop)) {
      ProcessResult& r = *run.result.result;
      r.stdout_text += (r.stdout_text.empty() || r.stdout_text.back() == '\n' ? "" : "\n") + ("kf: " + note + "\n");
    }
  }
  if (cache && run.reason == TerminationReason::kExited && run.result.Ok()) {
    if (std::string problem = cache->Store(key, run.result); !problem.empty()) {
      run.result.result->message = run.result.result->message.value_or("") + " (not cached: " + problem + ")";
    }
  }
  return emit(std::move(run));
}

}  // namespace

std::optional<EvalResult> InfrastructureFailure(const BuildStageResult& builds) {
  for (const auto* b : {&builds.candidate, &builds.reference}) {
    if (*b && (*b)->infrastructure_error) {
      EvalResult r = InfrastructureErrorResult(*(*b)->infrastructure_error, (*b)->result.result);
      if ((*b)->result.worker_info) r.metadata["compile_worker_info"] = *(*b)->result.worker_info;
      return r;
    }
  }
  return std::nullopt;
}

EvalResult InfrastructureErrorResult(const std::string& what, const std::optional<ProcessResult>& process) {
  EvalResult r;
  r.status = EvalStatus::kInfrastructureError;
  r.perf_score = PerfScoreFor(r.status);
  r.status_detail = what;
  r.eval_log = "Infrastructure error (the evaluator's environment failed; this says nothing about the "
               "candidate): " + what + "\n";
  if (process && !(process->stdout_text.empty() && process->stderr_text.empty())) {
    r.eval_log += process->stdout_text + "\n" + process->stderr_text + "\n";
  }
  return r;
}

namespace {

// One tree limit as the verdict records it: "17.6 GiB (cgroup v1)", "256 MiB (cgroup v2)", "4096 tasks (cgroup v2)",
// "none", or the
// value with "not applied: …" when no writable cgroup has the controller (the run then went without it).
std::string DescribeTreeLimit(std::optional<uint64_t> value, TreeLimit which) {
  if (!value) return "none";
  const double bytes = static_cast<double>(*value);
  const std::string amount = which == TreeLimit::kProcesses   ? fmt::format("{} task{}", *value, *value == 1 ? "" : "s")
                             : bytes >= double(uint64_t{1} << 30) ? fmt::format("{:.1f} GiB", bytes / double(uint64_t{1} << 30))
                                                                  : fmt::format("{:.0f} MiB", bytes / double(uint64_t{1} << 20));
  const std::string how = CgroupLimitMechanism(which);
  if (how.empty()) {
    return amount + " not applied: no writable " + (which == TreeLimit::kMemory ? "memory" : "pids") + " cgroup";
  }
  return amount + " (" + how + ")";
}

}  // namespace

void NoteIsolation(EvalResult& result, const HarnessLimits* limits) {
  ChildIsolation iso;
  try {
    iso = DescribeChildIsolation();
  } catch (const Error& e) {
    iso.mode = "error";
    iso.filesystem = iso.privileges = iso.seccomp = std::string("unknown: ") + e.what();
  }
  result.isolation = iso.ToJson();
  std::vector<std::string> notes;
  if (limits != nullptr) {
    const std::string memory = DescribeTreeLimit(limits->memory_limit_bytes, TreeLimit::kMemory);
    const std::string processes = DescribeTreeLimit(limits->process_limit, TreeLimit::kProcesses);
    result.isolation["limits"] = {{"memory", memory}, {"processes", processes}};
    for (const auto& [name, text] : {std::pair{"memory limit", &memory}, std::pair{"process limit", &processes}}) {
      if (text->find("not applied") != std::string::npos) {
        notes.push_back(std::string(name) + " of build and test runs: " + *text);
      }
    }
  }
  if (iso.Complete() && notes.empty()) return;
  if (iso.mode == "off" || iso.filesystem.rfind("landlock", 0) != 0) {
    notes.push_back("filesystem isolation of build and test children: " +
                    (iso.mode == "off" ? iso.Summary() : iso.filesystem) +
                    " (candidate code could write outside its work dir and read what kf's user can)");
  }
  if (iso.mode != "off" && iso.seccomp.rfind("seccomp filter", 0) != 0) {
    notes.push_back("system-call filter of build and test children: " + iso.seccomp);
  }
  if (iso.mode != "off" && iso.privileges.rfind("uid ", 0) != 0) {
    notes.push_back("privileges of build and test children: " + iso.privileges);
  }
  for (const std::string& note : notes) {
    result.eval_log += "\nNote: " + note + "\n";
    result.status_detail += (result.status_detail.empty() ? "" : "; ") + note;
  }
}

BuildPlan PlanBuilds(const Task& task, const HarnessDescriptor& kind, bool test_candidate, bool test_reference,
                     std::string arch_list) {
  BuildPlan plan;
  plan.candidate = (test_candidate || (test_reference && kind.reference_uses_candidate_build)) && task.has_build_step;
  plan.reference = test_reference && task.has_reference_build_step;
  plan.arch_list = std::move(arch_list);
  return plan;
}

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
