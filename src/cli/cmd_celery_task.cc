// kf celery-task — runs one of the reference's Celery task bodies here, without a broker: what a Python
// Celery worker of an existing farm can call to run kf's build and test stages (worker.hpp RunTaskBody).
//
//   kf celery-task NAME ARGS.json [-o OUT.json] [--queue QUEUE] [--work-root DIR]
//
// NAME is a reference task name (…build_custom_task.build_custom_task, …test_custom_task.test_custom_task,
// …test_sleep.test_sleep) or its last part (build_custom_task, test_custom_task, test_sleep). ARGS.json holds
// the positional arguments as a JSON array (e.g. [<encoded task>]); "-" = stdin. The output document is
// {"status": "SUCCESS", "result": …} or {"status": "FAILURE", "result": {"exc_type", "exc_message", "exc_module"}}
// (stdout unless -o). Exit 0 on SUCCESS, 1 on FAILURE.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"
#include "kernelfoundry/celery.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/worker.hpp"

namespace kf::cli {
namespace {

struct CeleryTaskOptions {
  std::string name;
  std::string args;
  std::string out;
  std::string queue;
  std::string work_root;
};

std::string FullName(const std::string& name) {
  for (std::string_view full : {celery::kBuildTaskName, celery::kTestTaskName, celery::kSleepTaskName}) {
    const std::string f(full);
    if (name == f || (f.size() > name.size() && f.compare(f.size() - name.size() - 1, std::string::npos, "." + name) == 0)) {
      return f;
    }
  }
  return name;
}

int RunCeleryTask(const CeleryTaskOptions& o) {
  const std::string name = FullName(o.name);
  Json args = ParseJson(ReadInput(o.args), o.args);
  if (!args.is_array()) throw Error(ErrorKind::kInvalidArgument, "expected a JSON array of positional arguments", o.args);
  TaskBodyContext ctx;
  ctx.queue = o.queue;
  ctx.work_root = o.work_root;
  TaskBodyResult r = RunTaskBody(name, args, Json::object(), ctx);
  Json doc = Json::object();
  if (r.result) {
    doc["status"] = "SUCCESS";
    doc["result"] = *r.result;
  } else {
    doc["status"] = "FAILURE";
    doc["result"] = celery::ExceptionInfo(r.failure->exc_type, r.failure->message, r.failure->exc_module);
  }
  const std::string text = DumpJson(doc) + "\n";
  if (o.out.empty() || o.out == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    WriteFileAtomic(o.out, text);
  }
  return r.result ? kExitOk : kExitVerdictFailed;
}

}  // namespace

KF_REGISTER_COMMAND("celery-task", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<CeleryTaskOptions>();
  CLI::App* cmd = app.add_subcommand("celery-task", "Run one of the reference's Celery task bodies here (no broker)");
  cmd->add_option("NAME", o->name, "build_custom_task, test_custom_task or test_sleep (or the full reference name)")
      ->required();
  cmd->add_option("ARGS", o->args, "JSON array of the task's positional arguments (- = stdin)")->required();
  cmd->add_option("-o,--output", o->out, "Write the result document here (default stdout)");
  cmd->add_option("--queue", o->queue, "The queue the task came from (test: selects the arch of a multi-arch config)");
  cmd->add_option("--work-root", o->work_root, "Parent directory of the work directories (default: temp dir)");
  cmd->callback([o, exit_code]() { *exit_code = RunCeleryTask(*o); });
});

}  // namespace kf::cli
