// kf::Json — the JSON value type used on every wire surface.
//
// An insertion-ordered nlohmann JSON value, so that encodings keep the key order of the reference (Python
// dicts keep insertion order) and config files keep their YAML order. Parse errors from nlohmann are
// converted to kf::Error(kParse) by ParseJson.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kf {

using Json = nlohmann::ordered_json;

/// Parses text as JSON. Throws kf::Error(kParse) naming `source` (a file name or "<stdin>") on bad input.
Json ParseJson(std::string_view text, const std::string& source);

/// Serialises like Python's json.dumps(indent=indent) with ensure_ascii=False: UTF-8 output, invalid UTF-8
/// replaced by U+FFFD (never throws on bad bytes). indent < 0 gives the compact form.
std::string DumpJson(const Json& value, int indent = -1);

}  // namespace kf
