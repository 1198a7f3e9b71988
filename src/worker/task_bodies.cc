// The reference's Celery task bodies on our stages (reference spec §4.3 build, §4.4 test, §5.2 shapes),
// and the job child process that runs them for a worker slot.
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/worker.hpp"
#include "kernelfoundry/worker_info.hpp"
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

Json Build(const Json& args, const TaskBodyContext& ctx) {
  Task task = DecodeTaskArg(args);
  const std::string arch_list = JoinArchs(ConfigArchs(task));
  std::unique_ptr<Harness> harness = MakeHarness(task);
  const bool test_custom = ConfigBool(task.config, "test_custom", true);
  const bool test_reference = ConfigBool(task.config, "test_reference", true);
  const bool build_candidate =
      task.has_build_step && (test_custom || (test_reference && harness->ReferenceUsesCandidateBuild()));
  const bool build_reference = task.has_reference_build_step && test_reference;
  EvaluateOptions options;
  options.work_root = ctx.work_root;
  options.stop = ctx.stop;
  RunBuildStage(*harness, task, build_candidate, build_reference, arch_list, options);
  return task.Encode();
}

Json Test(const Json& args, const TaskBodyContext& ctx) {
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
  Json out = Json::object();
  if (variants.empty()) return out;
  std::unique_ptr<Harness> harness = MakeHarness(task);
  EvaluateOptions options;
  options.work_root = ctx.work_root;
  options.stop = ctx.stop;
  TestStageResult r = RunTestStage(*harness, task, variants, archs, options);
  for (const auto& [key, result] : r.merged) out[key] = result.Encode();
  return out;
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
      out.result = Test(args, context);
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

int RunWorkerChild() {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::signal(SIGPIPE, SIG_IGN);
  // Answers go to the original stdout; anything else printed by this process goes to stderr.
  const int answers = ::dup(1);
  ::dup2(2, 1);
  std::thread([] { GetWorkerInfo(); }).detach();  // gathered once per process; warm it before the first job
  while (true) {
    std::optional<Json> request = worker_internal::ReadFrame(0);
    if (!request) return 0;  // the worker closed the lifeline while idle
    const int done = ::eventfd(0, EFD_CLOEXEC);
    Json answer;
    std::thread job([&] {
      TaskBodyContext ctx;
      ctx.queue = request->value("queue", "");
      ctx.work_root = request->value("work_root", "");
      answer = worker_internal::AnswerFor(
          RunTaskBody((*request)["task"].get<std::string>(), (*request)["args"], (*request)["kwargs"], ctx));
      const uint64_t one = 1;
      (void)!::write(done, &one, sizeof one);
    });
    while (true) {
      pollfd p[2] = {{0, POLLIN, 0}, {done, POLLIN, 0}};
      if (::poll(p, 2, -1) <= 0) continue;
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        // The worker never writes during a job: this is its death (EOF). Die too; the runners' shepherds
        // see us go and kill the candidate's process trees.
        ::_exit(137);
      }
      if (p[1].revents & POLLIN) break;
    }
    job.join();
    ::close(done);
    if (!worker_internal::WriteFrame(answers, answer)) return 0;
  }
}

}  // namespace kf
