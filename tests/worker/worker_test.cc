// The worker's message handling on the in-memory broker with fake task bodies (milliseconds per case):
// acks late, STARTED then SUCCESS, redelivery counting and the poison limit, time limits, expiry, unknown
// tasks, bad messages, canvas, reply size, graceful and immediate stop, reconnects, remote control while
// busy, recording in the store. The same worker on a real RabbitMQ with real jobs: farm_e2e_test.cc.
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/worker.hpp"
#include "test_util.hpp"
#include "worker/in_process_worker_util.hpp"

namespace kf {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Records publishes and acks of the worker's connections, in order.
class RecordingBroker final : public Broker {
 public:
  RecordingBroker(std::unique_ptr<Broker> inner, std::shared_ptr<std::vector<std::string>> log,
                  std::shared_ptr<std::mutex> mu)
      : in_(std::move(inner)), log_(std::move(log)), mu_(std::move(mu)) {}
  void DeclareExchange(const ExchangeSpec& s) override { in_->DeclareExchange(s); }
  uint32_t DeclareQueue(const QueueSpec& s) override { return in_->DeclareQueue(s); }
  void BindQueue(const std::string& q, const std::string& e, const std::string& k) override { in_->BindQueue(q, e, k); }
  void DeleteQueue(const std::string& q) override { in_->DeleteQueue(q); }
  void SetPrefetch(uint16_t n) override {
    Add("prefetch " + std::to_string(n));
    in_->SetPrefetch(n);
  }
  std::string Consume(const std::string& q, bool no_ack) override { return in_->Consume(q, no_ack); }
  void CancelConsumer(const std::string& t) override { in_->CancelConsumer(t); }
  void Publish(const Message& m) override {
    std::string what = "publish " + m.routing_key;
    try {
      Json body = celery::DeserializeBody(m.body, m.properties.content_type);
      if (body.is_object() && body.contains("status")) what += " " + body["status"].get<std::string>();
    } catch (const Error&) {
    }
    in_->Publish(m);
    Add(what);
  }
  std::optional<Delivery> Next(milliseconds t) override { return in_->Next(t); }
  void Ack(uint64_t tag) override {
    in_->Ack(tag);
    Add("ack");
  }
  void Reject(uint64_t tag, bool requeue) override {
    in_->Reject(tag, requeue);
    Add(requeue ? "reject requeue" : "reject");
  }
  size_t max_message_bytes() const override { return in_->max_message_bytes(); }

 private:
  void Add(const std::string& s) {
    std::lock_guard<std::mutex> lock(*mu_);
    log_->push_back(s);
  }
  std::unique_ptr<Broker> in_;
  std::shared_ptr<std::vector<std::string>> log_;
  std::shared_ptr<std::mutex> mu_;
};

// Fake bodies, all under the registered test_sleep name: args[0] selects the behaviour.
TaskBodyResult FakeBody(std::string_view, const Json& args, const Json&, const TaskBodyContext& ctx) {
  const std::string mode = args.at(0).get<std::string>();
  TaskBodyResult r;
  if (mode == "echo") {
    r.result = args.at(1);
  } else if (mode == "sleep") {
    const auto until = Clock::now() + milliseconds(static_cast<int64_t>(args.at(1).get<double>() * 1000));
    while (Clock::now() < until && !ctx.stop.stop_requested()) std::this_thread::sleep_for(milliseconds(5));
    r.result = ctx.stop.stop_requested() ? "stopped" : "slept";
  } else if (mode == "big") {
    r.result = std::string(args.at(1).get<size_t>(), 'x');
  } else {
    r.failure = TaskFailure{"ValueError", "builtins", "bad input"};
  }
  return r;
}

class WorkerTest : public testing::InProcessWorkerTest {
 protected:
  WorkerTest() : InProcessWorkerTest("test_custom_task_fake") {}

