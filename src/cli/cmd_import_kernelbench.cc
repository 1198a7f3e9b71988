// kf import-kernelbench — writes a task package from a KernelBench problem (include/kernelfoundry/kernelbench.hpp).
//
//   kf import-kernelbench PROBLEM.py [--set NAME=VALUE]… [--name TASK] [--gpu [--gpu-arch ARCH]] -o DIR [--force]
//                         [--list-sizes]
//
// --set rewrites a top-level `NAME = <number>` line of the problem (GPU-scale sizes -> CPU-scale); an unknown
// NAME or a non-numeric VALUE is an error (exit 3) naming it. --list-sizes prints the settable sizes and exits.
// The package's kernel.cpp (with --gpu: kernel.cu, a CUDA torch extension for gpu_arch ARCH, default 90) exports
// forward(*inputs, *model_state_tensors, *init_inputs); its EVOLVE block is a correct starting point that calls
// back into the PyTorch Model.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "core/files.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/kernelbench.hpp"

namespace kf::cli {
namespace {

struct ImportOptions {
  std::string problem;
  std::vector<std::string> sets;
  std::string name;
  std::string output;
  bool force = false;
  bool list_sizes = false;
  bool gpu = false;
  std::optional<std::string> gpu_arch;  ///< given (even empty) or not
};

std::string ReadAll(const std::string& path) {
  std::optional<std::string> bytes = ReadFileBytes(path);
  if (!bytes) throw Error(ErrorKind::kNotFound, "problem file not found", path);
  return std::move(*bytes);
}

int RunImport(const ImportOptions& o) {
  if (o.list_sizes) {
    for (const KernelBenchSize& s : ListKernelBenchSizes(ReadAll(o.problem))) {
      std::printf("%s = %s\n", s.name.c_str(), s.expression.c_str());
    }
    return kExitOk;
  }
  KernelBenchImportOptions io;
  io.problem = o.problem;
  for (const std::string& s : o.sets) {
    size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(ErrorKind::kInvalidArgument, "expected NAME=VALUE, got '" + s + "'", o.problem, "--set " + s);
    }
    io.sets.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  io.task_name = o.name;
  if (o.output.empty()) throw Error(ErrorKind::kInvalidArgument, "-o DIR is required", "", "-o");
  io.output_dir = o.output;
  io.overwrite = o.force;
  if (o.gpu_arch && !o.gpu) {
    throw Error(ErrorKind::kInvalidArgument, "--gpu-arch needs --gpu (a CPU package's gpu_arch is cpu)", "",
                "--gpu-arch");
  }
  io.target.gpu = o.gpu;
  if (o.gpu_arch) io.target.gpu_arch = *o.gpu_arch;  // "" is refused with the others (CheckTarget)
  KernelBenchImportResult r = ImportKernelBench(io);
  const Json& in = r.introspection;
  std::printf("wrote task %s to %s (%zu input(s), %zu state tensor(s), %zu init input(s)):", r.task_name.c_str(),
              r.output_dir.c_str(), in["inputs"].size(), in["state"].size(), in["init_inputs"].size());
  for (const std::string& f : r.files) std::printf(" %s", f.c_str());
  std::printf("\n");
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("import-kernelbench", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ImportOptions>();
  CLI::App* cmd = app.add_subcommand("import-kernelbench", "Write a task package from a KernelBench problem file");
  cmd->add_option("PROBLEM", o->problem, "KernelBench problem (.py with Model, get_inputs, get_init_inputs)")->required();
  cmd->add_option("--set", o->sets, "Override a top-level size: NAME=VALUE (repeatable)");
  cmd->add_option("--name", o->name, "Task name (default: kb_l<level>_<file stem>, e.g. kb_l1_19_relu)");
  cmd->add_option("-o,--output", o->output, "Output folder (created; must be empty unless --force)");
  cmd->add_flag("--force", o->force, "Overwrite the files of a non-empty output folder");
  cmd->add_flag("--list-sizes", o->list_sizes, "Print the settable sizes (NAME = EXPR) and exit");
  cmd->add_flag("--gpu", o->gpu, "A CUDA torch-extension task (kernel.cu, inputs and model on the CUDA device)");
  cmd->add_option("--gpu-arch", o->gpu_arch, "With --gpu: the config's gpu_arch (default 90: H100/H200)");
  cmd->callback([o, exit_code]() { *exit_code = RunImport(*o); });
});

}  // namespace kf::cli
