// Importer of KernelBench problems (ScalingIntelligence/KernelBench: a `class Model(nn.Module)`,
// `get_inputs()`, `get_init_inputs()` and module-level size integers) into reference-format task packages
// whose REFERENCE is the problem and whose EVOLVE block is a torch extension (`kf import-kernelbench`): a C++ CPU
// one (kernel.cpp, OpenMP, gpu_arch cpu), or with --gpu a CUDA one (kernel.cu built by nvcc, language cuda,
// gpu_arch e.g. "90"; inputs and model on the CUDA device, as KernelBench's own GPU evaluation has them).
//
// Generated package (DIR):
//   problem.py   the problem, top-level sizes rewritten by --set, wrapped in [REFERENCE_START]/[REFERENCE_END]
//   kernel.cpp   torch extension (module kb_kernel) exporting `forward`; EVOLVE block = a correct starting
//   (.cu: GPU)   point that calls back into problem.Model through pybind11
//   task.py      TestBase subclass: build(), test_output_shapes_match[seed], test_matches_reference[seed],
//                test_benchmark (performance); GPU: every test skips without a CUDA device
//   sides.py     the reference and candidate factories (CPU: each in an executor process; GPU: in the test process)
//   conftest.py, config.yaml
// Calling convention of `forward`: forward(*inputs, *model_state_tensors, *init_inputs) with inputs =
// get_inputs(), model_state_tensors = Model(*get_init_inputs()).state_dict() values in order, init_inputs =
// get_init_inputs() (int -> int64_t, float -> double, bool -> bool, tuple/list of ints -> std::vector<int64_t>,
// tuple/list of floats -> std::vector<double>).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/resources.hpp"

