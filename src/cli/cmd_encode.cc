// kf encode — loads a task package and prints (or writes) the reference's Task.encode() JSON.
//
//   kf encode TASK [-o OUT.json] [--indent N]
// The output file is written to a temporary name and renamed, so it is never left half-written.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"
#include "kernelfoundry/error.hpp"

namespace kf::cli {
namespace {

struct EncodeOptions {
  std::string task;
  std::string output;
  int indent = -1;
};

int RunEncode(const EncodeOptions& o) {
  if (!o.output.empty() && ClassifyOutput(o.output, nullptr) != OutputKind::kJson)
    throw Error(ErrorKind::kInvalidArgument, "expected a .json output file", o.output);
  LoadedTask loaded = LoadTask(o.task, /*discover_tests=*/true);
  std::string text = loaded.task.EncodeToString(o.indent);  // == DumpJson(Encode()), written directly
  text.push_back('\n');
  if (o.output.empty() || o.output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    WriteFileAtomic(o.output, text);
  }
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("encode", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<EncodeOptions>();
  CLI::App* cmd = app.add_subcommand("encode", "Encode a task package as JSON (the reference's Task.encode())");
  cmd->add_option("TASK", o->task, "Task package: directory or archive (zip, tar, tar.gz, ...)")->required();
  cmd->add_option("-o,--output", o->output, "Write to this .json file instead of stdout");
  cmd->add_option("--indent", o->indent, "Indent JSON by N spaces (default: compact)")->check(CLI::Range(-1, 16));
  cmd->callback([o, exit_code]() { *exit_code = RunEncode(*o); });
});

}  // namespace kf::cli