  WorkerOptions Options() {
    WorkerOptions o = BaseOptions("kftest@%h");
    auto log = log_;
    auto mu = mu_;
    o.connect = [this, log, mu] { return std::make_unique<RecordingBroker>(hub_.Connect(), log, mu); };
    o.body = FakeBody;
    return o;
  }
  std::string Send(const Json& args, celery::SendOptions o = {}) {
    return SendTask(celery::kSleepTaskName, args, std::move(o));
  }
  celery::TaskResult Wait(const std::string& id, int ms = 5000) { return InProcessWorkerTest::Wait(id, ms); }
  /// What the worker's connections published and acked, in order.
  std::vector<std::string> Log() {
    std::lock_guard<std::mutex> lock(*mu_);
    return *log_;
  }
  // Puts a message into the queue that a (simulated) worker received and lost `losses` times.
  void PublishLost(const Json& args, int losses, int header_count = -1) {
    auto producer = hub_.Connect();
    celery::DeclareTaskQueue(*producer, queue_);
    celery::SendOptions o;
    o.queue = queue_;
    o.reply_to = Client().reply_queue();
    if (header_count >= 0) o.extra_headers = Json{{"kf_deliveries", header_count}};
    lost_id_ = NewUuid();
    producer->Publish(celery::EncodeTaskMessage(lost_id_, celery::kSleepTaskName, args, Json::object(), o));
    for (int i = 0; i < losses; ++i) {
      auto dying = hub_.Connect();
      dying->SetPrefetch(1);
      dying->Consume(queue_, false);
      ASSERT_TRUE(dying->Next(milliseconds(500)));
    }  // each closes without an ack: redelivered
  }

