// The PostgreSQL dialect of the schema and OpenPostgresStore (see postgres_store.hpp): SQLAlchemy's DDL for
// PostgreSQL, creation under an advisory lock (safe when many workers open an empty database at once), and
// the check of an existing database against schema.hpp.
#if KF_HAVE_LIBPQ  // the whole file: built only with libpq (CMakeLists.txt)
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "kernelfoundry/error.hpp"
#include "store/postgres_store.hpp"
#include "store/sql_store.hpp"

namespace kf::store {

std::string PgCreateTableSql(const Table& table) {
  std::string sql = fmt::format("CREATE TABLE IF NOT EXISTS {} (\n", QuoteIdent(table.name));
  std::string pk;
  for (const auto& c : table.columns) {
    sql += fmt::format("\t{} {}", QuoteIdent(c.name), PgDeclaredType(c));
    if (c.server_now) sql += " DEFAULT now()";
    if (c.not_null) sql += " NOT NULL";
    sql += ", \n";
    if (c.primary_key) pk = QuoteIdent(c.name);
  }
  sql += fmt::format("\tPRIMARY KEY ({})\n)", pk);
  return sql;
}

std::string PgConnection::CreateTableSql(const Table& table) const { return PgCreateTableSql(table); }

namespace {

using T = ColumnType;

/// pg_advisory_xact_lock key held while tables and indexes are created ("kfschema" in ASCII).
constexpr const char* kSchemaLockKey = "7740157543302851937";

/// The information_schema data_type values a column of `type` may have in an existing database.
bool CompatibleType(ColumnType type, const std::string& data_type) {
  static const std::map<ColumnType, std::set<std::string>> families = {
      {T::kInteger, {"integer", "bigint", "smallint"}},
      {T::kFloat, {"double precision", "real", "numeric"}},
      {T::kVarchar, {"character varying", "text", "character"}},
      {T::kText, {"character varying", "text", "character"}},
      {T::kBoolean, {"boolean"}},
      {T::kDateTime, {"timestamp with time zone", "timestamp without time zone"}},
      {T::kJson, {"json", "jsonb"}},
  };
  return families.at(type).count(data_type) != 0;
}

/// table -> column -> data_type of every table in the current schema.
std::map<std::string, std::map<std::string, std::string>> ExistingColumns(PgConnection& conn) {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (const SqlRow& r : conn.Query("SELECT table_name, column_name, data_type FROM information_schema.columns "
                                    "WHERE table_schema = current_schema()",
                                    {}, {T::kVarchar, T::kVarchar, T::kVarchar})) {
    out[r[0].get<std::string>()][r[1].get<std::string>()] = r[2].get<std::string>();
  }
  return out;
}

std::set<std::string> ExistingIndexes(PgConnection& conn) {
  std::set<std::string> out;
  for (const SqlRow& r : conn.Query("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()", {},
                                    {T::kVarchar})) {
    out.insert(r[0].get<std::string>());
  }
  return out;
}

/// The index name in `CREATE INDEX IF NOT EXISTS "name" ON …`.
std::string IndexName(const std::string& sql) {
  size_t open = sql.find('"');
  return sql.substr(open + 1, sql.find('"', open + 1) - open - 1);
}

/// True when every kf_own column exists in `existing` (tables that are missing count as complete: they are
/// created with the column).
bool HasKfColumns(const std::map<std::string, std::map<std::string, std::string>>& existing) {
  for (const Table& t : Tables()) {
    auto table = existing.find(std::string(t.name));
    if (table == existing.end()) continue;
    for (const Column& c : t.columns) {
      if (c.kf_own && table->second.count(std::string(c.name)) == 0) return false;
    }
  }
  return true;
}

/// Checks the tables (a missing table, or a missing column other than a kf_own one, or a mistyped column is
/// stale) and returns whether every kf_own column exists.
bool CheckSchema(PgConnection& conn) {
  auto existing = ExistingColumns(conn);
  bool kf_columns = true;
  for (const Table& t : Tables()) {
    auto table = existing.find(std::string(t.name));
    if (table == existing.end()) {
      throw Error(ErrorKind::kInvalidArgument, fmt::format("table '{}' is missing: {}", t.name, StaleHint()),
                  conn.Name(), std::string(t.name));
    }
    for (const auto& c : t.columns) {
      std::string field = fmt::format("{}.{}", t.name, c.name);
      auto it = table->second.find(std::string(c.name));
      if (it == table->second.end()) {
        if (c.kf_own) {  // an older database opened read-only: kf_status reads as NULL
          kf_columns = false;
          continue;
        }
        throw Error(ErrorKind::kInvalidArgument, fmt::format("column '{}' is missing: {}", field, StaleHint()),
                    conn.Name(), field);
      }
      if (!CompatibleType(c.type, it->second)) {
        throw Error(ErrorKind::kInvalidArgument,
                    fmt::format("column '{}' is declared {} but should be {}: {}", field, it->second,
                                PgDeclaredType(c), StaleHint()),
                    conn.Name(), field);
      }
    }
  }
  return kf_columns;
}

/// Creates missing tables and indexes and runs the kf_status migration (KfStatusMigrationSql) where it is
/// due, in one transaction under the schema advisory lock.
void CreateSchema(PgConnection& conn) {
  auto existing = ExistingColumns(conn);
  auto indexes = ExistingIndexes(conn);
  std::vector<std::string> index_sql = IndexStatements(conn);
  bool tables_ok = std::all_of(Tables().begin(), Tables().end(),
                               [&](const Table& t) { return existing.count(std::string(t.name)) != 0; });
  bool indexes_ok = std::all_of(index_sql.begin(), index_sql.end(),
                                [&](const std::string& sql) { return indexes.count(IndexName(sql)) != 0; });
  if (tables_ok && indexes_ok && HasKfColumns(existing)) return;
  WriteTransaction tx(conn);
  conn.Exec(fmt::format("SELECT pg_advisory_xact_lock({})", kSchemaLockKey));
  existing = ExistingColumns(conn);  // another writer may have created them while we waited for the lock
  for (const Table& t : Tables()) conn.Exec(PgCreateTableSql(t));
  if (!HasKfColumns(existing)) {
    // A database the reference (or an older kf) wrote: add our column, filled from the statuses it holds.
    for (const std::string& sql : KfStatusMigrationSql(conn, PgDeclaredType(*GetTable("kernels").Find("kf_status")))) {
      conn.Exec(sql);
    }
  }
  // An index over a column that a stale table lacks would fail here; CheckSchema names the column instead.
  existing = ExistingColumns(conn);
  bool complete = std::all_of(Tables().begin(), Tables().end(), [&](const Table& t) {
    auto it = existing.find(std::string(t.name));
    return it != existing.end() && std::all_of(t.columns.begin(), t.columns.end(), [&](const Column& c) {
             return it->second.count(std::string(c.name)) != 0;
           });
  });
  if (complete) {
    for (const std::string& sql : index_sql) conn.Exec(sql);
  }
  tx.Commit();
}

/// The database named by the URL (libpq's default: the user name).
std::string TargetDatabase(const StoreUrl& url) {
  char* err = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.conninfo.c_str(), &err);
  if (options == nullptr) {
    std::string msg = err != nullptr ? ScrubSecret(err, url.password) : "cannot parse the URL";
    if (err != nullptr) PQfreemem(err);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    throw Error(ErrorKind::kInvalidArgument, "invalid PostgreSQL URL: " + msg, url.redacted, "db");
  }
  std::string dbname, user;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    if (std::string_view(o->keyword) == "dbname") dbname = o->val;
    if (std::string_view(o->keyword) == "user") user = o->val;
  }
  PQconninfoFree(options);
  return dbname.empty() ? user : dbname;
}

