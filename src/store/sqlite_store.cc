// The SQLite backend (see sqlite_store.hpp).
#include "store/sqlite_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "store/sql_store.hpp"
#include "store/sqlite_schema.hpp"

namespace kf::store {
namespace {

/// Sets WAL journal mode, retrying while another connection holds the lock the switch needs.
void EnableWal(Db& db) {
  auto deadline = std::chrono::steady_clock::now() + db.busy_timeout();
  for (;;) {
    try {
      Stmt st = db.Prepare("PRAGMA journal_mode=WAL");
      st.Run();
      return;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIO || std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

/// Creates the kf_ix_* indexes that are missing (one transaction; none when all exist).
void EnsureIndexes(SqliteConnection& conn) {
  std::set<std::string> existing;
  {
    Stmt st = conn.db().Prepare("SELECT name FROM sqlite_master WHERE type = 'index'");
    while (st.Step()) existing.insert(st.ColumnText(0));
  }
  std::vector<std::string> missing;
  for (const std::string& sql : IndexStatements(conn)) {
    size_t open = sql.find('"');
    std::string name = sql.substr(open + 1, sql.find('"', open + 1) - open - 1);
    if (existing.count(name) == 0) missing.push_back(sql);
  }
  if (missing.empty()) return;
  Transaction tx(conn.db());
  for (const std::string& sql : missing) conn.db().Exec(sql);
  tx.Commit();
}

/// Adds kernels.kf_status to a database written before it existed (KfStatusMigrationSql), once: the column is
/// checked again under the write lock, so concurrent first opens migrate it only once.
void MigrateKfColumns(SqliteConnection& conn) {
  Transaction tx(conn.db());
  if (!SqliteColumnExists(conn.db(), "kernels", "kf_status")) {
    for (const std::string& sql : KfStatusMigrationSql(conn, DeclaredType(*GetTable("kernels").Find("kf_status")))) {
      conn.db().Exec(sql);
    }
  }
  tx.Commit();
}

}  // namespace

SqliteConnection::SqliteConnection(const std::filesystem::path& path, const StoreOptions& options)
    : db_(path, options.read_only, options.busy_timeout) {}

std::string SqliteConnection::Placeholder(int index) const { return fmt::format("?{}", index); }

std::string SqliteConnection::CreateTableSql(const Table& table) const { return store::CreateTableSql(table); }

std::string SqliteConnection::StrPos(std::string_view haystack, std::string_view needle) const {
  return fmt::format("instr({}, {})", haystack, needle);
}

void SqliteConnection::Begin() { db_.Exec("BEGIN IMMEDIATE"); }
void SqliteConnection::Commit() { db_.Exec("COMMIT"); }
void SqliteConnection::Rollback() noexcept {
  try {
    db_.Exec("ROLLBACK");
  } catch (...) {  // NOLINT(bugprone-empty-catch): SQLite rolls back on close
  }
}

std::vector<SqlRow> SqliteConnection::Query(const std::string& sql, const std::vector<SqlParam>& params,
                                            const std::vector<ColumnType>& result_types) {
  Stmt st = db_.Prepare(sql);
  for (size_t i = 0; i < params.size(); ++i) BindValue(st, static_cast<int>(i + 1), params[i].type, params[i].value);
  std::vector<SqlRow> rows;
  while (st.Step()) {
    SqlRow row;
    int n = st.ColumnCount();
    for (int c = 0; c < n; ++c) {
      ColumnType type = static_cast<size_t>(c) < result_types.size() ? result_types[c] : ColumnType::kText;
      row.push_back(ReadValue(st, c, type));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::unique_ptr<Store> OpenSqliteStore(const std::filesystem::path& path, const StoreOptions& options) {
  std::error_code ec;
  if (options.read_only) {
    if (!std::filesystem::exists(path, ec)) {
      throw Error(ErrorKind::kNotFound, "the database file does not exist", path.string());
    }
  } else if (path.has_parent_path()) {
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      throw Error(ErrorKind::kIO, "cannot create the directory for the database: " + ec.message(),
                  path.parent_path().string());
    }
  }
  if (!options.read_only && !std::filesystem::exists(path, ec)) {
    // A new database is the evaluating user's alone (issue 25: every stored candidate's code, prompts, logs);
    // SQLite gives its -wal and -shm files the same mode. An empty file is an empty database.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) ::close(fd);
  }
  auto conn = std::make_unique<SqliteConnection>(path, options);
  if (!options.read_only) {
    EnableWal(conn->db());
    conn->db().Exec("PRAGMA synchronous=NORMAL");
  }
  bool kf_columns = EnsureSqliteSchema(conn->db(), /*create=*/!options.read_only);
  if (!options.read_only) {
    if (!kf_columns) MigrateKfColumns(*conn);
    kf_columns = true;
    EnsureIndexes(*conn);
  }
  return std::make_unique<SqlStore>(std::move(conn), kf_columns);
}

}  // namespace kf::store