  std::string lost_id_;
  std::shared_ptr<std::vector<std::string>> log_ = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::mutex> mu_ = std::make_shared<std::mutex>();
};

TEST_F(WorkerTest, RepliesStartedThenSuccessAndAcksOnlyAfterTheReply) {
  StartWorker(Options());
  const std::string id = Send(Json::array({"echo", Json{{"answer", 42}}}));
  celery::TaskResult r = Wait(id);
  EXPECT_EQ(r.status, "SUCCESS");
  EXPECT_EQ(r.result, (Json{{"answer", 42}}));
  Json started = Client().Started(id);
  EXPECT_EQ(started["hostname"].get<std::string>().rfind("kftest@", 0), 0u);
  EXPECT_TRUE(started["kf_acks_late"].get<bool>());
  StopWorker();
  std::vector<std::string> log = Log();
  const std::string reply = "publish " + Client().reply_queue();
  std::vector<std::string> job;
  for (const std::string& e : log) {
    if (e.rfind(reply, 0) == 0 || e == "ack" || e.rfind("prefetch", 0) == 0) job.push_back(e);
  }
  EXPECT_EQ(job, (std::vector<std::string>{"prefetch 1", reply + " STARTED", reply + " SUCCESS", "ack"}));
  EXPECT_EQ(hub_.Ready(queue_), 0u);
  EXPECT_EQ(hub_.Unacked(queue_), 0u);
  EXPECT_EQ(worker_->stats().succeeded.load(), 1);
}

TEST_F(WorkerTest, MessageStaysUnackedWhileItsJobRuns) {
  StartWorker(Options());
  const std::string id = Send(Json::array({"sleep", 0.5}));
  const auto t0 = Clock::now();
  while (Client().Started(id).is_null() && Clock::now() - t0 < milliseconds(3000)) Client().WaitAny({id}, milliseconds(20));
  EXPECT_EQ(hub_.Unacked(queue_), 1u);
  EXPECT_EQ(Wait(id).result, "slept");
  StopWorker();
  EXPECT_EQ(hub_.Unacked(queue_), 0u);
}

TEST_F(WorkerTest, RedeliveredMessageIsPutBackCountedAndThenRun) {
  PublishLost(Json::array({"echo", "survived"}), /*losses=*/1);
  StartWorker(Options());
  celery::TaskResult r = Wait(lost_id_);
  EXPECT_EQ(r.status, "SUCCESS");
  EXPECT_EQ(r.result, "survived");
  StopWorker();
  EXPECT_NE(Lines().find("(delivery 2) SUCCESS"), std::string::npos) << Lines();
  EXPECT_EQ(worker_->stats().requeued.load(), 1);
}

TEST_F(WorkerTest, PoisonMessageFailsWithWorkerLostErrorAtTheLimit) {
  // Two earlier workers were lost with it (header 2 from the last put-back), and this delivery is a
  // redelivery again: the third loss reaches the limit of 3.
  PublishLost(Json::array({"echo", "never"}), /*losses=*/1, /*header_count=*/2);
  WorkerOptions o = Options();
  o.max_deliveries = 3;
  StartWorker(o);
  celery::TaskResult r = Wait(lost_id_);
  EXPECT_EQ(r.status, "FAILURE");
  EXPECT_EQ(ExcType(r), "WorkerLostError");
  EXPECT_EQ(r.result["exc_module"], "billiard.exceptions");
  EXPECT_NE(ExcMessage(r).find("each of 3 deliveries"), std::string::npos) << ExcMessage(r);
  // The farm keeps serving.
  const std::string next = Send(Json::array({"echo", "next"}));
  EXPECT_EQ(Wait(next).result, "next");
  StopWorker();
  EXPECT_EQ(hub_.Ready(queue_), 0u);
}

TEST_F(WorkerTest, PoisonLimitCountsEveryLostDelivery) {
  // Without a header the count starts at the first loss: with a limit of 2, one loss → put back (header
  // 1), run as delivery 2.
  PublishLost(Json::array({"echo", "ok"}), /*losses=*/1);
  WorkerOptions o = Options();
  o.max_deliveries = 2;
  StartWorker(o);
  EXPECT_EQ(Wait(lost_id_).status, "SUCCESS");
  StopWorker();
  // With a limit of 1, the first loss is already fatal.
  PublishLost(Json::array({"echo", "ok"}), /*losses=*/1);
  o = Options();
  o.max_deliveries = 1;
  StartWorker(o);
  EXPECT_EQ(ExcType(Wait(lost_id_)), "WorkerLostError");
}

TEST_F(WorkerTest, HardTimeLimitKillsTheJob) {
  StartWorker(Options());
  celery::SendOptions so;
  so.hard_time_limit = 0.3;
  so.soft_time_limit = 0.2;  // soft first would be Celery's SoftTimeLimitExceeded; hard is the kill
  const auto t0 = Clock::now();
  celery::TaskResult r = Wait(Send(Json::array({"sleep", 30}), so));
  EXPECT_LT(Clock::now() - t0, milliseconds(3000));
  EXPECT_EQ(r.status, "FAILURE");
  EXPECT_EQ(ExcType(r), "SoftTimeLimitExceeded");
  so.soft_time_limit.reset();
  r = Wait(Send(Json::array({"sleep", 30}), so));
  EXPECT_EQ(ExcType(r), "TimeLimitExceeded");
  EXPECT_EQ(r.result["exc_module"], "celery.exceptions");
  EXPECT_TRUE(r.traceback.is_string());
  StopWorker();
}

TEST_F(WorkerTest, ExpiredMessageIsRevokedWithoutRunning) {
  StartWorker(Options());
  celery::SendOptions so;
  so.expires = celery::FormatIsoTime(1.0);  // 1970
  celery::TaskResult r = Wait(Send(Json::array({"echo", "x"}), so));
  EXPECT_EQ(r.status, "REVOKED");
  EXPECT_EQ(ExcType(r), "TaskRevokedError");
  EXPECT_EQ(ExcMessage(r), "expired");
  so.expires = celery::FormatIsoTime(4e9);  // 2096
  EXPECT_EQ(Wait(Send(Json::array({"echo", "x"}), so)).status, "SUCCESS");
  StopWorker();
}

TEST_F(WorkerTest, UnknownTaskIsNotRegisteredAndRejected) {
  StartWorker(Options());
  celery::SendOptions so;
  so.queue = queue_;
  const std::string id = Client().Send("kernelfoundry.eval_pipeline.tasks.build_image.build_image", Json::array(), so);
  celery::TaskResult r = Wait(id);
  EXPECT_EQ(r.status, "FAILURE");
  EXPECT_EQ(ExcType(r), "NotRegistered");
  EXPECT_EQ(r.result["exc_module"], "celery.exceptions");
  StopWorker();
  std::vector<std::string> log = Log();
  EXPECT_NE(std::find(log.begin(), log.end(), "reject"), log.end());
  EXPECT_EQ(hub_.Ready(queue_), 0u);  // not requeued
}

TEST_F(WorkerTest, BadMessagesGetAFailureNamingTheProblemAndTheWorkerKeepsServing) {
  StartWorker(Options());
  auto producer = hub_.Connect();
  celery::DeclareTaskQueue(*producer, queue_);
  Message bad;
  bad.routing_key = queue_;
  bad.properties.content_type = "application/x-msgpack";
  bad.properties.correlation_id = "bad-1";
  bad.properties.reply_to = Client().reply_queue();
  bad.properties.headers = Json{{"lang", "py"}, {"task", std::string(celery::kSleepTaskName)}, {"id", "bad-1"}};
  bad.body = "\xc1\xc1";
  producer->Publish(bad);
  celery::TaskResult r = Wait("bad-1");
  EXPECT_EQ(r.status, "FAILURE");
  EXPECT_EQ(ExcType(r), "ValueError");
  EXPECT_NE(ExcMessage(r).find("not valid msgpack"), std::string::npos) << ExcMessage(r);
  // Missing headers, no reply_to: nobody to tell; rejected.
  Message headless = bad;
  headless.properties.headers = Json::object();
  headless.properties.reply_to.clear();
  headless.properties.correlation_id.clear();
  producer->Publish(headless);
  // Canvas: unsupported.
  celery::SendOptions canvas_options;
  canvas_options.queue = queue_;
  canvas_options.reply_to = Client().reply_queue();
  Message canvas = celery::EncodeTaskMessage("canvas-1", celery::kSleepTaskName, Json::array({"echo", 1}),
                                             Json::object(), canvas_options);
  Json body = celery::DeserializeBody(canvas.body, canvas.properties.content_type);
  body[2]["chain"] = Json::array({Json{{"task", "next"}}});
  canvas.body = celery::SerializeBody(body, celery::ContentType::kMsgpack);
  producer->Publish(canvas);
  r = Wait("canvas-1");
  EXPECT_EQ(ExcType(r), "NotImplementedError");
  EXPECT_NE(ExcMessage(r).find("unsupported"), std::string::npos);
  // An encoded-task-like argument that fails in the body: a FAILURE from the body.
  EXPECT_EQ(ExcType(Wait(Send(Json::array({"fail"})))), "ValueError");
  EXPECT_EQ(Wait(Send(Json::array({"echo", "still here"}))).result, "still here");
  StopWorker();
  EXPECT_EQ(worker_->stats().rejected.load(), 2);
  EXPECT_EQ(hub_.Ready(queue_), 0u);
}

TEST_F(WorkerTest, ReplyOverTheBrokerLimitBecomesAFailure) {
  hub_.set_max_message_bytes(4096);
  StartWorker(Options());
  celery::TaskResult r = Wait(Send(Json::array({"big", 10000})));
  EXPECT_EQ(r.status, "FAILURE");
  EXPECT_NE(ExcMessage(r).find("message size limit of 4096 bytes"), std::string::npos) << ExcMessage(r);
  EXPECT_EQ(Wait(Send(Json::array({"big", 100}))).status, "SUCCESS");
  StopWorker();
}

TEST_F(WorkerTest, GracefulStopFinishesTheRunningJob) {
  StartWorker(Options());
  const std::string id = Send(Json::array({"sleep", 0.4}));
  while (Client().Started(id).is_null()) Client().WaitAny({id}, milliseconds(10));
  const std::string queued = Send(Json::array({"echo", "later"}));
  StopWorker(/*immediate=*/false);
  EXPECT_EQ(Wait(id).result, "slept");
  EXPECT_EQ(hub_.Ready(queue_), 1u) << "the queued message is left for the next worker";
  EXPECT_EQ(hub_.Unacked(queue_), 0u);
  (void)queued;
}

TEST_F(WorkerTest, ImmediateStopPutsTheJobBackUncounted) {
  StartWorker(Options());
  const std::string id = Send(Json::array({"sleep", 30}));
  while (Client().Started(id).is_null()) Client().WaitAny({id}, milliseconds(10));
  StopWorker(/*immediate=*/true);
  EXPECT_FALSE(Client().WaitAny({id}, milliseconds(200)));
  std::vector<Message> left = hub_.Drain(queue_);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].properties.headers["kf_deliveries"], 0);
  EXPECT_EQ(left[0].properties.headers["id"], id);
}

