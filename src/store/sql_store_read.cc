// SqlStore list and summary reads (see store.hpp): kernels pages, jobs pages, job logs, task summaries and
// task histories. The indexes that keep them fast are IndexStatements() in sql_store.cc.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "kernelfoundry/error.hpp"
#include "store/sql_store.hpp"

namespace kf::store {
namespace {

using T = ColumnType;

void CheckPage(int64_t limit, int64_t offset, const std::string& name) {
  if (limit < 0 || offset < 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("limit and offset must not be negative (got {} and {})", limit, offset), name, "limit");
  }
}

/// " LIMIT p OFFSET q" with parameters (limit 0 = the dialect's "no limit").
std::string LimitOffset(const SqlConnection& conn, ParamList& params, int64_t limit, int64_t offset) {
  std::string sql = " LIMIT " + params.Add(T::kInteger, limit > 0 ? Json(limit) : conn.NoLimit());
  sql += " OFFSET " + params.Add(T::kInteger, offset);
  return sql;
}

/// " WHERE a AND b" over the set filters of a kernels query (alias k; `kf_status` is the SQL of our status).
std::string KernelWhere(const KernelQuery& q, const std::string& kf_status, ParamList& params) {
  std::vector<std::string> terms;
  if (q.task_name) terms.push_back("k.\"task_name\" = " + params.Add(T::kVarchar, *q.task_name));
  if (q.job_id) terms.push_back("k.\"job_id\" = " + params.Add(T::kInteger, *q.job_id));
  if (q.status) terms.push_back("k.\"status\" = " + params.Add(T::kVarchar, *q.status));
  if (q.kf_status) terms.push_back(kf_status + " = " + params.Add(T::kVarchar, *q.kf_status));
  if (q.uuid) terms.push_back("k.\"uuid\" = " + params.Add(T::kVarchar, *q.uuid));
  if (q.parent_uuid) terms.push_back("k.\"parent_uuid\" = " + params.Add(T::kVarchar, *q.parent_uuid));
  if (q.db_user) terms.push_back("k.\"db_user\" = " + params.Add(T::kVarchar, *q.db_user));
  std::string sql;
  for (size_t i = 0; i < terms.size(); ++i) sql += (i ? " AND " : " WHERE ") + terms[i];
  return sql;
}

std::string SortColumn(KernelSort sort) {
  switch (sort) {
    case KernelSort::kId: return "k.\"id\"";
    case KernelSort::kTimestamp: return "k.\"timestamp\"";
    case KernelSort::kScore: return "k.\"score\"";
    case KernelSort::kRuntime: return "k.\"runtime\"";
    case KernelSort::kSpeedup: return "k.\"improve_over_native\"";
  }
  return "k.\"id\"";
}

std::string JobWhere(const JobQuery& q, ParamList& params) {
  std::vector<std::string> terms;
  if (q.task_name) terms.push_back("t.\"task_name\" = " + params.Add(T::kVarchar, *q.task_name));
  if (q.status) terms.push_back("j.\"status\" = " + params.Add(T::kVarchar, std::string(JobStatusName(*q.status))));
  std::string sql;
  for (size_t i = 0; i < terms.size(); ++i) sql += (i ? " AND " : " WHERE ") + terms[i];
  return sql;
}

std::string Text(const Json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

}  // namespace

std::vector<Json> SqlStore::ListKernels(const KernelQuery& query) {
  const Table& kernels = GetTable("kernels");
  CheckPage(query.limit, query.offset, conn_->Name());
  if (query.last_n < 0) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("last_n must not be negative (got {})", query.last_n),
                conn_->Name(), "last_n");
  }
  if (query.last_n > 0 && (query.limit > 0 || query.offset > 0)) {
    throw Error(ErrorKind::kInvalidArgument, "last_n cannot be combined with limit or offset", conn_->Name(),
                "last_n");
  }
  // The selected cells: the columns, then the job's status.
  std::vector<const Column*> columns;
  if (query.columns.empty()) {
    for (const auto& c : kernels.columns) columns.push_back(&c);
  } else {
    for (const auto& name : query.columns) {
      const Column* c = kernels.Find(name);
      if (c == nullptr) {
        throw Error(ErrorKind::kInvalidArgument, fmt::format("unknown column '{}' for table kernels", name),
                    conn_->Name(), "kernels." + name);
      }
      columns.push_back(c);
    }
  }
  std::lock_guard lock(mu_);
  ParamList params(*conn_);
  std::string cols;
  std::vector<ColumnType> types;
  const std::string kf_status = KernelColumnSql(*kernels.Find("kf_status"));
  for (const Column* c : columns) {
    cols += KernelColumnSql(*c) + ", ";
    types.push_back(c->type);
  }
  types.push_back(T::kVarchar);
  std::string order;
  if (query.last_n > 0) {
    order = " ORDER BY k.\"id\" DESC";
  } else {
    const char* dir = query.descending ? "DESC" : "ASC";
    order = query.sort == KernelSort::kId
                ? fmt::format(" ORDER BY k.\"id\" {}", dir)
                : fmt::format(" ORDER BY {} {}{}, k.\"id\" {}", SortColumn(query.sort), dir,
                              conn_->NullsOrder(query.descending), dir);
  }
  std::string where = KernelWhere(query, kf_status, params);
  std::string sql =
      fmt::format("SELECT {}j.\"status\" FROM \"kernels\" AS k LEFT JOIN \"jobs\" AS j ON j.\"id\" = k.\"job_id\"", cols);
  if (query.last_n > 0 || query.limit > 0 || query.offset > 0) {
    // A page: its ids first, from the narrow kf_ix_* indexes alone (stepping over `offset` wide rows would
    // read them all), then the rows of those ids.
    std::string page = "SELECT k.\"id\" FROM \"kernels\" AS k" + where + order;
    page += query.last_n > 0 ? " LIMIT " + params.Add(T::kInteger, query.last_n)
                             : LimitOffset(*conn_, params, query.limit, query.offset);
    sql += " WHERE k.\"id\" IN (" + page + ")" + order;
  } else {
    sql += where + order;
  }
  std::vector<Json> rows;
  for (const SqlRow& cells : conn_->Query(sql, params.params(), types)) {
    Json row = Json::object();
    for (size_t i = 0; i < columns.size(); ++i) row[std::string(columns[i]->name)] = cells[i];
    row["job_status"] = cells[columns.size()];
    rows.push_back(std::move(row));
  }
  if (query.last_n > 0) std::reverse(rows.begin(), rows.end());
  return rows;
}

