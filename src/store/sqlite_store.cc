// SqliteStore — the SQLite backend of kf::Store (see kernelfoundry/store.hpp for the contract).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "store/schema.hpp"
#include "store/sqlite_db.hpp"

namespace kf {

using store::Column;
using store::QuoteIdent;
using store::Table;

struct SqliteStore::Impl {
  Impl(const std::filesystem::path& p, const SqliteOptions& options)
      : path(p), db(p, options.read_only, options.busy_timeout) {}

  std::filesystem::path path;
  store::Db db;
  std::mutex mu;

  /// Inserts one row of `table` from the JSON object `row` (keys = column names) plus `defaults` for
  /// columns the row lacks or has as null. `conflict` is appended to the statement (e.g. ON CONFLICT …).
  /// Returns the new rowid, or 0 when the conflict clause skipped the row. REQUIRES: a transaction.
  int64_t InsertRow(const Table& table, const Json& row, const std::vector<std::pair<std::string, Json>>& defaults,
                    std::string_view conflict = {});

  /// Reads all columns of `table` for the current row of `st` (selected in table order).
  static Json ReadRow(const store::Stmt& st, const Table& table);
};

int64_t SqliteStore::Impl::InsertRow(const Table& table, const Json& row,
                                     const std::vector<std::pair<std::string, Json>>& defaults,
                                     std::string_view conflict) {
  if (!row.is_object()) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("a {} row must be a JSON object, got {}", table.name,
                                                         row.type_name()),
                path.string(), std::string(table.name));
  }
  std::vector<std::pair<const Column*, const Json*>> values;
  for (const auto& [key, value] : row.items()) {
    const Column* column = table.Find(key);
    if (column == nullptr) {
      throw Error(ErrorKind::kInvalidArgument, fmt::format("unknown column '{}' for table {}", key, table.name),
                  path.string(), fmt::format("{}.{}", table.name, key));
    }
    if (!value.is_null()) values.emplace_back(column, &value);
  }
  for (const auto& [name, value] : defaults) {
    const Column* column = table.Find(name);
    bool present = std::any_of(values.begin(), values.end(), [&](const auto& v) { return v.first == column; });
    if (column != nullptr && !present) values.emplace_back(column, &value);
  }
  for (const auto& c : table.columns) {
    if (!c.not_null || c.server_now || (c.primary_key && c.type == store::ColumnType::kInteger)) continue;
    bool present = std::any_of(values.begin(), values.end(), [&](const auto& v) { return v.first == &c; });
    if (!present) {
      throw Error(ErrorKind::kInvalidArgument, "required field is missing or null", path.string(),
                  fmt::format("{}.{}", table.name, c.name));
    }
  }
  std::string names, params;
  for (size_t i = 0; i < values.size(); ++i) {
    names += (i ? ", " : "") + QuoteIdent(values[i].first->name);
    params += fmt::format("{}?{}", i ? ", " : "", i + 1);
  }
  std::string sql = values.empty() ? fmt::format("INSERT INTO {} DEFAULT VALUES", QuoteIdent(table.name))
                                   : fmt::format("INSERT INTO {} ({}) VALUES ({})", QuoteIdent(table.name), names,
                                                 params);
  if (!conflict.empty()) sql += fmt::format(" {}", conflict);
  store::Stmt st = db.Prepare(sql);
  for (size_t i = 0; i < values.size(); ++i) {
    try {
      store::BindValue(st, static_cast<int>(i + 1), table, *values[i].first, *values[i].second);
    } catch (const Error& e) {
      throw Error(e.kind(), e.message(), path.string(), e.field());
    }
  }
  st.Run();
  return db.Changes() > 0 ? db.LastInsertRowid() : 0;
}

Json SqliteStore::Impl::ReadRow(const store::Stmt& st, const Table& table) {
  Json row = Json::object();
  for (size_t i = 0; i < table.columns.size(); ++i) {
    row[std::string(table.columns[i].name)] = store::ReadValue(st, static_cast<int>(i), table.columns[i]);
  }
  return row;
}

