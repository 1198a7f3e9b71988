// QueueStageRunner: Evaluate's build and test stages sent to a Celery farm (reference spec §4.2 TaskRunner;
// see farm.hpp).
#include <mutex>

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/scoring.hpp"

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

std::string ExcType(const celery::TaskResult& r) {
  return r.result.is_object() ? r.result.value("exc_type", "") : std::string();
}

std::string Describe(const celery::TaskResult& r) {
  const Json& e = r.result;
  if (!e.is_object()) return r.status;
  const Json& m = e.value("exc_message", Json::array());
  std::string message = m.is_array() && !m.empty() && m[0].is_string() ? m[0].get<std::string>() : DumpJson(m);
  return fmt::format("{} {}: {}", r.status, e.value("exc_type", "?"), message);
}

// Removes output_data[key] and returns it (null when absent); output_data that only held it becomes absent,
// so the stored results look like a local run's.
Json TakeOutputData(std::optional<ProcessResult>& pr, const char* key) {
  if (!pr || !pr->output_data || !pr->output_data->is_object() || !pr->output_data->contains(key)) return nullptr;
  Json value = std::move((*pr->output_data)[key]);
  pr->output_data->erase(key);
  if (pr->output_data->empty()) pr->output_data.reset();
  return value;
}

// A kf worker's typed verdict of a run (output_data "kf_verdict"), removed from the result.
std::optional<Classification> TakeVerdict(std::optional<ProcessResult>& pr) {
  const Json v = TakeOutputData(pr, "kf_verdict");
  if (!v.is_object() || !v.contains("status") || !v["status"].is_string()) return std::nullopt;
  std::optional<EvalStatus> status = EvalStatusFromName(v["status"].get<std::string>());
  if (!status) return std::nullopt;
  return Classification{*status, v.contains("detail") && v["detail"].is_string() ? v["detail"].get<std::string>() : ""};
}

// How the worker's runner ended a build process: a kf worker says so (output_data "kf_termination");
// otherwise recovered from the reference's message words.
TerminationReason BuildReason(std::optional<ProcessResult>& pr) {
  const Json named = TakeOutputData(pr, "kf_termination");
  if (named.is_string()) {
    if (std::optional<TerminationReason> r = TerminationReasonFromName(named.get<std::string>())) return *r;
  }
  if (!pr || !pr->message) return TerminationReason::kExited;
  const std::string& m = *pr->message;
  auto has = [&](const char* s) { return m.find(s) != std::string::npos; };
  if (has("timed out")) return TerminationReason::kWallTimeout;
  if (has("inactivity")) return TerminationReason::kInactivity;
  if (has("could not be started")) return TerminationReason::kSpawnFailed;
  return pr->returncode < 0 ? TerminationReason::kSignaled : TerminationReason::kExited;
}

// The typed verdict of a test the farm did not run to the end (a FAILURE or REVOKED reply).
Classification FarmTestVerdict(const celery::TaskResult& r) {
  const std::string type = ExcType(r);
  const std::string what = "on the farm: " + Describe(r);
  if (r.status == celery::kRevoked) return {EvalStatus::kCanceled, "the test was revoked " + what};
  if (type == "TimeLimitExceeded" || type == "SoftTimeLimitExceeded") {
    return {EvalStatus::kTestTimeout, "the test job hit its time limit " + what};
  }
  if (type == "WorkerLostError") return {EvalStatus::kCrash, "the test job took its worker down " + what};
  return {EvalStatus::kInfrastructureError, "the test could not be run " + what};
}

ProcessResult FarmFailure(const std::string& what, const celery::TaskResult& r) {
  return ProcessResult::Create(-1, "", "", what + " on the farm: " + Describe(r));
}

double Seconds(std::chrono::milliseconds ms) { return static_cast<double>(ms.count()) / 1000; }

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

// The clients a runner sends through: one borrowed client (calls take turns), or a pool opened on demand.
struct QueueStageRunner::Clients {
  CeleryClient* fixed = nullptr;
  std::mutex fixed_mu;
  BrokerFactory connect;
  std::mutex pool_mu;
  std::vector<std::unique_ptr<CeleryClient>> idle;

