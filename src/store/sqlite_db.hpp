// Thin RAII layer over the SQLite C API used by the SQLite backend (sqlite_store.hpp): a connection with a
// prepared-statement cache, statements with typed binds/columns, and an IMMEDIATE transaction that rolls back
// unless committed. Every SQLite failure becomes a kf::Error naming the database file (kIO by default; constraint and range
// errors kInvalidArgument; "not a database" / corruption kParse). Not thread-safe: one thread at a time.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kernelfoundry/error.hpp"

namespace kf::store {

class Db;

/// A prepared statement borrowed from Db's cache. On destruction it is reset and its bindings cleared,
/// so the next user starts clean. Move-only.
class Stmt {
 public:
  Stmt(Db& db, sqlite3_stmt* stmt) : db_(&db), stmt_(stmt) {}
  ~Stmt();
  Stmt(Stmt&& other) noexcept : db_(other.db_), stmt_(other.stmt_) { other.stmt_ = nullptr; }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& operator=(Stmt&&) = delete;

  /// Parameter indexes are 1-based, column indexes 0-based (SQLite's conventions).
  void BindNull(int index);
  void BindInt(int index, int64_t value);
  void BindDouble(int index, double value);
  void BindText(int index, std::string_view value);

  /// Runs one step. Returns true when a row is available, false when the statement is done.
  bool Step();
  /// Steps until done (for statements that return no rows).
  void Run();

  int ColumnCount() const { return sqlite3_column_count(stmt_); }
  /// SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB or SQLITE_NULL.
  int ColumnType(int col) const { return sqlite3_column_type(stmt_, col); }
  int64_t ColumnInt(int col) const { return sqlite3_column_int64(stmt_, col); }
  double ColumnDouble(int col) const { return sqlite3_column_double(stmt_, col); }
  /// The column as text ("" for NULL).
  std::string ColumnText(int col) const;

 private:
  Db* db_;
  sqlite3_stmt* stmt_;
};

/// One connection to a database file.
class Db {
 public:
  /// Opens `path`. read_only opens without SQLITE_OPEN_CREATE and SQLITE_OPEN_READWRITE. busy_timeout is how
  /// long a statement waits for another connection's lock.
  Db(const std::filesystem::path& path, bool read_only, std::chrono::milliseconds busy_timeout);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  /// Runs SQL text that has no parameters and returns no rows we need.
  void Exec(const std::string& sql);
  /// Returns the cached prepared statement for `sql` (prepared on first use).
  Stmt Prepare(const std::string& sql);

  int64_t LastInsertRowid() const { return sqlite3_last_insert_rowid(db_); }
  int Changes() const { return sqlite3_changes(db_); }
  const std::string& path() const { return path_; }
  std::chrono::milliseconds busy_timeout() const { return busy_timeout_; }

  /// Throws the kf::Error for SQLite result code `rc` while doing `what` (uses the connection's message).
  [[noreturn]] void Fail(int rc, std::string_view what, std::string field = {}) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  std::chrono::milliseconds busy_timeout_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

/// BEGIN IMMEDIATE … COMMIT. The destructor rolls back when Commit() was not reached (an exception).
class Transaction {
 public:
  explicit Transaction(Db& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void Commit();

 private:
  Db& db_;
  bool open_ = false;
};

}  // namespace kf::store
