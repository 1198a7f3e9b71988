// Whole-file reads, the one helper behind every "read this file into a string" of the project (caches,
// reports, control files, benchmarks). Internal to kf (src/), shared by every module.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace kf {

/// The whole content of the file at `path` (bytes, no newline translation), or nullopt when it cannot be opened
/// or a read fails (missing, unreadable, a directory). Never throws for I/O; callers that must fail say why.
std::optional<std::string> ReadFileBytes(const std::filesystem::path& path);

/// ReadFileBytes for a file a sandboxed child wrote (issue 25): a symlink in the last component is not followed
/// and only a regular file is read (never a FIFO, which would block), so a child cannot make kf read, with kf's
/// rights, what it may not read itself. nullopt otherwise.
std::optional<std::string> ReadChildFile(const std::filesystem::path& path);

/// "<size> <mtime in ns>" of the regular file at `path` (symlinks followed), or "" when it is not one: a cheap
/// identity for cache keys that must change when the file is replaced or rewritten (no byte is read).
std::string FileStamp(const std::filesystem::path& path);

}  // namespace kf
