// The SQLite schema: exact tables/columns/types of spec §5.6, readability by the sqlite3 CLI, and the
// checks of an existing (stale, foreign or broken) database file.
#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "store/schema.hpp"
#include "store/sql_helpers.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::RunShell;
using testing::Sql;
using testing::SqlValue;
using testing::TempDir;
using Columns = std::vector<std::pair<std::string, std::string>>;

// Written from the spec (§5.6) and SQLAlchemy's SQLite type names, independently of src/store/schema.cc.
const std::map<std::string, Columns>& ExpectedSchema() {
  static const std::map<std::string, Columns> expected = {
      {"kernels",
       {{"id", "INTEGER"},
        {"timestamp", "DATETIME"},
        {"uuid", "VARCHAR"},
        {"parent_uuid", "VARCHAR"},
        {"task_name", "VARCHAR"},
        {"Level_ID", "INTEGER"},
        {"input_code", "TEXT"},
        {"input_language", "VARCHAR"},
        {"output_code", "TEXT"},
        {"output_language", "VARCHAR"},
        {"Op_ID", "VARCHAR"},
        {"job_name", "VARCHAR"},
        {"prompt", "TEXT"},
        {"answer", "TEXT"},
        {"status", "VARCHAR"},
        {"trial", "INTEGER"},
        {"runtime", "FLOAT"},
        {"runtime_stats", "JSON"},
        {"improve_over_native", "FLOAT"},
        {"improve_over_compile", "FLOAT"},
        {"score", "INTEGER"},
        {"eval_log", "TEXT"},
        {"version", "INTEGER"},
        {"index_level_0", "INTEGER"},
        {"language_model", "VARCHAR"},
        {"profiler_data", "JSON"},
        {"profiler_data_reference", "JSON"},
        {"profiler_data_detail", "JSON"},
        {"profiler_data_detail_reference", "JSON"},
        {"template_results", "JSON"},
        {"optimization_profile", "JSON"},
        {"gpu_arch", "VARCHAR"},
        {"eval_worker_info", "JSON"},
        {"compile_worker_info", "JSON"},
        {"config", "JSON"},
        {"task_id", "VARCHAR(64)"},
        {"job_id", "INTEGER"},
        {"agent_session_id", "VARCHAR(64)"},
        {"db_user", "VARCHAR(128)"}}},
      {"tasks",
       {{"id", "VARCHAR(64)"},
        {"task_name", "VARCHAR"},
        {"Op_ID", "VARCHAR"},
        {"task_origin", "VARCHAR"},
        {"config", "JSON"},
        {"Level_ID", "INTEGER"},
        {"task_data", "JSON"},
        {"has_build_step", "BOOLEAN"},
        {"correctness_tests", "JSON"},
        {"profile_tests", "JSON"},
        {"evolve_block", "VARCHAR"},
        {"reference_block", "VARCHAR"},
        {"user_instructions_block", "VARCHAR"},
        {"hyperparameters_buildtime", "JSON"},
        {"hyperparameters_runtime", "JSON"}}},
      {"jobs",
       {{"id", "INTEGER"},
        {"task_id", "VARCHAR(64)"},
        {"task_origin", "VARCHAR"},
        {"status", "VARCHAR(16)"},
        {"progress", "FLOAT"},
        {"created_at", "DATETIME"},
        {"started_at", "DATETIME"},
        {"finished_at", "DATETIME"},
        {"archived_at", "DATETIME"},
        {"input_tokens", "INTEGER"},
        {"output_tokens", "INTEGER"},
        {"cached_input_tokens", "INTEGER"},
        {"config", "JSON"}}},
      {"job_logs",
       {{"id", "INTEGER"},
        {"job_id", "INTEGER"},
        {"hostname", "VARCHAR"},
        {"kernel_uuid", "VARCHAR"},
        {"agent_session_id", "VARCHAR(64)"},
        {"level", "VARCHAR(16)"},
        {"timestamp", "DATETIME"},
        {"message", "TEXT"},
        {"extra", "JSON"}}},
      {"baseline_times",
       {{"id", "INTEGER"},
        {"level", "VARCHAR"},
        {"task_name", "VARCHAR"},
        {"mean", "FLOAT"},
        {"std", "FLOAT"},
        {"min", "FLOAT"},
        {"max", "FLOAT"},
        {"num_trials", "INTEGER"},
        {"hardware", "VARCHAR"},
        {"device", "VARCHAR"},
        {"platform", "VARCHAR"},
        {"backend", "VARCHAR"}}},
      {"rag",
       {{"id", "INTEGER"},
        {"task_name", "VARCHAR"},
        {"language", "VARCHAR"},
        {"descriptor", "VARCHAR"},
        {"kernel_code", "VARCHAR"},
        {"file_path", "VARCHAR"},
        {"category", "VARCHAR"},
        {"keywords", "VARCHAR"},
        {"optimization_profile", "JSON"},
        {"embedded_text", "VARCHAR"},
        {"embedding", "JSON"},
        {"origin", "VARCHAR"}}},
  };
  return expected;
}