int64_t SqlStore::CountKernels(const KernelQuery& query) {
  std::lock_guard lock(mu_);
  ParamList params(*conn_);
  std::string sql = "SELECT count(*) FROM \"kernels\" AS k" +
                    KernelWhere(query, KernelColumnSql(*GetTable("kernels").Find("kf_status")), params);
  return conn_->Query(sql, params.params(), {T::kInteger}).at(0).at(0).get<int64_t>();
}

std::optional<Json> SqlStore::GetKernel(int64_t id) {
  const Table& kernels = GetTable("kernels");
  std::lock_guard lock(mu_);
  ParamList params(*conn_);
  std::string sql = fmt::format(
      "SELECT {}, j.\"status\" FROM \"kernels\" AS k LEFT JOIN \"jobs\" AS j ON j.\"id\" = k.\"job_id\" WHERE "
      "k.\"id\" = {}",
      KernelSelectList(), params.Add(T::kInteger, id));
  std::vector<ColumnType> types = ColumnTypes(kernels);
  types.push_back(T::kVarchar);
  std::vector<SqlRow> rows = conn_->Query(sql, params.params(), types);
  if (rows.empty()) return std::nullopt;
  Json row = RowFromCells(kernels, rows[0]);
  row["job_status"] = rows[0][kernels.columns.size()];
  return row;
}

std::vector<Json> SqlStore::ListJobs(const JobQuery& query) {
  const Table& jobs = GetTable("jobs");
  CheckPage(query.limit, query.offset, conn_->Name());
  std::lock_guard lock(mu_);
  ParamList params(*conn_);
  std::string sql = fmt::format(
      "SELECT {}, t.\"task_name\", (SELECT count(*) FROM \"kernels\" AS k WHERE k.\"job_id\" = j.\"id\") "
      "FROM \"jobs\" AS j LEFT JOIN \"tasks\" AS t ON t.\"id\" = j.\"task_id\"{} ORDER BY j.\"id\" DESC",
      SelectList(jobs, "j"), JobWhere(query, params));
  if (query.limit > 0 || query.offset > 0) sql += LimitOffset(*conn_, params, query.limit, query.offset);
  std::vector<ColumnType> types = ColumnTypes(jobs);
  types.push_back(T::kVarchar);
  types.push_back(T::kInteger);
  std::vector<Json> out;
  for (const SqlRow& cells : conn_->Query(sql, params.params(), types)) {
    Json row = RowFromCells(jobs, cells);
    row["task_name"] = cells[jobs.columns.size()];
    row["kernels"] = cells[jobs.columns.size() + 1];
    out.push_back(std::move(row));
  }
  return out;
}

