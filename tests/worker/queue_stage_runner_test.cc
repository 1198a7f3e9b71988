// QueueStageRunner as Evaluate's StageRunner (options.runner), on the in-memory broker with a kf Worker
// whose task bodies run a recording fake harness:
//  * the farm's verdict equals the local one (the worker's typed verdicts travel in output_data
//    "kf_verdict" and are removed again), also for a failure that the text alone would misread;
//  * results of a foreign worker (no kf_verdict) are classified from their text (ClassifyFromWire);
//  * cancelling the evaluation stops the wait, revokes the task with terminate, and the worker stops the job;
//  * one runner over a connection factory serves concurrent evaluations.
#include <algorithm>
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/worker.hpp"
#include "test_util.hpp"
#include "worker/fake_stage_util.hpp"

namespace kf {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class FarmRunner : public ::testing::Test {
 protected:
  void SetUp() override {
    language_ = "fake" + NewUuid().substr(0, 6);
    build_q_ = celery::BuildQueueName(language_);
    test_q_ = celery::TestQueueName("cpu");
  }
  void TearDown() override {
    if (thread_.joinable()) {
      worker_->RequestStop(true);
      thread_.join();
    }
  }
  void StartWorker(int concurrency = 1) {
    WorkerOptions o;
    o.connect = hub_.Factory();
    o.broker_display = "memory://";
    o.queues = {build_q_, test_q_};
    o.node_name = "kfrunner-" + NewUuid().substr(0, 6) + "@%h";
    o.concurrency = concurrency;
    o.run_in_process = true;
    o.device_slots = &slots_;
    o.work_root = dir_.path();
    o.log = [](const std::string&) {};
    o.body = [this](std::string_view name, const Json& args, const Json& kwargs, const TaskBodyContext& ctx) {
      TaskBodyContext c = ctx;
      c.harness = harness_.load();
      return RunTaskBody(name, args, kwargs, c);
    };
    worker_ = std::make_unique<Worker>(std::move(o));
    thread_ = std::thread([this] { worker_->Run(); });
  }
  Evaluation Local(const testing::RecordingHarness& h) {
    EvaluateOptions o;
    o.harness = &h;
    o.work_root = dir_.path();
    return Evaluate(testing::MakeFakeStageTask(language_, "cpu"), std::nullopt, o);
  }
  Evaluation Farm(StageRunner& runner, std::stop_token stop = {}) {
    EvaluateOptions o;
    o.runner = &runner;
    o.stop = stop;
    return Evaluate(testing::MakeFakeStageTask(language_, "cpu"), std::nullopt, o);
  }

