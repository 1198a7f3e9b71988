// kf setup-python — builds the task side's compiled module (kernelfoundry._measure: the C++ timing loop of pytest
// tasks) for a Python interpreter other than the one kf was built for, e.g. on a machine where kf arrived as a
// bundle (scripts/bundle.sh) and the task interpreter is that machine's Python with PyTorch.
//
//   kf setup-python [--python PATH] [--cxx COMPILER]
//
// The interpreter: --python, else $KF_PYTHON, else `python3` on PATH. It must import pybind11 (the headers) and
// sysconfig names its include directory and extension suffix. The sources: <prefix>/share/kernelfoundry/python-src
// (installed with kf: the module's own files) and the task SDK (kf::FindTaskSdk: the timing loop's sources and
// headers; a bundle's SDK also carries nlohmann/json). The compiler: --cxx, else $CXX, else c++. The module is
// written next to the task side's other files (kf::TaskPythonDir()/kernelfoundry/_measure<EXT_SUFFIX>), then
// imported once by the interpreter as a check. Prints the module's path and the KF_PYTHON line to use.
// Exit codes: 0 built and imported; 4 sources or the task side not found; 6 a step failed (its output shown).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/process.hpp"
#include "kernelfoundry/resources.hpp"

namespace kf::cli {
namespace {
namespace fs = std::filesystem;

/// Runs argv (inherits the environment, 15 min cap); throws kf::Error(kIO) naming `what` with the output when it
/// fails. Returns stdout.
std::string Step(const std::vector<std::string>& argv, const std::string& what,
                 const std::map<std::string, std::string>& env = {}) {
  ProcessOptions o;
  o.argv = argv;
  o.env_add = env;
  o.wall_timeout = std::chrono::minutes(15);
  const ProcessRun run = RunProcess(o);
  if (run.result.returncode != 0 || run.reason != TerminationReason::kExited) {
    throw Error(ErrorKind::kIO,
                what + " failed (exit " + std::to_string(run.result.returncode) + ")" +
                    (run.result.message ? ": " + *run.result.message : std::string()) + "\n" +
                    run.result.stdout_text + run.result.stderr_text,
                "", "setup-python");
  }
  return run.result.stdout_text;
}

int RunSetupPython(std::string python, std::string cxx) {
  const auto env_or = [](const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr && *v != '\0' ? v : fallback);
  };
  if (python.empty()) python = env_or("KF_PYTHON", "python3");
  if (cxx.empty()) cxx = env_or("CXX", "c++");
  const ResourceDir task = TaskPythonDir();
  const fs::path src = task.path.parent_path() / "python-src";
  if (!fs::exists(src / "measure_module.cc")) {
    throw Error(ErrorKind::kNotFound,
                "no module sources at " + src.string() + " (an installed kf or a bundle carries them; from a build "
                "tree, build the _measure target instead)", src.string(), "setup-python");
  }
  const TaskSdk sdk = FindTaskSdk();
  // One line each: the include directory, pybind11's headers, the extension suffix, the interpreter's own path.
  const std::string info = Step(
      {python, "-c",
       "import sys, sysconfig, pybind11; print(sysconfig.get_paths()['include']); print(pybind11.get_include()); "
       "print(sysconfig.get_config_var('EXT_SUFFIX')); print(sys.executable)"},
      python + " (import pybind11, sysconfig)");
  std::istringstream lines(info);
  std::string py_include, pybind_include, suffix, executable;
  std::getline(lines, py_include);
  std::getline(lines, pybind_include);
  std::getline(lines, suffix);
  std::getline(lines, executable);
  if (suffix.empty() || suffix == "None" || executable.empty()) {
    throw Error(ErrorKind::kIO, python + " named no extension suffix or executable: " + info, "", "setup-python");
  }
  const fs::path out = task.path / "kernelfoundry" / ("_measure" + suffix);
  std::vector<std::string> argv = {cxx, "-std=c++20", "-O2", "-DNDEBUG", "-shared", "-fPIC", "-fvisibility=hidden",
                                   "-I" + py_include, "-I" + pybind_include, "-I" + sdk.include_dir.string(),
                                   "-I" + (src / "core").string()};
  for (const char* f : {"measure_module.cc", "measure_paired.cc", "core/convert.cc"}) argv.push_back((src / f).string());
  for (const fs::path& s : sdk.sources) {  // the timing loop; not the native test programs' protocol (sdk/)
    if (s.parent_path().filename() != "sdk") argv.push_back(s.string());
  }
  argv.insert(argv.end(), {"-o", out.string() + ".tmp", "-pthread"});
  std::printf("building %s for %s (%s)\n", out.c_str(), executable.c_str(), cxx.c_str());
  std::fflush(stdout);
  Step(argv, "compiling kernelfoundry._measure");
  fs::rename(out.string() + ".tmp", out);
  Step({executable, "-c", "import kernelfoundry._measure as m, sys; print(m.__file__)"},
       "importing the new module", {{"PYTHONPATH", task.path.string()}});
  std::printf("ok: %s\nuse this interpreter for tasks: export KF_PYTHON=%s\n", out.c_str(), executable.c_str());
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("setup-python", [](CLI::App& app, int* exit_code) {
  auto python = std::make_shared<std::string>();
  auto cxx = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("setup-python",
                                     "Build the task side's compiled module (_measure) for a Python interpreter");
  cmd->add_option("--python", *python, "The interpreter (default: $KF_PYTHON, else python3 on PATH)");
  cmd->add_option("--cxx", *cxx, "The C++20 compiler (default: $CXX, else c++)");
  cmd->callback([python, cxx, exit_code]() { *exit_code = RunSetupPython(*python, *cxx); });
});

}  // namespace kf::cli
