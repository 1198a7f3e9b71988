// The seam between the backend-neutral SqlStore (every Store method written once, in portable SQL) and a
// database driver (SQLite: sqlite_store.cc, PostgreSQL: postgres_store.cc). A driver runs parameterised SQL
// with typed values and converts result cells back to kf::Json by the expected column type; it also supplies
// the few dialect differences (parameter syntax, string search, row locks). Not thread-safe: SqlStore
// serialises all calls.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "store/schema.hpp"

namespace kf::store {

/// One parameter: a value already normalised by CheckValue for `type` (null = SQL NULL).
struct SqlParam {
  ColumnType type;
  Json value;
};

/// One result row: one Json per selected expression, converted by the expected types given to Query.
using SqlRow = std::vector<Json>;

class SqlConnection {
 public:
  virtual ~SqlConnection() = default;

  /// The placeholder of parameter `index` (1-based): "?1" (SQLite) or "$1" (PostgreSQL).
  virtual std::string Placeholder(int index) const = 0;
  /// SQL for the 1-based position of `needle` in `haystack` (0 when absent): instr() or strpos().
  virtual std::string StrPos(std::string_view haystack, std::string_view needle) const = 0;
  /// The LIMIT value that means "no limit": -1 (SQLite) or null (PostgreSQL).
  virtual Json NoLimit() const = 0;
  /// The NULLS clause that makes NULL sort as the smallest value in an ORDER BY (or index) of that
  /// direction: "" for SQLite (its default), " NULLS FIRST" / " NULLS LAST" for PostgreSQL.
  virtual std::string_view NullsOrder(bool descending) const = 0;
  /// True when an extra narrow index on kernels.id pays (SQLite: the id b-tree holds the whole rows).
  virtual bool WantsIdIndex() const = 0;
  /// Appended to a SELECT inside a write transaction to lock the selected rows ("" or " FOR UPDATE").
  virtual std::string_view ForUpdate() const = 0;
  /// The dialect's `CREATE TABLE IF NOT EXISTS` statement of `table` (SQLAlchemy's DDL).
  virtual std::string CreateTableSql(const Table& table) const = 0;

  /// Starts a write transaction (SQLite: BEGIN IMMEDIATE, which takes the write lock at once).
  virtual void Begin() = 0;
  virtual void Commit() = 0;
  /// Rolls back the open transaction; never throws (a failure leaves the backend to roll back).
  virtual void Rollback() noexcept = 0;

  /// Runs `sql` with `params` bound in order and returns every row, cell i converted as `result_types[i]`
  /// (extra cells come back as strings). Throws kf::Error (file = Name(); kInvalidArgument for constraint
  /// and data errors, kIO for locks, read-only and connection failures).
  virtual std::vector<SqlRow> Query(const std::string& sql, const std::vector<SqlParam>& params,
                                    const std::vector<ColumnType>& result_types) = 0;

  /// The database for messages: the SQLite file path or the redacted URL.
  virtual const std::string& Name() const = 0;
};

/// Begin() now, Rollback() on destruction unless Commit() was reached.
class WriteTransaction {
 public:
  explicit WriteTransaction(SqlConnection& conn) : conn_(conn) { conn_.Begin(); }
  ~WriteTransaction() {
    if (open_) conn_.Rollback();
  }
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  void Commit() {
    conn_.Commit();
    open_ = false;
  }

 private:
  SqlConnection& conn_;
  bool open_ = true;
};

/// The statements of the one-time migration that adds our kernels.kf_status column to a database written
/// before it existed (by the reference or an older kf), in order: ADD COLUMN (declared `declared_type`), the
/// backfill from the first line of eval_log as older kf versions wrote it ("kf status: <name>[ (<detail>)]";
/// the name must be 1-32 characters, rows without that line keep NULL), and DROP of our former table
/// kf_kernel_status. The caller runs them in one write transaction after checking, inside it, that the
/// column is still missing. This is the only place that reads our status out of eval_log text.
std::vector<std::string> KfStatusMigrationSql(const SqlConnection& conn, std::string_view declared_type);

/// CREATE INDEX IF NOT EXISTS statements of the kf_ix_* indexes in `conn`'s dialect.
std::vector<std::string> IndexStatements(const SqlConnection& conn);

}  // namespace kf::store