int64_t SqlStore::CountJobs(const JobQuery& query) {
  std::lock_guard lock(mu_);
  ParamList params(*conn_);
  std::string sql = "SELECT count(*) FROM \"jobs\" AS j LEFT JOIN \"tasks\" AS t ON t.\"id\" = j.\"task_id\"" +
                    JobWhere(query, params);
  return conn_->Query(sql, params.params(), {T::kInteger}).at(0).at(0).get<int64_t>();
}

std::vector<Json> SqlStore::ListJobLogs(int64_t job_id) {
  std::lock_guard lock(mu_);
  ParamList params(*conn_);
  return SelectRows(GetTable("job_logs"), "WHERE \"job_id\" = " + params.Add(T::kInteger, job_id) + " ORDER BY \"id\"",
                    params.params());
}

std::vector<TaskSummary> SqlStore::ListTaskSummaries() {
  std::lock_guard lock(mu_);
  std::map<std::string, TaskSummary> by_task;
  // Counts, best speedup and newest time by (task, reference status): kf_ix_kernels_summary alone answers it.
  std::vector<SqlRow> rows = conn_->Query(
      "SELECT k.\"task_name\", k.\"status\", count(*), max(CASE WHEN k.\"score\" = 5 AND k.\"improve_over_native\" "
      "> 1e-9 THEN k.\"improve_over_native\" END), max(k.\"timestamp\") FROM \"kernels\" AS k GROUP BY "
      "k.\"task_name\", k.\"status\"",
      {}, {T::kVarchar, T::kVarchar, T::kInteger, T::kFloat, T::kDateTime});
  for (const SqlRow& r : rows) {
    TaskSummary& s = by_task[Text(r[0])];
    s.task_name = Text(r[0]);
    int64_t n = r[2].get<int64_t>();
    s.kernels += n;
    s.by_status[Text(r[1])] += n;
    if (r[3].is_number() && (!s.best_speedup || r[3].get<double>() > *s.best_speedup)) s.best_speedup = r[3].get<double>();
    s.last_timestamp = std::max(s.last_timestamp, Text(r[4]));
  }
  // Counts by our status (kf_ix_kernels_kf_status alone answers it); none for an older database opened
  // read-only, whose rows all count as "not recorded by kf".
  if (has_kf_columns_) {
    for (const SqlRow& r : conn_->Query("SELECT k.\"task_name\", k.\"kf_status\", count(*) FROM \"kernels\" AS k WHERE "
                                        "k.\"kf_status\" IS NOT NULL GROUP BY k.\"task_name\", k.\"kf_status\"",
                                        {}, {T::kVarchar, T::kVarchar, T::kInteger})) {
      auto it = by_task.find(Text(r[0]));
      if (it != by_task.end()) it->second.by_kf_status[Text(r[1])] += r[2].get<int64_t>();
    }
  }
  std::vector<TaskSummary> out;
  for (auto& [name, s] : by_task) {
    int64_t known = 0;
    for (const auto& [status, n] : s.by_kf_status) known += n;
    if (known < s.kernels) s.by_kf_status[""] = s.kernels - known;  // rows without our status
    out.push_back(std::move(s));
  }
  return out;  // std::map: ordered by task_name
}

std::vector<KernelPoint> SqlStore::KernelHistory(const HistoryQuery& query) {
  CheckPage(query.limit, 0, conn_->Name());
  std::lock_guard lock(mu_);
  ParamList params(*conn_);
  std::string sql = fmt::format(
      "SELECT k.\"id\", k.\"timestamp\", k.\"status\", {}, k.\"improve_over_native\", k.\"score\" FROM \"kernels\" "
      "AS k WHERE k.\"task_name\" = {} AND k.\"id\" > {} ORDER BY k.\"id\"",
      KernelColumnSql(*GetTable("kernels").Find("kf_status")), params.Add(T::kVarchar, query.task_name),
      params.Add(T::kInteger, query.after_id));
  if (query.limit > 0) sql += " LIMIT " + params.Add(T::kInteger, query.limit);
  std::vector<KernelPoint> out;
  for (const SqlRow& r :
       conn_->Query(sql, params.params(), {T::kInteger, T::kDateTime, T::kVarchar, T::kVarchar, T::kFloat, T::kInteger})) {
    KernelPoint p;
    p.id = r[0].get<int64_t>();
    p.timestamp = Text(r[1]);
    p.status = Text(r[2]);
    p.kf_status = Text(r[3]);
    if (r[4].is_number()) p.speedup = r[4].get<double>();
    if (r[5].is_number_integer()) p.score = r[5].get<int64_t>();
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace kf::store
