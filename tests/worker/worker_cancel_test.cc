// The worker's cooperative cancellation and device exclusivity, on the in-memory broker (see worker.hpp):
//  * the soft time limit and a revoke with terminate ask the running job to stop (its stop_token) and reply
//    FAILURE SoftTimeLimitExceeded / REVOKED "terminated"; a job that does not stop is killed after
//    cancel_grace; the hard limit still kills; a task revoked before it arrives is REVOKED "revoked";
//  * with -c 2, timed phases of different jobs never share a device (one DeviceSlots for every slot, also
//    across job processes: kf_fake_worker_child runs the real task bodies with a recording fake harness),
//    while their correctness runs do overlap; timed phases on different devices may overlap.
#include <atomic>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/worker.hpp"
#include "test_util.hpp"
#include "worker/fake_stage_util.hpp"
#include "worker/in_process_worker_util.hpp"

namespace kf {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::PhaseSpan;

class WorkerCancel : public testing::InProcessWorkerTest {
 protected:
  WorkerCancel() : InProcessWorkerTest("test_custom_task_cancel") {}

  WorkerOptions Options() {
    WorkerOptions o = BaseOptions("kfcancel-" + NewUuid().substr(0, 6) + "@%h");
    o.device_slots = &slots_;
    return o;
  }
  std::string Send(std::string_view task, const Json& args, celery::SendOptions o = {}) {
    return SendTask(task, args, std::move(o));
  }
  celery::TaskResult Wait(const std::string& id, int ms = 10000) { return InProcessWorkerTest::Wait(id, ms); }
  void WaitStarted(const std::string& id) {
    const auto t0 = Clock::now();
    while (Client().Started(id).is_null() && Clock::now() - t0 < milliseconds(10000)) {
      Client().WaitAny({}, milliseconds(10));
    }
  }

