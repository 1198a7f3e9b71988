// The reference's tables (spec §5.6) as data: column names, value kinds, NOT NULL and server defaults, plus
// the backend-neutral row checks. Every backend derives its DDL, its check of an existing database and its
// value conversion from this one description (SQLite: sqlite_schema.hpp, PostgreSQL: postgres_store.cc).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernelfoundry/json.hpp"

namespace kf::store {

/// Value kinds of the columns (SQLAlchemy type; SQLite / PostgreSQL declared type).
enum class ColumnType {
  kInteger,   ///< Integer: INTEGER / INTEGER (SERIAL for the primary key)
  kFloat,     ///< Float: FLOAT / FLOAT (double precision)
  kVarchar,   ///< String / String(n): VARCHAR / VARCHAR(n)
  kText,      ///< Text: TEXT
  kBoolean,   ///< Boolean: BOOLEAN (SQLite stores 0/1)
  kDateTime,  ///< DateTime(timezone=True): DATETIME (UTC text) / TIMESTAMP WITH TIME ZONE
  kJson,      ///< JSON: JSON (JSON text)
};

struct Column {
  std::string_view name;
  ColumnType type;
  int max_chars = 0;         ///< VARCHAR(n): n characters; 0 = unlimited
  bool not_null = false;
  bool primary_key = false;
  bool server_now = false;   ///< server default: the current time
  bool autoincrement = false;  ///< integer primary key the database assigns (SQLite rowid, PostgreSQL SERIAL)
  /// Ours, beside the reference's columns (kernels.kf_status), which its models ignore: created with the
  /// table and added to an older database by its first read-write open (a migration); a read-only store
  /// works without it (it then reads as NULL).
  bool kf_own = false;
};

struct Table {
  std::string_view name;
  std::vector<Column> columns;

  /// The column called `name`, or nullptr.
  const Column* Find(std::string_view column) const;
};

/// The reference's tables: kernels, tasks, jobs, job_logs, baseline_times, rag, with their columns in the
/// reference's order, then our own (kf_own) columns. They must exist in every database we open.
const std::vector<Table>& Tables();
/// Our tables of kf serve's submission API (kf_api_tokens, kf_submissions): not in Tables() — created only
/// when the API is first used on a database (SqlStore::EnsureApiTables), so other databases keep exactly the
/// reference's tables.
const std::vector<Table>& ApiTables();
/// One of Tables() or ApiTables() by name. REQUIRES: the name exists (else kf::Error(kInternal)).
const Table& GetTable(std::string_view name);

/// The table our former kf_kernel_status table was (kernel_id, task_name, kf_status): the migration that
/// adds kernels.kf_status drops it.
inline constexpr std::string_view kFormerStatusTable = "kf_kernel_status";

/// `"name"` with embedded quotes doubled (the same in SQLite and PostgreSQL).
std::string QuoteIdent(std::string_view name);

/// The sentence appended to every "stale database" error.
std::string StaleHint();

/// Checks `value` for `column` of `table` and returns it normalised: null stays null; INTEGER gives an
/// int64 (integral floats accepted), FLOAT a double, BOOLEAN a bool (0/1 accepted), VARCHAR/TEXT/DATETIME
/// a string (VARCHAR(n): at most n UTF-8 characters), JSON anything. Throws kf::Error(kInvalidArgument)
/// with field "table.column" on a mismatch.
Json CheckValue(const Table& table, const Column& column, const Json& value);

/// A checked row ready to insert: the columns to write with their normalised values, in row order followed
/// by the defaults used.
using CheckedRow = std::vector<std::pair<const Column*, Json>>;

/// Checks an insert into `table`: `row` must be a JSON object whose keys are columns (null values are
/// skipped); `defaults` fill columns the row lacks or has as null; every NOT NULL column without a server
/// default (or an integer primary key) must then be present. Throws kf::Error(kInvalidArgument) with field
/// "table" (not an object), "table.key" (unknown column, wrong type, too long) or "table.column" (required
/// field missing or null).
CheckedRow CheckRow(const Table& table, const Json& row, const std::vector<std::pair<std::string, Json>>& defaults);

/// "YYYY-MM-DD HH:MM:SS.ffffff" from PostgreSQL's timestamp text in UTC ("2026-11-30 12:00:00.5+00"): the
/// UTC offset ("+00", "+00:00", "Z") is dropped and the fraction padded to (or added as) 6 digits. Text of
/// another shape is returned unchanged.
std::string NormalizeTimestamp(std::string_view text);

}  // namespace kf::store
