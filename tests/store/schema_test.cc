// The schema on every backend: exact tables/columns/types of spec §5.6 (SQLAlchemy's SQLite and PostgreSQL
// type names), NOT NULL and server defaults, the checks of an existing (stale, foreign or broken) database,
// databases created by the reference; SQLite's WAL mode, sqlite3 CLI and affinity rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "store/sql_helpers.hpp"
#include "store/sqlite_schema.hpp"
#include "store/store_backends.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Backend;
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
        {"db_user", "VARCHAR(128)"},
        {"kf_status", "VARCHAR(32)"}}},  // ours, after the reference's columns
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

/// SQLAlchemy's PostgreSQL type names (information_schema spelling) for the SQLite ones above.
std::string PgType(const std::string& sqlite_type) {
  if (sqlite_type.rfind("VARCHAR(", 0) == 0) return "character varying" + sqlite_type.substr(7);
  static const std::map<std::string, std::string> names = {
      {"INTEGER", "integer"}, {"FLOAT", "double precision"}, {"VARCHAR", "character varying"}, {"TEXT", "text"},
      {"BOOLEAN", "boolean"}, {"DATETIME", "timestamp with time zone"}, {"JSON", "json"}};
  return names.at(sqlite_type);
}

class SchemaTest : public testing::BackendTest {
 protected:
  bool IsSqlite() const { return GetParam() == Backend::kSqlite; }
  /// (name, declared type) of every column of `table`, in order, as the backend reports them.
  Columns ColumnsOf(const testing::TestDatabase& db, const std::string& table) const {
    Columns out;
    std::string sql = IsSqlite() ? "SELECT name, type FROM pragma_table_info('" + table + "') ORDER BY cid"
                                 : "SELECT column_name, data_type || coalesce('(' || character_maximum_length || ')', "
                                   "'') FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '" +
                                       table + "' ORDER BY ordinal_position";
    for (const auto& r : db.Sql(sql)) out.emplace_back(r[0], r[1]);
    return out;
  }
  std::vector<std::string> NotNull(const std::string& table) const {
    std::vector<std::string> out;
    std::string sql = IsSqlite() ? "SELECT name FROM pragma_table_info('" + table + "') WHERE \"notnull\" ORDER BY cid"
                                 : "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' "
                                   "AND table_name = '" + table + "' AND is_nullable = 'NO' ORDER BY ordinal_position";
    for (const auto& r : db_->Sql(sql)) out.push_back(r[0]);
    return out;
  }
};

TEST_P(SchemaTest, ColumnsAndDeclaredTypesMatchSpec) {
  std::string tables_sql = IsSqlite() ? "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
                                      : "SELECT table_name FROM information_schema.tables WHERE table_schema = "
                                        "'public' ORDER BY table_name";
  std::vector<std::string> names;
  for (const auto& r : db_->Sql(tables_sql)) names.push_back(r[0]);
  // The reference's six tables and nothing else (our status is the column kernels.kf_status).
  EXPECT_EQ(names, (std::vector<std::string>{"baseline_times", "job_logs", "jobs", "kernels", "rag", "tasks"}));
  for (const auto& [table, sqlite_expected] : ExpectedSchema()) {
    Columns expected = sqlite_expected;
    if (!IsSqlite()) {
      for (auto& [name, type] : expected) type = PgType(type);
    }
    EXPECT_EQ(ColumnsOf(*db_, table), expected) << "table " << table;
    // Every table has an integer or hash primary key called id.
    std::string pk_sql =
        IsSqlite() ? "SELECT group_concat(name) FROM pragma_table_info('" + table + "') WHERE pk > 0"
                   : "SELECT string_agg(a.attname, ',') FROM pg_index i JOIN pg_attribute a ON a.attrelid = "
                     "i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = '" + table + "'::regclass AND i.indisprimary";
    EXPECT_EQ(db_->Value(pk_sql), "id") << table;
  }
}

