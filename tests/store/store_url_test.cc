// OpenStore's URLs (SQLAlchemy spellings): SQLite paths and sqlite:/// URLs, PostgreSQL URLs, unknown schemes
// as errors naming the value, and passwords that never reach a message.
#include <gtest/gtest.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "store/store_backends.hpp"
#include "store/store_url.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using store::ParseStoreUrl;
using store::StoreUrl;
using testing::ExpectError;
using testing::TempDir;

TEST(StoreUrl, PlainPathsAndSqliteUrls) {
  EXPECT_EQ(ParseStoreUrl("runs/kernels.sqlite3").sqlite_path, "runs/kernels.sqlite3");
  EXPECT_EQ(ParseStoreUrl("/abs/k.db").sqlite_path, "/abs/k.db");
  EXPECT_EQ(ParseStoreUrl("odd:name.db").sqlite_path, "odd:name.db");  // not a known scheme: a path
  EXPECT_EQ(ParseStoreUrl("sqlite:///runs/kernels.sqlite3").sqlite_path, "runs/kernels.sqlite3");
  EXPECT_EQ(ParseStoreUrl("sqlite:////tmp/k.sqlite3").sqlite_path, "/tmp/k.sqlite3");
  EXPECT_EQ(ParseStoreUrl("sqlite:///runs/k.db").kind, StoreUrl::Kind::kSqlite);
}

TEST(StoreUrl, PostgresUrlsKeepEverythingButThePasswordInTheRedactedForm) {
  StoreUrl u = ParseStoreUrl("postgresql://kf:s3cr%40t@db.example:5433/kernels?sslmode=require");
  EXPECT_EQ(u.kind, StoreUrl::Kind::kPostgres);
  EXPECT_EQ(u.password, "s3cr@t");  // percent-decoded
  EXPECT_EQ(u.redacted, "postgresql://kf:***@db.example:5433/kernels?sslmode=require");
  EXPECT_EQ(u.conninfo, "postgresql://kf:s3cr%40t@db.example:5433/kernels?sslmode=require");
  StoreUrl alias = ParseStoreUrl("postgres://postgres@127.0.0.1/kf");
  EXPECT_EQ(alias.kind, StoreUrl::Kind::kPostgres);
  EXPECT_EQ(alias.conninfo, "postgresql://postgres@127.0.0.1/kf");
  EXPECT_EQ(alias.password, "");
  EXPECT_EQ(alias.redacted, "postgres://postgres@127.0.0.1/kf");
  StoreUrl driver = ParseStoreUrl("postgresql+psycopg2://u:pw@h:1/d");
  EXPECT_EQ(driver.conninfo, "postgresql://u:pw@h:1/d");
  EXPECT_EQ(driver.redacted, "postgresql+psycopg2://u:***@h:1/d");
  EXPECT_EQ(RedactStoreUrl("postgresql://u:pw@h/d"), "postgresql://u:***@h/d");
  EXPECT_EQ(RedactStoreUrl("runs/k.sqlite3"), "runs/k.sqlite3");
}

TEST(StoreUrl, BadValuesAreErrorsNamingTheRedactedValue) {
  auto expect = [](const std::string& url, const std::string& text) {
    Error e = ExpectError(ErrorKind::kInvalidArgument, [&] { ParseStoreUrl(url); });
    EXPECT_EQ(e.field(), "db");
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  };
  expect("mysql://root:hunter2@h/kf", "invalid database URL 'mysql://root:***@h/kf': unknown scheme 'mysql'");
  expect("redis://h", "unknown scheme 'redis'");
  expect("foo+bar://x", "unknown scheme 'foo+bar'");
  expect("sqlite://", "expected sqlite:///relative/path or sqlite:////absolute/path");
  expect("sqlite:///", "the database path is empty");
  expect("sqlite:k.db", "expected sqlite:///relative/path");
  expect("sqlite:///k.db?mode=ro", "query parameters are not supported");
  expect("postgresql:u:hunter2@h/db", "expected postgresql://user[:password]@host[:port]/database");
  expect("postgresql://u:hunter2@h:99999/db", "the port '99999' is not a number from 1 to 65535");
  expect("postgresql://u:hunter2@h:port/db", "the port 'port' is not a number");
  expect("", "it is empty");
  EXPECT_EQ(RedactStoreUrl("postgresql://u:hunter2@h:99999/db"), "postgresql://u:***@h:99999/db");
}