TEST_F(WorkerTest, AnswersRemoteControlWhileAJobRuns) {
  StartWorker(Options());
  const std::string id = Send(Json::array({"sleep", 2}));
  while (Client().Started(id).is_null()) Client().WaitAny({id}, milliseconds(10));
  const auto t0 = Clock::now();
  auto answers = Client().Broadcast({"ping", "active_queues", "active"}, milliseconds(500));
  EXPECT_LT(Clock::now() - t0, milliseconds(1000));
  const std::string node = worker_->node_name();
  ASSERT_TRUE(answers["ping"].count(node)) << "no ping answer while busy";
  EXPECT_EQ(answers["ping"][node], (Json{{"ok", "pong"}}));
  ASSERT_TRUE(answers["active_queues"].count(node));
  EXPECT_EQ(answers["active_queues"][node][0]["name"], queue_);
  ASSERT_TRUE(answers["active"].count(node));
  EXPECT_EQ(answers["active"][node][0]["id"], id);
  EXPECT_TRUE(Client().Ping(node, milliseconds(1000)));
  EXPECT_FALSE(Client().Ping("nobody@nowhere", milliseconds(300)));
  std::vector<LiveWorker> live = InspectWorkers(Client(), milliseconds(300));
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].queues, std::vector<std::string>{queue_});
  EXPECT_EQ(Wait(id).result, "slept");
  StopWorker();
}

