// Internal helpers of the exec module shared between its translation units (not a public API).
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace kf::exec_internal {

/// Finds `name` like execvp would, but in `path_var` (the child's PATH) instead of ours. Names with a '/'
/// are returned unchanged (relative ones resolve against the child's cwd at exec). nullopt = not found.
std::optional<std::string> ResolveExecutable(const std::string& name, const std::string& path_var);

/// Seconds as the reference printed them: "2" for whole seconds, else the shortest decimal ("2.5").
std::string FormatSeconds(std::chrono::milliseconds ms);

}  // namespace kf::exec_internal
