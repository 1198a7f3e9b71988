// Internal helpers of the exec module shared between its translation units (not a public API).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "kernelfoundry/process.hpp"

namespace kf::exec_internal {

/// Finds `name` like execvp would, but in `path_var` (the child's PATH) instead of ours, relative PATH entries
/// (and empty ones, ".") against the child's working directory `cwd` (empty = ours), and, when the child takes
/// another identity (`as`, the sandbox user), only files that identity may execute through directories it may
/// search (by their mode bits: a root-only pyenv shim first on root's PATH is skipped, not picked and then
/// refused at exec). Names with a '/' are returned unchanged (relative ones resolve against the child's cwd at
/// exec). nullopt = not found.
std::optional<std::string> ResolveExecutable(const std::string& name, const std::string& path_var,
                                             const std::filesystem::path& cwd = {},
                                             const SandboxUser* as = nullptr);

/// Seconds as the reference printed them: "2" for whole seconds, else the shortest decimal ("2.5").
std::string FormatSeconds(std::chrono::milliseconds ms);

}  // namespace kf::exec_internal
