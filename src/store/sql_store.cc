// SqlStore writes, single-row reads and the shared SQL helpers (see sql_store.hpp). The list/summary reads
// are in sql_store_read.cc.
#include "store/sql_store.hpp"

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "store/job_lifecycle.hpp"

namespace kf::store {

using T = ColumnType;

// ------------------------------------------------------------------------------------------- helpers

void RethrowWithFile(const Error& e, const std::string& name) {
  throw Error(e.kind(), e.message(), e.file().empty() ? name : e.file(), e.field());
}

Json RowFromCells(const Table& table, const SqlRow& cells, size_t first) {
  Json row = Json::object();
  for (size_t i = 0; i < table.columns.size(); ++i) row[std::string(table.columns[i].name)] = cells.at(first + i);
  return row;
}

std::vector<ColumnType> ColumnTypes(const Table& table) {
  std::vector<ColumnType> types;
  for (const auto& c : table.columns) types.push_back(c.type);
  return types;
}

std::string SelectList(const Table& table, std::string_view alias) {
  std::string cols;
  for (size_t i = 0; i < table.columns.size(); ++i) {
    cols += (i ? ", " : "") + (alias.empty() ? "" : std::string(alias) + ".") + QuoteIdent(table.columns[i].name);
  }
  return cols;
}

std::vector<std::string> KfStatusMigrationSql(const SqlConnection& conn, std::string_view declared_type) {
  // The first line's word after "kf status: " (at most 40 characters are looked at; status names are
  // shorter): a space is appended so the first space always exists. The newline is a literal LF inside the
  // string literal, which both SQLite and PostgreSQL accept.
  const std::string head = "replace(substr(\"eval_log\", 12, 40), '\n', ' ') || ' '";
  const std::string word = fmt::format("substr({}, 1, {} - 1)", head, conn.StrPos(head, "' '"));
  return {
      fmt::format("ALTER TABLE \"kernels\" ADD COLUMN \"kf_status\" {}", declared_type),
      fmt::format("UPDATE \"kernels\" SET \"kf_status\" = {0} WHERE substr(\"eval_log\", 1, 11) = 'kf status: ' "
                  "AND length({0}) BETWEEN 1 AND 32",
                  word),
      fmt::format("DROP TABLE IF EXISTS {}", QuoteIdent(kFormerStatusTable)),
  };
}

std::vector<std::string> IndexStatements(const SqlConnection& conn) {
  // Sort columns with NULL as the smallest value, then id: one index serves both directions of a sort.
  auto sort_index = [&conn](std::string_view column) {
    return fmt::format("\"kernels\" (\"task_name\", \"{}\"{}, \"id\")", column, conn.NullsOrder(false));
  };
  std::vector<std::pair<std::string, std::string>> indexes = {
      // ListKernels / CountKernels by task (by id) and KernelHistory, covering the history's columns.
      {"kf_ix_kernels_history",
       "\"kernels\" (\"task_name\", \"id\", \"timestamp\", \"status\", \"improve_over_native\", \"score\")"},
      // ListTaskSummaries: GROUP BY task_name, status answered from the index alone.
      {"kf_ix_kernels_summary",
       "\"kernels\" (\"task_name\", \"status\", \"score\", \"improve_over_native\", \"timestamp\")"},
      // ListKernels of a task sorted by speedup, score or runtime.
      {"kf_ix_kernels_task_speedup", sort_index("improve_over_native")},
      {"kf_ix_kernels_task_score", sort_index("score")},
      {"kf_ix_kernels_task_runtime", sort_index("runtime")},
      {"kf_ix_kernels_job_id", "\"kernels\" (\"job_id\")"},
      // Counts and filters by our status (ListTaskSummaries, the kf_status filter of ListKernels).
      {"kf_ix_kernels_kf_status", "\"kernels\" (\"task_name\", \"kf_status\")"},
      {"kf_ix_jobs_task_id", "\"jobs\" (\"task_id\", \"id\")"},
      {"kf_ix_jobs_status", "\"jobs\" (\"status\", \"id\")"},
      {"kf_ix_job_logs_job_id", "\"job_logs\" (\"job_id\", \"id\")"},
      {"kf_ix_tasks_task_name", "\"tasks\" (\"task_name\")"},
      // Lineage: a kernel by its uuid, the children of a kernel (kf results --lineage, /api/lineage).
      {"kf_ix_kernels_uuid", "\"kernels\" (\"uuid\")"},
      {"kf_ix_kernels_parent_uuid", "\"kernels\" (\"parent_uuid\")"},
  };
  // Pages ordered by id (the newest kernels) step over narrow entries instead of whole rows.
  if (conn.WantsIdIndex()) indexes.emplace_back("kf_ix_kernels_id", "\"kernels\" (\"id\")");
  std::vector<std::string> out;
  for (const auto& [name, on] : indexes) out.push_back(fmt::format("CREATE INDEX IF NOT EXISTS \"{}\" ON {}", name, on));
  return out;
}

// ------------------------------------------------------------------------------------------ SqlStore

SqlStore::SqlStore(std::unique_ptr<SqlConnection> conn, bool has_kf_columns)
    : conn_(std::move(conn)), has_kf_columns_(has_kf_columns) {}

std::string SqlStore::KernelColumnSql(const Column& column) const {
  if (column.kf_own && !has_kf_columns_) return "CAST(NULL AS VARCHAR)";  // an older database opened read-only
  return "k." + QuoteIdent(column.name);
}

std::string SqlStore::KernelSelectList() const {
  std::string cols;
  for (const auto& c : GetTable("kernels").columns) cols += (cols.empty() ? "" : ", ") + KernelColumnSql(c);
  return cols;
}

SqlStore::~SqlStore() = default;

std::string SqlStore::Describe() const { return conn_->Name(); }

Json SqlStore::InsertRow(const Table& table, const Json& row,
                         const std::vector<std::pair<std::string, Json>>& defaults, std::string_view conflict) {
  CheckedRow values;
  try {
    values = CheckRow(table, row, defaults);
  } catch (const Error& e) {
    RethrowWithFile(e, conn_->Name());
  }
  ParamList params(*conn_);
  std::string names, placeholders;
  for (size_t i = 0; i < values.size(); ++i) {
    names += (i ? ", " : "") + QuoteIdent(values[i].first->name);
    placeholders += (i ? ", " : "") + params.Add(values[i].first->type, std::move(values[i].second));
  }
  std::string sql = values.empty() ? fmt::format("INSERT INTO {} DEFAULT VALUES", QuoteIdent(table.name))
                                   : fmt::format("INSERT INTO {} ({}) VALUES ({})", QuoteIdent(table.name), names,
                                                 placeholders);
  if (!conflict.empty()) sql += fmt::format(" {}", conflict);
  const Column& id = *table.Find("id");
  sql += " RETURNING \"id\"";
  std::vector<SqlRow> rows = conn_->Query(sql, params.params(), {id.type});
  return rows.empty() ? Json(nullptr) : rows[0].at(0);
}

std::vector<Json> SqlStore::SelectRows(const Table& table, const std::string& where,
                                       const std::vector<SqlParam>& params) {
  std::string sql = fmt::format("SELECT {} FROM {} {}", SelectList(table), QuoteIdent(table.name), where);
  std::vector<Json> out;
  for (const SqlRow& cells : conn_->Query(sql, params, ColumnTypes(table))) out.push_back(RowFromCells(table, cells));
  return out;
}

bool SqlStore::InsertTask(const Json& row) {
  std::lock_guard lock(mu_);
  WriteTransaction tx(*conn_);
  Json id = InsertRow(GetTable("tasks"), row, {}, "ON CONFLICT (\"id\") DO NOTHING");
  tx.Commit();
  return !id.is_null();
}

int64_t SqlStore::CreateJob(const std::string& task_origin, const Json& config) {
  Json row = {{"task_origin", task_origin},
              {"status", std::string(JobStatusName(JobStatus::kInit))},
              {"progress", 0.0},
              {"created_at", NowTimestamp()},
              {"input_tokens", 0},
              {"output_tokens", 0},
              {"cached_input_tokens", 0},
              {"config", config}};
  std::lock_guard lock(mu_);
  WriteTransaction tx(*conn_);
  Json id = InsertRow(GetTable("jobs"), row, {});
  tx.Commit();
  return id.get<int64_t>();
}

JobUpdateOutcome SqlStore::UpdateJob(int64_t id, const JobUpdate& update) {
  const Table& jobs = GetTable("jobs");
  std::lock_guard lock(mu_);
  WriteTransaction tx(*conn_);
  ParamList select(*conn_);
  std::string sql = fmt::format(
      "SELECT \"status\", \"started_at\" IS NOT NULL, \"finished_at\" IS NOT NULL FROM \"jobs\" WHERE \"id\" = {}{}",
      select.Add(T::kInteger, id), conn_->ForUpdate());
  std::vector<SqlRow> rows = conn_->Query(sql, select.params(), {T::kVarchar, T::kBoolean, T::kBoolean});
  if (rows.empty()) throw Error(ErrorKind::kNotFound, fmt::format("no job with id {}", id), conn_->Name(), "jobs.id");
  JobState state{rows[0][0].is_string() ? rows[0][0].get<std::string>() : "", rows[0][1] == true,
                 rows[0][2] == true};
  std::optional<std::vector<std::pair<std::string_view, Json>>> sets;
  try {
    sets = PlanJobUpdate(state, update);
  } catch (const Error& e) {
    RethrowWithFile(e, conn_->Name());
  }
  if (!sets) return JobUpdateOutcome::kCanceled;  // the transaction rolls back; nothing was written
  if (!sets->empty()) {
    ParamList params(*conn_);
    std::string assignments;
    for (size_t i = 0; i < sets->size(); ++i) {
      const Column& column = *jobs.Find((*sets)[i].first);
      Json value;
      try {
        value = CheckValue(jobs, column, (*sets)[i].second);
      } catch (const Error& e) {
        RethrowWithFile(e, conn_->Name());
      }
      assignments += fmt::format("{}{} = {}", i ? ", " : "", QuoteIdent(column.name), params.Add(column.type, value));
    }
    std::string where = params.Add(T::kInteger, id);
    conn_->Query(fmt::format("UPDATE \"jobs\" SET {} WHERE \"id\" = {}", assignments, where), params.params(), {});
  }
  tx.Commit();
  return JobUpdateOutcome::kUpdated;
}

int64_t SqlStore::InsertKernel(const Json& row) {
  std::lock_guard lock(mu_);
  WriteTransaction tx(*conn_);
  Json id = InsertRow(GetTable("kernels"), row, {{"timestamp", NowTimestamp()}, {"db_user", DefaultDbUser()}});
  tx.Commit();
  return id.get<int64_t>();
}

void SqlStore::InsertJobLogs(const std::vector<JobLog>& logs) {
  if (logs.empty()) return;
  const Table& table = GetTable("job_logs");
  auto opt = [](const std::optional<std::string>& s) { return s ? Json(*s) : Json(nullptr); };
  std::lock_guard lock(mu_);
  WriteTransaction tx(*conn_);
  for (const auto& log : logs) {
    Json row = {{"job_id", log.job_id},
                {"hostname", opt(log.hostname)},
                {"kernel_uuid", opt(log.kernel_uuid)},
                {"agent_session_id", opt(log.agent_session_id)},
                {"level", log.level},
                {"timestamp", log.timestamp.empty() ? NowTimestamp() : log.timestamp},
                {"message", log.message},
                {"extra", log.extra}};
    InsertRow(table, row, {});
  }
  tx.Commit();
}

Json SqlStore::GetJob(int64_t id) {
  std::lock_guard lock(mu_);
  ParamList params(*conn_);
  std::vector<Json> rows = SelectRows(GetTable("jobs"), "WHERE \"id\" = " + params.Add(T::kInteger, id), params.params());
  if (rows.empty()) throw Error(ErrorKind::kNotFound, fmt::format("no job with id {}", id), conn_->Name(), "jobs.id");
  return std::move(rows[0]);
}

std::optional<Json> SqlStore::GetTask(const std::string& id) {
  std::lock_guard lock(mu_);
  ParamList params(*conn_);
  std::vector<Json> rows =
      SelectRows(GetTable("tasks"), "WHERE \"id\" = " + params.Add(T::kVarchar, id), params.params());
  if (rows.empty()) return std::nullopt;
  return std::move(rows[0]);
}

}  // namespace kf::store
