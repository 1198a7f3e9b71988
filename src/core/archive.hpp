// Internal: archive reading shared by MemoryFileMap::FromArchive (bytes) and FromPath (archive files).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "kernelfoundry/memory_file_map.hpp"

namespace kf::detail {

/// Reads a zip / tar / tar.{gz,bz2,xz} archive file, streaming it from disk (never loaded whole).
/// Same rules and errors as MemoryFileMap::FromArchive; a file that cannot be opened is kIO.
MemoryFileMap ReadArchiveFile(const std::filesystem::path& path, const FileMapLimits& limits);

}  // namespace kf::detail
