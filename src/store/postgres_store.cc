// PgConnection — the libpq driver of the PostgreSQL backend (see postgres_store.hpp).
#if KF_HAVE_LIBPQ  // the whole file: built only with libpq (CMakeLists.txt)
#include "store/postgres_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/terminal.hpp"

namespace kf::store {
namespace {

using T = ColumnType;

// Type OIDs of the built-in types (catalog/pg_type_d.h, stable across PostgreSQL versions).
constexpr Oid kInt8Oid = 20, kTextOid = 25, kJsonOid = 114, kFloat8Oid = 701, kBoolOid = 16, kVarcharOid = 1043,
              kTimestampTzOid = 1184;

Oid OidFor(ColumnType type) {
  switch (type) {
    case T::kInteger: return kInt8Oid;
    case T::kFloat: return kFloat8Oid;
    case T::kVarchar: return kVarcharOid;
    case T::kText: return kTextOid;
    case T::kBoolean: return kBoolOid;
    case T::kDateTime: return kTimestampTzOid;
    case T::kJson: return kJsonOid;
  }
  return kTextOid;
}

/// PostgreSQL text cannot hold NUL or invalid UTF-8: NUL becomes U+2400 (as in process output) and invalid
/// sequences U+FFFD (DecodeUtf8Replace).
std::string PgText(const std::string& s) {
  std::string out = IsValidUtf8(s) ? s : DecodeUtf8Replace(s);
  for (size_t pos = out.find('\0'); pos != std::string::npos; pos = out.find('\0', pos)) {
    out.replace(pos, 1, "\xE2\x90\x80");
  }
  return out;
}

/// The text form of a checked value for its parameter type.
std::string ToText(ColumnType type, const Json& value) {
  switch (type) {
    case T::kInteger: return std::to_string(value.get<int64_t>());
    case T::kFloat: {
      double d = value.get<double>();
      if (std::isnan(d)) return "NaN";
      if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
      return fmt::format("{}", d);
    }
    case T::kBoolean: return value.get<bool>() ? "true" : "false";
    case T::kVarchar:
    case T::kText:
    case T::kDateTime: return PgText(value.get_ref<const std::string&>());
    case T::kJson: return PgText(DumpJson(value));
  }
  return DumpJson(value);
}

Json FromText(ColumnType type, const char* text) {
  switch (type) {
    case T::kInteger: {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(text, &end, 10);
      if (errno == 0 && end != text && *end == '\0') return static_cast<int64_t>(v);
      return std::strtod(text, nullptr);
    }
    case T::kFloat: return std::strtod(text, nullptr);
    case T::kBoolean: return std::strcmp(text, "t") == 0 || std::strcmp(text, "true") == 0;
    case T::kDateTime: return NormalizeTimestamp(text);
    case T::kJson: {
      Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_discarded()) return parsed;
      return std::string(text);
    }
    case T::kVarchar:
    case T::kText: return std::string(text);
  }
  return std::string(text);
}

void IgnoreNotice(void*, const char*) {}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

PgConnection::PgConnection(const StoreUrl& url, const StoreOptions& options, const std::string& dbname_override)
    : name_(url.redacted), password_(url.password), options_(options) {
  std::string timeout = std::to_string(std::max<int64_t>(1, (options.busy_timeout.count() + 999) / 1000));
  std::vector<const char*> keys = {"connect_timeout", "fallback_application_name", "dbname"};
  std::vector<const char*> values = {timeout.c_str(), "kf", url.conninfo.c_str()};
  if (!dbname_override.empty()) {  // a later dbname is a plain name that replaces the URL's
    keys.push_back("dbname");
    values.push_back(dbname_override.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  conn_ = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (conn_ == nullptr) throw Error(ErrorKind::kLimit, "out of memory while connecting to PostgreSQL", name_);
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = ScrubSecret(Trim(PQerrorMessage(conn_)), password_);
    PQfinish(conn_);
    conn_ = nullptr;
    bool missing_db = msg.find("database") != std::string::npos && msg.find("does not exist") != std::string::npos;
    throw Error(missing_db ? ErrorKind::kNotFound : ErrorKind::kIO,
                "cannot connect to PostgreSQL: " + msg, name_, "db");
  }
  PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
  SetUpSession();
}

PgConnection::~PgConnection() {
  if (conn_ != nullptr) PQfinish(conn_);
}

void PgConnection::SetUpSession() {
  std::string sql = fmt::format(
      "SET TIME ZONE 'UTC'; SET client_encoding TO 'UTF8'; SET client_min_messages TO warning; "
      "SET lock_timeout = {}",
      options_.busy_timeout.count());
  if (options_.read_only) sql += "; SET default_transaction_read_only = on";
  Exec(sql);
}

void PgConnection::EnsureConnected() {
  if (PQstatus(conn_) == CONNECTION_OK || in_transaction_) return;
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) Fail(nullptr, "reconnecting");
  SetUpSession();
}

std::string PgConnection::Placeholder(int index) const { return fmt::format("${}", index); }

std::string PgConnection::StrPos(std::string_view haystack, std::string_view needle) const {
  return fmt::format("strpos({}, {})", haystack, needle);
}

std::string PgConnection::DatabaseName() const { return PQdb(conn_) != nullptr ? PQdb(conn_) : ""; }

void PgConnection::Exec(const std::string& sql) {
  EnsureConnected();
  PGresult* res = PQexec(conn_, sql.c_str());
  ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) Fail(res, "running " + sql.substr(0, sql.find_first_of(" (")));
  PQclear(res);
}

