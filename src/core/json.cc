#include "kernelfoundry/json.hpp"

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
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kf
