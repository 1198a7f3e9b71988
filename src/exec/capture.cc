// Output capture: capped per-stream storage (head + tail) and line splitting.
#include "exec/capture.hpp"

#include <cstring>

namespace kf::exec_internal {
namespace {

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

/// Length a UTF-8 sequence announces by its lead byte (1 for ASCII and for invalid leads).
size_t SequenceLength(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  if (lead >= 0xE0) return lead <= 0xEF ? 3 : 1;
  if (lead >= 0xC2) return 2;
  return 1;
}

/// Number of bytes at the end of `s` that form an incomplete (cut) UTF-8 sequence.
size_t IncompleteTail(const std::string& s) {
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(s[n - back]);
    if (IsContinuation(c)) continue;
    size_t need = SequenceLength(c);
    return need > back ? back : 0;
  }
  return 0;
}

/// Number of continuation bytes at the start of `s` (the rest of a character cut off in front).
size_t LeadingContinuations(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && i < 3 && IsContinuation(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

}  // namespace

CappedStream::CappedStream(size_t cap) : head_cap_(cap / 2), tail_cap_(cap - cap / 2) {}

void CappedStream::Append(std::string_view bytes) {
  total_ += bytes.size();
  if (head_.size() < head_cap_) {
    size_t take = std::min(bytes.size(), head_cap_ - head_.size());
    head_.append(bytes.data(), take);
    bytes.remove_prefix(take);
  }
  if (bytes.empty() || tail_cap_ == 0) return;
  if (bytes.size() >= tail_cap_) {
    tail_.assign(bytes.data() + bytes.size() - tail_cap_, tail_cap_);
    return;
  }
  tail_.append(bytes.data(), bytes.size());
  // Amortised O(1): trim only when the tail has grown to twice its cap.
  if (tail_.size() >= 2 * tail_cap_) tail_.erase(0, tail_.size() - tail_cap_);
}

std::string CutMarker(uint64_t dropped_bytes) {
  return "\n[... " + std::to_string(dropped_bytes) + " bytes cut by kf ...]\n";
}

std::string MakeNulVisible(std::string_view bytes) {
  if (std::memchr(bytes.data(), 0, bytes.size()) == nullptr) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 16);
  for (char c : bytes) {
    if (c == '\0') {
      out += "\xE2\x90\x80";  // U+2400 SYMBOL FOR NULL
    } else {
      out += c;
    }
  }
  return out;
}

std::string CappedStream::Finish() const {
  std::string tail = tail_;
  if (tail.size() > tail_cap_) tail.erase(0, tail.size() - tail_cap_);
  uint64_t kept = head_.size() + tail.size();
  if (kept == total_) return MakeNulVisible(head_ + tail);
  std::string head = head_;
  size_t cut_head = IncompleteTail(head);
  head.resize(head.size() - cut_head);
  size_t cut_tail = LeadingContinuations(tail);
  tail.erase(0, cut_tail);
  uint64_t dropped = total_ - head.size() - tail.size();
  return MakeNulVisible(head) + CutMarker(dropped) + MakeNulVisible(tail);
}

void LineSplitter::Append(std::string_view bytes) {
  while (!bytes.empty()) {
    const void* nl = std::memchr(bytes.data(), '\n', bytes.size());
    size_t len = nl ? static_cast<size_t>(static_cast<const char*>(nl) - bytes.data()) : bytes.size();
    if (!overlong_) {
      size_t room = kMaxLine - pending_.size();
      if (len > room) {
        pending_.append(bytes.data(), room);
        overlong_ = true;
      } else {
        pending_.append(bytes.data(), len);
      }
    }
    if (!nl) return;
    std::string_view line = pending_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    emit_(line);
    pending_.clear();
    overlong_ = false;
    bytes.remove_prefix(len + 1);
  }
}

void LineSplitter::Flush() {
  if (pending_.empty()) return;
  std::string_view line = pending_;
  if (line.back() == '\r') line.remove_suffix(1);
  emit_(line);
  pending_.clear();
  overlong_ = false;
}

}  // namespace kf::exec_internal