/// Expects `fn` to throw kf::Error of `kind` whose field is `field` and whose message contains `text`.
template <typename Fn>
void ExpectError(Fn&& fn, ErrorKind kind, const std::string& field, const std::string& text) {
  try {
    fn();
    ADD_FAILURE() << "no kf::Error thrown (expected field " << field << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(StoreSchema, ColumnsAndDeclaredTypesMatchSpec) {
  TempDir tmp;
  auto db = tmp.path() / "kernels.sqlite3";
  SqliteStore::Open(db);
  auto tables = Sql(db, "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name");
  std::vector<std::string> names;
  for (const auto& r : tables) names.push_back(r[0]);
  EXPECT_EQ(names, (std::vector<std::string>{"baseline_times", "job_logs", "jobs", "kernels", "rag", "tasks"}));
  for (const auto& [table, expected] : ExpectedSchema()) {
    Columns actual;
    for (const auto& r : Sql(db, "SELECT name, type FROM pragma_table_info('" + table + "') ORDER BY cid")) {
      actual.emplace_back(r[0], r[1]);
    }
    EXPECT_EQ(actual, expected) << "table " << table;
    // Every table has an integer or hash primary key called id.
    EXPECT_EQ(SqlValue(db, "SELECT group_concat(name) FROM pragma_table_info('" + table + "') WHERE pk > 0"), "id");
  }
}

TEST(StoreSchema, NotNullAndServerDefaultsAsSqlalchemyDeclares) {
  TempDir tmp;
  auto db = tmp.path() / "k.sqlite3";
  SqliteStore::Open(db);
  auto not_null = [&](const std::string& table) {
    std::vector<std::string> out;
    for (const auto& r : Sql(db, "SELECT name FROM pragma_table_info('" + table + "') WHERE \"notnull\" ORDER BY cid")) {
      out.push_back(r[0]);
    }
    return out;
  };
  // kernels.task_id is nullable here on purpose (the reference's NOT NULL is listed as a bug).
  EXPECT_EQ(not_null("kernels"), (std::vector<std::string>{"id", "timestamp", "db_user"}));
  EXPECT_EQ(not_null("tasks"), (std::vector<std::string>{"id", "task_name", "task_origin", "has_build_step"}));
  EXPECT_EQ(not_null("jobs"), (std::vector<std::string>{"id", "task_origin", "status", "progress", "created_at"}));
  EXPECT_EQ(not_null("job_logs"), (std::vector<std::string>{"id", "job_id", "level", "timestamp", "message"}));
  EXPECT_EQ(SqlValue(db, "SELECT dflt_value FROM pragma_table_info('kernels') WHERE name='timestamp'"),
            "CURRENT_TIMESTAMP");
  // The integer primary keys are rowid aliases (autoincrementing).
  Sql(db, "INSERT INTO job_logs (job_id, level, message) VALUES (1, 'INFO', 'x')");
  EXPECT_EQ(SqlValue(db, "SELECT id FROM job_logs"), "1");
}

TEST(StoreSchema, SqliteCliOpensTheDatabaseInWalMode) {
  TempDir tmp;
  auto db = tmp.path() / "runs" / "kernels.sqlite3";  // parent directory is created
  SqliteStore::Open(db)->CreateJob("custom", Json::object());
  auto [rc, out] = RunShell("sqlite3 '" + db.string() + "' '.tables'");
  ASSERT_EQ(rc, 0) << out;
  for (const char* t : {"baseline_times", "job_logs", "jobs", "kernels", "rag", "tasks"}) {
    EXPECT_NE(out.find(t), std::string::npos) << t << " missing in: " << out;
  }
  auto [rc2, mode] = RunShell("sqlite3 '" + db.string() + "' 'PRAGMA journal_mode; SELECT status FROM jobs;'");
  ASSERT_EQ(rc2, 0) << mode;
  EXPECT_EQ(mode, "wal\nINIT\n");
}

TEST(StoreSchema, DroppedColumnMakesTheDatabaseStale) {
  TempDir tmp;
  auto db = tmp.path() / "k.sqlite3";
  SqliteStore::Open(db);
  Sql(db, "ALTER TABLE kernels DROP COLUMN improve_over_compile");
  ExpectError([&] { SqliteStore::Open(db); }, ErrorKind::kInvalidArgument, "kernels.improve_over_compile",
              "database file is stale");
  ExpectError([&] { SqliteStore::Open(db, {.read_only = true}); }, ErrorKind::kInvalidArgument,
              "kernels.improve_over_compile", "is missing");
}

TEST(StoreSchema, MissingTableIsStaleWhenReadOnlyAndCreatedOtherwise) {
  TempDir tmp;
  auto db = tmp.path() / "k.sqlite3";
  SqliteStore::Open(db);
  Sql(db, "DROP TABLE job_logs");
  ExpectError([&] { SqliteStore::Open(db, {.read_only = true}); }, ErrorKind::kInvalidArgument, "job_logs",
              "table 'job_logs' is missing");
  SqliteStore::Open(db);  // read-write creates the missing table, as SQLAlchemy's create_all does
  EXPECT_EQ(SqlValue(db, "SELECT count(*) FROM pragma_table_info('job_logs')"), "9");
}

TEST(StoreSchema, ColumnWithAnotherTypeAffinityIsStale) {
  TempDir tmp;
  auto db = tmp.path() / "k.sqlite3";
  Sql(db,
      "CREATE TABLE baseline_times (id INTEGER NOT NULL, level VARCHAR NOT NULL, task_name VARCHAR NOT NULL, "
      "mean TEXT, std FLOAT, min FLOAT, max FLOAT, num_trials INTEGER, hardware VARCHAR, device VARCHAR, "
      "platform VARCHAR, backend VARCHAR, PRIMARY KEY (id))");
  ExpectError([&] { SqliteStore::Open(db); }, ErrorKind::kInvalidArgument, "baseline_times.mean",
              "declared TEXT but should be FLOAT");
}

TEST(StoreSchema, ExtraColumnsOfANewerSchemaAreAccepted) {
  TempDir tmp;
  auto db = tmp.path() / "k.sqlite3";
  SqliteStore::Open(db);
  Sql(db, "ALTER TABLE kernels ADD COLUMN future_metric FLOAT");
  auto store = SqliteStore::Open(db);
  EXPECT_GT(store->InsertKernel({{"task_name", "t"}}), 0);
}

// A database as the reference's SQLAlchemy models create it (kernels.task_id NOT NULL, quoted mixed-case
// names, no AUTOINCREMENT keyword) is accepted and written to.
TEST(StoreSchema, AcceptsADatabaseCreatedByTheReference) {
  TempDir tmp;
  auto db = tmp.path() / "ref.sqlite3";
  std::string kernels =
      "CREATE TABLE kernels (\n\tid INTEGER NOT NULL, \n\ttimestamp DATETIME DEFAULT (CURRENT_TIMESTAMP) NOT NULL, "
      "\n\tuuid VARCHAR, parent_uuid VARCHAR, task_name VARCHAR, \"Level_ID\" INTEGER, input_code TEXT, "
      "input_language VARCHAR, output_code TEXT, output_language VARCHAR, \"Op_ID\" VARCHAR, job_name VARCHAR, "
      "prompt TEXT, answer TEXT, status VARCHAR, trial INTEGER, runtime FLOAT, runtime_stats JSON, "
      "improve_over_native FLOAT, improve_over_compile FLOAT, score INTEGER, eval_log TEXT, version INTEGER, "
      "index_level_0 INTEGER, language_model VARCHAR, profiler_data JSON, profiler_data_reference JSON, "
      "profiler_data_detail JSON, profiler_data_detail_reference JSON, template_results JSON, "
      "optimization_profile JSON, gpu_arch VARCHAR, eval_worker_info JSON, compile_worker_info JSON, config JSON, "
      "task_id VARCHAR(64) NOT NULL, job_id INTEGER, agent_session_id VARCHAR(64), db_user VARCHAR(128) NOT NULL, "
      "\n\tPRIMARY KEY (id)\n)";
  Sql(db, kernels);
  Sql(db, "INSERT INTO kernels (task_id, db_user, task_name, score) VALUES ('abc', 'ref', 'old', 5)");
  auto store = SqliteStore::Open(db);
  EXPECT_GT(store->InsertKernel({{"task_id", "def"}, {"task_name", "new"}, {"score", 3}}), 0);
  // Their NOT NULL task_id still holds: a row without one is refused with the column named.
  try {
    store->InsertKernel({{"task_name", "no task"}});
    ADD_FAILURE() << "expected a NOT NULL failure";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("kernels.task_id"), std::string::npos) << e.what();
  }
  auto rows = store->ListKernels({});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["task_name"], "old");
  EXPECT_EQ(rows[0]["timestamp"].get<std::string>().size(), 19u);  // server default, no fraction
  EXPECT_EQ(rows[1]["score"], 3);
}

