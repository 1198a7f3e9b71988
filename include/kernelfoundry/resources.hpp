// Resources — where kf finds, at run time, what it needs besides its own binary.
//
// Three resources: the task-side Python package `kernelfoundry` (prepended to the PYTHONPATH of every
// pytest task run and of test collection), the task SDK of native test programs (headers to add with -I and
// the timing-loop sources to compile in), and the task Python interpreter. Nothing else is looked up: no
// source or build path is used anywhere else at run time.
//
// Contract (an Env in miniature; the same order for every directory resource):
//  1. Its environment variable (KF_PYTHON_DIR, KF_SDK_DIR). When set, it must point at a valid directory;
//     a wrong one is an error, never silently skipped.
//  2. The install prefix of the running executable (/proc/self/exe): `<prefix>/bin/kf` looks in
//     `<prefix>/share/kernelfoundry/{python,sdk}` (what `cmake --install` writes).
//  3. Only for a program running from inside the build tree it was built in (build/kf, the test binaries):
//     the build tree (`<build>/python`, the package assembled with its compiled modules), then the source
//     tree (`python/`; the SDK as `include/` + `src/`). An installed or copied kf never looks there.
// A directory counts only when it holds the resource's marker file (kernelfoundry/__init__.py;
// include/kernelfoundry/sdk/task_sdk.hpp and every SDK source). When nothing is found the error names every
// place looked at and the variable to set.
// The interpreter is $KF_PYTHON, else /usr/bin/python3 (Debian's, which sees the Debian Python packages).
//
// Thread-safety: every function may be called concurrently. Nothing is cached: the environment is read on
// every call, so a test may set the variables before a call.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kf {

/// A directory resource and where it was found.
struct ResourceDir {
  std::filesystem::path path;  ///< absolute directory
  std::string origin;          ///< "KF_PYTHON_DIR" / "KF_SDK_DIR", "install prefix", "build tree", "source tree"
};

/// The directory holding the task-side `kernelfoundry` package (the directory to put on PYTHONPATH).
/// Throws kf::Error(kNotFound, field = "KF_PYTHON_DIR") naming what was looked for and where when no
/// candidate holds kernelfoundry/__init__.py (or when $KF_PYTHON_DIR is set and does not).
ResourceDir TaskPythonDir();

/// The task SDK of native test programs.
struct TaskSdk {
  std::filesystem::path include_dir;              ///< add -I<include_dir>; holds kernelfoundry/sdk/task_sdk.hpp
  std::vector<std::filesystem::path> sources;     ///< the timing-loop .cc files to compile into the program
  std::string origin;                             ///< as ResourceDir::origin
};

/// Finds the task SDK: a directory with include/kernelfoundry/sdk/task_sdk.hpp and src/<each SDK source>.
/// Throws kf::Error(kNotFound, field = "KF_SDK_DIR") naming what was looked for and where.
TaskSdk FindTaskSdk();

/// The Python interpreter for task-side code (pytest, the collector, build targets, KernelBench
/// introspection): $KF_PYTHON when set and non-empty, else "/usr/bin/python3". Never throws.
std::string TaskPythonInterpreter();

/// The running executable (/proc/self/exe, resolved). Empty when it cannot be read.
std::filesystem::path RunningExecutable();

}  // namespace kf
