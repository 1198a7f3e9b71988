// The reference's Celery task bodies on our stages (reference spec §4.3 build, §4.4 test, §5.2 shapes),
// and the job child process that runs them for a worker slot.
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/verdict_cache.hpp"
#include "kernelfoundry/worker.hpp"
#include "kernelfoundry/worker_info.hpp"
#include "worker/gated_harness.hpp"
#include "worker/job_runner.hpp"

namespace kf {

namespace {

bool ConfigBool(const Json& config, const char* key, bool fallback) {
  if (!config.is_object() || !config.contains(key) || config[key].is_null()) return fallback;
  if (!config[key].is_boolean()) {
    throw Error(ErrorKind::kInvalidArgument, "expected true or false, got " + DumpJson(config[key]), "config", key);
  }
  return config[key].get<bool>();
}

std::string JoinArchs(const std::vector<std::string>& archs) {
  std::string out;
  for (size_t i = 0; i < archs.size(); ++i) out += (i ? "," : "") + archs[i];
  return out;
}

// The archs named by config gpu_arch (a string, as the reference requires).
std::vector<std::string> ConfigArchs(const Task& task) {
  if (!task.config.is_object() || !task.config.contains("gpu_arch") || !task.config["gpu_arch"].is_string()) {
    throw Error(ErrorKind::kInvalidArgument, "config gpu_arch must be a string such as \"cpu\" or \"lnl\"",
                "encoded task", "config.gpu_arch");
  }
  std::vector<std::string> archs = SplitGpuArchs(task.config["gpu_arch"].get<std::string>());
  if (archs.empty()) throw Error(ErrorKind::kInvalidArgument, "config gpu_arch names no arch", "encoded task", "config.gpu_arch");
  return archs;
}

Task DecodeTaskArg(const Json& args) {
  if (!args.is_array() || args.empty() || !args[0].is_object()) {
    throw Error(ErrorKind::kInvalidArgument, "expected args (encoded_task,) with the encoded Task as a map", "",
                "args[0]");
  }
  return Task::Decode(args[0]);
}

// The harness a body runs: the context's (tests) or the task's, behind the worker's device gate when there is
// one. With a gate, the stages get a private DeviceSlots (the gate does the cross-job exclusion; taking the
// same shared slots twice could deadlock behind a waiting writer).
struct BodyHarness {
  std::unique_ptr<Harness> own;
  std::optional<worker_internal::GatedHarness> gated;
  DeviceSlots private_slots;
  const Harness* harness = nullptr;