namespace kf {

/// One rewritable top-level size assignment of a problem: `NAME = <constant arithmetic expression>`.
struct KernelBenchSize {
  std::string name;        ///< the variable, e.g. "batch_size"
  std::string expression;  ///< right-hand side without a trailing comment, e.g. "4096" or "2048 * 2"
  int line = 0;            ///< 1-based line number in the source
};

/// The top-level size assignments of a problem source, in source order. A line qualifies when it starts at
/// column 0 with an identifier, then `=`, then only numeric literals, `+ - * / % ( )`, `**`, `//` and
/// spaces (an optional `# comment` follows). Lines inside triple-quoted strings are not excluded (the
/// problems have none at column 0).
std::vector<KernelBenchSize> ListKernelBenchSizes(const std::string& source);

/// Rewrites the size assignments named in `sets` ({NAME, VALUE} in command-line order) and returns the new
/// source; each rewritten line becomes `NAME = VALUE  # kf import-kernelbench --set (was: EXPR)`. Every line
/// assigning NAME is rewritten. Throws kf::Error(kInvalidArgument, file = `file`, field = "--set NAME") when
/// NAME is not a size assignment of the source (the message lists the settable names), when VALUE is not an
/// integer or floating-point literal, or when NAME is given twice.
std::string ApplyKernelBenchSizes(const std::string& source,
                                  const std::vector<std::pair<std::string, std::string>>& sets,
                                  const std::string& file);

/// Task name for a problem file: "kb_" + "l<N>_" when the parent folder is "level<N>" + the file stem in lower
/// case with every non-alphanumeric run mapped to '_' and trailing '_' dropped
/// (".../level1/19_ReLU.py" -> "kb_l1_19_relu", ".../level1/26_GELU_.py" -> "kb_l1_26_gelu").
std::string KernelBenchTaskName(const std::filesystem::path& problem);

/// Runs `python` once (kf::RunProcess, wall timeout `timeout`, 8 GiB memory limit) on `problem_source` (saved
/// as problem.py in a temporary folder) with an introspection script and returns its JSON:
///   {"inputs": [ARG…], "state": [{"name", "shape", "dtype"}…], "init_inputs": [ARG…],
///    "forward_params": [names], "init_params": [names], "sizes": {NAME: value}}
/// where ARG is {"kind": "tensor", "shape": [..], "dtype": "float32"} or {"kind": "int"|"float"|"bool"|
/// "int_list"|"float_list", "value": …}. Tensor factories (torch.rand, randn, zeros, …) are redirected to the
/// meta device while get_inputs() and Model(...) run, so GPU-scale problems are introspected without
/// allocating (falls back to real tensors when the model cannot be built on the meta device).
/// Throws kf::Error(kParse, file = `file`) with the Python output when the script fails or times out, and
/// kf::Error(kUnsupported) for an argument kind the C++ calling convention cannot express.
Json IntrospectKernelBenchProblem(const std::string& problem_source, const std::string& file,
                                  const std::string& python = TaskPythonInterpreter(),
                                  std::chrono::milliseconds timeout = std::chrono::seconds(180));

/// Where a generated package's candidate runs: a C++ CPU torch extension (kernel.cpp) or a CUDA one (kernel.cu).
struct KernelBenchTarget {
  bool gpu = false;            ///< false: CPU (gpu_arch "cpu", language cpp); true: CUDA (language cuda)
  std::string gpu_arch = "90";  ///< with gpu: the config's gpu_arch, a CUDA architecture ("90", "sm_90", "Hopper", …)
};

/// Everything the package renderer needs.
struct KernelBenchPackageSpec {
  std::string task_name;                          ///< e.g. "kb_l1_19_relu"
  std::string problem_file;                       ///< origin shown in comments, e.g. "level1/19_ReLU.py"
  std::string problem_source;                     ///< already size-rewritten source
  std::vector<std::pair<std::string, std::string>> sets;  ///< the --set overrides (documentation only)
  Json introspection;                             ///< IntrospectKernelBenchProblem's result
  KernelBenchTarget target;                       ///< CPU or CUDA package
};

/// Renders the package files {relative path: content} (problem.py, kernel.cpp or kernel.cu, task.py, sides.py,
/// conftest.py, config.yaml). Pure. Throws kf::Error(kUnsupported) for an introspected argument kind without a C++
/// type, kf::Error(kInvalidArgument, field "--gpu-arch") for a GPU target whose gpu_arch is not a CUDA
/// architecture (IsCudaArch, profile.hpp).
std::map<std::string, std::string> RenderKernelBenchPackage(const KernelBenchPackageSpec& spec);

/// The C++ parameter type of one introspected argument ({"kind": …}): "torch::Tensor", "int64_t", "double",
/// "bool", "std::vector<int64_t>", "std::vector<double>". Throws kf::Error(kUnsupported) otherwise.
std::string KernelBenchCppType(const Json& arg);

/// Options of ImportKernelBench (`kf import-kernelbench`).
struct KernelBenchImportOptions {
  std::filesystem::path problem;                               ///< PROBLEM.py
  std::vector<std::pair<std::string, std::string>> sets;       ///< --set NAME=VALUE, in order
  std::string task_name;                                       ///< --name; empty = KernelBenchTaskName(problem)
  std::filesystem::path output_dir;                            ///< -o DIR (created; must be empty or absent)
  bool overwrite = false;                                      ///< --force: replace files in a non-empty DIR
  KernelBenchTarget target;                                    ///< --gpu, --gpu-arch
  std::string python = TaskPythonInterpreter();  ///< interpreter with torch (resources.hpp)
  std::chrono::milliseconds introspect_timeout = std::chrono::seconds(180);
};

/// What ImportKernelBench wrote.
struct KernelBenchImportResult {
  std::string task_name;
  std::filesystem::path output_dir;
  std::vector<std::string> files;  ///< relative paths written
  Json introspection;
};

/// Reads the problem, applies the sizes, introspects it and writes the package. Throws kf::Error:
/// kNotFound (problem missing), kInvalidArgument (bad --set / --name, non-empty DIR without overwrite),
/// kParse / kUnsupported (see IntrospectKernelBenchProblem), kIO (cannot write).
KernelBenchImportResult ImportKernelBench(const KernelBenchImportOptions& options);

}  // namespace kf
