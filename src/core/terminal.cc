// Terminal-escape stripping and UTF-8 helpers (see include/kernelfoundry/terminal.hpp).
//
// The stripper is a sequence of hand-written linear scans, one per step of the reference's algorithm
// (spec §3.1). The steps must stay separate passes: removing one sequence can join an ESC with the text
// after it (e.g. "ESC ESC[0m P" -> "ESC P", a short escape for step 5), and the reference's regex
// substitutions see exactly that. Searches for a terminator never cross a newline and are memoised, so
// every pass is O(n) even on adversarial input (many unterminated openers on one long line).
#include "kernelfoundry/terminal.hpp"

#include <cstdint>
#include <cstring>
#include <fmt/format.h>

namespace kf {
namespace {

constexpr char kEsc = '\x1b';
constexpr char kBel = '\x07';
constexpr size_t kNpos = std::string_view::npos;

inline unsigned char U(char c) { return static_cast<unsigned char>(c); }
inline bool InRange(char c, unsigned lo, unsigned hi) { return U(c) >= lo && U(c) <= hi; }

/// Length of a string terminator at i (BEL -> 1, ESC '\' -> 2), else 0.
inline size_t StLen(std::string_view s, size_t i) {
  if (s[i] == kBel) return 1;
  if (s[i] == kEsc && i + 1 < s.size() && s[i + 1] == '\\') return 2;
  return 0;
}

/// Finds the first position >= from where `stop(s, i)` holds (or s.size()). Memoises the last answer:
/// for queries that do not decrease, the total scanning work is O(n).
template <class Stop>
class StopFinder {
 public:
  StopFinder(std::string_view s, Stop stop) : s_(s), stop_(stop) {}
  size_t Find(size_t from) {
    if (valid_ && from >= from_ && from <= result_) return result_;
    size_t i = from;
    while (i < s_.size() && !stop_(s_, i)) ++i;
    valid_ = true;
    from_ = from;
    result_ = i;
    return i;
  }