TEST_F(WorkerTest, ReconnectsAndPublishesTheReplyOfAJobThatOutlivedItsConnection) {
  StartWorker(Options());
  EXPECT_EQ(Wait(Send(Json::array({"echo", 1}))).result, 1);
  hub_.DropConnections();  // idle: every connection breaks (the worker's and ours)
  client_.reset();
  EXPECT_EQ(Wait(Send(Json::array({"echo", 2}))).result, 2);

  // A job whose connection breaks while it runs: replies go to a durable queue of the test, so they
  // survive the drop.
  auto producer = hub_.Connect();
  const std::string replies = "kf_test_replies_" + NewUuid();
  producer->DeclareQueue(QueueSpec{replies, true, false, false, Json::object()});
  celery::SendOptions so;
  so.queue = queue_;
  so.reply_to = replies;
  producer->Publish(celery::EncodeTaskMessage("job-1", celery::kSleepTaskName, Json::array({"sleep", 0.6}),
                                              Json::object(), so));
  const auto t0 = Clock::now();
  while (hub_.Unacked(queue_) == 0 && Clock::now() - t0 < milliseconds(3000)) std::this_thread::sleep_for(milliseconds(5));
  hub_.DropConnections();
  producer.reset();
  client_.reset();
  EXPECT_EQ(Wait(Send(Json::array({"echo", 3}))).result, 3);  // served after the reconnect
  StopWorker();
  int successes = 0;
  for (const Message& m : hub_.Drain(replies)) {
    celery::TaskResult r = celery::DecodeResultMessage(m);
    EXPECT_EQ(r.task_id, "job-1");
    if (r.status == "SUCCESS") {
      ++successes;
      EXPECT_EQ(r.result, "slept");
    }
  }
  EXPECT_EQ(successes, 1) << Lines();
  EXPECT_GE(worker_->stats().reconnects.load(), 2);
  EXPECT_NE(Lines().find("finished while disconnected"), std::string::npos) << Lines();
  EXPECT_NE(Lines().find("dropping its redelivery"), std::string::npos) << Lines();
  EXPECT_EQ(hub_.Ready(queue_), 0u) << "the redelivered copy of the finished job must not run again";
}

