// AMQP field tables <-> JSON (see amqp_table.hpp).
#include "queue/amqp_table.hpp"

#include <cmath>
#include <limits>

#include "kernelfoundry/error.hpp"

namespace kf::queue_internal {

amqp_bytes_t TableBuilder::Bytes(const std::string& s) {
  strings_.push_back(s);
  std::string& stored = strings_.back();
  amqp_bytes_t b;
  b.len = stored.size();
  b.bytes = stored.empty() ? nullptr : stored.data();
  return b;
}

amqp_field_value_t TableBuilder::Value(const Json& v) {
  amqp_field_value_t f{};
  switch (v.type()) {
    case Json::value_t::null:
      f.kind = AMQP_FIELD_KIND_VOID;
      break;
    case Json::value_t::boolean:
      f.kind = AMQP_FIELD_KIND_BOOLEAN;
      f.value.boolean = v.get<bool>() ? 1 : 0;
      break;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: {
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        f.kind = AMQP_FIELD_KIND_F64;
        f.value.f64 = v.get<double>();
        break;
      }
      const int64_t i = v.get<int64_t>();
      if (i >= std::numeric_limits<int32_t>::min() && i <= std::numeric_limits<int32_t>::max()) {
        f.kind = AMQP_FIELD_KIND_I32;
        f.value.i32 = static_cast<int32_t>(i);
      } else if (i > 0) {
        // 'l': RabbitMQ's signed 64-bit; py-amqp reads it as unsigned, which is right for positive values.
        f.kind = AMQP_FIELD_KIND_I64;
        f.value.i64 = i;
      } else {
        f.kind = AMQP_FIELD_KIND_F64;
        f.value.f64 = static_cast<double>(i);
      }
      break;
    }
    case Json::value_t::number_float:
      f.kind = AMQP_FIELD_KIND_F64;
      f.value.f64 = v.get<double>();
      break;
    case Json::value_t::string:
      f.kind = AMQP_FIELD_KIND_UTF8;
      f.value.bytes = Bytes(v.get<std::string>());
      break;
    case Json::value_t::array: {
      arrays_.emplace_back();
      std::vector<amqp_field_value_t>& items = arrays_.back();
      items.reserve(v.size());
      for (const Json& item : v) items.push_back(Value(item));
      f.kind = AMQP_FIELD_KIND_ARRAY;
      f.value.array.num_entries = static_cast<int>(items.size());
      f.value.array.entries = items.empty() ? nullptr : items.data();
      break;
    }
    case Json::value_t::object:
      f.kind = AMQP_FIELD_KIND_TABLE;
      f.value.table = Table(v);
      break;
    default:  // binary, discarded
      f.kind = AMQP_FIELD_KIND_VOID;
      break;
  }
  return f;
}

amqp_table_t TableBuilder::Table(const Json& object) {
  amqp_table_t t{};
  if (object.is_null() || (object.is_object() && object.empty())) return t;
  if (!object.is_object()) {
    throw Error(ErrorKind::kInvalidArgument, "an AMQP table must be a JSON object, got " + DumpJson(object), "",
                "headers");
  }
  entries_.emplace_back();
  std::vector<amqp_table_entry_t>& entries = entries_.back();
  entries.reserve(object.size());
  for (auto it = object.begin(); it != object.end(); ++it) {
    amqp_table_entry_t e{};
    e.key = Bytes(it.key());
    e.value = Value(it.value());
    entries.push_back(e);
  }
  t.num_entries = static_cast<int>(entries.size());
  t.entries = entries.data();
  return t;
}

namespace {

std::string ToString(amqp_bytes_t b) { return b.len ? std::string(static_cast<const char*>(b.bytes), b.len) : ""; }

Json FieldToJson(const amqp_field_value_t& f) {
  switch (f.kind) {
    case AMQP_FIELD_KIND_BOOLEAN: return f.value.boolean != 0;
    case AMQP_FIELD_KIND_I8: return f.value.i8;
    case AMQP_FIELD_KIND_U8: return f.value.u8;
    case AMQP_FIELD_KIND_I16: return f.value.i16;
    case AMQP_FIELD_KIND_U16: return f.value.u16;
    case AMQP_FIELD_KIND_I32: return f.value.i32;
    case AMQP_FIELD_KIND_U32: return f.value.u32;
    case AMQP_FIELD_KIND_I64: return f.value.i64;
    case AMQP_FIELD_KIND_U64:
    case AMQP_FIELD_KIND_TIMESTAMP: return f.value.u64;
    case AMQP_FIELD_KIND_F32: return static_cast<double>(f.value.f32);
    case AMQP_FIELD_KIND_F64: return f.value.f64;
    case AMQP_FIELD_KIND_DECIMAL:
      return static_cast<double>(f.value.decimal.value) / std::pow(10.0, f.value.decimal.decimals);
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES: return ToString(f.value.bytes);
    case AMQP_FIELD_KIND_ARRAY: {
      Json a = Json::array();
      for (int i = 0; i < f.value.array.num_entries; ++i) a.push_back(FieldToJson(f.value.array.entries[i]));
      return a;
    }
    case AMQP_FIELD_KIND_TABLE: return TableToJson(f.value.table);
    case AMQP_FIELD_KIND_VOID:
    default: return nullptr;
  }
}

}  // namespace

Json TableToJson(const amqp_table_t& table) {
  Json out = Json::object();
  for (int i = 0; i < table.num_entries; ++i) out[ToString(table.entries[i].key)] = FieldToJson(table.entries[i].value);
  return out;
}

}  // namespace kf::queue_internal
