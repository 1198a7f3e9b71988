// The submission API's tables (kf_api_tokens, kf_submissions) on every backend: created on first use only (other
// databases keep exactly the reference's tables), tokens by hash with revocation, a submission stored with its
// job in one transaction, the active ones listed for a restart, the result of a finished one.
#include <gtest/gtest.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "store/store_backends.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Backend;

class ApiTablesTest : public testing::BackendTest {};

const std::string kHashA(64, 'a'), kHashB(64, 'b');

TEST_P(ApiTablesTest, TokensByHashAndRevocation) {
  const int64_t a1 = store_->AddApiToken("alice", kHashA, false);
  const int64_t a2 = store_->AddApiToken("alice", kHashB, false);
  store_->AddApiToken("root", std::string(64, 'c'), true);
  auto found = store_->FindApiTokens(kHashA);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].first.user, "alice");
  EXPECT_EQ(found[0].first.id, a1);
  EXPECT_FALSE(found[0].first.admin);
  EXPECT_EQ(found[0].second, kHashA);
  EXPECT_TRUE(store_->FindApiTokens(std::string(64, 'd')).empty());
  EXPECT_EQ(store_->RevokeApiTokens("alice", a2), 1);
  EXPECT_TRUE(store_->FindApiTokens(kHashB).empty());
  EXPECT_EQ(store_->FindApiTokens(kHashA).size(), 1u);
  EXPECT_EQ(store_->RevokeApiTokens("alice", std::nullopt), 1);  // the one still active
  EXPECT_EQ(store_->RevokeApiTokens("nobody", std::nullopt), 0);
  const auto all = store_->ListApiTokens();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(all[0].revoked_at.has_value());
  EXPECT_FALSE(all[2].revoked_at.has_value());
  EXPECT_TRUE(all[2].admin);
  EXPECT_EQ(all[2].ToJson()["revoked_at"], nullptr);
  testing::ExpectError(ErrorKind::kInvalidArgument, [&] { store_->AddApiToken("alice", "not-a-hash", false); });
  testing::ExpectError(ErrorKind::kInvalidArgument, [&] { store_->AddApiToken("", kHashA, false); });
}

TEST_P(ApiTablesTest, SubmissionsWithTheirJobs) {
  Submission s;
  s.user = "alice";
  s.task = "{\"task\": 1}";
  s.lineage = {{"parent_uuid", "p"}};
  s.archive_bytes = 123;
  const int64_t id = store_->CreateSubmission(s, {{"task_name", "t"}});
  const int64_t other = store_->CreateJob("custom", Json::object());  // not submitted through the API
  EXPECT_EQ(store_->GetJob(id)["status"], "INIT");
  EXPECT_EQ(store_->GetJob(id)["task_origin"], "alice");
  auto got = store_->GetSubmission(id, true);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->user, "alice");
  EXPECT_EQ(got->task, s.task);
  EXPECT_EQ(got->lineage["parent_uuid"], "p");
  EXPECT_EQ(got->archive_bytes, 123);
  EXPECT_TRUE(got->result.is_null());
  EXPECT_EQ(store_->GetSubmission(id, false)->task, "");
  EXPECT_FALSE(store_->GetSubmission(other, true));
  EXPECT_EQ(store_->ActiveSubmissions(), std::vector<int64_t>{id});
  store_->SetSubmissionResult(id, {{"kernel_uuid", "u"}});
  EXPECT_EQ(store_->GetSubmission(id, false)->result["kernel_uuid"], "u");
  (void)store_->UpdateJob(id, JobUpdate{.status = JobStatus::kComplete});
  EXPECT_TRUE(store_->ActiveSubmissions().empty());
}

TEST_P(ApiTablesTest, OtherDatabasesKeepTheReferencesTables) {
  store_->CreateJob("custom", Json::object());
  auto names = [&] {
    const std::string sql = GetParam() == Backend::kSqlite
                                ? "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'kf_%'"
                                : "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
                                  "AND table_name LIKE 'kf_%'";
    return db_->Sql(sql).size();
  };
  EXPECT_EQ(names(), 0u);
  store_->ListApiTokens();  // first use
  EXPECT_EQ(names(), 2u);
  // Read-only stores open the database as before.
  EXPECT_EQ(Open({.read_only = true})->CountJobs({}), 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, ApiTablesTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         testing::BackendParamName());

}  // namespace
}  // namespace kf
