// SqlStore: the tables of kf serve's submission API (see store.hpp): bearer tokens by hash and submitted jobs.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "kernelfoundry/error.hpp"
#include "store/sql_store.hpp"

namespace kf::store {
namespace {

using T = ColumnType;

ApiToken TokenFromRow(const Json& row) {
  ApiToken t;
  t.id = row["id"].get<int64_t>();
  t.user = row["db_user"].get<std::string>();
  t.admin = row["admin"] == true;
  t.created_at = row["created_at"].is_string() ? row["created_at"].get<std::string>() : "";
  if (row["revoked_at"].is_string()) t.revoked_at = row["revoked_at"].get<std::string>();
  return t;
}

bool IsSha256Hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
         });
}

std::string_view ActiveStatusList() { return "('INIT', 'RUN', 'VALIDATING')"; }

}  // namespace

void SqlStore::EnsureApiTables() {
  if (api_tables_) return;
  WriteTransaction tx(*conn_);
  for (const Table& t : ApiTables()) conn_->Query(conn_->CreateTableSql(t), {}, {});
  conn_->Query("CREATE INDEX IF NOT EXISTS \"kf_ix_api_tokens_sha256\" ON \"kf_api_tokens\" (\"token_sha256\")", {}, {});
  tx.Commit();
  api_tables_ = true;
}

int64_t SqlStore::AddApiToken(const std::string& user, const std::string& token_sha256, bool admin) {
  if (user.empty()) throw Error(ErrorKind::kInvalidArgument, "the user name is empty", conn_->Name(), "kf_api_tokens.db_user");
  if (!IsSha256Hex(token_sha256)) {
    throw Error(ErrorKind::kInvalidArgument, "expected a SHA-256 as 64 lower-case hex digits", conn_->Name(),
                "kf_api_tokens.token_sha256");
  }
  Json row = {{"db_user", user}, {"token_sha256", token_sha256}, {"admin", admin}, {"created_at", NowTimestamp()}};
  std::lock_guard lock(mu_);
  EnsureApiTables();
  WriteTransaction tx(*conn_);
  Json id = InsertRow(GetTable("kf_api_tokens"), row, {});
  tx.Commit();
  return id.get<int64_t>();
}

std::vector<std::pair<ApiToken, std::string>> SqlStore::FindApiTokens(const std::string& token_sha256) {
  std::lock_guard lock(mu_);
  EnsureApiTables();
  ParamList params(*conn_);
  std::vector<Json> rows = SelectRows(
      GetTable("kf_api_tokens"),
      "WHERE \"token_sha256\" = " + params.Add(T::kVarchar, token_sha256) + " AND \"revoked_at\" IS NULL",
      params.params());
  std::vector<std::pair<ApiToken, std::string>> out;
  for (const Json& r : rows) out.emplace_back(TokenFromRow(r), r["token_sha256"].get<std::string>());
  return out;
}

std::vector<ApiToken> SqlStore::ListApiTokens() {
  std::lock_guard lock(mu_);
  EnsureApiTables();
  std::vector<ApiToken> out;
  for (const Json& r : SelectRows(GetTable("kf_api_tokens"), "ORDER BY \"id\"", {})) out.push_back(TokenFromRow(r));
  return out;
}

int64_t SqlStore::RevokeApiTokens(const std::string& user, std::optional<int64_t> id) {
  std::lock_guard lock(mu_);
  EnsureApiTables();
  WriteTransaction tx(*conn_);
  ParamList params(*conn_);
  std::string sql = fmt::format(
      "UPDATE \"kf_api_tokens\" SET \"revoked_at\" = {} WHERE \"db_user\" = {} AND \"revoked_at\" IS NULL",
      params.Add(T::kDateTime, NowTimestamp()), params.Add(T::kVarchar, user));
  if (id) sql += " AND \"id\" = " + params.Add(T::kInteger, *id);
  sql += " RETURNING \"id\"";
  const size_t n = conn_->Query(sql, params.params(), {T::kInteger}).size();
  tx.Commit();
  return static_cast<int64_t>(n);
}

int64_t SqlStore::CreateSubmission(const Submission& s, const Json& job_config) {
  Json job = {{"task_origin", s.user},
              {"status", std::string(JobStatusName(JobStatus::kInit))},
              {"progress", 0.0},
              {"created_at", NowTimestamp()},
              {"input_tokens", 0},
              {"output_tokens", 0},
              {"cached_input_tokens", 0},
              {"config", job_config}};
  std::lock_guard lock(mu_);
  EnsureApiTables();
  WriteTransaction tx(*conn_);
  const int64_t id = InsertRow(GetTable("jobs"), job, {}).get<int64_t>();
  Json row = {{"id", id},
              {"db_user", s.user},
              {"created_at", NowTimestamp()},
              {"archive_bytes", s.archive_bytes},
              {"lineage", s.lineage},
              {"task", s.task}};
  InsertRow(GetTable("kf_submissions"), row, {});
  tx.Commit();
  return id;
}

std::optional<Submission> SqlStore::GetSubmission(int64_t job_id, bool with_task) {
  std::lock_guard lock(mu_);
  EnsureApiTables();
  ParamList params(*conn_);
  std::string sql = fmt::format(
      "SELECT \"db_user\", \"created_at\", \"archive_bytes\", \"lineage\", {}, \"result\" FROM \"kf_submissions\" "
      "WHERE \"id\" = {}",
      with_task ? "\"task\"" : "''", params.Add(T::kInteger, job_id));
  std::vector<SqlRow> rows =
      conn_->Query(sql, params.params(), {T::kVarchar, T::kDateTime, T::kInteger, T::kJson, T::kText, T::kJson});
  if (rows.empty()) return std::nullopt;
  const SqlRow& r = rows[0];
  Submission s;
  s.job_id = job_id;
  s.user = r[0].get<std::string>();
  s.created_at = r[1].is_string() ? r[1].get<std::string>() : "";
  s.archive_bytes = r[2].is_number_integer() ? r[2].get<int64_t>() : 0;
  s.lineage = r[3].is_object() ? r[3] : Json::object();
  s.task = r[4].is_string() ? r[4].get<std::string>() : "";
  s.result = r[5];
  return s;
}

void SqlStore::SetSubmissionResult(int64_t job_id, const Json& result) {
  std::lock_guard lock(mu_);
  EnsureApiTables();
  WriteTransaction tx(*conn_);
  ParamList params(*conn_);
  const std::string sql = fmt::format("UPDATE \"kf_submissions\" SET \"result\" = {} WHERE \"id\" = {}",
                                      params.Add(T::kJson, result), params.Add(T::kInteger, job_id));
  conn_->Query(sql, params.params(), {});
  tx.Commit();
}

std::vector<int64_t> SqlStore::ActiveSubmissions() {
  std::lock_guard lock(mu_);
  EnsureApiTables();
  std::string sql = fmt::format(
      "SELECT s.\"id\" FROM \"kf_submissions\" AS s JOIN \"jobs\" AS j ON j.\"id\" = s.\"id\" "
      "WHERE j.\"status\" IN {} ORDER BY s.\"id\"",
      ActiveStatusList());
  std::vector<int64_t> out;
  for (const SqlRow& r : conn_->Query(sql, {}, {T::kInteger})) out.push_back(r[0].get<int64_t>());
  return out;
}

}  // namespace kf::store
