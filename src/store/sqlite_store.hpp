// The SQLite backend of kf::Store (private: callers use kf::OpenStore). SqliteConnection is the SqlConnection
// driver over one sqlite3 connection (sqlite_db.hpp); OpenSqliteStore opens the file in WAL mode, creates and
// checks the schema (sqlite_schema.hpp) and the kf_ix_* indexes, and wraps the connection in a SqlStore.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kernelfoundry/store.hpp"
#include "store/sql_connection.hpp"
#include "store/sqlite_db.hpp"

namespace kf::store {

class SqliteConnection final : public SqlConnection {
 public:
  /// Opens `path` (see Db). REQUIRES: the parent directory exists unless read_only.
  SqliteConnection(const std::filesystem::path& path, const StoreOptions& options);

  std::string Placeholder(int index) const override;
  std::string CreateTableSql(const Table& table) const override;
  std::string StrPos(std::string_view haystack, std::string_view needle) const override;
  Json NoLimit() const override { return -1; }
  std::string_view ForUpdate() const override { return {}; }
  std::string_view NullsOrder(bool) const override { return {}; }
  bool WantsIdIndex() const override { return true; }
  void Begin() override;
  void Commit() override;
  void Rollback() noexcept override;
  std::vector<SqlRow> Query(const std::string& sql, const std::vector<SqlParam>& params,
                            const std::vector<ColumnType>& result_types) override;
  const std::string& Name() const override { return db_.path(); }

  Db& db() { return db_; }

 private:
  Db db_;
};

/// Opens (creating the parent directories, the file, missing tables and the kf_ix_* indexes unless
/// read_only) the SQLite database at `path` in WAL mode, then checks the schema (EnsureSqliteSchema). Errors
/// as kf::OpenStore describes for SQLite.
std::unique_ptr<Store> OpenSqliteStore(const std::filesystem::path& path, const StoreOptions& options);

}  // namespace kf::store
