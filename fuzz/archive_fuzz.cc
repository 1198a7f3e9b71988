// libFuzzer target: MemoryFileMap::FromArchive on arbitrary bytes with small limits. Any outcome other than
// a loaded map or a kf::Error (crash, leak, other exception, sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/memory_file_map.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kf::FileMapLimits limits{64, 4u << 20, 1u << 20};  // files, total bytes, bytes per file
  try {
    kf::MemoryFileMap map =
        kf::MemoryFileMap::FromArchive(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz", limits);
    map.RemoveRootDir();
    (void)map.Encode();
  } catch (const kf::Error&) {
  }
  return 0;
}