  MemoryBroker hub_;
  DeviceSlots slots_;
  testing::TempDir dir_;
  std::string language_, build_q_, test_q_;
  std::atomic<const Harness*> harness_{nullptr};
  std::unique_ptr<Worker> worker_;
  std::thread thread_;
};

TEST_F(FarmRunner, FarmVerdictEqualsTheLocalVerdict) {
  testing::RecordingHarness good("", 0, 0, 0), wrong("", 0, 0, 0, /*wrong=*/true);
  harness_ = &good;
  StartWorker();
  CeleryClient client(hub_.Connect());
  QueueStageRunner runner(client);

  Evaluation local = Local(good);
  Evaluation farm = Farm(runner);
  EXPECT_EQ(farm.result.status, EvalStatus::kCorrect) << farm.result.status_detail;
  EXPECT_EQ(farm.result.status, local.result.status);
  EXPECT_EQ(farm.result.perf_score, 5);
  EXPECT_DOUBLE_EQ(farm.result.runtime_improvement, 2.0);
  EXPECT_DOUBLE_EQ(farm.result.runtime_improvement, local.result.runtime_improvement);
  // The kf extension is gone from what is stored: output_data looks like a local run's.
  ASSERT_TRUE(farm.task.test_result && farm.task.test_result->correctness_result);
  EXPECT_FALSE(farm.task.test_result->correctness_result->output_data.has_value());
  ASSERT_TRUE(farm.task.test_result->performance_result);
  EXPECT_EQ(*farm.task.test_result->performance_result->output_data,
            *local.task.test_result->performance_result->output_data);
  ASSERT_TRUE(farm.task.build_result);
  EXPECT_TRUE(farm.task.build_result->Ok());

  // A failure the wire text alone misreads (exit code 70: "unexpected exit code") keeps its typed verdict.
  harness_ = &wrong;
  local = Local(wrong);
  farm = Farm(runner);
  EXPECT_EQ(local.result.status, EvalStatus::kValueMismatch) << local.result.status_detail;
  EXPECT_EQ(farm.result.status, EvalStatus::kValueMismatch) << farm.result.status_detail;
  EXPECT_EQ(farm.result.perf_score, local.result.perf_score);
  EXPECT_EQ(ClassifyFromWire(*farm.task.test_result->correctness_result).status, EvalStatus::kTestError)
      << "the text alone would have said test_error";
}

TEST_F(FarmRunner, ResultsOfAForeignWorkerAreClassifiedFromTheirText) {
  // A reference-style worker: replies with text only (no kf_verdict).
  auto foreign = hub_.Connect();
  celery::DeclareTaskQueue(*foreign, test_q_);
  foreign->SetPrefetch(1);
  foreign->Consume(test_q_, false);
  std::thread reply([&] {
    std::optional<Delivery> d;
    for (int i = 0; i < 200 && !d; ++i) d = foreign->Next(milliseconds(50));
    ASSERT_TRUE(d);
    celery::TaskMessage m = celery::DecodeTaskMessage(d->message);
    TestResult tr;
    tr.worker_info = Json{{"hostname", "ref"}, {"gpu_name", ""}};
    tr.correctness_result = ProcessResult::Create(
        1, "task.py::TestX::test_output_shapes_match PASSED\ntask.py::TestX::test_a FAILED\n", "", std::nullopt);
    foreign->Publish(celery::EncodeResultMessage(
        celery::TaskResult{m.id, "SUCCESS", Json{{"custom", tr.Encode()}}, nullptr, Json::array()}, m.reply_to,
        m.correlation_id));
    foreign->Ack(d->delivery_tag);
  });
  CeleryClient client(hub_.Connect());
  QueueStageRunner runner(client);
  Task task = testing::MakeFakeStageTask(language_, "cpu");
  TestStageResult r = runner.Test(task, MakeTestVariants(task, true, false), {"cpu"}, EvaluateOptions{});
  reply.join();
  ASSERT_EQ(r.per_arch.size(), 1u);
  ASSERT_EQ(r.per_arch[0].second.size(), 1u);
  const VariantRun& run = r.per_arch[0].second[0].second;
  ASSERT_TRUE(run.correctness);
  EXPECT_EQ(run.correctness->status, EvalStatus::kValueMismatch) << run.correctness->detail;
  EXPECT_FALSE(run.performance);
  EXPECT_FALSE(run.result.correctness_result->output_data.has_value());
}

TEST_F(FarmRunner, CancelingTheEvaluationRevokesTheTaskAndTheWorkerStopsTheJob) {
  const auto record = dir_.path() / "spans.txt";
  testing::RecordingHarness slow(record, 0, 0, 60'000);  // the timed run would take a minute
  harness_ = &slow;
  StartWorker();
  std::atomic<bool> started{false};
  FarmOptions fo;
  fo.on_event = [&](const std::string& e) {
    if (e.rfind("test cpu: started on", 0) == 0) started = true;
  };
  CeleryClient client(hub_.Connect());
  QueueStageRunner runner(client, fo);
  std::stop_source stop;
  Evaluation ev;
  std::thread evaluation([&] { ev = Farm(runner, stop.get_token()); });
  const auto t0 = Clock::now();
  while (!started && Clock::now() - t0 < milliseconds(10000)) std::this_thread::sleep_for(milliseconds(10));
  ASSERT_TRUE(started);
  std::this_thread::sleep_for(milliseconds(300));  // the timed run is under way
  const auto t1 = Clock::now();
  stop.request_stop();
  evaluation.join();
  EXPECT_LT(Clock::now() - t1, milliseconds(3000)) << "the client did not stop waiting";
  EXPECT_EQ(ev.result.status, EvalStatus::kCanceled) << ev.result.status_detail;
  // The worker got the revoke and stopped the job (not a minute later).
  const auto t2 = Clock::now();
  while ((hub_.Unacked(test_q_) > 0 || worker_->stats().failed.load() == 0) && Clock::now() - t2 < milliseconds(10000)) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(worker_->stats().canceled.load(), 1);
  EXPECT_EQ(worker_->stats().failed.load(), 1) << "the job ends REVOKED";
  EXPECT_EQ(hub_.Unacked(test_q_), 0u);
  EXPECT_EQ(hub_.Ready(test_q_), 0u);
  std::vector<testing::PhaseSpan> spans = testing::ReadSpans(record);
  // The candidate's build and the correctness runs, then the candidate's timed run, stopped; nothing after it.
  ASSERT_GE(spans.size(), 3u);
  EXPECT_EQ(spans.front().phase, "build");
  const testing::PhaseSpan& last = spans.back();
  EXPECT_EQ(last.phase, "performance");
  EXPECT_EQ(last.variant, "custom");
  EXPECT_TRUE(last.stopped);
  EXPECT_LT(last.end_us - last.start_us, 10'000'000);
  EXPECT_EQ(std::count_if(spans.begin(), spans.end(), [](const testing::PhaseSpan& p) { return p.phase == "performance"; }),
            1);
}

TEST_F(FarmRunner, OneRunnerOverAFactoryServesConcurrentEvaluations) {
  testing::RecordingHarness good("", 0, 100, 100);
  harness_ = &good;
  StartWorker(/*concurrency=*/3);
  std::atomic<int> connects{0};
  QueueStageRunner runner([this, &connects] {
    ++connects;
    return hub_.Connect();
  });
  std::vector<Evaluation> evs(3);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < evs.size(); ++i) threads.emplace_back([&, i] { evs[i] = Farm(runner); });
  for (std::thread& t : threads) t.join();
  for (const Evaluation& ev : evs) EXPECT_EQ(ev.result.status, EvalStatus::kCorrect) << ev.result.status_detail;
  EXPECT_GE(connects.load(), 2) << "concurrent calls must not share one client";
  EXPECT_LE(connects.load(), 3);
  // Clients are reused afterwards.
  EXPECT_EQ(Farm(runner).result.status, EvalStatus::kCorrect);
  EXPECT_LE(connects.load(), 3);
}

}  // namespace
}  // namespace kf
