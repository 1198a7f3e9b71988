// AMQP field tables <-> kf::Json for the rabbitmq-c backend (celery-interop.md §2.6: emit only S, t, I, l, d,
// V, A, F; read every kind).
#pragma once

#include <amqp.h>

#include <deque>
#include <string>
#include <vector>

#include "kernelfoundry/json.hpp"

namespace kf::queue_internal {

/// Owns the memory of amqp_table_t values built from JSON (rabbitmq-c keeps pointers only). Not copyable.
class TableBuilder {
 public:
  TableBuilder() = default;
  TableBuilder(const TableBuilder&) = delete;
  TableBuilder& operator=(const TableBuilder&) = delete;
  /// A table for a JSON object (null or an empty object give the empty table). Valid while the builder
  /// lives. Throws kf::Error(kInvalidArgument) for a non-object.
  amqp_table_t Table(const Json& object);

 private:
  amqp_field_value_t Value(const Json& value);
  amqp_bytes_t Bytes(const std::string& s);
  std::deque<std::string> strings_;
  std::deque<std::vector<amqp_table_entry_t>> entries_;
  std::deque<std::vector<amqp_field_value_t>> arrays_;
};

/// A received table as a JSON object (integers of every width, floats, decimals as doubles, timestamps as
/// integers, byte arrays as strings, void as null).
Json TableToJson(const amqp_table_t& table);

}  // namespace kf::queue_internal