  DeviceSlots slots_;
};

// A body that sleeps `args[1]` seconds; it stops early when asked unless args[0] is "stubborn", and notes
// that it saw the request.
struct StopAwareBody {
  std::shared_ptr<std::atomic<int>> saw_stop = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> ran = std::make_shared<std::atomic<int>>(0);
  TaskBodyResult operator()(std::string_view, const Json& args, const Json&, const TaskBodyContext& ctx) const {
    ++*ran;
    const bool stubborn = args.at(0) == "stubborn";
    const auto until = Clock::now() + milliseconds(static_cast<int64_t>(args.at(1).get<double>() * 1000));
    bool noted = false;
    while (Clock::now() < until) {
      if (ctx.stop.stop_requested() && !noted) {
        noted = true;
        ++*saw_stop;
        if (!stubborn) break;
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
    TaskBodyResult r;
    r.result = noted ? "stopped" : "slept";
    return r;
  }
};

TEST_F(WorkerCancel, SoftTimeLimitAsksTheJobToStopAndRepliesSoftTimeLimitExceeded) {
  StopAwareBody body;
  WorkerOptions o = Options();
  o.body = body;
  StartWorker(o);
  celery::SendOptions so;
  so.soft_time_limit = 0.3;
  so.hard_time_limit = 20;
  const auto t0 = Clock::now();
  celery::TaskResult r = Wait(Send(celery::kSleepTaskName, Json::array({"polite", 30}), so));
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
  EXPECT_EQ(r.status, "FAILURE");
  EXPECT_EQ(ExcType(r), "SoftTimeLimitExceeded");
  EXPECT_EQ(r.result["exc_module"], "celery.exceptions");
  EXPECT_EQ(body.saw_stop->load(), 1) << "the body was asked to stop, not killed";
  EXPECT_EQ(worker_->stats().canceled.load(), 1);
  EXPECT_NE(Lines().find("soft time limit of 0.3 s; asked the job to stop"), std::string::npos) << Lines();
  StopWorker();
  EXPECT_EQ(hub_.Unacked(queue_), 0u);
  EXPECT_EQ(hub_.Ready(queue_), 0u);
}

TEST_F(WorkerCancel, AJobThatIgnoresTheStopIsKilledAfterTheCancelGrace) {
  StopAwareBody body;
  WorkerOptions o = Options();
  o.body = body;
  o.cancel_grace = milliseconds(200);
  StartWorker(o);
  celery::SendOptions so;
  so.soft_time_limit = 0.2;
  celery::TaskResult r = Wait(Send(celery::kSleepTaskName, Json::array({"stubborn", 1.5}), so));
  EXPECT_EQ(ExcType(r), "SoftTimeLimitExceeded");
  EXPECT_NE(Lines().find("did not stop within 0.2 s; killed"), std::string::npos) << Lines();
  // The slot serves the next job.
  EXPECT_EQ(Wait(Send(celery::kSleepTaskName, Json::array({"polite", 0.01}))).result, "slept");
  StopWorker();
}

TEST_F(WorkerCancel, HardTimeLimitStillWinsOverAStubbornJob) {
  StopAwareBody body;
  WorkerOptions o = Options();
  o.body = body;
  o.cancel_grace = milliseconds(60'000);
  StartWorker(o);
  celery::SendOptions so;
  so.soft_time_limit = 0.2;
  so.hard_time_limit = 0.5;
  celery::TaskResult r = Wait(Send(celery::kSleepTaskName, Json::array({"stubborn", 1.0}), so));
  EXPECT_EQ(ExcType(r), "TimeLimitExceeded");
  EXPECT_EQ(body.saw_stop->load(), 1);
  StopWorker();
}

TEST_F(WorkerCancel, RevokeWithTerminateStopsTheRunningJob) {
  StopAwareBody body;
  WorkerOptions o = Options();
  o.body = body;
  StartWorker(o);
  const std::string id = Send(celery::kSleepTaskName, Json::array({"polite", 30}));
  WaitStarted(id);
  // A broadcast reaches only a worker whose control queue is bound: wait until it answers a ping (under load
  // the job can start before the control consumer is ready, and a revoke sent then is lost, as with Celery).
  for (int i = 0; i < 50 && !Client().Broadcast({"ping"}, milliseconds(200))["ping"].count(worker_->node_name());
       ++i) {
  }
  const auto t0 = Clock::now();
  Client().Revoke({id}, /*terminate=*/true);
  celery::TaskResult r = Wait(id);
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
  EXPECT_EQ(r.status, "REVOKED");
  EXPECT_EQ(ExcType(r), "TaskRevokedError");
  EXPECT_EQ(ExcMessage(r), "terminated");
  EXPECT_EQ(body.saw_stop->load(), 1);
  EXPECT_NE(Lines().find("revoked with terminate; asked the job to stop"), std::string::npos) << Lines();
  // Remote control lists it as revoked.
  auto answers = Client().Broadcast({"revoked"}, milliseconds(500));
  ASSERT_TRUE(answers["revoked"].count(worker_->node_name()));
  EXPECT_EQ(answers["revoked"][worker_->node_name()], Json::array({id}));
  StopWorker();
  EXPECT_EQ(hub_.Unacked(queue_), 0u);
  EXPECT_EQ(hub_.Ready(queue_), 0u);
}

TEST_F(WorkerCancel, ATaskRevokedBeforeItArrivesIsRevokedWithoutRunning) {
  StopAwareBody body;
  WorkerOptions o = Options();
  o.body = body;
  StartWorker(o);
  const std::string busy = Send(celery::kSleepTaskName, Json::array({"polite", 0.5}));
  WaitStarted(busy);
  const std::string queued = Send(celery::kSleepTaskName, Json::array({"polite", 0.01}));
  Client().Revoke({queued}, /*terminate=*/false);
  std::this_thread::sleep_for(milliseconds(100));  // remote control runs on its own connection
  EXPECT_EQ(Wait(busy).result, "slept") << "a revoke without terminate leaves the running job alone";
  celery::TaskResult r = Wait(queued);
  EXPECT_EQ(r.status, "REVOKED");
  EXPECT_EQ(ExcMessage(r), "revoked");
  EXPECT_EQ(body.ran->load(), 1) << "the revoked task never ran";
  StopWorker();
  EXPECT_EQ(hub_.Ready(queue_), 0u);
}

// ---- device exclusivity across slots ----

class WorkerDevices : public WorkerCancel {
 protected:
  // Sends one test_custom_task per arch and waits for all; returns the replies.
  std::vector<celery::TaskResult> RunTests(const std::vector<std::string>& archs) {
    std::vector<std::string> ids;
    for (const std::string& arch : archs) {
      Task task = testing::MakeFakeStageTask("fake", arch);
      ids.push_back(Send(celery::kTestTaskName, Json::array({task.Encode()})));
    }
    std::vector<celery::TaskResult> out;
    for (const std::string& id : ids) out.push_back(Wait(id, 30000));
    return out;
  }
  static std::vector<PhaseSpan> Of(const std::vector<PhaseSpan>& spans, const std::string& phase) {
    std::vector<PhaseSpan> out;
    for (const PhaseSpan& s : spans) {
      if (s.phase == phase) out.push_back(s);
    }
    return out;
  }
  testing::TempDir dir_;
};

TEST_F(WorkerDevices, TimedPhasesOfTwoSlotsNeverShareADeviceButCorrectnessRunsOverlap) {
  const auto record = dir_.path() / "spans.txt";
  testing::RecordingHarness harness(record, 0, 300, 400);
  WorkerOptions o = Options();
  o.concurrency = 2;
  o.body = [&harness](std::string_view name, const Json& args, const Json& kwargs, const TaskBodyContext& ctx) {
    TaskBodyContext c = ctx;
    c.harness = &harness;
    return RunTaskBody(name, args, kwargs, c);
  };
  StartWorker(o);
  for (const std::string arch : {"cpu", "Ampere"}) {  // the host, and one GPU device
    std::filesystem::remove(record);
    for (const celery::TaskResult& r : RunTests({arch, arch})) {
      ASSERT_EQ(r.status, "SUCCESS") << r.result.dump();
      EXPECT_EQ(r.result["custom"]["correctness_result"]["output_data"]["kf_verdict"]["status"], "correct");
      EXPECT_EQ(r.result["custom"]["performance_result"]["output_data"]["kf_verdict"]["status"], "correct");
    }
    std::vector<PhaseSpan> spans = testing::ReadSpans(record);
    std::vector<PhaseSpan> perf = Of(spans, "performance"), corr = Of(spans, "correctness");
    ASSERT_EQ(perf.size(), 2u);
    ASSERT_EQ(corr.size(), 2u);
    EXPECT_FALSE(testing::Overlap(perf[0], perf[1])) << arch << ": two timed runs on one device at once";
    EXPECT_TRUE(testing::Overlap(corr[0], corr[1])) << arch << ": the slots did not run in parallel";
    for (const PhaseSpan& p : perf) {
      for (const PhaseSpan& c : corr) {
        // A timed run on the host excludes every other use of the host (the other job's correctness run);
        // on a GPU the other job's correctness run may overlap it (it holds the device shared).
        if (arch == "cpu") {
          EXPECT_FALSE(testing::Overlap(p, c)) << "timed run on the host during a correctness run";
        }
      }
    }
  }
  // Different GPUs: nothing to exclude, the timed runs may (and here do) overlap.
  std::filesystem::remove(record);
  RunTests({"lnl", "bmg"});
  std::vector<PhaseSpan> perf = Of(testing::ReadSpans(record), "performance");
  ASSERT_EQ(perf.size(), 2u);
  EXPECT_TRUE(testing::Overlap(perf[0], perf[1])) << "timed runs on two different devices were serialised";
  StopWorker();
}

TEST_F(WorkerDevices, JobProcessesTakeTheirLeasesFromTheWorkerAndObeyRevoke) {
  const auto record = dir_.path() / "spans.txt";
  ::setenv("KF_FAKE_RECORD", record.c_str(), 1);
  ::setenv("KF_FAKE_CORRECTNESS_MS", "300", 1);
  ::setenv("KF_FAKE_PERFORMANCE_MS", "400", 1);
  WorkerOptions o = Options();
  o.concurrency = 2;
  o.run_in_process = false;
  o.child_argv = {(testing::BinaryDir() / "tests" / "kf_fake_worker_child").string()};
  o.work_root = dir_.path();
  StartWorker(o);
  std::vector<celery::TaskResult> replies = RunTests({"Ampere", "Ampere"});
  for (const celery::TaskResult& r : replies) {
    ASSERT_EQ(r.status, "SUCCESS") << r.result.dump() << "\n" << Lines();
    EXPECT_EQ(r.result["custom"]["performance_result"]["output_data"]["kf_verdict"]["status"], "correct");
    EXPECT_TRUE(r.result["custom"]["performance_result"]["output_data"].contains("runtimes"));
  }
  std::vector<PhaseSpan> perf = Of(testing::ReadSpans(record), "performance");
  ASSERT_EQ(perf.size(), 2u);
  EXPECT_NE(perf[0].pid, perf[1].pid) << "both slots' job processes ran a job";
  EXPECT_FALSE(testing::Overlap(perf[0], perf[1])) << "two job processes timed on one device at once";

  // A revoke with terminate reaches the job process: its running phase sees the stop.
  std::filesystem::remove(record);
  ::setenv("KF_FAKE_CORRECTNESS_MS", "30000", 1);
  StopWorker();
  StartWorker(o);  // fresh job processes read the new setting
  Task task = testing::MakeFakeStageTask("fake", "Ampere");
  const std::string id = Send(celery::kTestTaskName, Json::array({task.Encode()}));
  WaitStarted(id);
  // STARTED leaves the worker when the job is handed to a job process, which may not have reached its phase yet
  // (under ASan on a loaded machine it took more than the 300 ms this waited before): a revoke then stops the job
  // before any phase and there is no span to check.
  const auto begun_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (testing::StartedPhases(record, "correctness") == 0 && std::chrono::steady_clock::now() < begun_by) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_EQ(testing::StartedPhases(record, "correctness"), 1u) << Lines();
  Client().Revoke({id}, /*terminate=*/true);
  celery::TaskResult r = Wait(id);
  EXPECT_EQ(r.status, "REVOKED");
  EXPECT_EQ(ExcMessage(r), "terminated");
  std::vector<PhaseSpan> spans = testing::ReadSpans(record);
  ASSERT_EQ(spans.size(), 1u) << Lines();
  EXPECT_EQ(spans[0].phase, "correctness");
  EXPECT_TRUE(spans[0].stopped) << "the job process was killed instead of asked to stop";
  EXPECT_LT(spans[0].end_us - spans[0].start_us, 10'000'000);
  StopWorker();
  for (const char* v : {"KF_FAKE_RECORD", "KF_FAKE_CORRECTNESS_MS", "KF_FAKE_PERFORMANCE_MS"}) ::unsetenv(v);
}

}  // namespace
}  // namespace kf
