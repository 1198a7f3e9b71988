#include "core/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>

namespace kf::internal {

void AdviseHugePages(const void* data, size_t bytes) {
  if (data == nullptr || bytes < kHugePageWorthyBytes) return;
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace kf::internal
