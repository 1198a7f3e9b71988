// kf validate — checks a task package's structure and lists EVERY problem (the reference's validate()
// stops at the first). It names the package kind and the checks that apply: a pytest task needs task.py,
// conftest.py and at least one correctness and one performance test (collected with pytest); a native task
// (harness: native) needs build commands and its test names under config `tests`; both need an EVOLVE block,
// task_name and job_name in the config.
//
//   kf validate TASK [--json] [--run [--gpu-arch A] [--db PATH|URL] [--no-store] [--keep-workdir]]
// Exit 0 when valid, 3 when invalid (problems on stdout), other codes for unreadable input.
//
// --run: after ValidateStructure() reported no problem, the task is loaded as `kf run` loads it
// (kf::LoadTaskForRun: overrides.yml applied) and its reference alone is built and tested (`--ref`,
// RunAndReport in cli/run_common.hpp); the job goes INIT -> VALIDATING -> VALIDATED. Exit 0 when the reference
// passes its own tests, 1 otherwise. With --json the run's lines go to stderr (stdout stays JSON). When the
// reference passes, the low-signal check follows (LowSignalCheck below): warnings only, the exit code stays.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/console_reporter.hpp"
#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"
#include "cli/run_common.hpp"
#include "cli/validate_json.hpp"

