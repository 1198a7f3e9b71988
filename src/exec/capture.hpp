// Output capture: a per-stream byte store capped to its first and last halves, and a line splitter that
// feeds the end-marker monitor and the caller's line callback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace kf::exec_internal {

/// Keeps at most `cap` bytes of a stream: the first cap/2 bytes and the last cap - cap/2 bytes.
/// Memory stays O(cap) whatever the stream's length.
class CappedStream {
 public:
  explicit CappedStream(size_t cap);
  void Append(std::string_view bytes);
  uint64_t total() const { return total_; }
  /// The kept bytes. When bytes were dropped: head + "\n[... N bytes cut by kf ...]\n" + tail, with the
  /// cut moved to UTF-8 character boundaries (the bytes of a split character are counted in N).
  /// NUL bytes are replaced by U+2400 (SYMBOL FOR NULL) so they stay visible in text and JSON.
  std::string Finish() const;

 private:
  size_t head_cap_, tail_cap_;
  std::string head_, tail_;
  uint64_t total_ = 0;
};

/// The marker inserted where bytes were cut.
std::string CutMarker(uint64_t dropped_bytes);
/// Replaces each NUL byte by U+2400.
std::string MakeNulVisible(std::string_view bytes);

/// Splits a byte stream into lines. A line longer than kMaxLine keeps its first kMaxLine bytes (the rest
/// is skipped up to the next '\n'), so one 200 kB line costs 64 KiB, not 200 kB.
class LineSplitter {
 public:
  static constexpr size_t kMaxLine = 64 * 1024;
  /// `emit` gets each complete line without its '\n' (a trailing '\r' is removed too).
  explicit LineSplitter(std::function<void(std::string_view)> emit) : emit_(std::move(emit)) {}
  void Append(std::string_view bytes);
  /// Emits a final unterminated line, if any.
  void Flush();

 private:
  std::function<void(std::string_view)> emit_;
  std::string pending_;
  bool overlong_ = false;
};

}  // namespace kf::exec_internal