TEST_P(SchemaTest, NotNullAndServerDefaultsAsSqlalchemyDeclares) {
  // kernels.task_id is nullable here on purpose (the reference's NOT NULL is listed as a bug).
  EXPECT_EQ(NotNull("kernels"), (std::vector<std::string>{"id", "timestamp", "db_user"}));
  EXPECT_EQ(NotNull("tasks"), (std::vector<std::string>{"id", "task_name", "task_origin", "has_build_step"}));
  EXPECT_EQ(NotNull("jobs"), (std::vector<std::string>{"id", "task_origin", "status", "progress", "created_at"}));
  EXPECT_EQ(NotNull("job_logs"), (std::vector<std::string>{"id", "job_id", "level", "timestamp", "message"}));
  EXPECT_EQ(db_->Value(IsSqlite() ? "SELECT dflt_value FROM pragma_table_info('kernels') WHERE name='timestamp'"
                                  : "SELECT column_default FROM information_schema.columns WHERE table_name = "
                                    "'kernels' AND column_name = 'timestamp'"),
            IsSqlite() ? "CURRENT_TIMESTAMP" : "now()");
  // The integer primary keys autoincrement (rowid alias / SERIAL) and the server fills the timestamp.
  db_->Sql("INSERT INTO job_logs (job_id, level, message) VALUES (1, 'INFO', 'x')");
  EXPECT_EQ(db_->Value("SELECT id FROM job_logs"), "1");
  EXPECT_EQ(store_->ListJobLogs(1).at(0)["timestamp"].get<std::string>().size(), IsSqlite() ? 19u : 26u);
}

TEST_P(SchemaTest, DroppedColumnMakesTheDatabaseStale) {
  db_->Sql("ALTER TABLE kernels DROP COLUMN improve_over_compile");
  ExpectError([&] { Open(); }, ErrorKind::kInvalidArgument, "kernels.improve_over_compile", "database file is stale");
  ExpectError([&] { Open({.read_only = true}); }, ErrorKind::kInvalidArgument, "kernels.improve_over_compile",
              "is missing");
}

TEST_P(SchemaTest, MissingTableIsStaleWhenReadOnlyAndCreatedOtherwise) {
  db_->Sql("DROP TABLE job_logs");
  ExpectError([&] { Open({.read_only = true}); }, ErrorKind::kInvalidArgument, "job_logs",
              "table 'job_logs' is missing");
  Open();  // read-write creates the missing table, as SQLAlchemy's create_all does
  EXPECT_EQ(db_->Value(IsSqlite() ? "SELECT count(*) FROM pragma_table_info('job_logs')"
                                  : "SELECT count(*) FROM information_schema.columns WHERE table_name = 'job_logs'"),
            "9");
}

TEST_P(SchemaTest, ColumnWithAnotherTypeIsStale) {
  testing::TestDatabase fresh(GetParam());
  fresh.Sql(std::string("CREATE TABLE baseline_times (id ") + (IsSqlite() ? "INTEGER" : "SERIAL") +
            " NOT NULL, level VARCHAR NOT NULL, task_name VARCHAR NOT NULL, mean TEXT, std FLOAT, min FLOAT, "
            "max FLOAT, num_trials INTEGER, hardware VARCHAR, device VARCHAR, platform VARCHAR, backend VARCHAR, "
            "PRIMARY KEY (id))");
  ExpectError([&] { OpenStore(fresh.url()); }, ErrorKind::kInvalidArgument, "baseline_times.mean",
              IsSqlite() ? "declared TEXT but should be FLOAT" : "declared text but should be FLOAT");
}

TEST_P(SchemaTest, ExtraColumnsOfANewerSchemaAreAccepted) {
  db_->Sql("ALTER TABLE kernels ADD COLUMN future_metric FLOAT");
  auto store = Open();
  EXPECT_GT(store->InsertKernel({{"task_name", "t"}}), 0);
}

