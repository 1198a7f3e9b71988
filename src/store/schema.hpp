// The reference's tables (spec §5.6) as data: column names, SQLAlchemy's declared SQLite types, NOT NULL
// and server defaults. From this one description come the CREATE TABLE statements, the check of an
// existing database, and the conversion of JSON values to and from SQLite values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "store/sqlite_db.hpp"

namespace kf::store {

/// Value kinds of the columns (SQLAlchemy type → SQLite declared type).
enum class ColumnType {
  kInteger,   ///< Integer → INTEGER
  kFloat,     ///< Float → FLOAT
  kVarchar,   ///< String / String(n) → VARCHAR / VARCHAR(n)
  kText,      ///< Text → TEXT
  kBoolean,   ///< Boolean → BOOLEAN (0/1)
  kDateTime,  ///< DateTime(timezone=True) → DATETIME (UTC text)
  kJson,      ///< JSON → JSON (JSON text)
};

struct Column {
  std::string_view name;
  ColumnType type;
  int max_chars = 0;         ///< VARCHAR(n): n characters; 0 = unlimited
  bool not_null = false;
  bool primary_key = false;
  bool server_now = false;   ///< DEFAULT (CURRENT_TIMESTAMP)
};

struct Table {
  std::string_view name;
  std::vector<Column> columns;

  /// The column called `name`, or nullptr.
  const Column* Find(std::string_view column) const;
};

/// All tables: kernels, tasks, jobs, job_logs, baseline_times, rag.
const std::vector<Table>& Tables();
/// One of Tables() by name. REQUIRES: the name exists.
const Table& GetTable(std::string_view name);

/// The declared type as SQLAlchemy writes it, e.g. "VARCHAR(64)", "DATETIME", "JSON".
std::string DeclaredType(const Column& column);
/// `"name"` with embedded quotes doubled.
std::string QuoteIdent(std::string_view name);
/// CREATE TABLE IF NOT EXISTS statement in SQLAlchemy's layout (PRIMARY KEY as a table constraint).
std::string CreateTableSql(const Table& table);
/// SQLite's type affinity of a declared type (§3.1 of the SQLite datatype docs): 'I'nteger, 'T'ext,
/// 'B'lob, 'R'eal or 'N'umeric.
char TypeAffinity(std::string_view declared_type);

/// Creates missing tables (in one transaction). Then checks every table: a missing table or column or a
/// declared type with another affinity throws kf::Error(kInvalidArgument) naming "table.column".
/// With create = false only the check runs.
void EnsureSchema(Db& db, bool create);

/// Binds `value` for `column` of `table` at parameter `index`: null → NULL; otherwise the value must suit
/// the column type (integer, number, string within VARCHAR(n), boolean, string timestamp; anything for
/// JSON, stored as JSON text). Throws kf::Error(kInvalidArgument) naming "table.column" on a mismatch.
void BindValue(Stmt& stmt, int index, const Table& table, const Column& column, const Json& value);

/// Reads result column `col` as the JSON value of `column` (JSON text parsed; BOOLEAN as true/false; NULL
/// as null). Unparsable JSON text comes back as a string.
Json ReadValue(const Stmt& stmt, int col, const Column& column);

}  // namespace kf::store
