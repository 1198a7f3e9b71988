// A farm worker with the verdict cache (WorkerOptions::verdict_cache, `kf worker --verdict-cache`): the same
// evaluation sent twice through the farm (Evaluate with a QueueStageRunner) gets its test job's value from
// the record module's cache the second time — the same verdict to the bit, the worker's job log saying so —
// while a candidate that times out is tested again every time. Real jobs (the native omp_reduction example)
// on the in-memory broker; the worker's store records both kinds.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/store.hpp"
#include "kernelfoundry/worker.hpp"
#include "test_util.hpp"
#include "worker/farm_util.hpp"
#include "worker/in_process_worker_util.hpp"

namespace kf {
namespace {

class WorkerVerdictCacheE2E : public testing::InProcessWorkerTest {
 protected:
  WorkerVerdictCacheE2E() : InProcessWorkerTest("unused_verdict_cache") {}

  void SetUp() override {
    InProcessWorkerTest::SetUp();
    tag_ = testing::FarmTag();
    package_ = testing::MakeOmpTask(dir_.path(), tag_, /*test_timeout=*/2);
    store_ = OpenStore((dir_.path() / "worker.sqlite3").string());
    WorkerOptions o = BaseOptions("kfcache@%h");
    o.queues = {celery::BuildQueueName(tag_), celery::TestQueueName(tag_)};
    o.work_root = dir_.path();
    o.store = store_.get();
    o.verdict_cache = true;
    StartWorker(std::move(o));
  }

  // One evaluation of `candidate` through the farm.
  Evaluation ThroughTheFarm(const std::string& candidate) {
    QueueStageRunner runner(Client());
    EvaluateOptions o;
    o.runner = &runner;
    o.work_root = dir_.path();
    const Task task = LoadTaskForRun(package_.string()).task;
    return Evaluate(task, BlockUpdate{BlockUpdateShort{{"EVOLVE", candidate}}}, o);
  }

  // The `verdict_cache` extra of the summary log of the worker's job `job_id` (null when it ran). The worker
  // records a job after its reply, so this waits up to 10 s for the row.
  Json CachedFact(int64_t job_id) {
    std::vector<Json> logs = store_->ListJobLogs(job_id);
    for (int i = 0; i < 200 && logs.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      logs = store_->ListJobLogs(job_id);
    }
    if (logs.empty()) return "no logs";
    const Json& extra = logs.front()["extra"];
    return extra.is_object() ? extra.value("verdict_cache", Json(nullptr)) : Json("no extra");
  }

  // The status of the worker's job `job_id` once it is no longer RUN (the worker writes the job's logs, then
  // marks it: flaky under ASan in CI, 2026-12-05, read as RUN right after its log appeared); waits up to 10 s.
  std::string FinalStatus(int64_t job_id) {
    auto status = [&] {
      const Json job = store_->GetJob(job_id);
      return job.is_object() ? job.value("status", std::string()) : std::string("no job");
    };
    std::string now = status();
    for (int i = 0; i < 200 && now == "RUN"; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      now = status();
    }
    return now;
  }

  testing::TempDir dir_;
  testing::ScopedEnv cache_{"KF_CACHE_DIR", (dir_.path() / "cache").c_str()};
  std::string tag_;
  std::filesystem::path package_;
  std::unique_ptr<Store> store_;
};

TEST_F(WorkerVerdictCacheE2E, ARepeatedIdenticalTestJobIsACacheHitAndATimeoutIsNot) {
  const Evaluation first = ThroughTheFarm(testing::OmpCandidate("wrong"));
  ASSERT_EQ(first.result.status, EvalStatus::kValueMismatch) << first.result.status_detail << "\n" << Lines();
  const Evaluation second = ThroughTheFarm(testing::OmpCandidate("wrong"));
  EXPECT_EQ(second.result.status, EvalStatus::kValueMismatch);
  EXPECT_EQ(second.result.status_detail, first.result.status_detail);
  ASSERT_TRUE(second.task.test_result && first.task.test_result);
  EXPECT_EQ(second.task.test_result->Encode(), first.task.test_result->Encode());  // the stored value itself
  // Jobs 1-4: build, test, build, test. The second test came from the cache, the first ran.
  EXPECT_TRUE(CachedFact(2).is_null()) << CachedFact(2);
  const Json hit = CachedFact(4);
  ASSERT_TRUE(hit.is_object()) << hit << "\n" << Lines();
  EXPECT_EQ(hit["key"].get<std::string>().size(), 64u);
  EXPECT_EQ(FinalStatus(4), "COMPLETE");

  // A candidate that hangs: test_timeout both times, the test job runs again (jobs 6 and 8).
  const Evaluation hang1 = ThroughTheFarm(testing::OmpCandidate("hang"));
  const Evaluation hang2 = ThroughTheFarm(testing::OmpCandidate("hang"));
  EXPECT_EQ(hang1.result.status, EvalStatus::kTestTimeout) << hang1.result.status_detail;
  EXPECT_EQ(hang2.result.status, EvalStatus::kTestTimeout) << hang2.result.status_detail;
  EXPECT_TRUE(CachedFact(6).is_null()) << CachedFact(6);
  EXPECT_TRUE(CachedFact(8).is_null()) << CachedFact(8);
}

}  // namespace
}  // namespace kf