void PgConnection::Begin() {
  Exec("BEGIN");
  in_transaction_ = true;
}

void PgConnection::Commit() {
  in_transaction_ = false;
  Exec("COMMIT");
}

void PgConnection::Rollback() noexcept {
  in_transaction_ = false;
  if (PQstatus(conn_) != CONNECTION_OK) return;  // the server rolls back a lost session
  PQclear(PQexec(conn_, "ROLLBACK"));
}

std::vector<SqlRow> PgConnection::Query(const std::string& sql, const std::vector<SqlParam>& params,
                                        const std::vector<ColumnType>& result_types) {
  EnsureConnected();
  std::vector<std::string> texts(params.size());
  std::vector<const char*> values(params.size(), nullptr);
  std::vector<Oid> types(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    types[i] = OidFor(params[i].type);
    if (params[i].value.is_null()) continue;
    texts[i] = ToText(params[i].type, params[i].value);
    values[i] = texts[i].c_str();
  }
  PGresult* res = PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), types.data(), values.data(),
                               nullptr, nullptr, /*resultFormat=*/0);
  ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) Fail(res, "running a statement");
  std::vector<SqlRow> rows;
  int n = PQntuples(res), fields = PQnfields(res);
  rows.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    SqlRow row;
    row.reserve(static_cast<size_t>(fields));
    for (int c = 0; c < fields; ++c) {
      if (PQgetisnull(res, r, c)) {
        row.emplace_back(nullptr);
        continue;
      }
      ColumnType type = static_cast<size_t>(c) < result_types.size() ? result_types[c] : T::kText;
      row.push_back(FromText(type, PQgetvalue(res, r, c)));
    }
    rows.push_back(std::move(row));
  }
  PQclear(res);
  return rows;
}

void PgConnection::Fail(PGresult* res, std::string_view what) {
  std::string state, message, field;
  if (res != nullptr) {
    auto get = [res](int code) {
      const char* v = PQresultErrorField(res, code);
      return v != nullptr ? std::string(v) : std::string();
    };
    state = get(PG_DIAG_SQLSTATE);
    message = get(PG_DIAG_MESSAGE_PRIMARY);
    std::string detail = get(PG_DIAG_MESSAGE_DETAIL);
    if (!detail.empty()) message += " (" + detail + ")";
    std::string table = get(PG_DIAG_TABLE_NAME), column = get(PG_DIAG_COLUMN_NAME);
    if (!table.empty()) field = column.empty() ? table : table + "." + column;
    PQclear(res);
  }
  if (message.empty()) message = Trim(PQerrorMessage(conn_));
  message = ScrubSecret(message, password_);
  std::string cls = state.substr(0, 2);
  ErrorKind kind = ErrorKind::kIO;
  std::string text = fmt::format("{} failed: {}", what, message);
  if (cls == "23" || cls == "22") {
    kind = ErrorKind::kInvalidArgument;
  } else if (state == "42P01" || state == "42703") {
    kind = ErrorKind::kInvalidArgument;
    text += ": " + StaleHint();
  } else if (state == "25006") {
    text = fmt::format("{} failed: the database is open read-only", what);
  } else if (state == "55P03" || state == "57014") {
    text = fmt::format("the database is locked by another writer (waited {} ms while {})",
                       options_.busy_timeout.count(), what);
  } else if (cls == "53") {
    kind = ErrorKind::kLimit;
  }
  throw Error(kind, text, name_, field);
}

}  // namespace kf::store

#endif  // KF_HAVE_LIBPQ
