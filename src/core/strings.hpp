// Small string helpers used across modules (internal: src/ is on every module's private include path).
// Pure functions (RandomUuid4 draws random numbers); thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kf {

/// `s` without leading and trailing ASCII whitespace (space, \t, \n, \v, \f, \r).
std::string_view Trim(std::string_view s);

/// The parts joined with `sep` ("a, b, c").
std::string Join(const std::vector<std::string>& parts, std::string_view sep);

/// Splits text into lines without their '\n'; a trailing newline does not add an empty line.
std::vector<std::string_view> SplitLines(std::string_view text);

/// Case-insensitive (ASCII) substring search.
bool ContainsNoCase(std::string_view haystack, std::string_view needle);

/// Keeps the first quarter and the rest from the end of `text` when it is longer than `cap` bytes, cutting on
/// UTF-8 boundaries and marking the cut "\n[... N characters omitted ...]\n".
std::string CapMiddle(std::string_view text, size_t cap);

/// A random (version 4, RFC 4122 §4.4) UUID in its canonical text form "xxxxxxxx-xxxx-4xxx-[89ab]xxx-…"
/// (36 characters, lower-case hex). Thread-safe.
std::string RandomUuid4();

}  // namespace kf
