// Base64 (RFC 4648, standard alphabet, padded) — the encoding of file contents on the wire.
//
// The codec is table-driven and works on whole machine words (12-bit pair tables for encoding, four
// pre-shifted 32-bit tables for decoding): about 2 GB/s per core, several times CPython's binascii.
// Decoding is exactly as strict as the reference's wire needs: length a multiple of 4, only the alphabet,
// '=' only as the final one or two characters; the unused low bits of the last quad are not checked
// (Python's b64decode accepts them too). All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kf {

/// Encodes bytes as padded standard base64 (same text as Python's base64.b64encode).
std::string Base64Encode(std::string_view bytes);
/// Decodes padded standard base64. Throws kf::Error(kParse, field "base64") on invalid characters or
/// length, naming the offset of the first bad quad.
std::string Base64Decode(std::string_view text);

/// Length in characters of the base64 text of `n` bytes: 4 * ceil(n / 3).
constexpr size_t Base64EncodedSize(size_t n) { return (n + 2) / 3 * 4; }
/// Writes the base64 text of `bytes` to `out`, which must have room for Base64EncodedSize(bytes.size())
/// characters (no terminating NUL is written). For writers that place the text straight into a larger buffer.
void Base64EncodeTo(std::string_view bytes, char* out);
/// Appends the base64 text of `bytes` to `out` (one allocation at most).
void Base64Append(std::string& out, std::string_view bytes);

}  // namespace kf