  BodyHarness(const Task& task, const TaskBodyContext& ctx, EvaluateOptions& options) {
    harness = ctx.harness;
    if (harness == nullptr) {
      own = MakeHarness(task);
      harness = own.get();
    }
    if (ctx.devices != nullptr) {
      gated.emplace(*harness, *ctx.devices);
      harness = &*gated;
      options.slots = &private_slots;
    }
  }
};

// {"kf_verdict": {status, detail}} added to a result's output_data (see RunTaskBody).
void AddVerdict(std::optional<ProcessResult>& pr, const std::optional<Classification>& verdict) {
  if (!pr || !verdict) return;
  if (!pr->output_data || !pr->output_data->is_object()) pr->output_data = Json::object();
  (*pr->output_data)["kf_verdict"] =
      Json{{"status", std::string(EvalStatusName(verdict->status))}, {"detail", verdict->detail}};
}

Json Build(const Json& args, const TaskBodyContext& ctx) {
  Task task = DecodeTaskArg(args);
  const std::string arch_list = JoinArchs(ConfigArchs(task));
  const HarnessDescriptor& kind = HarnessDescriptorFor(task.config, "encoded task");
  const bool test_custom = ConfigBool(task.config, "test_custom", true);
  const bool test_reference = ConfigBool(task.config, "test_reference", true);
  EvaluateOptions options;
  options.work_root = ctx.work_root;
  options.stop = ctx.stop;
  BodyHarness h(task, ctx, options);
  BuildStageResult r = RunBuildStage(*h.harness, task, PlanBuilds(task, kind, test_custom, test_reference, arch_list),
                                     options);
  // A failed build says how its process ended (kf clients read it instead of parsing the message).
  auto annotate = [](const std::optional<BuildRun>& run, std::optional<BuildResult>& stored) {
    if (!run || !stored || stored->Ok() || !stored->result) return;
    ProcessResult& pr = *stored->result;
    if (!pr.output_data || !pr.output_data->is_object()) pr.output_data = Json::object();
    (*pr.output_data)["kf_termination"] = TerminationReasonName(run->reason);
  };
  annotate(r.candidate, task.build_result);
  annotate(r.reference, task.build_result_reference);
  return task.Encode();
}

// The value of a test body from its stage result: {variant: TestResult} merged over the archs, each run's
// output_data holding the typed verdict (kf_verdict).
Json TestValue(TestStageResult& r, const std::vector<TestVariant>& variants) {
  Json out = Json::object();
  for (const TestVariant& v : variants) {
    std::vector<std::pair<std::string, TestResult>> per_arch;
    for (auto& [arch, runs] : r.per_arch) {
      for (auto& [key, run] : runs) {
        if (key != v.key) continue;
        TestResult result = run.result;
        AddVerdict(result.correctness_result, run.correctness);
        AddVerdict(result.performance_result, run.performance);
        per_arch.emplace_back(arch, std::move(result));
      }
    }
    if (!per_arch.empty()) out[v.key] = TestResult::Merge(per_arch).Encode();
  }
  return out;
}

Json Test(const Json& args, const TaskBodyContext& ctx, Json& cached) {
  Task task = DecodeTaskArg(args);
  std::vector<std::string> archs = ConfigArchs(task);
  if (archs.size() > 1) {
    for (const std::string& a : archs) {
      if (ctx.queue == celery::TestQueueName(a)) archs = {a};
    }
  }
  const bool test_custom = ConfigBool(task.config, "test_custom", true) && !task.test_result;
  // The reference's worker default is false: its clients cache the reference's result.
  const bool test_reference = ConfigBool(task.config, "test_reference", false) && !task.test_result_reference;
  std::vector<TestVariant> variants = MakeTestVariants(task, test_custom, test_reference);
  if (variants.empty()) return Json::object();
  auto run = [&]() -> std::pair<Json, TestStageResult> {
    EvaluateOptions options;
    options.work_root = ctx.work_root;
    options.stop = ctx.stop;
    BodyHarness h(task, ctx, options);
    TestStageResult r = RunTestStage(*h.harness, task, variants, archs, options);
    Json value = TestValue(r, variants);
    if (ctx.stop.stop_requested()) r.per_arch.clear();  // a stopped body is never stored (nothing ran to the end)
    return {std::move(value), std::move(r)};
  };
  if (!ctx.verdict_cache || ctx.harness != nullptr) return run().first;
  // The verdict cache (record module): an identical earlier body on this machine returns its stored value.
  TestBodyValue v = TestThroughVerdictCache(TestStageCacheKey(task, archs, test_custom, test_reference), run);
  cached = std::move(v.cached);
  return std::move(v.value);
}

Json Sleep(const Json& args, const Json& kwargs, const TaskBodyContext& ctx) {
  Json duration = args.size() > 0 ? args[0] : kwargs.value("duration", Json(nullptr));
  Json message = args.size() > 1 ? args[1] : kwargs.value("message", Json(""));
  if (!duration.is_number()) {
    throw Error(ErrorKind::kInvalidArgument, "expected (duration: float, message: str)", "", "args[0]");
  }
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(duration.get<double>()));
  while (std::chrono::steady_clock::now() < until && !ctx.stop.stop_requested()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return message;
}

}  // namespace

bool IsRegisteredTask(std::string_view task_name) {
  return task_name == celery::kBuildTaskName || task_name == celery::kTestTaskName ||
         task_name == celery::kSleepTaskName;
}

TaskBodyResult RunTaskBody(std::string_view task_name, const Json& args, const Json& kwargs,
                           const TaskBodyContext& context) {
  TaskBodyResult out;
  try {
    if (task_name == celery::kBuildTaskName) {
      out.result = Build(args, context);
    } else if (task_name == celery::kTestTaskName) {
      out.result = Test(args, context, out.cached);
    } else if (task_name == celery::kSleepTaskName) {
      out.result = Sleep(args, kwargs, context);
    } else {
      out.failure = TaskFailure{"NotRegistered", "celery.exceptions", std::string(task_name)};
    }
  } catch (const Error& e) {
    const bool bad_input = e.kind() == ErrorKind::kParse || e.kind() == ErrorKind::kInvalidArgument ||
                           e.kind() == ErrorKind::kNotFound || e.kind() == ErrorKind::kUnsafe;
    out.failure = TaskFailure{bad_input ? "ValueError" : "RuntimeError", "builtins",
                              std::string("kf: ") + std::string(ErrorKindName(e.kind())) + ": " + e.what()};
  } catch (const std::exception& e) {
    out.failure = TaskFailure{"RuntimeError", "builtins", std::string("kf: internal error: ") + e.what()};
  }
  return out;
}

namespace {

// The job process's side of the worker's device gate: lease requests go to the worker as frames on the
// answer pipe, grants come back on stdin (read by RunWorkerChild's loop, which calls Granted).
class ChildGate final : public DeviceGate {
 public:
  ChildGate(int fd, std::mutex& write_mu) : fd_(fd), write_mu_(write_mu) {}

