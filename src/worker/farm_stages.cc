// QueueStageRunner: Evaluate's build and test stages sent to a Celery farm (reference spec §4.2 TaskRunner).
#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/harness.hpp"

namespace kf {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string Language(const Task& task) {
  if (!task.config.is_object() || !task.config.contains("language") || !task.config["language"].is_string()) {
    throw Error(ErrorKind::kInvalidArgument, "the farm's build queue is build_custom_task_<language>: set language",
                "config.yaml", "language");
  }
  return task.config["language"].get<std::string>();
}

// The reference's queue_override_build / queue_override_test config keys win over the derived names.
std::optional<std::string> OverrideQueue(const Task& task, const char* key) {
  if (task.config.is_object() && task.config.contains(key) && task.config[key].is_string() &&
      !task.config[key].get<std::string>().empty()) {
    return task.config[key].get<std::string>();
  }
  return std::nullopt;
}

std::string Describe(const celery::TaskResult& r) {
  const Json& e = r.result;
  if (!e.is_object()) return r.status;
  const Json& m = e.value("exc_message", Json::array());
  std::string message = m.is_array() && !m.empty() && m[0].is_string() ? m[0].get<std::string>() : DumpJson(m);
  return fmt::format("{} {}: {}", r.status, e.value("exc_type", "?"), message);
}

// How the worker's runner ended a process, recovered from the reference's message words.
std::optional<TerminationReason> ReasonFrom(const std::optional<ProcessResult>& pr) {
  if (!pr || !pr->message) return std::nullopt;
  const std::string& m = *pr->message;
  auto has = [&](const char* s) { return m.find(s) != std::string::npos; };
  if (has("Process timed out")) return TerminationReason::kWallTimeout;
  if (has("killed due to inactivity")) return TerminationReason::kInactivity;
  if (has("did not exit within")) return TerminationReason::kEndMarkerGrace;
  if (has("memory limit exceeded")) return TerminationReason::kMemoryLimit;
  if (has("output limit exceeded")) return TerminationReason::kOutputLimit;
  if (has("CPU time limit exceeded")) return TerminationReason::kCpuLimit;
  if (has("process limit exceeded")) return TerminationReason::kProcessLimit;
  if (has("could not be started")) return TerminationReason::kSpawnFailed;
  if (has("terminated by signal")) return TerminationReason::kSignaled;
  return pr->returncode < 0 ? std::optional(TerminationReason::kSignaled) : std::optional(TerminationReason::kExited);
}

PhaseOutcome OutcomeOf(const std::optional<ProcessResult>& pr) {
  if (!pr) return PhaseOutcome::kNotRun;
  if (pr->returncode == 0) return PhaseOutcome::kPassed;
  std::optional<TerminationReason> r = ReasonFrom(pr);
  if (r == TerminationReason::kWallTimeout) return PhaseOutcome::kTimedOut;
  if (r == TerminationReason::kInactivity) return PhaseOutcome::kInactive;
  return pr->returncode == 1 ? PhaseOutcome::kTestsFailed : PhaseOutcome::kError;
}

ProcessResult FarmFailure(const std::string& what, const celery::TaskResult& r) {
  return ProcessResult::Create(-1, "", "", what + " on the farm: " + Describe(r));
}

double Seconds(std::chrono::milliseconds ms) { return static_cast<double>(ms.count()) / 1000; }

}  // namespace

QueueStageRunner::QueueStageRunner(CeleryClient& client, FarmOptions options)
    : client_(client), options_(std::move(options)) {}

BuildStageResult QueueStageRunner::Build(const Harness& /*harness*/, Task& task, bool build_candidate,
                                         bool build_reference, const std::string& arch_list,
                                         const EvaluateOptions& options) {
  BuildStageResult out;
  if (!build_candidate && !build_reference) return out;
  Task send = task;
  send.config["test_custom"] = build_candidate;
  send.config["test_reference"] = build_reference;
  send.config["gpu_arch"] = arch_list;
  const HarnessLimits limits = HarnessLimits::FromConfig(task.config);
  const double t = Seconds(limits.build_timeout);
  celery::SendOptions so;
  const std::optional<std::string> override_queue = OverrideQueue(task, "queue_override_build");
  so.queue = override_queue ? *override_queue : celery::BuildQueueName(Language(task));
  so.retries = 1;
  so.soft_time_limit = t + 10;
  so.hard_time_limit = t + 30;
  so.content_type = options_.content_type;
  CallOptions call;
  call.timeout = std::chrono::milliseconds(static_cast<int64_t>((t + 40) * 1000));
  call.liveness_interval = options_.liveness_interval;
  call.on_event = [&](const std::string& e) {
    if (options_.on_event) options_.on_event("build: " + e);
  };
  if (options.progress) {
    for (bool ref : {false, true}) {
      if (ref ? build_reference : build_candidate) {
        options.progress(PhaseEvent{ref ? Phase::kBuildReference : Phase::kBuildCandidate, ref ? "reference" : "custom",
                                    arch_list, false, false, 0, ""});
      }
    }
  }
  if (options_.on_event) options_.on_event("build: sent to " + so.queue);
  const Clock::time_point t0 = Clock::now();
  celery::TaskResult r = Call(client_, celery::kBuildTaskName, Json::array({send.Encode()}), so, call);
  const double wall = SecondsSince(t0);
  std::optional<Task> built;
  if (r.status == celery::kSuccess) {
    try {
      built = Task::Decode(r.result);
    } catch (const Error& e) {
      r.status = std::string(celery::kFailure);
      r.result = celery::ExceptionInfo("ValueError", std::string("the worker returned a task that does not decode: ") + e.what());
    }
  }
  auto make = [&](bool reference) -> std::optional<BuildRun> {
    if (!(reference ? build_reference : build_candidate)) return std::nullopt;
    BuildRun run;
    run.wall_s = wall;
    if (built) {
      const std::optional<BuildResult>& br = reference ? built->build_result_reference : built->build_result;
      if (!br) return std::nullopt;
      run.result = *br;
    } else {
      run.result.result = FarmFailure("Build failed", r);
    }
    run.reason = ReasonFrom(run.result.result).value_or(TerminationReason::kExited);
    if (options.progress) {
      std::string note;
      if (!run.result.Ok() && run.result.result && run.result.result->message) note = *run.result.result->message;
      options.progress(PhaseEvent{reference ? Phase::kBuildReference : Phase::kBuildCandidate,
                                  reference ? "reference" : "custom", arch_list, true, run.result.Ok(), wall, note});
    }
    return run;
  };
  out.candidate = make(false);
  out.reference = make(true);
  if (out.candidate) task.build_result = out.candidate->result;
  if (out.reference) task.build_result_reference = out.reference->result;
  return out;
}

