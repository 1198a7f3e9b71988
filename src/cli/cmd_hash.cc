// kf hash — prints the task's hash id (SHA-256 over the base64 of every file but config.yaml/.yml, in
// sorted path order; identical to the reference's generate_hash_id and to the `tasks.id` DB column).
//
//   kf hash TASK
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"

namespace kf::cli {

KF_REGISTER_COMMAND("hash", [](CLI::App& app, int* exit_code) {
  auto task = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("hash", "Print a task's hash id (the tasks.id database key)");
  cmd->add_option("TASK", *task, "Task package (directory or archive) or encoded task (.json, - for stdin)")
      ->required();
  cmd->callback([task, exit_code]() {
    LoadedTask loaded = LoadTask(*task, /*discover_tests=*/false);  // the id depends on the files only
    std::printf("%s\n", loaded.task.HashId().c_str());
    *exit_code = kExitOk;
  });
});

}  // namespace kf::cli