/// CREATE DATABASE through the maintenance database "postgres"; a concurrent creation is not an error.
void CreateDatabase(const StoreUrl& url, const StoreOptions& options, const std::string& name, const Error& cause) {
  try {
    PgConnection admin(url, StoreOptions{.read_only = false, .busy_timeout = options.busy_timeout}, "postgres");
    try {
      admin.Exec("CREATE DATABASE " + QuoteIdent(name));
    } catch (const Error& e) {
      if (e.message().find("already exists") == std::string::npos) throw;
    }
  } catch (const Error& e) {
    throw Error(cause.kind(),
                fmt::format("{}; creating it failed too: {} (create it with: createdb {})", cause.message(),
                            e.message(), name),
                cause.file(), cause.field());
  }
}

}  // namespace

std::string PgDeclaredType(const Column& column) {
  switch (column.type) {
    case T::kInteger: return column.autoincrement ? "SERIAL" : "INTEGER";
    case T::kFloat: return "FLOAT";
    case T::kVarchar: return column.max_chars > 0 ? fmt::format("VARCHAR({})", column.max_chars) : "VARCHAR";
    case T::kText: return "TEXT";
    case T::kBoolean: return "BOOLEAN";
    case T::kDateTime: return "TIMESTAMP WITH TIME ZONE";
    case T::kJson: return "JSON";
  }
  return "TEXT";
}

std::unique_ptr<Store> OpenPostgresStore(const StoreUrl& url, const StoreOptions& options) {
  std::string database = TargetDatabase(url);  // also checks the URL's syntax before connecting
  std::unique_ptr<PgConnection> conn;
  try {
    conn = std::make_unique<PgConnection>(url, options);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotFound || options.read_only || database.empty()) throw;
    CreateDatabase(url, options, database, e);
    conn = std::make_unique<PgConnection>(url, options);
  }
  if (!options.read_only) CreateSchema(*conn);
  bool kf_columns = CheckSchema(*conn);
  return std::make_unique<SqlStore>(std::move(conn), kf_columns);
}

}  // namespace kf::store

#endif  // KF_HAVE_LIBPQ
