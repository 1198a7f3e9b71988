// kf info — prints a task's build flags, tests, config and block files as YAML (Task::PrintInfo), with its
// hash id first and the overrides (overrides.yml) last.
//
//   kf info TASK            TASK = package directory, archive, or encoded task (.json / "-")
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"
#include "kernelfoundry/config.hpp"

namespace kf::cli {
namespace {

int RunInfo(const std::string& task_arg) {
  LoadedTask loaded = LoadTask(task_arg, /*discover_tests=*/true);
  std::printf("id: %s\n", loaded.task.HashId().c_str());
  loaded.task.PrintInfo([](const std::string& line) { std::printf("%s\n", line.c_str()); });
  if (loaded.metadata.contains("overrides")) {
    Json overrides = Json::object();
    overrides["overrides"] = loaded.metadata["overrides"];
    std::fputs(DumpYaml(overrides).c_str(), stdout);
  }
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("info", [](CLI::App& app, int* exit_code) {
  auto task = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("info", "Show a task's id, build flags, tests, config and blocks (YAML)");
  cmd->add_option("TASK", *task, "Task package (directory or archive) or encoded task (.json, - for stdin)")
      ->required();
  cmd->callback([task, exit_code]() { *exit_code = RunInfo(*task); });
});

}  // namespace kf::cli
