// Admission (src/worker/admission.hpp): each typed outcome of a delivered message on the in-memory broker —
// run, run after an eta, requeue (counted redelivery, stopping worker), reply (poison limit, revoked, canvas,
// expired), not registered, bad message, drop — and the slot acting on a requeue while it waits for an eta.
// The same outcomes through a whole worker: worker_test.cc, worker_cancel_test.cc.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "core/clock.hpp"
#include "kernelfoundry/celery.hpp"
#include "kernelfoundry/queue.hpp"
#include "test_util.hpp"
#include "worker/admission.hpp"
#include "worker/in_process_worker_util.hpp"

namespace kf::worker_internal {
namespace {

using std::chrono::milliseconds;

class AdmitTest : public ::testing::Test {
 protected:
  // Publishes a test_sleep task (with `options`' headers) to the queue and returns its delivery to a consumer.
  Delivery Deliver(celery::SendOptions options = {}) {
    auto producer = hub_.Connect();
    celery::DeclareTaskQueue(*producer, kQueue);
    options.queue = kQueue;
    options.reply_to = "reply.admission";
    producer->Publish(celery::EncodeTaskMessage(NewUuid(), task_, Json::array({0.0, "x"}), Json::object(), options));
    consumer_ = hub_.Connect();
    consumer_->SetPrefetch(1);
    consumer_->Consume(kQueue, false);
    std::optional<Delivery> d = consumer_->Next(milliseconds(500));
    EXPECT_TRUE(d.has_value());
    return d.value_or(Delivery{});
  }
  // The facts the slot would see for `d` (nothing revoked, not stopping, registered, now).
  static AdmitFacts FactsOf(const Delivery& d) {
    AdmitFacts f;
    f.redelivered = d.redelivered;
    const Json& h = d.message.properties.headers;
    f.prior = h.is_object() && h.contains("kf_deliveries") ? h["kf_deliveries"].get<int>() : 0;
    f.now = UnixTimeNow();
    f.max_deliveries = 3;
    return f;
  }
  Admission AdmitDelivery(const Delivery& d, const AdmitFacts& facts) {
    return Admit(celery::DecodeTaskMessage(d.message), facts);
  }

