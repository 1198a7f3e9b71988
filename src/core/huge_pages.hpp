// Transparent huge pages for the big buffers of the JSON fast paths (internal to core).
//
// A fresh buffer of tens of MB costs one page fault per 4 KiB page on first touch. On the 2-core
// development VM a fault costs about 1.7 µs, so a 70 MB encoded task paid ~30 ms per buffer in faults
// alone (measured 2026-12-01: EncodeToString 44.7 ms with 17,165 faults; with huge pages 17 ms, ~800).
// Kernels whose THP mode is "madvise" (Debian's default) back a range with 2 MiB pages only when asked.
#pragma once

#include <cstddef>

namespace kf::internal {

/// Buffers at least this big (bytes) are worth advising; smaller ones are left alone.
inline constexpr size_t kHugePageWorthyBytes = size_t{4} << 20;

/// Asks the kernel to back the 2 MiB-aligned interior of [data, data + bytes) with transparent huge pages
/// (madvise MADV_HUGEPAGE). Call it before the range is first written: pages already touched stay small.
/// Does nothing for ranges under kHugePageWorthyBytes, and ignores refusals (THP off, old kernel): it only
/// changes speed, never contents.
void AdviseHugePages(const void* data, size_t bytes);

}  // namespace kf::internal
