// kf with-blocks — puts candidate code into a task's blocks (Task::WithBlocks) and writes the new task.
//
//   kf with-blocks TASK --block EVOLVE=kernel.cpp [--block KEY=FILE ...] -o OUT
//   kf with-blocks TASK --blocks update.json -o OUT
// update.json: {KEY: text|null} (one block per key) or {KEY: {path: [text|null, ...]}|null}.
// OUT: *.json (encoded task), an archive (.zip, .tar.gz, ...) or a directory (refused when it exists and is
// not empty, unless --force). When a block is null (the candidate could not be extracted) the result is the
// reference's failure task (no files, extract_code_result returncode 1): it is written only to a .json OUT,
// and the exit code is 1.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"
#include "kernelfoundry/error.hpp"

namespace kf::cli {
namespace {

struct WithBlocksOptions {
  std::string task;
  std::vector<std::string> block_args;
  std::string blocks_file;
  std::string output;
  bool keep_reference = false;
  bool force = false;
};

BlockUpdate ReadUpdate(const WithBlocksOptions& o) {
  if (o.block_args.empty() == o.blocks_file.empty())
    throw Error(ErrorKind::kInvalidArgument, "give either --block KEY=FILE (repeatable) or --blocks FILE.json",
                "", "--block");
  if (!o.blocks_file.empty()) return BlockUpdateFromJson(ParseJson(ReadInput(o.blocks_file), o.blocks_file), o.blocks_file);
  BlockUpdateShort update;
  for (const std::string& arg : o.block_args) {
    size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
      throw Error(ErrorKind::kInvalidArgument, fmt::format("expected KEY=FILE, got '{}'", arg), "", "--block");
    std::string key = arg.substr(0, eq);
    if (update.count(key))
      throw Error(ErrorKind::kInvalidArgument, fmt::format("key {} given twice", key), "", "--block");
    update[key] = ReadInput(arg.substr(eq + 1));
  }
  return update;
}

int RunWithBlocks(const WithBlocksOptions& o) {
  BlockUpdate update = ReadUpdate(o);  // read inputs first: nothing is loaded or written on a bad argument
  const OutputKind kind = ClassifyOutput(o.output, nullptr);
  LoadedTask loaded = LoadTask(o.task, /*discover_tests=*/kind == OutputKind::kJson);
  Task result;
  try {
    result = loaded.task.WithBlocks(update, o.keep_reference);
  } catch (const Error& e) {
    throw Error(e.kind(), e.message(), e.file().empty() ? o.task : (std::filesystem::path(o.task) / e.file()).string(),
                e.field());
  }
  const bool failed = result.extract_code_result && result.extract_code_result->returncode != 0;
  if (kind == OutputKind::kJson) {
    WriteFileAtomic(o.output, DumpJson(result.Encode()) + "\n");
  } else if (!failed) {
    WriteTaskFiles(result.task_data, o.output, o.force);
  }
  if (failed) {
    std::fprintf(stderr, "kf: with-blocks: %s%s\n", result.extract_code_result->message.value_or("failed").c_str(),
                 kind == OutputKind::kJson ? " (failure task written)" : "; nothing written");
    return kExitVerdictFailed;
  }
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("with-blocks", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<WithBlocksOptions>();
  CLI::App* cmd = app.add_subcommand("with-blocks", "Replace a task's blocks with candidate code and write the new task");
  cmd->add_option("TASK", o->task, "Task package (directory or archive) or encoded task (.json, - for stdin)")
      ->required();
  cmd->add_option("--block", o->block_args, "KEY=FILE: the new content of the only KEY block (repeatable)");
  cmd->add_option("--blocks", o->blocks_file, "JSON file {KEY: text|null} or {KEY: {path: [text|null]}}");
  cmd->add_option("-o,--output", o->output, "Output: .json (encoded task), archive, or directory")->required();
  cmd->add_flag("--keep-reference", o->keep_reference, "Keep the reference build and test results");
  cmd->add_flag("--force", o->force, "Write into an existing non-empty directory (overlay)");
  cmd->callback([o, exit_code]() { *exit_code = RunWithBlocks(*o); });
});

}  // namespace kf::cli
