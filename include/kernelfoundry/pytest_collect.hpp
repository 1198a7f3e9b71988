// Pytest test discovery — the TestCollector for reference-format tasks (task.py + conftest.py).
//
// Runs `<task python> -m kernelfoundry.collect <task_dir>` (our python package on PYTHONPATH, both found by
// kernelfoundry/resources.hpp; no bytecode written) under kf::RunProcess with a wall-clock limit, in the task directory. The collector
// prints one line "KF_COLLECT_JSON:{"tests":[{"nodeid":…,"performance":bool}],"errors":[…]}"; tests marked
// @pytest.mark.performance are the profile tests, all others the correctness tests (collection order kept):
// both lists come from ONE collection (the reference collects twice).
// Speed: the collector defers heavy imports (torch, numpy, …) until collection really uses them, and
// compiles the task's own modules with postponed annotations (python/task/kernelfoundry/lazy_imports.py), so a
// task.py that imports torch only for its test bodies is collected without loading torch (~0.3 s instead
// of 1.5–6 s). When such a collection reports a failure, the task is collected again with plain imports
// (PytestCollectOptions::eager) and that run's answer stands, so error texts are those of a normal import.
// Fixes the reference's text scraping (spec §6 "get_test_names"): the first collection's failures are not
// ignored — an import error of task.py fails with the collector's own error text.
//
// The cache salt covers the interpreter path and the bytes of every *.py file of our python package, so an
// upgrade of the plugin invalidates cached test lists. Thread-safe.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "kernelfoundry/resources.hpp"
#include "kernelfoundry/test_discovery.hpp"

namespace kf {

struct PytestCollectOptions {
  std::filesystem::path python = TaskPythonInterpreter();  ///< interpreter with pytest installed
  std::filesystem::path python_dir;  ///< holds the kernelfoundry package; empty = kf::TaskPythonDir()
  std::chrono::milliseconds timeout{180'000};  ///< wall-clock limit of one collection
  bool eager = false;  ///< plain imports only (no deferred imports; KF_COLLECT_EAGER=1 for the collector)
  /// task_dir is a copy kf wrote (PytestCollector's, called by DiscoverTests): kf may share it read-only with
  /// the sandbox user's group (issue 25: the collector runs task code unprivileged), whatever its files' modes.
  bool own_copy = false;
};

/// Collects the tests of the task materialised in `task_dir`. Throws kf::Error (file "task.py"):
/// kInvalidArgument when task.py is missing, or with the collector's error text when it cannot be
/// collected (import error, syntax error), kLimit on timeout, kIO when python cannot be started, kInternal for unreadable collector output.
TestLists CollectPytestTests(const std::filesystem::path& task_dir, const PytestCollectOptions& options = {});

/// The collector to put into TaskCreateOptions::collector (cache salt computed here, once per call).
TestCollector PytestCollector(const PytestCollectOptions& options = {});

/// Parses the collector's output (stdout): the last line starting with "KF_COLLECT_JSON:". Exposed for
/// tests. Throws as CollectPytestTests.
TestLists ParseCollectOutput(const std::string& stdout_text, const std::string& stderr_text);

}  // namespace kf
