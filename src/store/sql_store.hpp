// SqlStore — the one implementation of kf::Store, written in SQL that SQLite and PostgreSQL both run, over a
// SqlConnection (sql_connection.hpp) that a backend supplies. Row checks (schema.hpp CheckRow) and the job
// lifecycle (job_lifecycle.hpp) are backend-neutral; only the driver and the DDL differ per backend. Thread
// safety as in store.hpp: one mutex serialises the calls on the one connection.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "store/schema.hpp"
#include "store/sql_connection.hpp"

namespace kf::store {

class SqlStore final : public Store {
 public:
  /// Takes over an open connection whose schema has been created and checked. `has_kf_columns`: the
  /// database has our kf_own columns (kernels.kf_status); false only for an older database opened read-only,
  /// whose rows then read kf_status as NULL.
  SqlStore(std::unique_ptr<SqlConnection> conn, bool has_kf_columns);
  ~SqlStore() override;
  SqlStore(const SqlStore&) = delete;
  SqlStore& operator=(const SqlStore&) = delete;

  bool InsertTask(const Json& row) override;
  int64_t CreateJob(const std::string& task_origin, const Json& config) override;
  [[nodiscard]] JobUpdateOutcome UpdateJob(int64_t id, const JobUpdate& update) override;
  int64_t InsertKernel(const Json& row) override;
  void InsertJobLogs(const std::vector<JobLog>& logs) override;
  std::vector<Json> ListKernels(const KernelQuery& query) override;
  int64_t CountKernels(const KernelQuery& query) override;
  std::optional<Json> GetKernel(int64_t id) override;
  std::vector<Json> ListJobs(const JobQuery& query) override;
  int64_t CountJobs(const JobQuery& query) override;
  std::vector<Json> ListJobLogs(int64_t job_id) override;
  std::vector<TaskSummary> ListTaskSummaries() override;
  std::vector<KernelPoint> KernelHistory(const HistoryQuery& query) override;
  Json GetJob(int64_t id) override;
  std::optional<Json> GetTask(const std::string& id) override;
  std::string Describe() const override;
  int64_t AddApiToken(const std::string& user, const std::string& token_sha256, bool admin) override;
  std::vector<std::pair<ApiToken, std::string>> FindApiTokens(const std::string& token_sha256) override;
  std::vector<ApiToken> ListApiTokens() override;
  int64_t RevokeApiTokens(const std::string& user, std::optional<int64_t> id) override;
  int64_t CreateSubmission(const Submission& s, const Json& job_config) override;
  std::optional<Submission> GetSubmission(int64_t job_id, bool with_task) override;
  std::vector<int64_t> ActiveSubmissions() override;
  void SetSubmissionResult(int64_t job_id, const Json& result) override;

 private:
  /// Inserts one checked row of `table` (`conflict` is appended, e.g. ON CONFLICT … DO NOTHING) and
  /// returns its id (null when the conflict clause skipped it). REQUIRES: mu_ held, a transaction open.
  Json InsertRow(const Table& table, const Json& row, const std::vector<std::pair<std::string, Json>>& defaults,
                 std::string_view conflict = {});
  /// Every column of `table` of the rows selected by `where` (which may use params).
  std::vector<Json> SelectRows(const Table& table, const std::string& where, const std::vector<SqlParam>& params);

  /// The SQL of `column` of the kernels row aliased k: k."name", or a NULL for a kf_own column the database
  /// lacks.
  std::string KernelColumnSql(const Column& column) const;
  /// Every kernels column (KernelColumnSql), in table order.
  std::string KernelSelectList() const;

  /// Creates the submission API's tables (ApiTables) and their index once per store. REQUIRES: mu_ held, no
  /// transaction open.
  void EnsureApiTables();

  std::mutex mu_;
  std::unique_ptr<SqlConnection> conn_;
  bool has_kf_columns_;
  bool api_tables_ = false;
};

/// Parameters collected while SQL text is built: Add returns the placeholder for the value.
class ParamList {
 public:
  explicit ParamList(const SqlConnection& conn) : conn_(conn) {}
  std::string Add(ColumnType type, Json value) {
    params_.push_back({type, std::move(value)});
    return conn_.Placeholder(static_cast<int>(params_.size()));
  }
  const std::vector<SqlParam>& params() const { return params_; }

 private:
  const SqlConnection& conn_;
  std::vector<SqlParam> params_;
};

/// Re-throws `e` with its file set to `name` (errors of CheckRow carry no file).
[[noreturn]] void RethrowWithFile(const Error& e, const std::string& name);

/// Every kernels row of `table` as Json from cells in table order (the first table.columns.size() cells).
Json RowFromCells(const Table& table, const SqlRow& cells, size_t first = 0);

/// The result types of all columns of `table`, in order.
std::vector<ColumnType> ColumnTypes(const Table& table);

/// `SELECT "a", "b", … ` list of all columns of `table`, each prefixed by `alias.` when alias is not empty.
std::string SelectList(const Table& table, std::string_view alias = {});

}  // namespace kf::store
