// Helpers shared by the harness implementations (internal to the harness module).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/process.hpp"

namespace kf::harness_internal {

/// Keys build outputs relative to the task tree (B15 fixed): a relative path is resolved against task_dir,
/// an absolute one is used as is; symlinks are resolved; a directory contributes its regular files.
/// Meta = the file's mode & 0777 and mtime. Throws kf::Error(kNotFound, field = the path) for a path that
/// does not exist and kf::Error(kUnsafe, field = the path) for one that resolves outside task_dir.
MemoryFileMap CollectArtifacts(const std::filesystem::path& task_dir, const std::vector<std::string>& paths);

/// The environment of every task-side Python child: unbuffered output, no bytecode files in the task tree,
/// the persistent cache dir; then `extra` (which wins).
std::map<std::string, std::string> PythonEnv(const std::map<std::string, std::string>& extra);

/// `a` + "\n" + `b`, or `b` alone when `a` is empty.
std::string JoinNotes(const std::optional<std::string>& a, const std::string& b);

/// ProcessOptions for one test run of `request`: cwd = task dir, the request's environment plus
/// KERNELFOUNDRY_TEST=1, its test time limits, line callback and cancellation token, and a result pipe
/// (ProcessOptions::result_pipe) for the run's report. The caller sets argv (and anything else).
ProcessOptions TestProcessOptions(const TestRequest& request);

/// ProcessOptions for one build of `request`: cwd = task dir, environment + KERNELFOUNDRY_BUILD=1, the build
/// time limits, line callback and cancellation token. The caller sets argv.
ProcessOptions BuildProcessOptions(const BuildRequest& request);

}  // namespace kf::harness_internal