namespace kf::cli {
namespace {

struct ValidateOptions {
  std::string task;
  bool json = false;
  bool run = false;  // --run: also build and test the reference
  std::string gpu_arch;
  bool keep_workdir = false;
  std::string db;
  bool store = true;
};

// The test names of the KF-LOW-SIGNAL[<test>] failures in `log` (kernelfoundry.testing and the task SDK's
// checkers raise them in KF_FAKE_OUTPUT mode), first-seen order, without duplicates.
std::vector<std::string> LowSignalTests(const std::string& log) {
  std::vector<std::string> out;
  const std::string marker = "KF-LOW-SIGNAL[";
  for (size_t at = log.find(marker); at != std::string::npos; at = log.find(marker, at + 1)) {
    const size_t start = at + marker.size();
    const size_t end = log.find(']', start);
    if (end == std::string::npos || end - start > 512) continue;
    std::string name = log.substr(start, end - start);
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  }
  return out;
}

// The low-signal check (issue 9): the reference's correctness tests run twice more, with their value checks
// fed an all-zeros and a constant output (KF_FAKE_OUTPUT); a test whose check accepts such an output cannot
// tell a trivial candidate from a real one (KernelBench's all-zeros problem). Warns per test; never fails the
// validation. Tests that compare values with their own code rather than kernelfoundry.testing / the SDK's
// assert_allclose are not covered, and the report says so.
void LowSignalCheck(const Task& task, const EvaluateOptions& base, std::FILE* out) {
  std::fprintf(out, "low-signal check (correctness tests fed a trivial output):\n");
  bool any = false;
  for (const char* mode : {"zeros", "constant"}) {
    EvaluateOptions options;
    options.gpu_arch = base.gpu_arch;
    options.test_candidate = false;
    options.correctness_only = true;
    options.test_env = {{"KF_FAKE_OUTPUT", mode}};
    Evaluation ev = Evaluate(task, std::nullopt, options);
    const std::vector<std::string> weak = LowSignalTests(ev.result.eval_log);
    if (weak.empty() && ev.result.status != EvalStatus::kReferenceOnly) {
      std::fprintf(out, "  all-%s output: the check run did not complete (%s); nothing to report\n", mode,
                   std::string(EvalStatusName(ev.result.status)).c_str());
      continue;
    }
    for (const std::string& t : weak) {
      std::fprintf(out, "  WARNING: %s passes with an all-%s output\n", t.c_str(), mode);
      any = true;
    }
  }
  if (!any) {
    std::fprintf(out, "  ok: no value check accepts an all-zeros or a constant output (checks made with "
                      "kernelfoundry.testing / the SDK's assert_allclose)\n");
  }
}

// `--run`: the reference's own correctness and performance run, recorded as a VALIDATED job. The task is
// loaded again as `kf run` loads it; stdin ("-", an encoded task: no overrides) cannot be read twice, so the
// task the structure check read is used.
int RunReferenceCheck(const ValidateOptions& o, Task checked) {
  TaskForRun loaded;
  if (o.task == "-") {
    loaded.task = std::move(checked);
  } else {
    loaded = LoadTaskForRunArg(o.task);
  }
  RunRequest request;
  if (!o.gpu_arch.empty()) request.options.gpu_arch = o.gpu_arch;
  request.options.keep_workdir = o.keep_workdir;
  request.reference_check = true;
  request.store = o.store;
  request.db = o.db;
  ConsoleReporter console({.progress = stderr, .verdict = o.json ? stderr : stdout, .reference_check = true});
  const int rc = RunAndReport(loaded.task, request, console);
  if (rc == kExitOk) LowSignalCheck(loaded.task, request.options, o.json ? stderr : stdout);
  return rc;
}

// The package kind and the structural checks that apply to it (Task::Problems implements them).
struct Kind {
  std::string harness;
  std::vector<std::string> checks;
};

Kind KindOf(const Task& task) {
  const Json& h = task.config.is_object() && task.config.contains("harness") ? task.config["harness"] : Json();
  if (h.is_string() && h.get<std::string>() == "native") {
    return {"native", {"config build commands (build: [...] or cmake: true)",
                       "config tests: correctness and performance names", "an EVOLVE block", "task_name and job_name"}};
  }
  return {"pytest", {"task.py and conftest.py at the top level", "correctness and performance tests collected by pytest",
                     "an EVOLVE block", "task_name and job_name"}};
}

int RunValidate(const ValidateOptions& o) {
  Task task;
  std::vector<std::string> problems = ValidateStructure(o.task, &task);
  const Kind kind = KindOf(task);
  if (o.json) {
    Json out = Json::object();
    out["task"] = o.task;
    out["valid"] = problems.empty();
    out["problems"] = problems;
    out["harness"] = kind.harness;
    out["checks"] = kind.checks;
    out["correctness_tests"] = task.correctness_tests;
    out["performance_tests"] = task.profile_tests;
    std::printf("%s\n", DumpJson(out, 2).c_str());
  } else if (problems.empty()) {
    std::printf("%s: valid %s task (%zu correctness test(s), %zu performance test(s))\n", o.task.c_str(),
                kind.harness.c_str(), task.correctness_tests.size(), task.profile_tests.size());
    std::string checks;
    for (const std::string& c : kind.checks) checks += (checks.empty() ? "" : "; ") + c;
    std::printf("  checked: %s\n", checks.c_str());
  } else {
    std::printf("%s: invalid %s task, %zu problem(s):\n", o.task.c_str(), kind.harness.c_str(), problems.size());
    for (const std::string& p : problems) std::printf("  - %s\n", p.c_str());
  }
  if (!problems.empty()) return kExitBadInput;
  if (o.run) return RunReferenceCheck(o, std::move(task));
  return kExitOk;
}

}  // namespace

Json ValidateTaskJson(const std::string& path, bool run) {
  Task task;
  std::vector<std::string> problems = ValidateStructure(path, &task);
  const Kind kind = KindOf(task);
  Json out = {{"task", path},
              {"valid", problems.empty()},
              {"problems", problems},
              {"harness", kind.harness},
              {"checks", kind.checks},
              {"correctness_tests", task.correctness_tests},
              {"performance_tests", task.profile_tests}};
  if (!run || !problems.empty()) return out;
  // The reference's own run (as kf validate --run, not recorded), then the low-signal check.
  TaskForRun loaded = LoadTaskForRun(path);
  EvaluateOptions options;
  options.test_candidate = false;
  const Evaluation ev = Evaluate(loaded.task, std::nullopt, options);
  const bool passes = ev.result.status == EvalStatus::kReferenceOnly;
  out["reference_passes"] = passes;
  out["reference_status"] = std::string(EvalStatusName(ev.result.status));
  if (!passes) {
    out["valid"] = false;
    out["reference_log"] = ev.result.eval_log.substr(0, 20000);
    return out;
  }
  Json weak = Json::array();
  for (const char* mode : {"zeros", "constant"}) {
    EvaluateOptions check = options;
    check.correctness_only = true;
    check.test_env = {{"KF_FAKE_OUTPUT", mode}};
    const Evaluation c = Evaluate(loaded.task, std::nullopt, check);
    for (const std::string& t : LowSignalTests(c.result.eval_log)) weak.push_back({{"test", t}, {"accepts", mode}});
  }
  out["low_signal"] = std::move(weak);
  return out;
}

KF_REGISTER_COMMAND("validate", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* cmd = app.add_subcommand("validate", "Check a task's structure and list every problem (exit 3 if invalid)");
  cmd->add_option("TASK", o->task, "Task package (directory or archive) or encoded task (.json, - for stdin)")
      ->required();
  cmd->add_flag("--json", o->json, "Print {\"task\", \"valid\", \"problems\"} as JSON");
  cmd->add_flag("--run", o->run, "Also build and test the reference (--ref) and report pass/fail (exit 1 on fail)");
  cmd->add_option("--gpu-arch", o->gpu_arch, "With --run: override config gpu_arch");
  cmd->add_option("--db", o->db,
                  "With --run: results database, a SQLite path or postgresql:// URL (default $KF_DB, else "
                  "runs/kernels.sqlite3)");
  cmd->add_flag("--no-store", [o](int64_t) { o->store = false; }, "With --run: do not write to the database");
  cmd->add_flag("--keep-workdir", o->keep_workdir, "With --run: keep the work directories");
  cmd->callback([o, exit_code]() { *exit_code = RunValidate(*o); });
});

}  // namespace kf::cli
