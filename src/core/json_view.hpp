// Read-only views of a parsed JSON document, so that one decoder (codec_impl.hpp) serves both parsers:
//  * NlohmannView over a kf::Json (the public Decode(const Json&) functions);
//  * DomView (core/simdjson_view.hpp) over a simdjson DOM element (the DecodeFromString fast paths).
// A view answers exactly what nlohmann would answer for the same text, duplicate keys included (the last
// value wins, at the position of the first), so both paths accept, reject and decode identically.
//
// The interface (duck-typed, used by templates): is_null/is_boolean/is_number/is_number_integer/
// is_number_unsigned/is_string/is_array/is_object, type_name() (nlohmann's names), get_bool/get_int64/
// get_uint64/get_double, get_string() (a view into the document), size(), find(key) -> std::optional<View>,
// for_each_member(f(std::string_view key, View value)), for_each_element(f(View)), to_json(), dump().
// Views borrow the document: they must not outlive it. Thread-safety: as the underlying document (const use).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernelfoundry/json.hpp"

namespace kf::internal {

class NlohmannView {
 public:
  explicit NlohmannView(const Json& j) : j_(&j) {}

  bool is_null() const { return j_->is_null(); }
  bool is_boolean() const { return j_->is_boolean(); }
  bool is_number() const { return j_->is_number(); }
  bool is_number_integer() const { return j_->is_number_integer(); }
  bool is_number_unsigned() const { return j_->is_number_unsigned(); }
  bool is_string() const { return j_->is_string(); }
  bool is_array() const { return j_->is_array(); }
  bool is_object() const { return j_->is_object(); }
  const char* type_name() const { return j_->type_name(); }

  bool get_bool() const { return j_->get<bool>(); }
  int64_t get_int64() const { return j_->get<int64_t>(); }
  uint64_t get_uint64() const { return j_->get<uint64_t>(); }
  double get_double() const { return j_->get<double>(); }
  std::string_view get_string() const { return j_->get_ref<const std::string&>(); }
  size_t size() const { return j_->size(); }

  std::optional<NlohmannView> find(const char* key) const {
    auto it = j_->find(key);
    if (it == j_->end()) return std::nullopt;
    return NlohmannView(*it);
  }
  template <class F>
  void for_each_member(F&& f) const {
    for (auto it = j_->begin(); it != j_->end(); ++it) f(std::string_view(it.key()), NlohmannView(it.value()));
  }
  template <class F>
  void for_each_element(F&& f) const {
    for (const Json& item : *j_) f(NlohmannView(item));
  }
  Json to_json() const { return *j_; }
  std::string dump() const { return j_->dump(); }

 private:
  const Json* j_;
};

}  // namespace kf::internal