  template <typename Fn>
  auto With(Fn&& fn) {
    if (fixed != nullptr) {
      std::lock_guard<std::mutex> lock(fixed_mu);
      return fn(*fixed);
    }
    std::unique_ptr<CeleryClient> client;
    {
      std::lock_guard<std::mutex> lock(pool_mu);
      if (!idle.empty()) {
        client = std::move(idle.back());
        idle.pop_back();
      }
    }
    if (!client) client = std::make_unique<CeleryClient>(connect());
    auto result = fn(*client);  // a throw drops the client (its connection may be broken)
    std::lock_guard<std::mutex> lock(pool_mu);
    idle.push_back(std::move(client));
    return result;
  }
};

QueueStageRunner::QueueStageRunner(CeleryClient& client, FarmOptions options)
    : options_(std::move(options)), clients_(std::make_unique<Clients>()) {
  clients_->fixed = &client;
}

QueueStageRunner::QueueStageRunner(BrokerFactory connect, FarmOptions options)
    : options_(std::move(options)), clients_(std::make_unique<Clients>()) {
  if (!connect) throw Error(ErrorKind::kInvalidArgument, "no broker connection", "", "broker");
  clients_->connect = std::move(connect);
}

QueueStageRunner::~QueueStageRunner() = default;

BuildStageResult QueueStageRunner::Build(Task& task, const BuildPlan& plan, const EvaluateOptions& options) {
  BuildStageResult out;
  if (!plan.candidate && !plan.reference) return out;
  Task send = task;
  send.config["test_custom"] = plan.candidate;
  send.config["test_reference"] = plan.reference;
  send.config["gpu_arch"] = plan.arch_list;
  const HarnessLimits limits = HarnessLimits::FromConfig(task.config);
  const double t = Seconds(limits.build_timeout);
  celery::SendOptions so;
  so.queue = OverrideQueue(task, "queue_override_build").value_or(celery::BuildQueueName(Language(task)));
  so.retries = 1;
  so.soft_time_limit = t + 10;
  so.hard_time_limit = t + 30;
  so.content_type = options_.content_type;
  CallOptions call;
  call.timeout = Millis(t + 40);
  call.liveness_interval = options_.liveness_interval;
  call.stop = options.stop;
  call.on_event = [&](const std::string& e) {
    if (options_.on_event) options_.on_event("build: " + e);
  };
  if (options.progress) {
    for (bool ref : {false, true}) {
      if (ref ? plan.reference : plan.candidate) {
        options.progress(PhaseEvent{ref ? Phase::kBuildReference : Phase::kBuildCandidate, ref ? "reference" : "custom",
                                    plan.arch_list, false, false, 0, ""});
      }
    }
  }
  if (options_.on_event) options_.on_event("build: sent to " + so.queue);
  const Clock::time_point t0 = Clock::now();
  celery::TaskResult r = clients_->With([&](CeleryClient& client) {
    return Call(client, celery::kBuildTaskName, Json::array({send.Encode()}), so, call);
  });
  const double wall = SecondsSince(t0);
  const bool canceled = r.status == celery::kRevoked && options.stop.stop_requested();
  std::optional<Task> built;
  if (r.status == celery::kSuccess) {
    try {
      built = Task::Decode(r.result);
    } catch (const Error& e) {
      throw Error(ErrorKind::kIO, std::string("the farm's build worker returned a task that does not decode: ") + e.what(),
                  so.queue, "result");
    }
  } else if (!canceled) {
    // Only a time limit and a worker lost on every delivery are the candidate's doing.
    const std::string type = ExcType(r);
    if (type != "TimeLimitExceeded" && type != "SoftTimeLimitExceeded" && type != "WorkerLostError") {
      throw Error(ErrorKind::kIO, "the farm could not run the build: " + Describe(r), so.queue);
    }
  }
  auto make = [&](bool reference) -> std::optional<BuildRun> {
    if (!(reference ? plan.reference : plan.candidate)) return std::nullopt;
    BuildRun run;
    run.wall_s = wall;
    if (built) {
      const std::optional<BuildResult>& br = reference ? built->build_result_reference : built->build_result;
      if (!br) return std::nullopt;
      run.result = *br;
      run.reason = BuildReason(run.result.result);
    } else {
      run.result.result = FarmFailure("Build failed", r);
      const std::string type = ExcType(r);
      run.reason = canceled                      ? TerminationReason::kCanceled
                   : type == "WorkerLostError" ? TerminationReason::kSignaled
                                               : TerminationReason::kWallTimeout;
    }
    if (options.progress) {
      std::string note;
      if (!run.result.Ok() && run.result.result && run.result.result->message) note = *run.result.result->message;
      options.progress(PhaseEvent{reference ? Phase::kBuildReference : Phase::kBuildCandidate,
                                  reference ? "reference" : "custom", plan.arch_list, true, run.result.Ok(), wall, note});
    }
    return run;
  };
  out.candidate = make(false);
  out.reference = make(true);
  if (out.candidate) task.build_result = out.candidate->result;
  if (out.reference) task.build_result_reference = out.reference->result;
  return out;
}