TestStageResult QueueStageRunner::Test(const Harness& /*harness*/, const Task& task,
                                       const std::vector<TestVariant>& variants, const std::vector<std::string>& archs,
                                       const EvaluateOptions& options) {
  TestStageResult out;
  bool want_custom = false, want_reference = false;
  for (const TestVariant& v : variants) (v.reference ? want_reference : want_custom) = true;
  const HarnessLimits limits = HarnessLimits::FromConfig(task.config);
  const double t = Seconds(limits.test_timeout) * 5;  // correctness + performance + 3 profiler passes
  for (const std::string& arch : archs) {
    Task send = task;
    send.config["gpu_arch"] = arch;
    send.config["test_custom"] = want_custom;
    send.config["test_reference"] = want_reference;
    send.test_result.reset();
    send.test_result_reference.reset();
    celery::SendOptions so;
    so.queue = OverrideQueue(task, "queue_override_test").value_or(celery::TestQueueName(arch));
    so.content_type = options_.content_type;
    CallOptions call;
    call.timeout = std::chrono::milliseconds(static_cast<int64_t>((t + 40) * 1000));
    call.liveness_interval = options_.liveness_interval;
    call.on_event = [&](const std::string& e) {
      if (options_.on_event) options_.on_event("test " + arch + ": " + e);
    };
    if (options.progress) {
      for (const TestVariant& v : variants) options.progress(PhaseEvent{Phase::kCorrectness, v.key, arch, false, false, 0, ""});
    }
    if (options_.on_event) options_.on_event("test " + arch + ": sent to " + so.queue);
    const Clock::time_point t0 = Clock::now();
    celery::TaskResult r = Call(client_, celery::kTestTaskName, Json::array({send.Encode()}), so, call);
    const double wall = SecondsSince(t0);
    std::vector<std::pair<std::string, VariantRun>> runs;
    for (const TestVariant& v : variants) {
      VariantRun run;
      std::optional<TestResult> tr;
      if (r.status == celery::kSuccess && r.result.is_object() && r.result.contains(v.key)) {
        try {
          tr = TestResult::Decode(r.result[v.key]);
        } catch (const Error& e) {
          tr = TestResult{};
          tr->correctness_result =
              ProcessResult::Create(-1, "", "", std::string("the worker's test result does not decode: ") + e.what());
        }
      }
      if (!tr) {
        tr = TestResult{};
        tr->correctness_result = r.status == celery::kSuccess
                                     ? ProcessResult::Create(-1, "", "", "the worker returned no result for variant " + v.key)
                                     : FarmFailure("Test failed", r);
      }
      run.result = std::move(*tr);
      run.correctness = OutcomeOf(run.result.correctness_result);
      run.performance = OutcomeOf(run.result.performance_result);
      if (run.result.correctness_result) run.correctness_stop = ReasonFrom(run.result.correctness_result);
      if (run.result.performance_result) run.performance_stop = ReasonFrom(run.result.performance_result);
      run.correctness_s = wall;
      if (options.progress) {
        std::string note;
        const auto& c = run.result.correctness_result;
        if (c && c->returncode != 0 && c->message) note = *c->message;
        options.progress(PhaseEvent{Phase::kCorrectness, v.key, arch, true, run.correctness == PhaseOutcome::kPassed,
                                    wall, note});
      }
      runs.emplace_back(v.key, std::move(run));
    }
    out.per_arch.emplace_back(arch, std::move(runs));
  }
  for (const TestVariant& v : variants) {
    std::vector<std::pair<std::string, TestResult>> per_arch;
    for (const auto& [arch, runs] : out.per_arch) {
      for (const auto& [key, run] : runs) {
        if (key == v.key) per_arch.emplace_back(arch, run.result);
      }
    }
    out.merged.emplace_back(v.key, TestResult::Merge(per_arch));
  }
  return out;
}

}  // namespace kf
