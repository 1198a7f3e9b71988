#include "store/schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"

namespace kf::store {
namespace {

using T = ColumnType;

// Shorthands for the table descriptions below.
Column Pk() { return {"id", T::kInteger, 0, true, true, false, true}; }
Column C(std::string_view name, ColumnType type) { return {name, type, 0, false, false, false}; }
Column NotNull(std::string_view name, ColumnType type) { return {name, type, 0, true, false, false}; }
Column Varchar(std::string_view name, int n, bool not_null = false) {
  return {name, T::kVarchar, n, not_null, false, false};
}
Column Now(std::string_view name) { return {name, T::kDateTime, 0, true, false, true}; }

std::vector<Table> MakeTables() {
  std::vector<Table> t;
  t.push_back({"kernels",
               {Pk(), Now("timestamp"), C("uuid", T::kVarchar), C("parent_uuid", T::kVarchar),
                C("task_name", T::kVarchar), C("Level_ID", T::kInteger), C("input_code", T::kText),
                C("input_language", T::kVarchar), C("output_code", T::kText), C("output_language", T::kVarchar),
                C("Op_ID", T::kVarchar), C("job_name", T::kVarchar), C("prompt", T::kText), C("answer", T::kText),
                C("status", T::kVarchar), C("trial", T::kInteger), C("runtime", T::kFloat),
                C("runtime_stats", T::kJson), C("improve_over_native", T::kFloat),
                C("improve_over_compile", T::kFloat), C("score", T::kInteger), C("eval_log", T::kText),
                C("version", T::kInteger), C("index_level_0", T::kInteger), C("language_model", T::kVarchar),
                C("profiler_data", T::kJson), C("profiler_data_reference", T::kJson),
                C("profiler_data_detail", T::kJson), C("profiler_data_detail_reference", T::kJson),
                C("template_results", T::kJson), C("optimization_profile", T::kJson), C("gpu_arch", T::kVarchar),
                C("eval_worker_info", T::kJson), C("compile_worker_info", T::kJson), C("config", T::kJson),
                // NOT NULL in the reference; nullable here (kernels can exist without a stored task).
                Varchar("task_id", 64), C("job_id", T::kInteger), Varchar("agent_session_id", 64),
                Varchar("db_user", 128, true),
                // Ours: the EvalStatus name of the verdict (kf::EvalStatusName), NULL for rows the reference wrote.
                {"kf_status", T::kVarchar, 32, false, false, false, false, true}}});
  t.push_back({"tasks",
               {{"id", T::kVarchar, 64, true, true, false}, NotNull("task_name", T::kVarchar),
                C("Op_ID", T::kVarchar), NotNull("task_origin", T::kVarchar), C("config", T::kJson),
                C("Level_ID", T::kInteger), C("task_data", T::kJson), NotNull("has_build_step", T::kBoolean),
                C("correctness_tests", T::kJson), C("profile_tests", T::kJson), C("evolve_block", T::kVarchar),
                C("reference_block", T::kVarchar), C("user_instructions_block", T::kVarchar),
                C("hyperparameters_buildtime", T::kJson), C("hyperparameters_runtime", T::kJson)}});
  t.push_back({"jobs",
               {Pk(), Varchar("task_id", 64), NotNull("task_origin", T::kVarchar), Varchar("status", 16, true),
                NotNull("progress", T::kFloat), Now("created_at"), C("started_at", T::kDateTime),
                C("finished_at", T::kDateTime), C("archived_at", T::kDateTime), C("input_tokens", T::kInteger),
                C("output_tokens", T::kInteger), C("cached_input_tokens", T::kInteger), C("config", T::kJson)}});
  t.push_back({"job_logs",
               {Pk(), NotNull("job_id", T::kInteger), C("hostname", T::kVarchar), C("kernel_uuid", T::kVarchar),
                Varchar("agent_session_id", 64), Varchar("level", 16, true), Now("timestamp"),
                NotNull("message", T::kText), C("extra", T::kJson)}});
  t.push_back({"baseline_times",
               {Pk(), NotNull("level", T::kVarchar), NotNull("task_name", T::kVarchar), C("mean", T::kFloat),
                C("std", T::kFloat), C("min", T::kFloat), C("max", T::kFloat), C("num_trials", T::kInteger),
                C("hardware", T::kVarchar), C("device", T::kVarchar), C("platform", T::kVarchar),
                C("backend", T::kVarchar)}});
  t.push_back({"rag",
               {Pk(), C("task_name", T::kVarchar), NotNull("language", T::kVarchar), C("descriptor", T::kVarchar),
                C("kernel_code", T::kVarchar), NotNull("file_path", T::kVarchar), NotNull("category", T::kVarchar),
                C("keywords", T::kVarchar), C("optimization_profile", T::kJson),
                NotNull("embedded_text", T::kVarchar), C("embedding", T::kJson), C("origin", T::kVarchar)}});
  return t;
}

std::vector<Table> MakeApiTables() {
  std::vector<Table> t;
  // Bearer tokens, stored as the SHA-256 (hex) of the token, never the token.
  t.push_back({"kf_api_tokens",
               {Pk(), Varchar("db_user", 128, true), Varchar("token_sha256", 64, true), NotNull("admin", T::kBoolean),
                Now("created_at"), C("revoked_at", T::kDateTime)}});
  // One row per job submitted through the API (id = jobs.id): who submitted it and the encoded task, so a
  // queued or running job survives a restart of the server.
  t.push_back({"kf_submissions",
               {{"id", T::kInteger, 0, true, true, false, false}, Varchar("db_user", 128, true), Now("created_at"),
                C("archive_bytes", T::kInteger), C("lineage", T::kJson), NotNull("task", T::kText),
                C("result", T::kJson)}});
  return t;
}

/// Number of UTF-8 code points (continuation bytes are not counted).
size_t CountChars(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

std::string Field(const Table& table, std::string_view column) { return fmt::format("{}.{}", table.name, column); }

[[noreturn]] void TypeMismatch(const Table& table, const Column& column, std::string_view expected,
                               const Json& value) {
  throw Error(ErrorKind::kInvalidArgument, fmt::format("expected {}, got {}", expected, value.type_name()), {},
              Field(table, column.name));
}

}  // namespace

std::string StaleHint() {
  return "the database file is stale (written by another version of the schema); move it away or delete it "
         "so that a new one is created";
}

const Column* Table::Find(std::string_view column) const {
  for (const auto& c : columns) {
    if (c.name == column) return &c;
  }
  return nullptr;
}

const std::vector<Table>& Tables() {
  static const std::vector<Table> tables = MakeTables();
  return tables;
}

const std::vector<Table>& ApiTables() {
  static const std::vector<Table> tables = MakeApiTables();
  return tables;
}

const Table& GetTable(std::string_view name) {
  for (const auto& t : Tables()) {
    if (t.name == name) return t;
  }
  for (const auto& t : ApiTables()) {
    if (t.name == name) return t;
  }
  throw Error(ErrorKind::kInternal, fmt::format("no table description for '{}'", name));
}

std::string QuoteIdent(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

Json CheckValue(const Table& table, const Column& column, const Json& value) {
  if (value.is_null()) return nullptr;
  switch (column.type) {
    case T::kInteger:
      if (value.is_number_unsigned()) {
        auto u = value.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          TypeMismatch(table, column, "an integer that fits in 64 bits", value);
        }
        return static_cast<int64_t>(u);
      }
      if (value.is_number_integer()) return value.get<int64_t>();
      if (value.is_number_float() && std::isfinite(value.get<double>()) &&
          std::trunc(value.get<double>()) == value.get<double>() && std::fabs(value.get<double>()) < 9.2e18) {
        return static_cast<int64_t>(value.get<double>());
      }
      TypeMismatch(table, column, "an integer", value);
    case T::kFloat:
      if (!value.is_number()) TypeMismatch(table, column, "a number", value);
      return value.get<double>();
    case T::kBoolean:
      if (value.is_boolean()) return value;
      if (value.is_number_integer() && (value.get<int64_t>() == 0 || value.get<int64_t>() == 1)) {
        return value.get<int64_t>() == 1;
      }
      TypeMismatch(table, column, "a boolean", value);
    case T::kVarchar:
    case T::kText:
    case T::kDateTime: {
      if (!value.is_string()) {
        TypeMismatch(table, column, column.type == T::kDateTime ? "a timestamp string" : "a string", value);
      }
      const auto& s = value.get_ref<const std::string&>();
      if (column.max_chars > 0 && CountChars(s) > static_cast<size_t>(column.max_chars)) {
        throw Error(ErrorKind::kInvalidArgument,
                    fmt::format("value has {} characters, the column holds at most {}", CountChars(s),
                                column.max_chars),
                    {}, Field(table, column.name));
      }
      return value;
    }
    case T::kJson:
      return value;
  }
  return value;
}

CheckedRow CheckRow(const Table& table, const Json& row, const std::vector<std::pair<std::string, Json>>& defaults) {
  if (!row.is_object()) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("a {} row must be a JSON object, got {}", table.name, row.type_name()), {},
                std::string(table.name));
  }
  CheckedRow values;
  auto present = [&values](const Column* c) {
    return std::any_of(values.begin(), values.end(), [c](const auto& v) { return v.first == c; });
  };
  for (const auto& [key, value] : row.items()) {
    const Column* column = table.Find(key);
    if (column == nullptr) {
      throw Error(ErrorKind::kInvalidArgument, fmt::format("unknown column '{}' for table {}", key, table.name), {},
                  Field(table, key));
    }
    if (!value.is_null()) values.emplace_back(column, CheckValue(table, *column, value));
  }
  for (const auto& [name, value] : defaults) {
    const Column* column = table.Find(name);
    if (column != nullptr && !present(column) && !value.is_null()) {
      values.emplace_back(column, CheckValue(table, *column, value));
    }
  }
  for (const auto& c : table.columns) {
    if (!c.not_null || c.server_now || c.autoincrement) continue;
    if (!present(&c)) {
      throw Error(ErrorKind::kInvalidArgument, "required field is missing or null", {}, Field(table, c.name));
    }
  }
  return values;
}