TestStageResult QueueStageRunner::Test(const Task& task, const std::vector<TestVariant>& variants,
                                       const std::vector<std::string>& archs, const EvaluateOptions& options) {
  TestStageResult out;
  bool want_custom = false, want_reference = false;
  for (const TestVariant& v : variants) (v.reference ? want_reference : want_custom) = true;
  const HarnessLimits limits = HarnessLimits::FromConfig(task.config);
  const double t = Seconds(limits.test_timeout) * 5;  // correctness + performance + 3 profiler passes
  for (const std::string& arch : archs) {
    if (options.stop.stop_requested()) break;
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
    call.timeout = Millis(t + 40);
    call.liveness_interval = options_.liveness_interval;
    call.stop = options.stop;
    call.on_event = [&](const std::string& e) {
      if (options_.on_event) options_.on_event("test " + arch + ": " + e);
    };
    if (options.progress) {
      for (const TestVariant& v : variants) options.progress(PhaseEvent{Phase::kCorrectness, v.key, arch, false, false, 0, ""});
    }
    if (options_.on_event) options_.on_event("test " + arch + ": sent to " + so.queue);
    const Clock::time_point t0 = Clock::now();
    celery::TaskResult r = clients_->With([&](CeleryClient& client) {
      return Call(client, celery::kTestTaskName, Json::array({send.Encode()}), so, call);
    });
    const double wall = SecondsSince(t0);
    std::vector<std::pair<std::string, VariantRun>> runs;
    for (const TestVariant& v : variants) {
      VariantRun run;
      const bool present = r.status == celery::kSuccess && r.result.is_object() && r.result.contains(v.key) &&
                           !r.result[v.key].is_null();
      if (present) {
        try {
          run.result = TestResult::Decode(r.result[v.key]).value_or(TestResult{});
          run.correctness = TakeVerdict(run.result.correctness_result);
          run.performance = TakeVerdict(run.result.performance_result);
          // Not a kf worker: the correctness run's text decides, as for any result from the wire.
          if (!run.correctness && run.result.correctness_result) {
            run.correctness = ClassifyFromWire(*run.result.correctness_result);
          }
        } catch (const Error& e) {
          run.result = TestResult{};
          const std::string text = std::string("the worker's test result does not decode: ") + e.what();
          run.result.correctness_result = ProcessResult::Create(-1, "", "", text);
          run.correctness = Classification{EvalStatus::kInfrastructureError, text};
          run.performance.reset();
        }
      } else if (r.status == celery::kSuccess) {
        const std::string text = "the worker returned no result for variant " + v.key;
        run.result.correctness_result = ProcessResult::Create(-1, "", "", text);
        run.correctness = Classification{EvalStatus::kInfrastructureError, text};
      } else {
        run.result.correctness_result = FarmFailure("Test failed", r);
        run.correctness = FarmTestVerdict(r);
      }
      run.correctness_s = wall;
      if (options.progress) {
        const bool ok = run.correctness && run.correctness->status == EvalStatus::kCorrect;
        std::string note;
        if (!ok && run.correctness) {
          note = std::string(EvalStatusName(run.correctness->status)) +
                 (run.correctness->detail.empty() ? "" : ": " + run.correctness->detail);
        }
        options.progress(PhaseEvent{Phase::kCorrectness, v.key, arch, true, ok, wall, note});
        if (run.result.performance_result) {
          const bool perf_ok = run.performance ? run.performance->status == EvalStatus::kCorrect
                                               : run.result.performance_result->returncode == 0;
          options.progress(PhaseEvent{Phase::kPerformance, v.key, arch, false, false, 0, ""});
          options.progress(PhaseEvent{Phase::kPerformance, v.key, arch, true, perf_ok, 0,
                                      perf_ok || !run.performance ? "" : run.performance->detail});
        }
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
    if (!per_arch.empty()) out.merged.emplace_back(v.key, TestResult::Merge(per_arch));
  }
  return out;
}

}  // namespace kf
