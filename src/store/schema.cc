#include "store/schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

namespace kf::store {
namespace {

using T = ColumnType;

// Shorthands for the table descriptions below.
Column Pk() { return {"id", T::kInteger, 0, true, true, false}; }
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
                Varchar("db_user", 128, true)}});
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

std::string StaleHint() {
  return "the database file is stale (written by another version of the schema); move it away or delete it "
         "so that a new one is created";
}

/// Number of UTF-8 code points (continuation bytes are not counted).
size_t CountChars(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

[[noreturn]] void TypeMismatch(const Table& table, const Column& column, std::string_view expected,
                               const Json& value) {
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("expected {}, got {}", expected, value.type_name()), {},
              fmt::format("{}.{}", table.name, column.name));
}

}  // namespace

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

const Table& GetTable(std::string_view name) {
  for (const auto& t : Tables()) {
    if (t.name == name) return t;
  }
  throw Error(ErrorKind::kInternal, fmt::format("no table description for '{}'", name));
}

std::string DeclaredType(const Column& column) {
  switch (column.type) {
    case T::kInteger: return "INTEGER";
    case T::kFloat: return "FLOAT";
    case T::kVarchar: return column.max_chars > 0 ? fmt::format("VARCHAR({})", column.max_chars) : "VARCHAR";
    case T::kText: return "TEXT";
    case T::kBoolean: return "BOOLEAN";
    case T::kDateTime: return "DATETIME";
    case T::kJson: return "JSON";
  }
  return "BLOB";
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

std::string CreateTableSql(const Table& table) {
  std::string sql = fmt::format("CREATE TABLE IF NOT EXISTS {} (\n", QuoteIdent(table.name));
  std::string pk;
  for (const auto& c : table.columns) {
    sql += fmt::format("\t{} {}", QuoteIdent(c.name), DeclaredType(c));
    if (c.server_now) sql += " DEFAULT (CURRENT_TIMESTAMP)";
    if (c.not_null) sql += " NOT NULL";
    sql += ", \n";
    if (c.primary_key) pk = QuoteIdent(c.name);
  }
  sql += fmt::format("\tPRIMARY KEY ({})\n)", pk);
  return sql;
}

char TypeAffinity(std::string_view declared_type) {
  std::string up(declared_type);
  std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  auto has = [&](const char* s) { return up.find(s) != std::string::npos; };
  if (has("INT")) return 'I';
  if (has("CHAR") || has("CLOB") || has("TEXT")) return 'T';
  if (up.empty() || has("BLOB")) return 'B';
  if (has("REAL") || has("FLOA") || has("DOUB")) return 'R';
  return 'N';
}

void EnsureSchema(Db& db, bool create) {
  const auto& tables = Tables();
  auto existing = [&db]() {
    std::map<std::string, bool> names;
    Stmt st = db.Prepare("SELECT name FROM sqlite_master WHERE type = 'table'");
    while (st.Step()) names[st.ColumnText(0)] = true;
    return names;
  };
  if (create) {
    auto names = existing();
    bool all = std::all_of(tables.begin(), tables.end(),
                           [&](const Table& t) { return names.count(std::string(t.name)) != 0; });
    if (!all) {
      Transaction tx(db);
      for (const auto& t : tables) db.Exec(CreateTableSql(t));
      tx.Commit();
    }
  }
  for (const auto& t : tables) {
    std::map<std::string, std::string> declared;
    {
      Stmt st = db.Prepare("SELECT name, type FROM pragma_table_info(?1)");
      st.BindText(1, t.name);
      while (st.Step()) declared[st.ColumnText(0)] = st.ColumnText(1);
    }
    if (declared.empty()) {
      throw Error(ErrorKind::kInvalidArgument, fmt::format("table '{}' is missing: {}", t.name, StaleHint()),
                  db.path(), std::string(t.name));
    }
    for (const auto& c : t.columns) {
      std::string field = fmt::format("{}.{}", t.name, c.name);
      auto it = declared.find(std::string(c.name));
      if (it == declared.end()) {
        throw Error(ErrorKind::kInvalidArgument, fmt::format("column '{}' is missing: {}", field, StaleHint()),
                    db.path(), field);
      }
      std::string want = DeclaredType(c);
      if (TypeAffinity(it->second) != TypeAffinity(want)) {
        throw Error(ErrorKind::kInvalidArgument,
                    fmt::format("column '{}' is declared {} but should be {}: {}", field, it->second, want,
                                StaleHint()),
                    db.path(), field);
      }
    }
  }
}

void BindValue(Stmt& stmt, int index, const Table& table, const Column& column, const Json& value) {
  if (value.is_null()) {
    stmt.BindNull(index);
    return;
  }
  switch (column.type) {
    case T::kInteger:
      if (value.is_number_unsigned()) {
        auto u = value.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          TypeMismatch(table, column, "an integer that fits in 64 bits", value);
        }
        stmt.BindInt(index, static_cast<int64_t>(u));
      } else if (value.is_number_integer()) {
        stmt.BindInt(index, value.get<int64_t>());
      } else if (value.is_number_float() && std::isfinite(value.get<double>()) &&
                 std::trunc(value.get<double>()) == value.get<double>() &&
                 std::fabs(value.get<double>()) < 9.2e18) {
        stmt.BindInt(index, static_cast<int64_t>(value.get<double>()));
      } else {
        TypeMismatch(table, column, "an integer", value);
      }
      return;
    case T::kFloat:
      if (!value.is_number()) TypeMismatch(table, column, "a number", value);
      stmt.BindDouble(index, value.get<double>());
      return;
    case T::kBoolean:
      if (value.is_boolean()) {
        stmt.BindInt(index, value.get<bool>() ? 1 : 0);
      } else if (value.is_number_integer() && (value.get<int64_t>() == 0 || value.get<int64_t>() == 1)) {
        stmt.BindInt(index, value.get<int64_t>());
      } else {
        TypeMismatch(table, column, "a boolean", value);
      }
      return;
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
                    {}, fmt::format("{}.{}", table.name, column.name));
      }
      stmt.BindText(index, s);
      return;
    }
    case T::kJson:
      stmt.BindText(index, DumpJson(value));
      return;
  }
}

Json ReadValue(const Stmt& stmt, int col, const Column& column) {
  switch (stmt.ColumnType(col)) {
    case SQLITE_NULL:
      return nullptr;
    case SQLITE_INTEGER:
      if (column.type == T::kBoolean) return stmt.ColumnInt(col) != 0;
      if (column.type == T::kFloat) return static_cast<double>(stmt.ColumnInt(col));
      if (column.type == T::kVarchar || column.type == T::kText) return stmt.ColumnText(col);
      return stmt.ColumnInt(col);
    case SQLITE_FLOAT:
      if (column.type == T::kVarchar || column.type == T::kText) return stmt.ColumnText(col);
      return stmt.ColumnDouble(col);
    default: {  // TEXT or BLOB
      std::string text = stmt.ColumnText(col);
      if (column.type == T::kJson) {
        Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (!parsed.is_discarded()) return parsed;
      }
      return text;
    }
  }
}

}  // namespace kf::store
