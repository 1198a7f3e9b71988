// kf blocks — prints a task's [KEY_START]…[KEY_END] blocks.
//
//   kf blocks TASK                 every key: a "# KEY" line, then its blocks_to_str text
//   kf blocks TASK --key EVOLVE    that key's blocks_to_str text exactly (what goes into prompts / the DB)
//   kf blocks TASK [--key K] --json   {KEY: {path: [contents]}} (or {path: [contents]} with --key)
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"
#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/error.hpp"

namespace kf::cli {
namespace {

struct BlocksOptions {
  std::string task;
  std::string key;
  bool json = false;
};

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

int RunBlocks(const BlocksOptions& o) {
  LoadedTask loaded = LoadTask(o.task, /*discover_tests=*/false);
  const TaskBlocks& blocks = loaded.task.blocks;
  if (!o.key.empty()) {
    auto it = blocks.find(o.key);
    if (it == blocks.end())
      throw Error(ErrorKind::kNotFound, fmt::format("the task has no [{}_START] block", o.key), o.task, o.key);
    if (o.json) Print(DumpJson(BlocksToJson(TaskBlocks{{o.key, it->second}})[o.key], 2) + "\n");
    else Print(BlocksToStr(it->second));
    return kExitOk;
  }
  if (o.json) {
    Print(DumpJson(BlocksToJson(blocks), 2) + "\n");
    return kExitOk;
  }
  for (const char* key : kBlockKeys) {
    auto it = blocks.find(key);
    if (it == blocks.end()) continue;
    std::string text = BlocksToStr(it->second);
    if (!text.empty() && text.back() != '\n') text.push_back('\n');
    Print(fmt::format("# {}\n{}", key, text));
  }
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("blocks", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<BlocksOptions>();
  CLI::App* cmd = app.add_subcommand("blocks", "Print a task's EVOLVE / REFERENCE / USER_INSTRUCTIONS blocks");
  cmd->add_option("TASK", o->task, "Task package (directory or archive) or encoded task (.json, - for stdin)")
      ->required();
  cmd->add_option("--key", o->key, "Only this key (EVOLVE, REFERENCE, USER_INSTRUCTIONS)");
  cmd->add_flag("--json", o->json, "Print {KEY: {path: [contents]}} as JSON");
  cmd->callback([o, exit_code]() { *exit_code = RunBlocks(*o); });
});

}  // namespace kf::cli
