// The SQLite dialect of the schema (schema.hpp): SQLAlchemy's declared SQLite types and CREATE TABLE
// layout, the check of an existing file (type affinities), and value conversion to and from SQLite cells.
#pragma once

#include <string>
#include <string_view>

#include "kernelfoundry/json.hpp"
#include "store/schema.hpp"
#include "store/sqlite_db.hpp"

namespace kf::store {

/// The declared type as SQLAlchemy writes it for SQLite, e.g. "VARCHAR(64)", "DATETIME", "JSON".
std::string DeclaredType(const Column& column);
/// CREATE TABLE IF NOT EXISTS statement in SQLAlchemy's layout (PRIMARY KEY as a table constraint).
std::string CreateTableSql(const Table& table);
/// SQLite's type affinity of a declared type (§3.1 of the SQLite datatype docs): 'I'nteger, 'T'ext,
/// 'B'lob, 'R'eal or 'N'umeric.
char TypeAffinity(std::string_view declared_type);

/// Creates missing tables of Tables() (in one transaction). Then checks every table: a missing table, a
/// missing column (other than a kf_own one) or a declared type with another affinity throws
/// kf::Error(kInvalidArgument) naming "table.column" (file = the database path). With create = false only
/// the check runs. Returns whether every kf_own column exists (false: the database predates them and needs
/// the kf_status migration, see KfStatusMigrationSql).
bool EnsureSqliteSchema(Db& db, bool create);
/// True when `table` has a column called `column`.
bool SqliteColumnExists(Db& db, std::string_view table, std::string_view column);
/// True when the database has a table called `name`.
bool SqliteTableExists(Db& db, std::string_view name);

/// Binds a value normalised by CheckValue for a column of kind `type` at parameter `index`: null -> NULL,
/// BOOLEAN -> 0/1, JSON -> JSON text, strings as text, numbers as numbers.
void BindValue(Stmt& stmt, int index, ColumnType type, const Json& value);

/// Reads result column `col` as a value of kind `type` (JSON text parsed; BOOLEAN as true/false; NULL as
/// null). Unparsable JSON text comes back as a string.
Json ReadValue(const Stmt& stmt, int col, ColumnType type);

}  // namespace kf::store