 private:
  std::string_view s_;
  Stop stop_;
  bool valid_ = false;
  size_t from_ = 0;
  size_t result_ = 0;
};

/// Copies s to out up to the next ESC at or after i; returns the ESC position (or s.size()).
inline size_t CopyToEsc(std::string_view s, size_t i, std::string& out) {
  const void* hit = i < s.size() ? std::memchr(s.data() + i, kEsc, s.size() - i) : nullptr;
  size_t e = hit ? static_cast<size_t>(static_cast<const char*>(hit) - s.data()) : s.size();
  out.append(s.data() + i, e - i);
  return e;
}

// Step 4: CSI sequences.
std::string StripCsi(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while ((i = CopyToEsc(s, i, out)) < s.size()) {
    if (i + 1 < s.size() && s[i + 1] == '[') {
      size_t j = i + 2;
      while (j < s.size() && InRange(s[j], 0x30, 0x3F)) ++j;
      while (j < s.size() && InRange(s[j], 0x20, 0x2F)) ++j;
      if (j < s.size() && InRange(s[j], 0x40, 0x7E)) {
        i = j + 1;
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

// Length of the OSC-8 closer "ESC ] 8 ; ; ST" at i, or 0.
size_t CloserLen(std::string_view s, size_t i) {
  if (s.compare(i, 5, "\x1b]8;;") != 0 || i + 5 >= s.size()) return 0;
  size_t st = StLen(s, i + 5);
  return st ? 5 + st : 0;
}

// Step 1: OSC-8 hyperlinks rendered as text.
std::string RenderHyperlinks(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto closer_or_newline = [](std::string_view t, size_t i) { return t[i] == '\n' || CloserLen(t, i) != 0; };
  StopFinder<decltype(closer_or_newline)> closers(s, closer_or_newline);
  size_t i = 0;
  while ((i = CopyToEsc(s, i, out)) < s.size()) {
    if (s.compare(i, 4, "\x1b]8;") == 0) {
      size_t j = i + 4;  // params: up to ';'
      while (j < s.size() && s[j] != ';' && s[j] != '\n' && s[j] != kBel && s[j] != kEsc) ++j;
      if (j < s.size() && s[j] == ';') {
        size_t uri_begin = j + 1, k = uri_begin;  // URI: up to ST
        while (k < s.size() && s[k] != '\n' && s[k] != kBel && s[k] != kEsc) ++k;
        size_t st = k < s.size() ? StLen(s, k) : 0;
        if (st != 0) {
          size_t label_begin = k + st;
          size_t c = closers.Find(label_begin);
          if (c < s.size() && s[c] != '\n') {
            std::string_view uri = s.substr(uri_begin, k - uri_begin);
            std::string label = StripCsi(s.substr(label_begin, c - label_begin));
            if (uri.empty() || uri == label) {
              out += label;
            } else if (IsPythonBlank(label)) {
              out += uri;
            } else {
              out += label;
              out += " (";
              out += uri;
              out += ')';
            }
            i = c + CloserLen(s, c);
            continue;
          }
        }
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

// Steps 2 and 3: ESC + one of `introducers` … first ST on the same line, deleted.
std::string StripStrings(std::string_view s, std::string_view introducers) {
  std::string out;
  out.reserve(s.size());
  auto st_or_newline = [](std::string_view t, size_t i) { return t[i] == '\n' || StLen(t, i) != 0; };
  StopFinder<decltype(st_or_newline)> terminators(s, st_or_newline);
  size_t i = 0;
  while ((i = CopyToEsc(s, i, out)) < s.size()) {
    if (i + 1 < s.size() && introducers.find(s[i + 1]) != kNpos) {
      size_t t = terminators.Find(i + 2);
      if (t < s.size() && s[t] != '\n') {
        i = t + StLen(s, t);
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

// Step 5: two- and three-(or more-)byte escapes.
std::string StripShortEscapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while ((i = CopyToEsc(s, i, out)) < s.size()) {
    size_t j = i + 1;
    if (j < s.size() && InRange(s[j], 0x20, 0x2F)) {
      while (j < s.size() && InRange(s[j], 0x20, 0x2F)) ++j;
      if (j < s.size() && InRange(s[j], 0x30, 0x7E)) {
        i = j + 1;
        continue;
      }
    } else if (j < s.size() && (InRange(s[j], 0x30, 0x5A) || InRange(s[j], 0x5C, 0x7E))) {
      i = j + 1;
      continue;
    }
    out.push_back(s[i++]);
  }
  return out;
}

// ---- UTF-8 ----

/// Result of decoding one sequence at a position: `len` bytes; `ok` false means those `len` bytes are one
/// maximal invalid subpart (reason: 0 invalid start, 1 invalid continuation, 2 unexpected end).
struct Utf8Step {
  size_t len;
  bool ok;
  int reason;
  char32_t cp;
};

Utf8Step DecodeOne(std::string_view s, size_t i) {
  unsigned char b = U(s[i]);
  if (b < 0x80) return {1, true, 0, b};
  size_t need;
  unsigned lo = 0x80, hi = 0xBF;
  char32_t cp;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1, cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2, cp = b & 0x0F;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3, cp = b & 0x07;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return {1, false, 0, 0};
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return {k, false, 2, 0};
    unsigned char c = U(s[i + k]);
    unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) return {k, false, 1, 0};
    cp = (cp << 6) | (c & 0x3F);
  }
  return {need + 1, true, 0, cp};
}

/// Returns the first position >= i holding a non-ASCII byte (or s.size()); checks 8 bytes at a time.
size_t SkipAscii(std::string_view s, size_t i) {
  while (i + 8 <= s.size()) {
    uint64_t word;
    std::memcpy(&word, s.data() + i, 8);
    if (word & 0x8080808080808080ull) break;
    i += 8;
  }
  while (i < s.size() && U(s[i]) < 0x80) ++i;
  return i;
}

bool IsPythonSpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

}  // namespace

std::string StripTerminalEscapes(std::string_view text) {
  if (text.find(kEsc) == kNpos) return std::string(text);
  std::string s = RenderHyperlinks(text);
  s = StripStrings(s, "PX^_");
  s = StripStrings(s, "]");
  s = StripCsi(s);
  s = StripShortEscapes(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; (i = CopyToEsc(s, i, out)) < s.size();) ++i;  // step 6: drop the remaining ESC bytes
  return out;
}

std::string DecodeUtf8Replace(std::string_view bytes) {
  std::string out;
  size_t run = 0;  // start of the pending valid run, appended in bulk
  size_t i = 0;
  while ((i = SkipAscii(bytes, i)) < bytes.size()) {
    Utf8Step st = DecodeOne(bytes, i);
    if (!st.ok) {
      if (out.empty()) out.reserve(bytes.size() + 16);
      out.append(bytes.data() + run, i - run);
      out += "\xEF\xBF\xBD";  // U+FFFD
      run = i + st.len;
    }
    i += st.len;
  }
  if (run == 0) return std::string(bytes);
  out.append(bytes.data() + run, bytes.size() - run);
  return out;
}

bool IsValidUtf8(std::string_view bytes) {
  size_t i = 0;
  while ((i = SkipAscii(bytes, i)) < bytes.size()) {
    Utf8Step st = DecodeOne(bytes, i);
    if (!st.ok) return false;
    i += st.len;
  }
  return true;
}

std::string DescribeUtf8Error(std::string_view bytes) {
  static constexpr const char* kReasons[] = {"invalid start byte", "invalid continuation byte",
                                             "unexpected end of data"};
  size_t i = 0;
  while (i < bytes.size()) {
    Utf8Step st = DecodeOne(bytes, i);
    if (!st.ok) {
      if (st.len == 1) {
        return fmt::format("'utf-8' codec can't decode byte 0x{:02x} in position {}: {}", U(bytes[i]), i,
                           kReasons[st.reason]);
      }
      return fmt::format("'utf-8' codec can't decode bytes in position {}-{}: {}", i, i + st.len - 1,
                         kReasons[st.reason]);
    }
    i += st.len;
  }
  return {};
}

bool IsPythonBlank(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    Utf8Step st = DecodeOne(text, i);
    if (!st.ok || !IsPythonSpace(st.cp)) return false;
    i += st.len;
  }
  return true;
}

}  // namespace kf
