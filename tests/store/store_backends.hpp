// Store tests over every backend: a TEST_P fixture whose parameter is the backend, a fresh database per test,
// and raw SQL access to it that does not go through the code under test. SQLite databases are files in a
// temp dir; PostgreSQL databases live in one throwaway server per test process (pg_server.hpp). Without the
// server binaries the PostgreSQL cases skip with "kf-postgres-unavailable: <reason>" (tests/CMakeLists.txt
// reports that ctest test as skipped).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernelfoundry/store.hpp"
#include "store/pg_server.hpp"
#include "store/sql_helpers.hpp"
#include "test_util.hpp"

namespace kf::testing {

enum class Backend { kSqlite, kPostgres };

/// "sqlite" / "postgres" (the suffix of the parameterised test names).
inline std::string BackendName(Backend backend) { return backend == Backend::kSqlite ? "sqlite" : "postgres"; }
/// For INSTANTIATE_TEST_SUITE_P: names the cases by backend.
struct BackendParamName {
  std::string operator()(const ::testing::TestParamInfo<Backend>& info) const { return BackendName(info.param); }
};

/// A fresh database of one backend for one test.
class TestDatabase {
 public:
  /// SQLite: <tmp>/runs/kernels.sqlite3 (the directory exists, the file not yet). PostgreSQL: a new database on the shared server.
  /// REQUIRES: for kPostgres, PgServer::Shared() is not null.
  explicit TestDatabase(Backend backend);
  Backend backend() const { return backend_; }
  /// The URL or path for kf::OpenStore.
  const std::string& url() const { return url_; }
  /// Raw SQL on the database, bypassing kf::Store.
  SqlRows Sql(const std::string& sql) const;
  /// The single value of a one-row, one-column query.
  std::string Value(const std::string& sql) const;
  const TempDir& tmp() const { return tmp_; }

 private:
  Backend backend_;
  TempDir tmp_;
  std::string url_;
  std::string pg_database_;
};

/// Base fixture: skips PostgreSQL cases when no server can run, else provides db_ (fresh) and store_ (open).
class BackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override;
  /// Opens another store on the same database.
  std::unique_ptr<Store> Open(const StoreOptions& options = {}) const { return OpenStore(db_->url(), options); }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<Store> store_;
};

// ------------------------------------------------------------------------------------------ TestDatabase

inline TestDatabase::TestDatabase(Backend backend) : backend_(backend) {
  if (backend == Backend::kSqlite) {
    std::filesystem::create_directories(tmp_.path() / "runs");  // raw SQL may create the file first
    url_ = (tmp_.path() / "runs" / "kernels.sqlite3").string();
  } else {
    PgServer* server = PgServer::Shared(nullptr);
    if (server == nullptr) throw std::runtime_error("no PostgreSQL server");
    pg_database_ = server->NewDatabase();
    url_ = server->Url(pg_database_);
  }
}

inline SqlRows TestDatabase::Sql(const std::string& sql) const {
  if (backend_ == Backend::kSqlite) return kf::testing::Sql(url_, sql);
  return PgServer::Shared(nullptr)->Sql(pg_database_, sql);
}

inline std::string TestDatabase::Value(const std::string& sql) const {
  SqlRows rows = Sql(sql);
  if (rows.size() != 1 || rows[0].size() != 1) throw std::runtime_error("expected one value from: " + sql);
  return rows[0][0];
}

inline void BackendTest::SetUp() {
  if (GetParam() == Backend::kPostgres) {
    std::string why;
    if (PgServer::Shared(&why) == nullptr) GTEST_SKIP() << "kf-postgres-unavailable: " << why;
  }
  db_ = std::make_unique<TestDatabase>(GetParam());
  store_ = OpenStore(db_->url());
}

}  // namespace kf::testing