  static constexpr const char* kQueue = "admission_test";
  std::string task_{celery::kSleepTaskName};
  MemoryBroker hub_;
  std::unique_ptr<Broker> consumer_;
};

TEST_F(AdmitTest, AFirstDeliveryRunsAsDeliveryOne) {
  const Delivery d = Deliver();
  const Admission a = AdmitDelivery(d, FactsOf(d));
  EXPECT_EQ(a.action, AdmitAction::kRun);
  EXPECT_EQ(a.delivery, 1);
  EXPECT_EQ(a.prior, 0);
  EXPECT_FALSE(a.eta.has_value());
}

TEST_F(AdmitTest, ARedeliveryBelowThePoisonLimitIsRequeuedCounted) {
  Deliver();
  consumer_.reset();  // closed without an ack: the broker redelivers it
  consumer_ = hub_.Connect();
  consumer_->Consume(kQueue, false);
  std::optional<Delivery> d = consumer_->Next(milliseconds(500));
  ASSERT_TRUE(d.has_value());
  ASSERT_TRUE(d->redelivered);
  const Admission a = AdmitDelivery(*d, FactsOf(*d));
  EXPECT_EQ(a.action, AdmitAction::kRequeue);
  EXPECT_EQ(a.prior, 1);  // one lost worker counted in the copy put back
}

TEST_F(AdmitTest, ARedeliveryAtThePoisonLimitRepliesWorkerLostError) {
  celery::SendOptions o;
  o.extra_headers = Json{{"kf_deliveries", 2}};
  const Delivery d = Deliver(o);
  AdmitFacts f = FactsOf(d);
  f.redelivered = true;
  const Admission a = AdmitDelivery(d, f);
  EXPECT_EQ(a.action, AdmitAction::kReply);
  EXPECT_EQ(a.status, WorkerJobStatus::kFailure);
  EXPECT_EQ(a.failure.exc_type, "WorkerLostError");
  EXPECT_EQ(a.failure.exc_module, "billiard.exceptions");
  EXPECT_NE(a.failure.message.find("each of 3 deliveries"), std::string::npos) << a.failure.message;
  EXPECT_EQ(a.delivery, 3);
}

TEST_F(AdmitTest, ARedeliveryAnsweredAfterAReconnectIsDropped) {
  const Delivery d = Deliver();
  AdmitFacts f = FactsOf(d);
  f.redelivered = true;
  f.answered_after_loss = true;
  EXPECT_EQ(AdmitDelivery(d, f).action, AdmitAction::kDrop);
}

TEST_F(AdmitTest, AStoppingWorkerRequeuesUncounted) {
  celery::SendOptions o;
  o.extra_headers = Json{{"kf_deliveries", 1}};
  const Delivery d = Deliver(o);
  AdmitFacts f = FactsOf(d);
  f.stopping = true;
  const Admission a = AdmitDelivery(d, f);
  EXPECT_EQ(a.action, AdmitAction::kRequeue);
  EXPECT_EQ(a.prior, 1);
}

TEST_F(AdmitTest, ARevokedIdRepliesRevokedBeforeStarting) {
  const Delivery d = Deliver();
  AdmitFacts f = FactsOf(d);
  f.revoked = true;
  const Admission a = AdmitDelivery(d, f);
  EXPECT_EQ(a.action, AdmitAction::kReply);
  EXPECT_EQ(a.status, WorkerJobStatus::kRevoked);
  EXPECT_EQ(a.failure.exc_type, "TaskRevokedError");
  EXPECT_EQ(a.failure.exc_module, "celery.exceptions");
  EXPECT_EQ(a.failure.message, "revoked");
  EXPECT_EQ(a.delivery, 1);
}

TEST_F(AdmitTest, AnUnknownTaskIsNotRegistered) {
  task_ = "kernelfoundry.eval_pipeline.tasks.build_image.build_image";
  const Delivery d = Deliver();
  AdmitFacts f = FactsOf(d);
  f.registered = false;
  EXPECT_EQ(AdmitDelivery(d, f).action, AdmitAction::kNotRegistered);
}

TEST_F(AdmitTest, CeleryCanvasRepliesNotImplemented) {
  const Delivery d = Deliver();
  celery::TaskMessage m = celery::DecodeTaskMessage(d.message);
  m.embed["chain"] = Json::array({Json{{"task", "next"}}});
  const Admission a = Admit(m, FactsOf(d));
  EXPECT_EQ(a.action, AdmitAction::kReply);
  EXPECT_EQ(a.status, WorkerJobStatus::kFailure);
  EXPECT_EQ(a.failure.exc_type, "NotImplementedError");
  EXPECT_NE(a.failure.message.find("'chain'"), std::string::npos) << a.failure.message;
}

TEST_F(AdmitTest, AnExpiredMessageRepliesRevokedAndAnUnexpiredOneRuns) {
  celery::SendOptions o;
  o.expires = celery::FormatIsoTime(1.0);  // 1970
  Delivery d = Deliver(o);
  Admission a = AdmitDelivery(d, FactsOf(d));
  EXPECT_EQ(a.action, AdmitAction::kReply);
  EXPECT_EQ(a.status, WorkerJobStatus::kRevoked);
  EXPECT_EQ(a.failure.message, "expired");
  consumer_->Ack(d.delivery_tag);
  o.expires = celery::FormatIsoTime(4e9);  // 2096
  d = Deliver(o);
  EXPECT_EQ(AdmitDelivery(d, FactsOf(d)).action, AdmitAction::kRun);
}

TEST_F(AdmitTest, AnEtaInTheFutureRunsNotBeforeIt) {
  const double eta = UnixTimeNow() + 60;
  celery::SendOptions o;
  o.extra_headers = Json{{"eta", celery::FormatIsoTime(eta)}};
  const Delivery d = Deliver(o);
  const Admission a = AdmitDelivery(d, FactsOf(d));
  EXPECT_EQ(a.action, AdmitAction::kRun);
  ASSERT_TRUE(a.eta.has_value());
  EXPECT_NEAR(*a.eta, eta, 1e-3);
}

TEST_F(AdmitTest, TimesThatDoNotParseMakeABadMessage) {
  for (const char* header : {"expires", "eta"}) {
    celery::SendOptions o;
    o.extra_headers = Json{{header, "next tuesday"}};
    const Delivery d = Deliver(o);
    const Admission a = AdmitDelivery(d, FactsOf(d));
    EXPECT_EQ(a.action, AdmitAction::kBadMessage) << header;
    EXPECT_NE(a.error.find("next tuesday"), std::string::npos) << header << ": " << a.error;
    consumer_->Ack(d.delivery_tag);
  }
}

// The slot acting on a requeue: a worker asked to stop while it holds a message for its eta puts the message
// back uncounted, and it runs on the next worker.
class AdmissionSlot : public testing::InProcessWorkerTest {
 protected:
  AdmissionSlot() : InProcessWorkerTest("admission_slot") {}
};

TEST_F(AdmissionSlot, AStopWhileWaitingForTheEtaPutsTheMessageBackUncounted) {
  WorkerOptions o = BaseOptions("kftest@%h");
  o.body = [](std::string_view, const Json& args, const Json&, const TaskBodyContext&) {
    TaskBodyResult r;
    r.result = args.at(1);
    return r;
  };
  StartWorker(o);
  celery::SendOptions so;
  so.extra_headers = Json{{"eta", celery::FormatIsoTime(UnixTimeNow() + 3)}};
  const std::string id = SendTask(celery::kSleepTaskName, Json::array({0.0, "late"}), so);
  for (int i = 0; i < 100 && hub_.Unacked(queue_) == 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  ASSERT_EQ(hub_.Unacked(queue_), 1u);  // held by the slot until its eta
  StopWorker();
  EXPECT_EQ(hub_.Ready(queue_), 1u);  // put back
  EXPECT_FALSE(Client().WaitAny({id}, milliseconds(100)).has_value());  // not answered
  std::vector<Message> back = hub_.Drain(queue_);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].properties.headers.value("kf_deliveries", -1), 0);  // uncounted
  EXPECT_EQ(celery::DecodeTaskMessage(back[0]).id, id);
}

}  // namespace
}  // namespace kf::worker_internal