namespace {

/// "SELECT "a", "b", … FROM "table"" over every column of `table`.
std::string SelectAll(const Table& table) {
  std::string cols;
  for (size_t i = 0; i < table.columns.size(); ++i) cols += (i ? ", " : "") + QuoteIdent(table.columns[i].name);
  return fmt::format("SELECT {} FROM {}", cols, QuoteIdent(table.name));
}

/// Sets WAL journal mode, retrying while another connection holds the lock the switch needs.
void EnableWal(store::Db& db) {
  auto deadline = std::chrono::steady_clock::now() + db.busy_timeout();
  for (;;) {
    try {
      store::Stmt st = db.Prepare("PRAGMA journal_mode=WAL");
      st.Run();
      return;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIO || std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace

SqliteStore::SqliteStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteStore::~SqliteStore() = default;

const std::filesystem::path& SqliteStore::path() const { return impl_->path; }

std::unique_ptr<SqliteStore> SqliteStore::Open(const std::filesystem::path& path, const SqliteOptions& options) {
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
  auto impl = std::make_unique<Impl>(path, options);
  if (!options.read_only) {
    EnableWal(impl->db);
    impl->db.Exec("PRAGMA synchronous=NORMAL");
  }
  store::EnsureSchema(impl->db, /*create=*/!options.read_only);
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(impl)));
}

bool SqliteStore::InsertTask(const Json& row) {
  std::lock_guard lock(impl_->mu);
  store::Transaction tx(impl_->db);
  int64_t id = impl_->InsertRow(store::GetTable("tasks"), row, {}, "ON CONFLICT (\"id\") DO NOTHING");
  tx.Commit();
  return id != 0;
}

int64_t SqliteStore::CreateJob(const std::string& task_origin, const Json& config) {
  std::lock_guard lock(impl_->mu);
  Json row = {{"task_origin", task_origin},
              {"status", std::string(JobStatusName(JobStatus::kInit))},
              {"progress", 0.0},
              {"created_at", NowTimestamp()},
              {"input_tokens", 0},
              {"output_tokens", 0},
              {"cached_input_tokens", 0},
              {"config", config}};
  store::Transaction tx(impl_->db);
  int64_t id = impl_->InsertRow(store::GetTable("jobs"), row, {});
  tx.Commit();
  return id;
}

JobUpdateOutcome SqliteStore::UpdateJob(int64_t id, const JobUpdate& update) {
  if (update.progress && std::isnan(*update.progress)) {
    throw Error(ErrorKind::kInvalidArgument, "progress is NaN", impl_->path.string(), "jobs.progress");
  }
  std::lock_guard lock(impl_->mu);
  const Table& jobs = store::GetTable("jobs");
  store::Transaction tx(impl_->db);
  std::string status;
  bool has_started = false, has_finished = false;
  {
    store::Stmt st = impl_->db.Prepare(
        "SELECT \"status\", \"started_at\" IS NOT NULL, \"finished_at\" IS NOT NULL FROM \"jobs\" WHERE \"id\" = ?1");
    st.BindInt(1, id);
    if (!st.Step()) {
      throw Error(ErrorKind::kNotFound, fmt::format("no job with id {}", id), impl_->path.string(), "jobs.id");
    }
    status = st.ColumnText(0);
    has_started = st.ColumnInt(1) != 0;
    has_finished = st.ColumnInt(2) != 0;
  }
  if (status == JobStatusName(JobStatus::kCanceled)) return JobUpdateOutcome::kCanceled;  // tx rolls back

  std::vector<std::pair<std::string_view, Json>> sets;
  std::optional<double> progress = update.progress;
  if (progress) progress = std::clamp(*progress, 0.0, 1.0);
  if (update.status) {
    sets.emplace_back("status", std::string(JobStatusName(*update.status)));
    if (IsTerminal(*update.status) && !has_finished) sets.emplace_back("finished_at", NowTimestamp());
    if (*update.status == JobStatus::kComplete) progress = 1.0;
  }
  if (progress) sets.emplace_back("progress", *progress);
  if (update.task_id) sets.emplace_back("task_id", *update.task_id);
  if (update.config) sets.emplace_back("config", *update.config);
  if (update.started && !has_started) sets.emplace_back("started_at", NowTimestamp());
  if (!sets.empty()) {
    std::string assignments;
    for (size_t i = 0; i < sets.size(); ++i) {
      assignments += fmt::format("{}{} = ?{}", i ? ", " : "", QuoteIdent(sets[i].first), i + 1);
    }
    store::Stmt st = impl_->db.Prepare(
        fmt::format("UPDATE \"jobs\" SET {} WHERE \"id\" = ?{}", assignments, sets.size() + 1));
    for (size_t i = 0; i < sets.size(); ++i) {
      try {
        store::BindValue(st, static_cast<int>(i + 1), jobs, *jobs.Find(sets[i].first), sets[i].second);
      } catch (const Error& e) {
        throw Error(e.kind(), e.message(), impl_->path.string(), e.field());
      }
    }
    st.BindInt(static_cast<int>(sets.size() + 1), id);
    st.Run();
  }
  tx.Commit();
  return JobUpdateOutcome::kUpdated;
}

int64_t SqliteStore::InsertKernel(const Json& row) {
  std::lock_guard lock(impl_->mu);
  store::Transaction tx(impl_->db);
  int64_t id = impl_->InsertRow(store::GetTable("kernels"), row,
                                {{"timestamp", NowTimestamp()}, {"db_user", DefaultDbUser()}});
  tx.Commit();
  return id;
}

void SqliteStore::InsertJobLogs(const std::vector<JobLog>& logs) {
  if (logs.empty()) return;
  std::lock_guard lock(impl_->mu);
  const Table& table = store::GetTable("job_logs");
  auto opt = [](const std::optional<std::string>& s) { return s ? Json(*s) : Json(nullptr); };
  store::Transaction tx(impl_->db);
  for (const auto& log : logs) {
    Json row = {{"job_id", log.job_id},
                {"hostname", opt(log.hostname)},
                {"kernel_uuid", opt(log.kernel_uuid)},
                {"agent_session_id", opt(log.agent_session_id)},
                {"level", log.level},
                {"timestamp", log.timestamp.empty() ? NowTimestamp() : log.timestamp},
                {"message", log.message},
                {"extra", log.extra}};
    impl_->InsertRow(table, row, {});
  }
  tx.Commit();
}

std::vector<Json> SqliteStore::ListKernels(const KernelQuery& query) {
  const Table& kernels = store::GetTable("kernels");
  std::vector<const Column*> columns;
  if (query.columns.empty()) {
    for (const auto& c : kernels.columns) columns.push_back(&c);
  } else {
    for (const auto& name : query.columns) {
      const Column* c = kernels.Find(name);
      if (c == nullptr) {
        throw Error(ErrorKind::kInvalidArgument, fmt::format("unknown column '{}' for table kernels", name),
                    impl_->path.string(), "kernels." + name);
      }
      columns.push_back(c);
    }
  }
  std::string cols;
  for (const Column* c : columns) cols += "k." + QuoteIdent(c->name) + ", ";
  std::string sql = fmt::format(
      "SELECT {}j.\"status\" FROM \"kernels\" AS k LEFT JOIN \"jobs\" AS j ON j.\"id\" = k.\"job_id\" "
      "WHERE (?1 IS NULL OR k.\"task_name\" = ?1) AND (?2 IS NULL OR k.\"job_id\" = ?2) "
      "ORDER BY k.\"id\" DESC LIMIT ?3",
      cols);
  std::lock_guard lock(impl_->mu);
  store::Stmt st = impl_->db.Prepare(sql);
  if (query.task_name) st.BindText(1, *query.task_name);
  if (query.job_id) st.BindInt(2, *query.job_id);
  st.BindInt(3, query.last_n > 0 ? query.last_n : -1);
  std::vector<Json> rows;
  while (st.Step()) {
    Json row = Json::object();
    for (size_t i = 0; i < columns.size(); ++i) {
      row[std::string(columns[i]->name)] = store::ReadValue(st, static_cast<int>(i), *columns[i]);
    }
    int last = static_cast<int>(columns.size());
    row["job_status"] = st.ColumnType(last) == SQLITE_NULL ? Json(nullptr) : Json(st.ColumnText(last));
    rows.push_back(std::move(row));
  }
  std::reverse(rows.begin(), rows.end());
  return rows;
}

Json SqliteStore::GetJob(int64_t id) {
  const Table& jobs = store::GetTable("jobs");
  std::lock_guard lock(impl_->mu);
  store::Stmt st = impl_->db.Prepare(SelectAll(jobs) + " WHERE \"id\" = ?1");
  st.BindInt(1, id);
  if (!st.Step()) {
    throw Error(ErrorKind::kNotFound, fmt::format("no job with id {}", id), impl_->path.string(), "jobs.id");
  }
  return Impl::ReadRow(st, jobs);
}

std::optional<Json> SqliteStore::GetTask(const std::string& id) {
  const Table& tasks = store::GetTable("tasks");
  std::lock_guard lock(impl_->mu);
  store::Stmt st = impl_->db.Prepare(SelectAll(tasks) + " WHERE \"id\" = ?1");
  st.BindText(1, id);
  if (!st.Step()) return std::nullopt;
  return Impl::ReadRow(st, tasks);
}

}  // namespace kf
