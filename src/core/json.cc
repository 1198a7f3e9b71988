#include "kernelfoundry/json.hpp"

#include "core/json_writer.hpp"
#include "kernelfoundry/error.hpp"

namespace kf {

Json ParseJson(std::string_view text, const std::string& source) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kParse, std::string("invalid JSON: ") + e.what(), source);
  }
}

std::string DumpJson(const Json& value, int indent) {
  // Same text as value.dump(indent, ' ', false, error_handler_t::replace), written by JsonWriter (strings
  // copied in runs instead of byte by byte).
  std::string out;
  internal::JsonWriter writer(&out, indent);
  writer.Value(value);
  return out;
}

}  // namespace kf
