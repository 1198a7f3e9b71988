// Base64 (RFC 4648 §4, standard alphabet, '=' padding): the wire format of file contents (reference:
// Python's base64.b64encode / b64decode). Own table-driven codec working on whole words:
//  * encode: 6 input bytes (one unaligned 64-bit load) -> 8 characters through a 4096-entry table of
//    character pairs (12 bits -> 2 characters), so a quad costs two loads instead of four shifts+loads;
//  * decode: 4 characters -> 3 bytes as the OR of four pre-shifted 32-bit tables (the layout of Nick
//    Galbreath's modp_b64); an invalid character sets bit 24, checked once per chunk, and the offset of the
//    first bad quad is looked up only when that happens.
// Both loops are branch-free per quad. Big-endian hosts use the plain per-quad loop.
#include "kernelfoundry/base64.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <thread>

#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr bool kLittle = std::endian::native == std::endian::little;

/// Reverse table: character -> 6-bit value, or 0xFF for characters outside the alphabet.
constexpr std::array<uint8_t, 256> MakeDecodeTable() {
  std::array<uint8_t, 256> table{};
  for (auto& v : table) v = 0xFF;
  for (uint8_t i = 0; i < 64; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = i;
  return table;
}
constexpr std::array<uint8_t, 256> kDecode = MakeDecodeTable();

/// 12 bits -> the two characters that encode them, in output order.
struct CharPair {
  char c[2];
};
constexpr std::array<CharPair, 4096> MakePairTable() {
  std::array<CharPair, 4096> table{};
  for (int i = 0; i < 4096; ++i) table[i] = CharPair{{kAlphabet[i >> 6], kAlphabet[i & 63]}};
  return table;
}
constexpr std::array<CharPair, 4096> kPairs = MakePairTable();

/// Decode tables for little-endian hosts: table k maps character k of a quad to its bits already placed in
/// the little-endian 32-bit word whose first three bytes are the decoded bytes; invalid -> 0x01FFFFFF.
constexpr uint32_t kBad = 0x01FFFFFF;
constexpr std::array<uint32_t, 256> MakeShifted(int k) {
  std::array<uint32_t, 256> table{};
  for (int ch = 0; ch < 256; ++ch) {
    const uint32_t v = kDecode[ch];
    if (v == 0xFF) {
      table[ch] = kBad;
      continue;
    }
    switch (k) {
      case 0: table[ch] = v << 2; break;                                      // byte0 bits 7..2
      case 1: table[ch] = (v >> 4) | ((v & 0x0F) << 12); break;                // byte0 1..0, byte1 7..4
      case 2: table[ch] = ((v >> 2) << 8) | ((v & 0x03) << 22); break;         // byte1 3..0, byte2 7..6
      default: table[ch] = v << 16; break;                                     // byte2 5..0
    }
  }
  return table;
}
constexpr std::array<uint32_t, 256> kD0 = MakeShifted(0), kD1 = MakeShifted(1), kD2 = MakeShifted(2),
                                     kD3 = MakeShifted(3);

[[noreturn]] void Fail(const std::string& what) {
  throw Error(ErrorKind::kParse, "invalid base64: " + what, "", "base64");
}

[[noreturn]] void FailAt(size_t offset) { Fail("character outside the alphabet near offset " + std::to_string(offset)); }

/// Offset of the first quad in [0, end) holding a character outside the alphabet (end when none).
size_t FirstBadQuad(const uint8_t* in, size_t end) {
  for (size_t i = 0; i < end; i += 4) {
    if ((kDecode[in[i]] | kDecode[in[i + 1]] | kDecode[in[i + 2]] | kDecode[in[i + 3]]) & 0x80) return i;
  }
  return end;
}

uint64_t LoadBigEndian64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (kLittle) v = __builtin_bswap64(v);
  return v;
}

}  // namespace

void Base64EncodeTo(std::string_view bytes, char* o) {
  const auto* in = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  // 6 bytes per step, read through an 8-byte load (so the loop stops 2 bytes early).
  for (; i + 8 <= n; i += 6, o += 8) {
    const uint64_t v = LoadBigEndian64(in + i);
    std::memcpy(o + 0, kPairs[(v >> 52) & 0xFFF].c, 2);
    std::memcpy(o + 2, kPairs[(v >> 40) & 0xFFF].c, 2);
    std::memcpy(o + 4, kPairs[(v >> 28) & 0xFFF].c, 2);
    std::memcpy(o + 6, kPairs[(v >> 16) & 0xFFF].c, 2);
  }
  for (; i + 3 <= n; i += 3, o += 4) {
    const uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8) | in[i + 2];
    std::memcpy(o + 0, kPairs[v >> 12].c, 2);
    std::memcpy(o + 2, kPairs[v & 0xFFF].c, 2);
  }
  if (n - i == 1) {
    const uint32_t v = uint32_t{in[i]} << 16;
    o[0] = kAlphabet[(v >> 18) & 63];
    o[1] = kAlphabet[(v >> 12) & 63];
    o[2] = '=';
    o[3] = '=';
  } else if (n - i == 2) {
    const uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8);
    o[0] = kAlphabet[(v >> 18) & 63];
    o[1] = kAlphabet[(v >> 12) & 63];
    o[2] = kAlphabet[(v >> 6) & 63];
    o[3] = '=';
  }
}