// A database as the reference's SQLAlchemy models create it (kernels.task_id NOT NULL, quoted mixed-case
// names, SQLite: no AUTOINCREMENT keyword; PostgreSQL: SERIAL, TIMESTAMP WITH TIME ZONE DEFAULT now()) is
// accepted and written to.
TEST_P(SchemaTest, AcceptsADatabaseCreatedByTheReference) {
  testing::TestDatabase ref(GetParam());
  std::string id = IsSqlite() ? "id INTEGER NOT NULL" : "id SERIAL NOT NULL";
  std::string ts = IsSqlite() ? "timestamp DATETIME DEFAULT (CURRENT_TIMESTAMP) NOT NULL"
                              : "timestamp TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL";
  std::string kernels =
      "CREATE TABLE kernels (\n\t" + id + ", \n\t" + ts +
      ", \n\tuuid VARCHAR, parent_uuid VARCHAR, task_name VARCHAR, \"Level_ID\" INTEGER, input_code TEXT, "
      "input_language VARCHAR, output_code TEXT, output_language VARCHAR, \"Op_ID\" VARCHAR, job_name VARCHAR, "
      "prompt TEXT, answer TEXT, status VARCHAR, trial INTEGER, runtime FLOAT, runtime_stats JSON, "
      "improve_over_native FLOAT, improve_over_compile FLOAT, score INTEGER, eval_log TEXT, version INTEGER, "
      "index_level_0 INTEGER, language_model VARCHAR, profiler_data JSON, profiler_data_reference JSON, "
      "profiler_data_detail JSON, profiler_data_detail_reference JSON, template_results JSON, "
      "optimization_profile JSON, gpu_arch VARCHAR, eval_worker_info JSON, compile_worker_info JSON, config JSON, "
      "task_id VARCHAR(64) NOT NULL, job_id INTEGER, agent_session_id VARCHAR(64), db_user VARCHAR(128) NOT NULL, "
      "\n\tPRIMARY KEY (id)\n)";
  ref.Sql(kernels);
  ref.Sql("INSERT INTO kernels (task_id, db_user, task_name, score) VALUES ('abc', 'ref', 'old', 5)");
  auto store = OpenStore(ref.url());
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
  // The server default: SQLite's CURRENT_TIMESTAMP has no fraction; PostgreSQL's now() has microseconds.
  EXPECT_EQ(rows[0]["timestamp"].get<std::string>().size(), IsSqlite() ? 19u : 26u);
  EXPECT_EQ(rows[1]["score"], 3);
}

// The catalog our store creates equals the one SQLAlchemy's create_all makes from the reference's models
// (tests/store/reference_models.py, written from spec §5.6): names, types, lengths, NOT NULL, defaults and
// keys, on both backends; the deliberate differences are kernels.task_id being nullable and our column
// kernels.kf_status after the reference's. Our store then appends to the SQLAlchemy-made database (adding
// kf_status to it on the way).
TEST_P(SchemaTest, CatalogEqualsSqlalchemyCreateAll) {
  testing::TestDatabase ref(GetParam());
  std::string url = IsSqlite() ? "sqlite:///" + ref.url() : ref.url();
  auto [rc, out] = RunShell("/usr/bin/python3 '" + (testing::SourceDir() / "tests/store/reference_models.py").string() +
                            "' '" + url + "'");
  ASSERT_EQ(rc, 0) << out;
  auto catalog = [&](const testing::TestDatabase& db) {
    std::vector<std::string> lines;
    for (const auto& [table, columns] : ExpectedSchema()) {
      std::string sql =
          IsSqlite() ? "SELECT name, type, \"notnull\", coalesce(dflt_value, '-'), pk FROM pragma_table_info('" + table +
                           "') ORDER BY cid"
                     : "SELECT column_name, data_type, coalesce(character_maximum_length::text, '-'), is_nullable, "
                       "coalesce(column_default, '-') FROM information_schema.columns WHERE table_schema = 'public' "
                       "AND table_name = '" + table + "' ORDER BY ordinal_position";
      for (const auto& r : db.Sql(sql)) {
        std::string line = table;
        for (const auto& cell : r) line += " | " + cell;
        lines.push_back(line);
      }
    }
    return lines;
  };
  std::vector<std::string> theirs = catalog(ref), ours = catalog(*db_);
  const std::string kf_status = IsSqlite() ? "kernels | kf_status | VARCHAR(32) | 0 | - | 0"
                                           : "kernels | kf_status | character varying | 32 | YES | -";
  auto ours_kf = std::find(ours.begin(), ours.end(), kf_status);
  ASSERT_NE(ours_kf, ours.end());
  EXPECT_EQ(*(ours_kf - 1), IsSqlite() ? "kernels | db_user | VARCHAR(128) | 1 | - | 0"
                                       : "kernels | db_user | character varying | 128 | NO | -");
  ours.erase(ours_kf);
  ASSERT_EQ(theirs.size(), 100u);
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    if (ours[i].rfind("kernels | task_id", 0) == 0) {
      EXPECT_NE(ours[i], theirs[i]) << "kernels.task_id: NOT NULL in the reference, nullable here";
      continue;
    }
    EXPECT_EQ(ours[i], theirs[i]);
  }
  auto store = OpenStore(ref.url());
  EXPECT_GT(store->InsertKernel({{"task_id", "t"}, {"task_name", "appended"}, {"kf_status", "correct"}}), 0);
  EXPECT_EQ(store->ListKernels({}).at(0)["task_name"], "appended");
  EXPECT_EQ(store->ListKernels({}).at(0)["kf_status"], "correct");
  EXPECT_EQ(catalog(ref).size(), 101u);  // the migration added kf_status
}

