// Body serialization of Celery messages (celery-interop.md §2.6): msgpack through nlohmann's msgpack codec
// (one library for both encodings), JSON with kombu's {"__type__", "__value__"} envelopes understood.
#include <string>

#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/celery.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/terminal.hpp"

namespace kf::celery {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Binary values (msgpack bin/ext) become strings of their bytes, made valid UTF-8; kombu envelopes are
// unwrapped; invalid UTF-8 in strings is replaced (Python would refuse it; we are lenient on input).
Json Normalise(Json&& value, bool json_envelopes) {
  switch (value.type()) {
    case Json::value_t::binary: {
      const auto& bin = value.get_binary();
      return DecodeUtf8Replace(std::string_view(reinterpret_cast<const char*>(bin.data()), bin.size()));
    }
    case Json::value_t::string:
      if (!IsValidUtf8(value.get_ref<const std::string&>())) return DecodeUtf8Replace(value.get<std::string>());
      return std::move(value);
    case Json::value_t::array: {
      for (Json& item : value) item = Normalise(std::move(item), json_envelopes);
      return std::move(value);
    }
    case Json::value_t::object: {
      if (json_envelopes && value.size() == 2 && value.contains("__type__") && value.contains("__value__")) {
        const Json& type = value["__type__"];
        const Json& inner = value["__value__"];
        std::string t = type.is_string() ? type.get<std::string>() : "";
        if (t == "base64" && inner.is_string()) return DecodeUtf8Replace(Base64Decode(inner.get<std::string>()));
        if (t == "bytes" || t == "datetime" || t == "date" || t == "time" || t == "uuid" || t == "decimal") {
          return Normalise(Json(inner), json_envelopes);
        }
        throw Error(ErrorKind::kParse, "unknown kombu JSON envelope __type__ " + DumpJson(type), "", "body");
      }
      Json out = Json::object();
      for (auto it = value.begin(); it != value.end(); ++it) {
        std::string key = IsValidUtf8(it.key()) ? it.key() : DecodeUtf8Replace(it.key());
        out[key] = Normalise(std::move(it.value()), json_envelopes);
      }
      return out;
    }
    default:
      return std::move(value);
  }
}

}  // namespace

std::string_view ContentTypeName(ContentType type) {
  return type == ContentType::kMsgpack ? "application/x-msgpack" : "application/json";
}

std::string_view ContentEncodingName(ContentType type) { return type == ContentType::kMsgpack ? "binary" : "utf-8"; }

void SanitizeUtf8(Json& value) {
  switch (value.type()) {
    case Json::value_t::string:
      if (!IsValidUtf8(value.get_ref<const std::string&>())) value = DecodeUtf8Replace(value.get<std::string>());
      break;
    case Json::value_t::array:
      for (Json& item : value) SanitizeUtf8(item);
      break;
    case Json::value_t::object: {
      bool bad_key = false;
      for (auto it = value.begin(); it != value.end(); ++it) {
        bad_key = bad_key || !IsValidUtf8(it.key());
        SanitizeUtf8(it.value());
      }
      if (bad_key) {
        Json out = Json::object();
        for (auto it = value.begin(); it != value.end(); ++it) out[DecodeUtf8Replace(it.key())] = std::move(it.value());
        value = std::move(out);
      }
      break;
    }
    case Json::value_t::binary: {
      const auto& bin = value.get_binary();
      value = DecodeUtf8Replace(std::string_view(reinterpret_cast<const char*>(bin.data()), bin.size()));
      break;
    }
    default:
      break;
  }
}

std::string SerializeBody(const Json& value, ContentType type) {
  if (type == ContentType::kJson) return DumpJson(value);
  Json clean = value;
  SanitizeUtf8(clean);
  std::string out;
  Json::to_msgpack(clean, nlohmann::detail::output_adapter<char>(out));
  return out;
}

Json DeserializeBody(std::string_view body, std::string_view content_type) {
  const std::string type = Lower(content_type);
  if (type == "application/x-msgpack" || type == "application/msgpack") {
    Json value;
    try {
      value = Json::from_msgpack(body.begin(), body.end());
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kParse, std::string("the body is not valid msgpack: ") + e.what(), "", "body");
    }
    return Normalise(std::move(value), false);
  }
  if (type.empty() || type == "application/json") {
    Json value;
    try {
      value = Json::parse(body.begin(), body.end());
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kParse, std::string("the body is not valid JSON: ") + e.what(), "", "body");
    }
    return Normalise(std::move(value), true);
  }
  throw Error(ErrorKind::kUnsupported,
              "content type '" + std::string(content_type) +
                  "' is not accepted (application/x-msgpack or application/json)",
              "", "content_type");
}

}  // namespace kf::celery
