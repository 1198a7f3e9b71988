// The native harness (harness: native). Internal to the harness module; see harness.hpp.
#pragma once

#include <memory>
#include <vector>

#include "kernelfoundry/harness.hpp"

namespace kf {

/// The native harness for a task config (reads build, cmake, test_executable, executor_executable, artifacts,
/// tests).
std::unique_ptr<Harness> MakeNativeHarness(const Json& config);

/// The tests a native task declares: config `tests: {correctness: [...], performance: [...]}`; entries that
/// are not strings are ignored (NativeConfigProblems reports them).
TestLists NativeDeclaredTests(const Json& config);

/// The config checks of a native task that need no build: `build` is a non-empty string or list of
/// non-empty strings (or `cmake: true` with a CMakeLists.txt in `files`), `test_executable`,
/// `executor_executable` and `artifacts` are relative paths inside the task, `tests.correctness` / `tests.performance` are non-empty lists of
/// names. Every problem found, in that order.
std::vector<ConfigProblem> NativeConfigProblems(const Json& config, const MemoryFileMap& files);

}  // namespace kf