TEST_P(SchemaTest, ReadOnlyOpenOfMissingDatabaseIsNotFoundAndCreatesNothing) {
  if (IsSqlite()) {
    auto db = db_->tmp().path() / "sub" / "none.sqlite3";
    ExpectError([&] { OpenStore(db.string(), {.read_only = true}); }, ErrorKind::kNotFound, "", "does not exist");
    EXPECT_FALSE(std::filesystem::exists(db.parent_path()));
  } else {
    testing::PgServer* server = testing::PgServer::Shared(nullptr);
    ExpectError([&] { OpenStore(server->Url("kf_never_created"), {.read_only = true}); }, ErrorKind::kNotFound, "db",
                "does not exist");
    EXPECT_EQ(server->Sql("postgres", "SELECT count(*) FROM pg_database WHERE datname = 'kf_never_created'")[0][0], "0");
  }
}

// Read-write opening creates what is missing: the SQLite file (and its directories), the PostgreSQL database.
TEST_P(SchemaTest, ReadWriteOpenCreatesTheDatabase) {
  std::string url;
  if (IsSqlite()) {
    url = (db_->tmp().path() / "new" / "dir" / "k.sqlite3").string();
  } else {
    url = testing::PgServer::Shared(nullptr)->Url("kf_created_on_first_use");
  }
  auto store = OpenStore(url);
  EXPECT_EQ(store->CreateJob("custom", nullptr), 1);
  EXPECT_EQ(OpenStore(url, {.read_only = true})->GetJob(1)["status"], "INIT");
}

// Read-only stores refuse every write with kIO and leave the database unchanged.
TEST_P(SchemaTest, ReadOnlyStoreRefusesWrites) {
  store_->CreateJob("custom", nullptr);
  auto ro = Open({.read_only = true});
  EXPECT_EQ(ro->GetJob(1)["status"], "INIT");
  testing::ExpectError(ErrorKind::kIO, [&] { ro->InsertKernel({{"task_name", "x"}}); });
  testing::ExpectError(ErrorKind::kIO, [&] { (void)ro->UpdateJob(1, {.status = JobStatus::kRun}); });
  EXPECT_EQ(db_->Value("SELECT count(*) FROM kernels"), "0");
  EXPECT_EQ(db_->Value("SELECT status FROM jobs WHERE id = 1"), "INIT");
}

INSTANTIATE_TEST_SUITE_P(Backends, SchemaTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         testing::BackendParamName());

TEST(StoreSchema, SqliteCliOpensTheDatabaseInWalMode) {
  TempDir tmp;
  auto db = tmp.path() / "runs" / "kernels.sqlite3";  // parent directory is created
  OpenStore(db.string())->CreateJob("custom", Json::object());
  auto [rc, out] = RunShell("sqlite3 '" + db.string() + "' '.tables'");
  ASSERT_EQ(rc, 0) << out;
  for (const char* t : {"baseline_times", "job_logs", "jobs", "kernels", "rag", "tasks"}) {
    EXPECT_NE(out.find(t), std::string::npos) << t << " missing in: " << out;
  }
  auto [rc2, mode] = RunShell("sqlite3 '" + db.string() + "' 'PRAGMA journal_mode; SELECT status FROM jobs;'");
  ASSERT_EQ(rc2, 0) << mode;
  EXPECT_EQ(mode, "wal\nINIT\n");
}

TEST(StoreSchema, FileThatIsNotADatabaseIsAParseError) {
  TempDir tmp;
  auto db = tmp.path() / "junk.sqlite3";
  testing::WriteFile(db, std::string(4096, 'x'));
  ExpectError([&] { OpenStore(db.string()); }, ErrorKind::kParse, "", "not a SQLite database");
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
