// The SQLite dialect of the schema (see sqlite_schema.hpp).
#include "store/sqlite_schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "kernelfoundry/error.hpp"

namespace kf::store {

using T = ColumnType;

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

bool SqliteTableExists(Db& db, std::string_view name) {
  Stmt st = db.Prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1");
  st.BindText(1, name);
  return st.Step() && st.ColumnInt(0) > 0;
}

bool SqliteColumnExists(Db& db, std::string_view table, std::string_view column) {
  Stmt st = db.Prepare("SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2");
  st.BindText(1, table);
  st.BindText(2, column);
  return st.Step() && st.ColumnInt(0) > 0;
}

bool EnsureSqliteSchema(Db& db, bool create) {
  if (create && !std::all_of(Tables().begin(), Tables().end(),
                             [&](const Table& t) { return SqliteTableExists(db, t.name); })) {
    Transaction tx(db);
    for (const auto& t : Tables()) db.Exec(CreateTableSql(t));
    tx.Commit();
  }
  bool kf_columns = true;
  for (const auto& t : Tables()) {
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
        if (c.kf_own) {  // an older database: migrated by a read-write open, read as NULL otherwise
          kf_columns = false;
          continue;
        }
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
  return kf_columns;
}

void BindValue(Stmt& stmt, int index, ColumnType type, const Json& value) {
  if (value.is_null()) {
    stmt.BindNull(index);
    return;
  }
  switch (type) {
    case T::kInteger:
      stmt.BindInt(index, value.get<int64_t>());
      return;
    case T::kFloat:
      stmt.BindDouble(index, value.get<double>());
      return;
    case T::kBoolean:
      stmt.BindInt(index, value.get<bool>() ? 1 : 0);
      return;
    case T::kVarchar:
    case T::kText:
    case T::kDateTime:
      stmt.BindText(index, value.get_ref<const std::string&>());
      return;
    case T::kJson:
      stmt.BindText(index, DumpJson(value));
      return;
  }
}

Json ReadValue(const Stmt& stmt, int col, ColumnType type) {
  switch (stmt.ColumnType(col)) {
    case SQLITE_NULL:
      return nullptr;
    case SQLITE_INTEGER:
      if (type == T::kBoolean) return stmt.ColumnInt(col) != 0;
      if (type == T::kFloat) return static_cast<double>(stmt.ColumnInt(col));
      if (type == T::kVarchar || type == T::kText || type == T::kDateTime) return stmt.ColumnText(col);
      return stmt.ColumnInt(col);
    case SQLITE_FLOAT:
      if (type == T::kVarchar || type == T::kText || type == T::kDateTime) return stmt.ColumnText(col);
      return stmt.ColumnDouble(col);
    default: {  // TEXT or BLOB
      std::string text = stmt.ColumnText(col);
      if (type == T::kJson) {
        Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (!parsed.is_discarded()) return parsed;
      }
      return text;
    }
  }
}

}  // namespace kf::store
