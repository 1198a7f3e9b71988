// The job lifecycle in `jobs` (spec §5.6): statuses, finished_at, progress, and CANCELED being final —
// reported to the caller instead of exiting the process (reference bug).
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "store/store_backends.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Backend;

class JobsTest : public testing::BackendTest {
 protected:
  Json Job(int64_t id) { return store_->GetJob(id); }
};

TEST(JobStatusNames, RoundTripAndTerminality) {
  const std::vector<std::pair<JobStatus, bool>> all = {
      {JobStatus::kInit, false},    {JobStatus::kRun, false},  {JobStatus::kValidating, false},
      {JobStatus::kComplete, true}, {JobStatus::kFail, true},  {JobStatus::kCanceled, true},
      {JobStatus::kValidated, true}};
  std::string names;
  for (const auto& [status, terminal] : all) {
    EXPECT_EQ(ParseJobStatus(JobStatusName(status)), status);
    EXPECT_EQ(IsTerminal(status), terminal) << JobStatusName(status);
    names += std::string(JobStatusName(status)) + " ";
  }
  EXPECT_EQ(names, "INIT RUN VALIDATING COMPLETE FAIL CANCELED VALIDATED ");
  EXPECT_THROW(ParseJobStatus("run"), Error);
  EXPECT_THROW(ParseJobStatus("CANCELLED"), Error);
}

TEST_P(JobsTest, CreateJobStartsInInit) {
  int64_t id = store_->CreateJob("KernelBench", {{"task_name", "relu"}, {"num_trials", 3}});
  EXPECT_EQ(id, 1);
  Json job = Job(id);
  EXPECT_EQ(job["status"], "INIT");
  EXPECT_EQ(job["progress"], 0.0);
  EXPECT_EQ(job["task_origin"], "KernelBench");
  EXPECT_EQ(job["config"], (Json{{"task_name", "relu"}, {"num_trials", 3}}));
  EXPECT_TRUE(job["task_id"].is_null());
  EXPECT_TRUE(job["started_at"].is_null());
  EXPECT_TRUE(job["finished_at"].is_null());
  EXPECT_TRUE(job["archived_at"].is_null());
  EXPECT_EQ(job["input_tokens"], 0);
  EXPECT_EQ(job["output_tokens"], 0);
  EXPECT_EQ(job["cached_input_tokens"], 0);
  EXPECT_EQ(job["created_at"].get<std::string>().size(), 26u);
  EXPECT_EQ(store_->CreateJob("custom", nullptr), 2);
  EXPECT_TRUE(Job(2)["config"].is_null());
}

TEST_P(JobsTest, RunStartedProgressAndComplete) {
  int64_t id = store_->CreateJob("custom", Json::object());
  ASSERT_EQ(store_->UpdateJob(id, {.status = JobStatus::kRun, .task_id = "abc123", .started = true}),
            JobUpdateOutcome::kUpdated);
  Json job = Job(id);
  EXPECT_EQ(job["status"], "RUN");
  EXPECT_EQ(job["task_id"], "abc123");
  std::string started = job["started_at"];
  EXPECT_EQ(started.size(), 26u);
  EXPECT_TRUE(job["finished_at"].is_null());

  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(store_->UpdateJob(id, {.progress = 0.25, .started = true}), JobUpdateOutcome::kUpdated);
  EXPECT_EQ(Job(id)["progress"], 0.25);
  EXPECT_EQ(Job(id)["started_at"], started) << "started_at is set once";

  ASSERT_EQ(store_->UpdateJob(id, {.progress = 1.5}), JobUpdateOutcome::kUpdated);
  EXPECT_EQ(Job(id)["progress"], 1.0);
  ASSERT_EQ(store_->UpdateJob(id, {.progress = -0.2}), JobUpdateOutcome::kUpdated);
  EXPECT_EQ(Job(id)["progress"], 0.0);

  ASSERT_EQ(store_->UpdateJob(id, {.status = JobStatus::kComplete, .progress = 0.5}), JobUpdateOutcome::kUpdated);
  job = Job(id);
  EXPECT_EQ(job["status"], "COMPLETE");
  EXPECT_EQ(job["progress"], 1.0) << "COMPLETE sets progress to 1.0";
  std::string finished = job["finished_at"];
  EXPECT_EQ(finished.size(), 26u);
  EXPECT_GE(finished, started);

  // Validation after completion keeps the first finished_at.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(store_->UpdateJob(id, {.status = JobStatus::kValidating}), JobUpdateOutcome::kUpdated);
  ASSERT_EQ(store_->UpdateJob(id, {.status = JobStatus::kValidated, .config = Json{{"validated", true}}}),
            JobUpdateOutcome::kUpdated);
  job = Job(id);
  EXPECT_EQ(job["status"], "VALIDATED");
  EXPECT_EQ(job["finished_at"], finished);
  EXPECT_EQ(job["config"], (Json{{"validated", true}}));
}

