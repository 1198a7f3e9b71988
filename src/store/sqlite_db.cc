#include "store/sqlite_db.hpp"

#include <fmt/format.h>

#include <limits>

namespace kf::store {
namespace {

ErrorKind KindFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
      return ErrorKind::kInvalidArgument;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return ErrorKind::kParse;
    case SQLITE_NOMEM:
      return ErrorKind::kLimit;
    default:
      return ErrorKind::kIO;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------- Stmt

Stmt::~Stmt() {
  if (stmt_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

void Stmt::BindNull(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) db_->Fail(rc, "binding a value");
}

void Stmt::BindInt(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) db_->Fail(rc, "binding a value");
}

void Stmt::BindDouble(int index, double value) {
  int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) db_->Fail(rc, "binding a value");
}

void Stmt::BindText(int index, std::string_view value) {
  if (value.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    throw Error(ErrorKind::kLimit, "value too large for SQLite (over 2 GiB)", db_->path());
  }
  int rc = sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_->Fail(rc, "binding a value");
}

bool Stmt::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->Fail(rc, "running a statement");
}

void Stmt::Run() {
  while (Step()) {
  }
}

std::string Stmt::ColumnText(int col) const {
  const auto* text = sqlite3_column_text(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(n));
}

// ------------------------------------------------------------------------------------------------ Db

Db::Db(const std::filesystem::path& path, bool read_only, std::chrono::milliseconds busy_timeout)
    : path_(path.string()), busy_timeout_(busy_timeout) {
  int flags = SQLITE_OPEN_NOMUTEX | (read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw Error(KindFor(rc), "cannot open the database: " + msg, path_);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, static_cast<int>(busy_timeout.count()));
}

Db::~Db() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

void Db::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);  // the same text is available from sqlite3_errmsg, which Fail uses
  if (rc != SQLITE_OK) Fail(rc, "running " + sql.substr(0, sql.find_first_of(" (")));
}

Stmt Db::Prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) return Stmt(*this, it->second);
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt,
                              nullptr);
  if (rc != SQLITE_OK) Fail(rc, "preparing a statement");
  cache_.emplace(sql, stmt);
  return Stmt(*this, stmt);
}

void Db::Fail(int rc, std::string_view what, std::string field) const {
  int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    throw Error(ErrorKind::kIO,
                fmt::format("the database is locked by another writer (waited {} ms while {})",
                            busy_timeout_.count(), what),
                path_, std::move(field));
  }
  if (primary == SQLITE_NOTADB) {
    throw Error(ErrorKind::kParse, "the file is not a SQLite database", path_, std::move(field));
  }
  std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  throw Error(KindFor(rc), fmt::format("{} failed: {}", what, msg), path_, std::move(field));
}

// ------------------------------------------------------------------------------------------ Transaction

Transaction::Transaction(Db& db) : db_(db) {
  db_.Exec("BEGIN IMMEDIATE");
  open_ = true;
}

Transaction::~Transaction() {
  if (open_) {
    try {
      db_.Exec("ROLLBACK");
    } catch (...) {  // NOLINT(bugprone-empty-catch): a failed rollback leaves SQLite to roll back on close
    }
  }
}

void Transaction::Commit() {
  db_.Exec("COMMIT");
  open_ = false;
}

}  // namespace kf::store
