// The PostgreSQL backend of kf::Store through libpq (private: callers use kf::OpenStore). PgConnection is the
// SqlConnection driver over one libpq connection: text-format parameters with explicit type OIDs, results
// converted by the expected column type, SQLSTATEs mapped to kf::Error kinds, and the password scrubbed from
// every message. The session runs in UTC (timestamps are TIMESTAMP WITH TIME ZONE) with lock_timeout =
// busy_timeout, and, when read-only, default_transaction_read_only. OpenPostgresStore creates the database
// (when missing and allowed), the tables (SQLAlchemy's PostgreSQL DDL) and the kf_ix_* indexes under an
// advisory lock, then checks the schema.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <vector>

#include "kernelfoundry/store.hpp"
#include "store/sql_connection.hpp"
#include "store/store_url.hpp"

namespace kf::store {

class PgConnection final : public SqlConnection {
 public:
  /// Connects to `url` (see OpenPostgresStore for the errors). `dbname_override` replaces the URL's database
  /// (used to reach the maintenance database "postgres").
  PgConnection(const StoreUrl& url, const StoreOptions& options, const std::string& dbname_override = {});
  ~PgConnection() override;
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  std::string Placeholder(int index) const override;
  std::string CreateTableSql(const Table& table) const override;
  std::string StrPos(std::string_view haystack, std::string_view needle) const override;
  Json NoLimit() const override { return nullptr; }
  std::string_view ForUpdate() const override { return " FOR UPDATE"; }
  std::string_view NullsOrder(bool descending) const override { return descending ? " NULLS LAST" : " NULLS FIRST"; }
  bool WantsIdIndex() const override { return false; }
  void Begin() override;
  void Commit() override;
  void Rollback() noexcept override;
  std::vector<SqlRow> Query(const std::string& sql, const std::vector<SqlParam>& params,
                            const std::vector<ColumnType>& result_types) override;
  const std::string& Name() const override { return name_; }

  /// Runs SQL without parameters or results we need (several statements allowed).
  void Exec(const std::string& sql);
  /// The database name libpq connected to.
  std::string DatabaseName() const;

 private:
  /// (Re)applies the session settings after a connect or reset.
  void SetUpSession();
  /// Reconnects when the connection was lost outside a transaction.
  void EnsureConnected();
  /// Throws the kf::Error for a failed result (cleared here) or, with res == nullptr, for the connection.
  [[noreturn]] void Fail(PGresult* res, std::string_view what);

  PGconn* conn_ = nullptr;
  std::string name_;      ///< redacted URL
  std::string password_;  ///< scrubbed from messages
  StoreOptions options_;
  bool in_transaction_ = false;
};

/// Opens the PostgreSQL store `url` (already parsed). Errors as kf::OpenStore describes for PostgreSQL.
std::unique_ptr<Store> OpenPostgresStore(const StoreUrl& url, const StoreOptions& options);

/// The declared PostgreSQL type SQLAlchemy writes for `column`: SERIAL for an autoincrement primary key,
/// "TIMESTAMP WITH TIME ZONE", "VARCHAR(64)", "JSON", ….
std::string PgDeclaredType(const Column& column);
/// SQLAlchemy's CREATE TABLE IF NOT EXISTS for PostgreSQL.
std::string PgCreateTableSql(const Table& table);

}  // namespace kf::store
