// Live temporary directories (work dirs, discovery dirs) that must not outlive kf, even when it is stopped
// with SIGINT/SIGTERM (issue 10, item 8). Owners register a directory after creating it and unregister it
// before removing it themselves; kf's termination handler (src/cli) calls RemoveLiveDirs() after the child
// trees are gone. Internal; thread-safe.
#pragma once

#include <filesystem>

namespace kf::internal {

/// Records `dir` as live. Once RemoveLiveDirs() has started (kf is stopping), the calling thread never
/// returns from here (it is parked until the process exits), so no new directory appears behind the cleanup.
void RegisterLiveDir(const std::filesystem::path& dir);

/// Forgets `dir` (its owner removes or keeps it).
void UnregisterLiveDir(const std::filesystem::path& dir);

/// Removes every live directory (read-only subdirectories made writable first) and closes the registry.
/// Returns how many were removed.
int RemoveLiveDirs();

/// Removes a directory tree, making read-only subdirectories writable first. Never throws.
void RemoveTree(const std::filesystem::path& dir);

}  // namespace kf::internal
