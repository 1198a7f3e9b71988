// kf decode — turns an encoded task (JSON) back into files: a directory or an archive.
//
//   kf decode TASK.json -o DIR|OUT.zip|OUT.tar.gz [--force]
// Every path is checked before anything is written: paths outside DIR (absolute, "..", links on the way)
// are refused. An existing non-empty DIR is refused unless --force (then the files are overlaid).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"
#include "kernelfoundry/error.hpp"

namespace kf::cli {
namespace {

struct DecodeOptions {
  std::string input;
  std::string output;
  bool force = false;
};

int RunDecode(const DecodeOptions& o) {
  if (ClassifyOutput(o.output, nullptr) == OutputKind::kJson)
    throw Error(ErrorKind::kInvalidArgument, "expected a directory or an archive (.zip, .tar.gz, ...)", o.output);
  Task task;
  try {
    task = Task::DecodeFromString(ReadInput(o.input), o.input == "-" ? "<stdin>" : o.input);
  } catch (const Error& e) {
    throw Error(e.kind(), e.message(), e.file() == "<task json>" ? o.input : e.file(), e.field());
  }
  WriteTaskFiles(task.task_data, o.output, o.force);
  std::fprintf(stderr, "kf: wrote %zu file(s) to %s\n", task.task_data.size(), o.output.c_str());
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("decode", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<DecodeOptions>();
  CLI::App* cmd = app.add_subcommand("decode", "Write the files of an encoded task (JSON) to a directory or archive");
  cmd->add_option("TASK_JSON", o->input, "Encoded task (.json file, - for stdin)")->required();
  cmd->add_option("-o,--output", o->output, "Output directory, or archive (.zip, .tar, .tar.gz, .tar.bz2, .tar.xz)")
      ->required();
  cmd->add_flag("--force", o->force, "Write into an existing non-empty directory (overlay)");
  cmd->callback([o, exit_code]() { *exit_code = RunDecode(*o); });
});

}  // namespace kf::cli