TEST_F(WorkerTest, RecordsEveryJobInTheStore) {
  testing::TempDir dir;
  auto store = OpenStore((dir.path() / "farm.sqlite3").string());
  WorkerOptions o = Options();
  o.store = store.get();
  StartWorker(o);
  Wait(Send(Json::array({"echo", "x"})));
  Wait(Send(Json::array({"fail"})));
  StopWorker();
  Json job1 = store->GetJob(1), job2 = store->GetJob(2);
  EXPECT_EQ(job1["status"], "COMPLETE");
  EXPECT_EQ(job1["task_origin"], "celery");
  EXPECT_EQ(job2["status"], "FAIL");
  EXPECT_FALSE(job2["finished_at"].is_null());
}

TEST_F(WorkerTest, ConcurrencyRunsOneJobPerSlotAtATime) {
  WorkerOptions o = Options();
  o.concurrency = 2;
  StartWorker(o);
  const auto t0 = Clock::now();
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Send(Json::array({"sleep", 0.4})));
  for (const std::string& id : ids) EXPECT_EQ(Wait(id).result, "slept");
  const auto wall = Clock::now() - t0;
  // Two slots: 4 × 0.4 s take about 0.8 s (not 1.6 s, not 0.4 s).
  EXPECT_GE(wall, milliseconds(750));
  EXPECT_LT(wall, milliseconds(1500));
  StopWorker();
  int prefetch = 0;
  for (const std::string& e : Log()) prefetch += e == "prefetch 1" ? 1 : 0;
  EXPECT_EQ(prefetch, 2) << "one channel with prefetch 1 per slot";
}

TEST_F(WorkerTest, AWorkerThatCannotStartJobsPutsTheMessageBackAndStops) {
  WorkerOptions o = Options();
  o.run_in_process = false;
  o.child_argv = {"/nonexistent/kf", "worker-child"};
  Worker worker(o);
  const std::string id = Send(Json::array({"echo", "x"}));
  std::string error;
  std::thread t([&] {
    try {
      worker.Run();
    } catch (const Error& e) {
      error = e.what();
    }
  });
  t.join();  // stops by itself
  EXPECT_NE(error.find("cannot run jobs"), std::string::npos) << error;
  std::vector<Message> left = hub_.Drain(queue_);
  ASSERT_EQ(left.size(), 1u) << "the message must survive the broken worker";
  EXPECT_EQ(left[0].properties.headers["id"], id);
  EXPECT_EQ(left[0].properties.headers["kf_deliveries"], 0) << "not counted as a lost worker";
}

TEST_F(WorkerTest, EtaInTheFutureDelaysTheJob) {
  StartWorker(Options());
  celery::SendOptions so;
  so.extra_headers = Json{{"eta", celery::FormatIsoTime(static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                                              std::chrono::system_clock::now().time_since_epoch())
                                                                              .count()) /
                                                          1e6 +
                                                      0.5)}};
  const auto t0 = Clock::now();
  EXPECT_EQ(Wait(Send(Json::array({"echo", "late"}), so)).result, "late");
  EXPECT_GE(Clock::now() - t0, milliseconds(400));
  StopWorker();
}

TEST_F(WorkerTest, ClientDeclaresTheQueueBeforePublishing) {
  // No worker has declared the queue yet: the client must, or the message would be dropped.
  const std::string id = Send(Json::array({"echo", "kept"}));
  EXPECT_TRUE(hub_.HasQueue(queue_));
  EXPECT_EQ(hub_.Ready(queue_), 1u);
  StartWorker(Options());
  EXPECT_EQ(Wait(id).result, "kept");
  StopWorker();
}

