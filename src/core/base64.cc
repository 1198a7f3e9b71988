// Base64 (RFC 4648 §4, standard alphabet, '=' padding). Own table-driven codec: the wire format of file
// contents (reference: Python's base64.b64encode / b64decode).
#include "kernelfoundry/base64.hpp"

#include <array>
#include <cstdint>

#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Reverse table: character -> 6-bit value, or 0xFF for characters outside the alphabet.
constexpr std::array<uint8_t, 256> MakeDecodeTable() {
  std::array<uint8_t, 256> table{};
  for (auto& v : table) v = 0xFF;
  for (uint8_t i = 0; i < 64; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = i;
  return table;
}
constexpr std::array<uint8_t, 256> kDecode = MakeDecodeTable();

[[noreturn]] void Fail(const std::string& what) {
  throw Error(ErrorKind::kParse, "invalid base64: " + what, "", "base64");
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  const auto* in = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  std::string out((n + 2) / 3 * 4, '=');
  char* o = out.data();
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8) | in[i + 2];
    *o++ = kAlphabet[(v >> 18) & 63];
    *o++ = kAlphabet[(v >> 12) & 63];
    *o++ = kAlphabet[(v >> 6) & 63];
    *o++ = kAlphabet[v & 63];
  }
  if (n - i == 1) {
    const uint32_t v = uint32_t{in[i]} << 16;
    o[0] = kAlphabet[(v >> 18) & 63];
    o[1] = kAlphabet[(v >> 12) & 63];
  } else if (n - i == 2) {
    const uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8);
    o[0] = kAlphabet[(v >> 18) & 63];
    o[1] = kAlphabet[(v >> 12) & 63];
    o[2] = kAlphabet[(v >> 6) & 63];
  }
  return out;
}

std::string Base64Decode(std::string_view text) {
  const size_t n = text.size();
  if (n % 4 != 0) Fail("length " + std::to_string(n) + " is not a multiple of 4");
  if (n == 0) return {};
  size_t pad = 0;
  if (text[n - 1] == '=') pad = (text[n - 2] == '=') ? 2 : 1;
  std::string out(n / 4 * 3 - pad, '\0');
  const auto* in = reinterpret_cast<const uint8_t*>(text.data());
  char* o = out.data();
  const size_t full = (pad == 0) ? n : n - 4;  // quads without padding
  for (size_t i = 0; i < full; i += 4) {
    const uint8_t a = kDecode[in[i]], b = kDecode[in[i + 1]], c = kDecode[in[i + 2]], d = kDecode[in[i + 3]];
    if ((a | b | c | d) & 0x80) Fail("character outside the alphabet near offset " + std::to_string(i));
    const uint32_t v = (uint32_t{a} << 18) | (uint32_t{b} << 12) | (uint32_t{c} << 6) | d;
    *o++ = static_cast<char>(v >> 16);
    *o++ = static_cast<char>((v >> 8) & 0xFF);
    *o++ = static_cast<char>(v & 0xFF);
  }
  if (pad != 0) {
    const size_t i = n - 4;
    const uint8_t a = kDecode[in[i]], b = kDecode[in[i + 1]];
    const uint8_t c = (pad == 2) ? 0 : kDecode[in[i + 2]];
    if ((a | b | c) & 0x80) Fail("character outside the alphabet near offset " + std::to_string(i));
    const uint32_t v = (uint32_t{a} << 18) | (uint32_t{b} << 12) | (uint32_t{c} << 6);
    *o++ = static_cast<char>(v >> 16);
    if (pad == 1) *o++ = static_cast<char>((v >> 8) & 0xFF);
  }
  return out;
}

}  // namespace kf