TEST_P(JobsTest, FailSetsFinishedAtAndKeepsProgress) {
  int64_t id = store_->CreateJob("custom", nullptr);
  ASSERT_EQ(store_->UpdateJob(id, {.status = JobStatus::kRun, .progress = 0.4}), JobUpdateOutcome::kUpdated);
  ASSERT_EQ(store_->UpdateJob(id, {.status = JobStatus::kFail}), JobUpdateOutcome::kUpdated);
  Json job = Job(id);
  EXPECT_EQ(job["status"], "FAIL");
  EXPECT_EQ(job["progress"], 0.4);
  EXPECT_FALSE(job["finished_at"].is_null());
}

// Reference bug: updating a CANCELED job called sys.exit(1) from library code. Here the caller is told and
// nothing is written; this test process keeps running.
TEST_P(JobsTest, CanceledJobIsFinalAndReportedToTheCaller) {
  int64_t id = store_->CreateJob("custom", nullptr);
  ASSERT_EQ(store_->UpdateJob(id, {.status = JobStatus::kRun, .progress = 0.3}), JobUpdateOutcome::kUpdated);
  ASSERT_EQ(store_->UpdateJob(id, {.status = JobStatus::kCanceled}), JobUpdateOutcome::kUpdated);
  Json canceled = Job(id);
  EXPECT_EQ(canceled["status"], "CANCELED");
  EXPECT_FALSE(canceled["finished_at"].is_null());

  EXPECT_EQ(store_->UpdateJob(id, {.progress = 0.9}), JobUpdateOutcome::kCanceled);
  EXPECT_EQ(store_->UpdateJob(id, {.status = JobStatus::kComplete}), JobUpdateOutcome::kCanceled);
  EXPECT_EQ(store_->UpdateJob(id, {.status = JobStatus::kRun, .task_id = "x", .started = true}),
            JobUpdateOutcome::kCanceled);
  EXPECT_EQ(Job(id), canceled) << "nothing changes on a canceled job";
  // Another process (here: another connection) cancelling the job is seen by the next update.
  int64_t other = store_->CreateJob("custom", nullptr);
  EXPECT_EQ(Open()->UpdateJob(other, {.status = JobStatus::kCanceled}),
            JobUpdateOutcome::kUpdated);
  EXPECT_EQ(store_->UpdateJob(other, {.progress = 0.5}), JobUpdateOutcome::kCanceled);
}

TEST_P(JobsTest, ErrorsLeaveTheJobUnchanged) {
  int64_t id = store_->CreateJob("custom", nullptr);
  Json before = Job(id);
  try {
    (void)store_->UpdateJob(id, {.status = JobStatus::kRun, .task_id = std::string(65, 'f')});
    FAIL() << "expected kf::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.field(), "jobs.task_id");
  }
  EXPECT_EQ(Job(id), before) << "the status change in the same call was rolled back";
  EXPECT_THROW((void)store_->UpdateJob(id, {.progress = std::nan("")}), Error);
  try {
    (void)store_->UpdateJob(999, {.status = JobStatus::kRun});
    FAIL() << "expected kf::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
  try {
    store_->GetJob(999);
    FAIL() << "expected kf::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("999"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         testing::BackendParamName());

}  // namespace
}  // namespace kf
