// DomView — a json_view.hpp view over a simdjson DOM element (the fast decode paths). Answers as nlohmann
// would for the same text:
//  * numbers: a non-negative integer is "unsigned" (nlohmann stores it as number_unsigned), a negative one
//    "integer", anything with a fraction or exponent a float; get_int64/get_uint64 cast like nlohmann's get;
//  * duplicate keys: the last value, at the position of the first (nlohmann's ordered_json parse);
//  * type names: nlohmann's ("object", "number", "boolean", ...).
// Internal to core; include only where simdjson is needed (it is a large header).
#pragma once

#include <simdjson.h>

#include <unordered_map>
#include <utility>
#include <vector>

#include "core/json_view.hpp"

namespace kf::internal {

class DomView {
 public:
  using Element = simdjson::dom::element;
  explicit DomView(Element e) : e_(e) {}

  bool is_null() const { return type() == Type::NULL_VALUE; }
  bool is_boolean() const { return type() == Type::BOOL; }
  bool is_number() const { return type() == Type::INT64 || type() == Type::UINT64 || type() == Type::DOUBLE; }
  bool is_number_integer() const { return type() == Type::INT64 || type() == Type::UINT64; }
  bool is_number_unsigned() const {
    return type() == Type::UINT64 || (type() == Type::INT64 && e_.get_int64().value_unsafe() >= 0);
  }
  bool is_string() const { return type() == Type::STRING; }
  bool is_array() const { return type() == Type::ARRAY; }
  bool is_object() const { return type() == Type::OBJECT; }
  const char* type_name() const {
    switch (type()) {
      case Type::OBJECT: return "object";
      case Type::ARRAY: return "array";
      case Type::STRING: return "string";
      case Type::BOOL: return "boolean";
      case Type::NULL_VALUE: return "null";
      default: return "number";
    }
  }

  bool get_bool() const { return e_.get_bool().value_unsafe(); }
  int64_t get_int64() const {
    if (type() == Type::UINT64) return static_cast<int64_t>(e_.get_uint64().value_unsafe());
    if (type() == Type::DOUBLE) return static_cast<int64_t>(e_.get_double().value_unsafe());
    return e_.get_int64().value_unsafe();
  }
  uint64_t get_uint64() const {
    if (type() == Type::INT64) return static_cast<uint64_t>(e_.get_int64().value_unsafe());
    if (type() == Type::DOUBLE) return static_cast<uint64_t>(e_.get_double().value_unsafe());
    return e_.get_uint64().value_unsafe();
  }
  double get_double() const { return e_.get_double().value_unsafe(); }
  std::string_view get_string() const { return e_.get_string().value_unsafe(); }
  size_t size() const {
    if (is_array()) return Array().size();
    if (is_object()) return Members().size();
    return 0;
  }

  /// The value of `key` (the last one when repeated), or nullopt.
  std::optional<DomView> find(const char* key) const {
    std::optional<DomView> found;
    const std::string_view k(key);
    for (auto kv : Object())
      if (kv.key == k) found = DomView(kv.value);
    return found;
  }
  template <class F>
  void for_each_member(F&& f) const {
    for (const auto& [key, value] : Members()) f(key, DomView(value));
  }
  template <class F>
  void for_each_element(F&& f) const {
    for (Element item : Array()) f(DomView(item));
  }
  Json to_json() const {
    switch (type()) {
      case Type::OBJECT: {
        Json j = Json::object();
        for (auto kv : Object()) j[std::string(kv.key)] = DomView(kv.value).to_json();  // nlohmann's duplicates
        return j;
      }
      case Type::ARRAY: {
        Json j = Json::array();
        for (Element item : Array()) j.push_back(DomView(item).to_json());
        return j;
      }
      case Type::INT64: {
        const int64_t v = e_.get_int64().value_unsafe();
        return v >= 0 ? Json(static_cast<uint64_t>(v)) : Json(v);
      }
      case Type::UINT64: return Json(e_.get_uint64().value_unsafe());
      case Type::DOUBLE: return Json(e_.get_double().value_unsafe());
      case Type::STRING: return Json(std::string(get_string()));
      case Type::BOOL: return Json(get_bool());
      default: return Json(nullptr);
    }
  }
  std::string dump() const { return to_json().dump(); }

 private:
  using Type = simdjson::dom::element_type;
  Type type() const { return e_.type(); }
  simdjson::dom::object Object() const { return e_.get_object().value_unsafe(); }
  simdjson::dom::array Array() const { return e_.get_array().value_unsafe(); }

  /// Members in first-seen key order with the last value of each key.
  std::vector<std::pair<std::string_view, Element>> Members() const {
    std::vector<std::pair<std::string_view, Element>> members;
    const simdjson::dom::object obj = Object();
    const size_t n = obj.size();
    members.reserve(n);
    if (n <= 16) {
      for (auto kv : obj) {
        bool seen = false;
        for (auto& m : members) {
          if (m.first == kv.key) {
            m.second = kv.value;
            seen = true;
            break;
          }
        }
        if (!seen) members.emplace_back(kv.key, kv.value);
      }
      return members;
    }
    std::unordered_map<std::string_view, size_t> index;
    index.reserve(n);
    for (auto kv : obj) {
      auto [it, inserted] = index.emplace(kv.key, members.size());
      if (inserted) {
        members.emplace_back(kv.key, kv.value);
      } else {
        members[it->second].second = kv.value;
      }
    }
    return members;
  }

  Element e_;
};

}  // namespace kf::internal
