// JsonWriter (see json_writer.hpp): nlohmann-identical JSON text, written without an intermediate kf::Json.
#include "core/json_writer.hpp"

#include <simdjson.h>

#include <charconv>
#include <cstring>

#include "kernelfoundry/base64.hpp"

namespace kf::internal {
namespace {

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHigh = 0x8080808080808080ull;

/// Non-zero iff some byte of v is < n (exact as a predicate for n <= 128).
constexpr uint64_t HasLess(uint64_t v, uint8_t n) { return (v - kOnes * n) & ~v & kHigh; }
/// Non-zero iff some byte of v is zero.
constexpr uint64_t HasZero(uint64_t v) { return (v - kOnes) & ~v & kHigh; }

/// True for the bytes nlohmann escapes: control characters, '"' and '\'.
inline bool NeedsEscape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

/// Index of the first byte in [from, n) that needs escaping, or (with `high`) is >= 0x80; n when none.
size_t FindSpecial(const char* s, size_t from, size_t n, bool high) {
  size_t i = from;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, s + i, 8);
    uint64_t hit = HasLess(v, 0x20) | HasZero(v ^ (kOnes * '"')) | HasZero(v ^ (kOnes * '\\'));
    if (high) hit |= v & kHigh;
    if (hit != 0) break;
  }
  for (; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (NeedsEscape(c) || (high && c >= 0x80)) return i;
  }
  return n;
}

bool HasHighByte(const char* s, size_t from, size_t n) {
  size_t i = from;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, s + i, 8);
    if (v & kHigh) return true;
  }
  for (; i < n; ++i)
    if (static_cast<unsigned char>(s[i]) >= 0x80) return true;
  return false;
}

void AppendEscape(std::string& out, unsigned char c) {
  switch (c) {
    case '\b': out += "\\b"; return;
    case '\t': out += "\\t"; return;
    case '\n': out += "\\n"; return;
    case '\f': out += "\\f"; return;
    case '\r': out += "\\r"; return;
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(esc, 6);
    }
  }
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view text) {
  const char* s = text.data();
  const size_t n = text.size();
  size_t special = FindSpecial(s, 0, n, /*high=*/true);
  if (special == n) {  // plain ASCII: one copy
    out.reserve(out.size() + n + 2);
    out += '"';
    out.append(s, n);
    out += '"';
    return;
  }
  if (HasHighByte(s, special, n) && !simdjson::validate_utf8(s, n)) {
    // Invalid UTF-8: nlohmann's own replacement rules (U+FFFD per maximal invalid subsequence).
    out += Json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  out.reserve(out.size() + n + 2);
  out += '"';
  size_t run = 0;  // start of the bytes not yet copied
  for (size_t i = FindSpecial(s, special, n, false); i < n; i = FindSpecial(s, i + 1, n, false)) {
    out.append(s + run, i - run);
    AppendEscape(out, static_cast<unsigned char>(s[i]));
    run = i + 1;
  }
  out.append(s + run, n - run);
  out += '"';
}

void JsonWriter::NewLine(size_t depth) {
  out_ += '\n';
  out_.append(depth * static_cast<size_t>(indent_), ' ');
}

void JsonWriter::BeforeValue() {
  if (stack_.empty() || !stack_.back().array) return;  // top level, or after Key()
  Frame& f = stack_.back();
  if (f.count++ > 0) out_ += ',';
  if (indent_ >= 0) NewLine(stack_.size());
}

void JsonWriter::Key(std::string_view key) {
  Frame& f = stack_.back();
  if (f.count++ > 0) out_ += ',';
  if (indent_ >= 0) NewLine(stack_.size());
  AppendJsonString(out_, key);
  if (indent_ >= 0) {
    out_ += ": ";
  } else {
    out_ += ':';
  }
}

void JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
  stack_.push_back({false, 0});
}

void JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  stack_.push_back({true, 0});
}

void JsonWriter::EndObject() {
  const Frame f = stack_.back();
  stack_.pop_back();
  if (f.count > 0 && indent_ >= 0) NewLine(stack_.size());
  out_ += '}';
}

void JsonWriter::EndArray() {
  const Frame f = stack_.back();
  stack_.pop_back();
  if (f.count > 0 && indent_ >= 0) NewLine(stack_.size());
  out_ += ']';
}

void JsonWriter::String(std::string_view text) {
  BeforeValue();
  AppendJsonString(out_, text);
}

void JsonWriter::Base64String(std::string_view bytes) {
  BeforeValue();
  out_ += '"';
  Base64Append(out_, bytes);
  out_ += '"';
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
}

void JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(buf, r.ptr);
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(buf, r.ptr);
}

void JsonWriter::Double(double value) {
  BeforeValue();
  out_ += Json(value).dump();  // nlohmann's Grisu2 form, e.g. "1.0", "1e+20", null for NaN
}

void JsonWriter::Value(const Json& value) {
  switch (value.type()) {
    case Json::value_t::object:
      BeginObject();
      for (auto it = value.begin(); it != value.end(); ++it) {
        Key(it.key());
        Value(it.value());
      }
      EndObject();
      return;
    case Json::value_t::array:
      BeginArray();
      for (const Json& item : value) Value(item);
      EndArray();
      return;
    case Json::value_t::string: String(value.get_ref<const std::string&>()); return;
    case Json::value_t::boolean: Bool(value.get<bool>()); return;
    case Json::value_t::number_integer: Int(value.get<int64_t>()); return;
    case Json::value_t::number_unsigned: Uint(value.get<uint64_t>()); return;
    case Json::value_t::number_float: Double(value.get<double>()); return;
    case Json::value_t::null: Null(); return;
    default:  // binary / discarded: never produced by parsing; nlohmann's compact form
      BeforeValue();
      out_ += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      return;
  }
}

}  // namespace kf::internal