TEST_F(WorkerTest, CallResendsWhenAnEarlyAckingWorkerIsLost) {
  // A reference-style worker (acks on receipt, no kf_acks_late in STARTED) takes the task and dies; it
  // never answers pings. Call notices and resends with a new id, which a kf worker then runs.
  auto ghost = hub_.Connect();
  celery::DeclareTaskQueue(*ghost, queue_);
  ghost->Consume(queue_, false);
  CallOptions co;
  co.timeout = milliseconds(20000);
  co.liveness_interval = milliseconds(100);
  co.liveness_misses = 2;
  std::vector<std::string> events;
  co.on_event = [&](const std::string& e) { events.push_back(e); };
  std::optional<celery::TaskResult> result;
  std::thread caller([&] {
    celery::SendOptions so;
    so.queue = queue_;
    result = Call(Client(), celery::kSleepTaskName, Json::array({"echo", "second try"}), so, co);
  });
  std::optional<Delivery> d;
  for (int i = 0; i < 100 && !d; ++i) d = ghost->Next(milliseconds(50));
  ASSERT_TRUE(d);
  celery::TaskMessage m = celery::DecodeTaskMessage(d->message);
  ghost->Publish(celery::EncodeResultMessage(
      celery::TaskResult{m.id, "STARTED", Json{{"pid", 1}, {"hostname", "ghost@nowhere"}}, nullptr, Json::array()},
      m.reply_to, m.correlation_id));
  ghost->Ack(d->delivery_tag);
  ghost.reset();
  StartWorker(Options());
  caller.join();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, "SUCCESS");
  EXPECT_EQ(result->result, "second try");
  EXPECT_NE(result->task_id, m.id);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0], "started on ghost@nowhere");
  EXPECT_NE(events[1].find("resending with a new task id: worker ghost@nowhere was lost"), std::string::npos) << events[1];
  StopWorker();
}

TEST_F(WorkerTest, WaitAnyReturnsEveryResultOfABatchOnce) {
  StartWorker(Options());
  std::set<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.insert(Send(Json::array({"echo", i})));
  std::set<std::string> got;
  while (got.size() < 5) {
    auto r = Client().WaitAny(ids, milliseconds(5000));
    ASSERT_TRUE(r);
    EXPECT_TRUE(got.insert(r->task_id).second) << "returned twice";
  }
  EXPECT_FALSE(Client().WaitAny(ids, milliseconds(100)));
  StopWorker();
}

TEST_F(WorkerTest, CallGivesUpAfterItsSendsWithoutAResult) {
  CallOptions co;
  co.timeout = milliseconds(200);
  celery::SendOptions so;
  so.queue = queue_;
  Error e = testing::ExpectError(ErrorKind::kLimit, [&] { Call(Client(), celery::kSleepTaskName, Json::array({"echo", 1}), so, co); });
  EXPECT_NE(std::string(e.what()).find("after 2 send(s) to queue " + queue_), std::string::npos) << e.what();
  EXPECT_EQ(hub_.Ready(queue_), 2u);  // the original and the resend wait for a worker
}

TEST(WorkerNodeName, ExpandsCeleryVariables) {
  EXPECT_EQ(ExpandNodeName("").rfind("kf@", 0), 0u);
  EXPECT_EQ(ExpandNodeName("gpu1@%h").rfind("gpu1@", 0), 0u);
  EXPECT_NE(ExpandNodeName("w%%x@h").find("w%x@h"), std::string::npos);
  EXPECT_NE(ExpandNodeName("solo").find('@'), std::string::npos);
}

TEST(WorkerOptionsTest, RefusesIncompleteOptions) {
  WorkerOptions o;
  testing::ExpectError(ErrorKind::kInvalidArgument, [&] { Worker w(o); });
  MemoryBroker hub;
  o.connect = hub.Factory();
  testing::ExpectError(ErrorKind::kInvalidArgument, [&] { Worker w(o); });
  o.queues = {"q"};
  o.concurrency = 0;
  testing::ExpectError(ErrorKind::kInvalidArgument, [&] { Worker w(o); });
}

TEST(WorkerStoreUrl, OpensStoreUrlsAndRefusesUnknownSchemes) {
  testing::TempDir dir;
  EXPECT_EQ(OpenWorkerStore(""), nullptr);
  EXPECT_NE(OpenWorkerStore("sqlite:///" + (dir.path() / "a.sqlite3").string()), nullptr);
  EXPECT_NE(OpenWorkerStore((dir.path() / "b.sqlite3").string()), nullptr);
  // Regression: an unknown scheme must not become a SQLite file under a directory named "mysql:".
  testing::ExpectError(ErrorKind::kInvalidArgument, [] { OpenWorkerStore("mysql://root@127.0.0.1:3306/kf"); });
}

}  // namespace
}  // namespace kf