TEST(StoreSchema, ReadOnlyOpenOfMissingFileIsNotFoundAndCreatesNothing) {
  TempDir tmp;
  auto db = tmp.path() / "sub" / "none.sqlite3";
  ExpectError([&] { SqliteStore::Open(db, {.read_only = true}); }, ErrorKind::kNotFound, "", "does not exist");
  EXPECT_FALSE(std::filesystem::exists(db.parent_path()));
}

TEST(StoreSchema, FileThatIsNotADatabaseIsAParseError) {
  TempDir tmp;
  auto db = tmp.path() / "junk.sqlite3";
  testing::WriteFile(db, std::string(4096, 'x'));
  ExpectError([&] { SqliteStore::Open(db); }, ErrorKind::kParse, "", "not a SQLite database");
}

TEST(StoreSchema, TypeAffinityFollowsSqliteRules) {
  using store::TypeAffinity;
  EXPECT_EQ(TypeAffinity("INTEGER"), 'I');
  EXPECT_EQ(TypeAffinity("BIGINT"), 'I');
  EXPECT_EQ(TypeAffinity("VARCHAR(64)"), 'T');
  EXPECT_EQ(TypeAffinity("text"), 'T');
  EXPECT_EQ(TypeAffinity("FLOAT"), 'R');
  EXPECT_EQ(TypeAffinity("DOUBLE PRECISION"), 'R');
  EXPECT_EQ(TypeAffinity("JSON"), 'N');
  EXPECT_EQ(TypeAffinity("DATETIME"), 'N');
  EXPECT_EQ(TypeAffinity("BOOLEAN"), 'N');
  EXPECT_EQ(TypeAffinity(""), 'B');
}

}  // namespace
}  // namespace kf
