// JsonWriter — a streaming JSON writer whose output is byte-identical to kf::DumpJson / nlohmann's
// dump(indent, ' ', ensure_ascii=false, error_handler_t::replace), used to write big documents (encoded
// tasks, results with artifacts) without building a kf::Json first.
//
// Why it is fast: strings are scanned a word at a time and copied in runs between the characters that need
// escaping; base64 text is written straight into the output (it never needs escaping); nothing is
// allocated per value. Byte identity with nlohmann: same separators ("," ":" compact; ",\n" ": " and
// `indent` spaces per level pretty; "{}" / "[]" for empty containers), same escapes (backslash-b, -t, -n,
// -f, -r, quote and backslash, and \u00xx for other bytes < 0x20; non-ASCII copied as is); strings that
// are not valid UTF-8 and floating-point numbers are handed to nlohmann itself (U+FFFD replacement,
// Grisu2 shortest form).
// tests/core/json_fast_test.cc checks the identity on random documents and strings.
//
// Usage: Begin/End calls must nest properly and every object member starts with Key(); violations are
// programming errors (not checked in release builds). Not thread-safe (one writer per thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"

namespace kf::internal {

class JsonWriter {
 public:
  /// Appends to `*out`. indent < 0: compact form; >= 0: pretty form with that many spaces per level.
  JsonWriter(std::string* out, int indent) : out_(*out), indent_(indent) {}

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  /// The next member's key (object context only).
  void Key(std::string_view key);

  void String(std::string_view text);
  /// A string holding the base64 text of `bytes` (encoded straight into the output).
  void Base64String(std::string_view bytes);
  void Bool(bool value);
  void Null();
  void Int(int64_t value);
  void Uint(uint64_t value);
  /// As nlohmann: shortest round-trip form ("1.0", "1e+20"); NaN and infinities become null.
  void Double(double value);
  /// Any kf::Json value (objects in their stored order).
  void Value(const Json& value);

  /// Reserves room for `bytes` more output characters.
  void Reserve(size_t bytes) { out_.reserve(out_.size() + bytes); }

 private:
  void BeforeValue();
  void NewLine(size_t depth);

  struct Frame {
    bool array;
    size_t count;
  };
  std::string& out_;
  int indent_;
  std::vector<Frame> stack_;
};

/// Appends `text` as a JSON string literal (quotes included), byte-identical to nlohmann's dump with
/// ensure_ascii=false and the replace error handler.
void AppendJsonString(std::string& out, std::string_view text);

}  // namespace kf::internal