std::string NormalizeTimestamp(std::string_view text) {
  // "YYYY-MM-DD HH:MM:SS" is 19 characters; then an optional ".fraction", then an optional offset.
  if (text.size() < 19 || text[10] != ' ' || text[13] != ':' || text[16] != ':') return std::string(text);
  std::string out(text.substr(0, 19));
  size_t pos = 19;
  std::string fraction;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) fraction += text[pos++];
  }
  std::string_view offset = text.substr(pos);
  if (!(offset.empty() || offset == "Z" || offset == "+00" || offset == "+00:00")) return std::string(text);
  fraction.resize(6, '0');
  return out + "." + fraction;
}

}  // namespace kf::store

namespace kf {

int ColumnMaxChars(std::string_view table, std::string_view column) {
  for (const auto& t : store::Tables()) {
    if (t.name != table) continue;
    if (const store::Column* c = t.Find(column)) return c->max_chars;
  }
  throw Error(ErrorKind::kInvalidArgument, "no such column", {}, fmt::format("{}.{}", table, column));
}

Json StoreSchema() {
  auto type_name = [](store::ColumnType type) {
    switch (type) {
      case store::ColumnType::kInteger: return "integer";
      case store::ColumnType::kFloat: return "float";
      case store::ColumnType::kVarchar: return "varchar";
      case store::ColumnType::kText: return "text";
      case store::ColumnType::kBoolean: return "boolean";
      case store::ColumnType::kDateTime: return "datetime";
      case store::ColumnType::kJson: return "json";
    }
    return "text";
  };
  Json tables = Json::array();
  for (const auto& t : store::Tables()) {
    Json columns = Json::array();
    for (const auto& c : t.columns) {
      columns.push_back({{"name", std::string(c.name)},
                         {"type", type_name(c.type)},
                         {"length", c.max_chars},
                         {"not_null", c.not_null},
                         {"primary_key", c.primary_key},
                         {"server_now", c.server_now},
                         {"autoincrement", c.autoincrement},
                         {"kf_own", c.kf_own}});
    }
    tables.push_back({{"name", std::string(t.name)}, {"columns", std::move(columns)}});
  }
  return tables;
}

}  // namespace kf
