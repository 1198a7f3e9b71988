// kf validate — checks a task package's structure and lists EVERY problem (the reference's validate()
// stops at the first): task.py, conftest.py, at least one correctness and one performance test (collected
// with pytest), an EVOLVE block, task_name and job_name in the config.
//
//   kf validate TASK [--json] [--run [--gpu-arch A] [--db PATH] [--no-store] [--keep-workdir]]
// Exit 0 when valid, 3 when invalid (problems on stdout), other codes for unreadable input.
//
// --run: after ValidateStructure() reported no problem, RunReferenceCheck (cli/run_common.hpp) builds and
// tests the reference (`--ref`) and reports pass/fail: exit 0 when it passes its own tests, 1 otherwise.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"
#include "cli/run_common.hpp"

namespace kf::cli {
namespace {

struct ValidateOptions {
  std::string task;
  bool json = false;
  bool run = false;           // --run: also build and test the reference (RunReferenceCheck, run_common.hpp)
  ValidateRunOptions run_options;
};

int RunValidate(const ValidateOptions& o) {
  Task task;
  std::vector<std::string> problems = ValidateStructure(o.task, &task);
  if (o.json) {
    Json out = Json::object();
    out["task"] = o.task;
    out["valid"] = problems.empty();
    out["problems"] = problems;
    std::printf("%s\n", DumpJson(out, 2).c_str());
  } else if (problems.empty()) {
    std::printf("%s: valid (%zu correctness test(s), %zu performance test(s))\n", o.task.c_str(),
                task.correctness_tests.size(), task.profile_tests.size());
  } else {
    std::printf("%s: invalid, %zu problem(s):\n", o.task.c_str(), problems.size());
    for (const std::string& p : problems) std::printf("  - %s\n", p.c_str());
  }
  if (!problems.empty()) return kExitBadInput;
  if (o.run) return RunReferenceCheck(task, o.run_options);
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("validate", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* cmd = app.add_subcommand("validate", "Check a task's structure and list every problem (exit 3 if invalid)");
  cmd->add_option("TASK", o->task, "Task package (directory or archive) or encoded task (.json, - for stdin)")
      ->required();
  cmd->add_flag("--json", o->json, "Print {\"task\", \"valid\", \"problems\"} as JSON");
  cmd->add_flag("--run", o->run, "Also build and test the reference (--ref) and report pass/fail (exit 1 on fail)");
  cmd->add_option("--gpu-arch", o->run_options.gpu_arch, "With --run: override config gpu_arch");
  cmd->add_option("--db", o->run_options.db, "With --run: results database (default $KF_DB, else runs/kernels.sqlite3)");
  cmd->add_flag("--no-store", [o](int64_t) { o->run_options.store = false; }, "With --run: do not write to the database");
  cmd->add_flag("--keep-workdir", o->run_options.keep_workdir, "With --run: keep the work directories");
  cmd->callback([o, exit_code]() { *exit_code = RunValidate(*o); });
});

}  // namespace kf::cli
