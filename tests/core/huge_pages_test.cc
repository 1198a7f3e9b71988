// core/huge_pages.hpp: advising a big fresh buffer before its first write gets it huge pages where the
// kernel offers them (THP "always" or "madvise"), seen in /proc/self/smaps; small buffers are left alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/huge_pages.hpp"

#include <sys/mman.h>

namespace kf::internal {
namespace {

// kB of AnonHugePages in the mapping of /proc/self/smaps that holds `address` (-1 when not found).
long AnonHugeKbAt(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-' && line.find(':') > line.find(' ')) {
      inside = begin <= a && a < end;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  }
  return -1;
}

std::string ThpMode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string all;
  std::getline(f, all);
  return all;
}

TEST(AdviseHugePages, ABigFreshBufferGetsHugePages) {
  const std::string mode = ThpMode();
  if (mode.empty() || mode.find("[never]") != std::string::npos) GTEST_SKIP() << "THP is off here: " << mode;
  // A fresh mapping (new[] could reuse heap pages an earlier test touched, which stay small).
  constexpr size_t kBytes = size_t{16} << 20;
  void* map = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  char* buffer = static_cast<char*>(map);
  AdviseHugePages(buffer, kBytes);
  std::memset(buffer, 1, kBytes);
  EXPECT_GT(AnonHugeKbAt(buffer + kBytes / 2), 0) << "THP mode: " << mode;
  EXPECT_EQ(buffer[kBytes - 1], 1);
  munmap(map, kBytes);
}

TEST(AdviseHugePages, IgnoresSmallAndNullRanges) {
  char small[64] = {};
  AdviseHugePages(small, sizeof small);
  AdviseHugePages(nullptr, size_t{64} << 20);
  EXPECT_EQ(small[0], 0);
}

}  // namespace
}  // namespace kf::internal