std::string Base64Encode(std::string_view bytes) {
  std::string out(Base64EncodedSize(bytes.size()), '\0');
  Base64EncodeTo(bytes, out.data());
  return out;
}

void Base64Append(std::string& out, std::string_view bytes) {
  const size_t at = out.size();
  out.resize(at + Base64EncodedSize(bytes.size()));
  Base64EncodeTo(bytes, out.data() + at);
}

size_t Base64DecodedSize(std::string_view text) {
  const size_t n = text.size();
  if (n % 4 != 0) Fail("length " + std::to_string(n) + " is not a multiple of 4");
  if (n == 0) return 0;
  const size_t pad = text[n - 1] != '=' ? 0 : text[n - 2] == '=' ? 2 : 1;
  return n / 4 * 3 - pad;
}

std::string Base64Decode(std::string_view text) {
  std::string out(Base64DecodedSize(text), '\0');
  Base64DecodeTo(text, out.data());
  return out;
}

void Base64DecodeTo(std::string_view text, char* o) {
  const size_t n = text.size();
  if (n % 4 != 0) Fail("length " + std::to_string(n) + " is not a multiple of 4");
  if (n == 0) return;
  size_t pad = 0;
  if (text[n - 1] == '=') pad = (text[n - 2] == '=') ? 2 : 1;
  const auto* in = reinterpret_cast<const uint8_t*>(text.data());
  const size_t full = (pad == 0) ? n : n - 4;  // quads without padding
  size_t i = 0;
  if constexpr (kLittle) {
    // Each quad stores a 4-byte word and advances 3, so the loop stops one quad before the end of the
    // output (the last quad is written byte by byte below). Errors are collected in bit 24 per chunk.
    uint32_t bad = 0;
    for (; i + 4 < full; i += 4, o += 3) {
      const uint32_t x = kD0[in[i]] | kD1[in[i + 1]] | kD2[in[i + 2]] | kD3[in[i + 3]];
      bad |= x;
      std::memcpy(o, &x, 4);
    }
    if (bad & 0xFF000000u) FailAt(FirstBadQuad(in, i));
  }
  for (; i < full; i += 4) {
    const uint8_t a = kDecode[in[i]], b = kDecode[in[i + 1]], c = kDecode[in[i + 2]], d = kDecode[in[i + 3]];
    if ((a | b | c | d) & 0x80) FailAt(i);
    const uint32_t v = (uint32_t{a} << 18) | (uint32_t{b} << 12) | (uint32_t{c} << 6) | d;
    *o++ = static_cast<char>(v >> 16);
    *o++ = static_cast<char>((v >> 8) & 0xFF);
    *o++ = static_cast<char>(v & 0xFF);
  }
  if (pad != 0) {
    const size_t q = n - 4;
    const uint8_t a = kDecode[in[q]], b = kDecode[in[q + 1]];
    const uint8_t c = (pad == 2) ? 0 : kDecode[in[q + 2]];
    if ((a | b | c) & 0x80) FailAt(q);
    const uint32_t v = (uint32_t{a} << 18) | (uint32_t{b} << 12) | (uint32_t{c} << 6);
    *o++ = static_cast<char>(v >> 16);
    if (pad == 1) *o++ = static_cast<char>((v >> 8) & 0xFF);
  }
}

std::optional<std::pair<size_t, Error>> Base64DecodeAll(const std::vector<Base64Job>& jobs) {
  // Decodes jobs [begin, end) in order; returns the first failure of the range.
  auto run = [&jobs](size_t begin, size_t end) -> std::optional<std::pair<size_t, Error>> {
    for (size_t i = begin; i < end; ++i) {
      try {
        jobs[i].out->assign(Base64DecodedSize(jobs[i].text), '\0');
        Base64DecodeTo(jobs[i].text, jobs[i].out->data());
      } catch (const Error& e) {
        return std::make_pair(i, e);
      }
    }
    return std::nullopt;
  };
  size_t total = 0;
  for (const Base64Job& job : jobs) total += job.text.size();
  const size_t threads =
      total < kBase64ParallelBytes ? 1 : std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4);
  if (threads == 1) return run(0, jobs.size());
  // Range k ends where the running text size passes (k + 1) / threads of the total.
  std::vector<size_t> bounds{0};
  size_t seen = 0;
  for (size_t i = 0; i < jobs.size() && bounds.size() < threads; ++i) {
    seen += jobs[i].text.size();
    if (seen * threads >= total * bounds.size()) bounds.push_back(i + 1);
  }
  bounds.push_back(jobs.size());
  std::vector<std::optional<std::pair<size_t, Error>>> failures(bounds.size() - 1);
  std::vector<std::thread> workers;
  for (size_t k = 1; k + 1 < bounds.size(); ++k) {
    try {
      workers.emplace_back([&, k] { failures[k] = run(bounds[k], bounds[k + 1]); });
    } catch (const std::system_error&) {  // no thread to be had: this one does the range
      failures[k] = run(bounds[k], bounds[k + 1]);
    }
  }
  failures[0] = run(bounds[0], bounds[1]);
  for (std::thread& t : workers) t.join();
  for (auto& f : failures) {
    if (f) return f;
  }
  return std::nullopt;
}

}  // namespace kf