TEST(StoreUrl, ScrubSecretReplacesEveryOccurrence) {
  EXPECT_EQ(store::ScrubSecret("a pw b pw", "pw"), "a *** b ***");
  EXPECT_EQ(store::ScrubSecret("nothing", ""), "nothing");
}

// Reference bug (issue 11): `--db postgresql://…` created a directory "postgresql:" holding a SQLite file.
TEST(OpenStore, UnknownSchemeCreatesNothing) {
  TempDir tmp;
  std::string url = "mariadb://" + (tmp.path() / "x").string();
  ExpectError(ErrorKind::kInvalidArgument, [&] { OpenStore(url); });
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

TEST(OpenStore, SqliteUrlsOpenTheNamedFile) {
  TempDir tmp;
  std::string absolute = "sqlite:///" + (tmp.path() / "abs" / "k.sqlite3").string();  // sqlite:////tmp/…
  ASSERT_EQ(absolute.substr(0, 11), "sqlite:////");
  OpenStore(absolute)->CreateJob("custom", nullptr);
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "abs" / "k.sqlite3"));
  auto [rc, out] = testing::RunShell("cd '" + tmp.path().string() + "' && '" +
                                     (testing::BinaryDir() / "kf").string() +
                                     "' results --json --db sqlite:///abs/k.sqlite3");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(OpenStore((tmp.path() / "abs" / "k.sqlite3").string(), {.read_only = true})->GetJob(1)["status"], "INIT");
}

// PostgreSQL connection failures: kIO, the redacted URL as the file, the password in no message.
class PostgresErrors : public testing::BackendTest {};

TEST_P(PostgresErrors, WrongPasswordAndClosedPortNeverShowThePassword) {
  testing::PgServer* server = testing::PgServer::Shared(nullptr);
  std::string wrong = "postgresql://postgres:hunter2-wrong@127.0.0.1:" + std::to_string(server->port()) + "/postgres";
  Error e = ExpectError(ErrorKind::kIO, [&] { OpenStore(wrong); });
  EXPECT_NE(std::string(e.what()).find("password authentication failed"), std::string::npos) << e.what();
  EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  EXPECT_EQ(e.file(), "postgresql://postgres:***@127.0.0.1:" + std::to_string(server->port()) + "/postgres");
  // The real password, in a URL whose server is not there.
  std::string closed = "postgresql://postgres:" + server->password() + "@127.0.0.1:1/kf";
  Error e2 = ExpectError(ErrorKind::kIO, [&] { OpenStore(closed, {.busy_timeout = std::chrono::milliseconds(1000)}); });
  EXPECT_EQ(std::string(e2.what()).find(server->password()), std::string::npos) << e2.what();
  // A malformed libpq parameter: libpq's own message quotes the URL; the password is scrubbed from it.
  std::string bad = server->Url("kf") + "?no_such_param=1";
  Error e3 = ExpectError(ErrorKind::kInvalidArgument, [&] { OpenStore(bad); });
  EXPECT_EQ(std::string(e3.what()).find(server->password()), std::string::npos) << e3.what();
  EXPECT_NE(std::string(e3.what()).find("no_such_param"), std::string::npos) << e3.what();
}

INSTANTIATE_TEST_SUITE_P(Backends, PostgresErrors, ::testing::Values(testing::Backend::kPostgres),
                         testing::BackendParamName());

}  // namespace
}  // namespace kf
