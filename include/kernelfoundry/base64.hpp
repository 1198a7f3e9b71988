// Base64 (RFC 4648, standard alphabet, padded) — the encoding of file contents on the wire.
//
// The codec is table-driven and works on whole machine words (12-bit pair tables for encoding, four
// pre-shifted 32-bit tables for decoding): about 2 GB/s per core, several times CPython's binascii.
// Decoding is exactly as strict as the reference's wire needs: length a multiple of 4, only the alphabet,
// '=' only as the final one or two characters; the unused low bits of the last quad are not checked
// (Python's b64decode accepts them too). All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernelfoundry/error.hpp"

namespace kf {

/// Encodes bytes as padded standard base64 (same text as Python's base64.b64encode).
std::string Base64Encode(std::string_view bytes);
/// Decodes padded standard base64. Throws kf::Error(kParse, field "base64") on invalid characters or
/// length, naming the offset of the first bad quad.
std::string Base64Decode(std::string_view text);
/// Bytes that `text` decodes to (3 per quad, less the '=' padding). Throws kf::Error(kParse, field "base64")
/// when the length is not a multiple of 4; the characters are checked by Base64DecodeTo.
size_t Base64DecodedSize(std::string_view text);
/// Decodes `text` into `out`, which must have room for Base64DecodedSize(text) bytes. Same checks and errors as
/// Base64Decode; on an error `out` holds partial output. For decoders that place bytes into storage they own.
void Base64DecodeTo(std::string_view text, char* out);

/// Length in characters of the base64 text of `n` bytes: 4 * ceil(n / 3).
constexpr size_t Base64EncodedSize(size_t n) { return (n + 2) / 3 * 4; }
/// Writes the base64 text of `bytes` to `out`, which must have room for Base64EncodedSize(bytes.size())
/// characters (no terminating NUL is written). For writers that place the text straight into a larger buffer.
void Base64EncodeTo(std::string_view bytes, char* out);
/// Appends the base64 text of `bytes` to `out` (one allocation at most).
void Base64Append(std::string& out, std::string_view bytes);

/// One text of a Base64DecodeAll batch and the string its bytes go to.
struct Base64Job {
  std::string_view text;
  std::string* out;  ///< resized to the decoded size and filled
};
/// Base64DecodeAll decodes on several threads once the texts add up to this many bytes (8 MiB): below it a
/// thread's start costs more than it saves.
inline constexpr size_t kBase64ParallelBytes = size_t{8} << 20;
/// Decodes every job into its `out`. With kBase64ParallelBytes of text or more, the jobs are split into
/// contiguous ranges of about equal text over up to 4 threads (std::thread::hardware_concurrency); the 50 MB
/// task of bench/task_bench decodes in 27 ms on 2 threads vs 46 ms on one (2-core VM, 2026-12-01), most of
/// it the page faults of the new strings, which threads take in parallel. Returns the index and error of
/// the first job, in job order, whose text is invalid (the same error Base64Decode throws; that job's and
/// later jobs' outputs are then unspecified), or nullopt when all decoded.
std::optional<std::pair<size_t, Error>> Base64DecodeAll(const std::vector<Base64Job>& jobs);

}  // namespace kf