  std::unique_ptr<Lease> Acquire(DeviceUse use, const std::string& arch, const std::stop_token& stop) override {
    auto promise = std::make_shared<std::promise<void>>();
    std::future<void> granted = promise->get_future();
    int64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = ++next_;
      pending_[id] = promise;
    }
    Send(Json{{"lease", Json{{"id", id}, {"use", DeviceUseName(use)}, {"arch", arch}}}});
    while (granted.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
      if (!stop.stop_requested()) continue;
      {
        std::lock_guard<std::mutex> lock(mu_);
        pending_.erase(id);
      }
      Send(Json{{"release", id}});  // the worker drops the request (or the grant that crossed it)
      return nullptr;
    }
    return std::make_unique<Held>(*this, id);
  }

  /// A {"granted": id} frame from the worker.
  void Granted(int64_t id) {
    std::shared_ptr<std::promise<void>> p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(id);
      if (it == pending_.end()) return;  // given up already; its release is on the way
      p = std::move(it->second);
      pending_.erase(it);
    }
    p->set_value();
  }

 private:
  struct Held final : Lease {
    Held(ChildGate& g, int64_t i) : gate(g), id(i) {}
    ~Held() override { gate.Send(Json{{"release", id}}); }
    ChildGate& gate;
    int64_t id;
  };
  void Send(const Json& frame) {
    std::lock_guard<std::mutex> lock(write_mu_);
    (void)worker_internal::WriteFrame(fd_, frame);
  }

  int fd_;
  std::mutex& write_mu_;
  std::mutex mu_;
  int64_t next_ = 0;
  std::map<int64_t, std::shared_ptr<std::promise<void>>> pending_;
};

}  // namespace

int RunWorkerChild(const Harness* harness) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::signal(SIGPIPE, SIG_IGN);
  // Answers go to the original stdout; anything else printed by this process goes to stderr.
  const int answers = ::dup(1);
  ::dup2(2, 1);
  std::mutex write_mu;
  ChildGate gate(answers, write_mu);
  std::thread([] { GetWorkerInfo(); }).detach();  // gathered once per process; warm it before the first job
  while (true) {
    std::optional<Json> request = worker_internal::ReadFrame(0);
    if (!request) return 0;  // the worker closed the lifeline while idle
    if (!request->is_object() || !request->contains("task")) continue;  // a stop or grant that came too late
    const int done = ::eventfd(0, EFD_CLOEXEC);
    std::stop_source stop;
    Json answer;
    std::thread job([&] {
      TaskBodyContext ctx = worker_internal::ContextFor(*request);
      ctx.stop = stop.get_token();
      ctx.devices = &gate;
      ctx.harness = harness;
      answer = worker_internal::AnswerFor(
          RunTaskBody((*request)["task"].get<std::string>(), (*request)["args"], (*request)["kwargs"], ctx));
      const uint64_t one = 1;
      (void)!::write(done, &one, sizeof one);
    });
    while (true) {
      pollfd p[2] = {{0, POLLIN, 0}, {done, POLLIN, 0}};
      if (::poll(p, 2, -1) <= 0) continue;
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        std::optional<Json> frame;
        try {
          frame = worker_internal::ReadFrame(0);
        } catch (const Error&) {
        }
        // EOF (or a torn frame): the worker died. Die too; the runners' shepherds see us go and kill the
        // candidate's process trees.
        if (!frame) ::_exit(137);
        if (frame->contains("granted") && (*frame)["granted"].is_number_integer()) {
          gate.Granted((*frame)["granted"].get<int64_t>());
        } else if (frame->contains("stop")) {
          stop.request_stop();
        }
        continue;
      }
      if (p[1].revents & POLLIN) break;
    }
    job.join();
    ::close(done);
    std::lock_guard<std::mutex> lock(write_mu);
    if (!worker_internal::WriteFrame(answers, answer)) return 0;
  }
}

}  // namespace kf
