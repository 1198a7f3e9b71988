// Resources — where kf finds, at run time, what it needs besides its own binary.
//
// Four resources: the two directories of the Python package `kernelfoundry`, split by trust (python/README.md) —
// the task side (prepended to the PYTHONPATH of every task run, build child and test collection: the only
// Python directory candidate code sees) and the host side (the warm-start zygote, the precompiled-header
// builder, the Python API; never on a candidate's path) —, the task SDK of native test programs (headers to add
// with -I and the timing-loop sources to compile in), and the task Python interpreter. Nothing else is looked
// up: no source or build path is used anywhere else at run time.
//
// Contract (an Env in miniature; the same order for every directory resource):
//  1. Its environment variable (KF_PYTHON_DIR, KF_PYTHON_HOST_DIR, KF_SDK_DIR). When set, it must point at a
//     valid directory; a wrong one is an error, never silently skipped.
//  2. The install prefix of the running executable (/proc/self/exe): `<prefix>/bin/kf` looks in
//     `<prefix>/share/kernelfoundry/{python-task,python,sdk}` (what `cmake --install` writes); for the Python
//     API's compiled module installed in `<prefix>/share/kernelfoundry/python/kernelfoundry/` and loaded by an
//     interpreter elsewhere, also that module's `<prefix>/share/kernelfoundry/...`.
//  3. Only for a program running from inside the build tree it was built in (build/kf, the test binaries, the
//     Python API's compiled module): the build tree (`<build>/python-task`, `<build>/python`: the package
//     assembled with its compiled modules), then the source tree (`python/task`; the SDK as `include/` + `src/`;
//     the host side has no source-tree fallback: it needs its compiled modules). An installed or copied kf
//     never looks there.
// A directory counts only when it holds the resource's marker file (task side: kernelfoundry/__init__.py and no
// host-side module kernelfoundry/zygote.py; host side: kernelfoundry/zygote.py; the SDK:
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
  std::string origin;          ///< "KF_PYTHON_DIR" / "KF_PYTHON_HOST_DIR" / "KF_SDK_DIR", "install prefix",
                               ///< "build tree", "source tree"
};

/// The directory holding the task side of the `kernelfoundry` package (the directory to put on a task run's
/// PYTHONPATH). Throws kf::Error(kNotFound, field = "KF_PYTHON_DIR") naming what was looked for and where when no
/// candidate holds kernelfoundry/__init__.py without kernelfoundry/zygote.py (or when $KF_PYTHON_DIR is set and
/// does not: pointing it at the host side is an error that says so).
ResourceDir TaskPythonDir();

/// The directory holding the host side of the `kernelfoundry` package (the zygote, the PCH builder, the Python
/// API; what host programs put on PYTHONPATH). Never put on a candidate's path. Throws kf::Error(kNotFound,
/// field = "KF_PYTHON_HOST_DIR") naming what was looked for and where when no candidate holds
/// kernelfoundry/zygote.py (or when $KF_PYTHON_HOST_DIR is set and does not).
ResourceDir HostPythonDir();

/// The task SDK of native test programs.
struct TaskSdk {
  std::filesystem::path include_dir;              ///< add -I<include_dir>; holds kernelfoundry/sdk/task_sdk.hpp
  std::vector<std::filesystem::path> sources;     ///< the SDK's .cc files (protocol, timing loop)
  /// Those sources compiled once (lib/kf_task_sdk.o, a relocatable object: linked wherever it appears on the
  /// command line), or empty when there is none or it is older than a source or header of the SDK.
  std::filesystem::path object;
  std::string origin;                             ///< as ResourceDir::origin

  /// The sources, space-separated ($KF_SDK_SOURCES: a build that compiles the SDK with its own flags).
  std::string SourceFiles() const;
  /// What a test program's build puts on its link line for the SDK ($KF_SDK_LINK): the object when
  /// there is one, else the sources; space-separated.
  std::string LinkInputs() const;
};

/// Finds the task SDK: a directory with include/kernelfoundry/sdk/task_sdk.hpp and src/<each SDK source>, and
/// its compiled object: <dir>/lib/kf_task_sdk.o, or for this build tree's source tree <build>/sdk/lib/kf_task_sdk.o,
/// used when it is newer than each SDK source and every file under <dir>/include/kernelfoundry (a stale object beside
/// edited headers would not match them). Throws kf::Error(kNotFound, field = "KF_SDK_DIR") naming what was looked
/// for and where.
TaskSdk FindTaskSdk();

/// The Python interpreter for task-side code (pytest, the collector, build targets, KernelBench
/// introspection): $KF_PYTHON when set and non-empty, else "/usr/bin/python3". Never throws.
std::string TaskPythonInterpreter();

/// The running executable (/proc/self/exe, resolved). Empty when it cannot be read.
std::filesystem::path RunningExecutable();

}  // namespace kf
