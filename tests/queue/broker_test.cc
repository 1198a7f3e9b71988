// The Broker contract, on the in-memory backend and on a real RabbitMQ (the same cases run on both, so the
// fake is held to what the server does): routing, prefetch, acks, redelivery when a connection dies,
// channel errors, header field types, the message size limit.
#include <set>

#include <gtest/gtest.h>

#include "kernelfoundry/celery.hpp"
#include "kernelfoundry/queue.hpp"
#include "services/rabbitmq.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using std::chrono::milliseconds;
using testing::ExpectError;

// A factory of connections to one broker, named for the test output.
struct Backend {
  std::string name;
  std::shared_ptr<MemoryBroker> memory;  // set for the fake
  std::string url;                       // set for RabbitMQ
  std::unique_ptr<Broker> Connect(size_t max_bytes = kDefaultMaxMessageBytes) const {
    if (memory) {
      memory->set_max_message_bytes(max_bytes);
      return memory->Connect();
    }
    AmqpOptions o;
    o.max_message_bytes = max_bytes;
    return ConnectAmqp(ParseBrokerUrl(url), o);
  }
};

class BrokerContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      b_.name = "memory";
      b_.memory = std::make_shared<MemoryBroker>();
    } else {
      b_.url = testing::TestBroker();
      if (b_.url.empty()) GTEST_SKIP() << "rabbitmq-server is not installed";
      b_.name = "rabbitmq";
    }
    q_ = "kf_test_" + NewUuid();
  }
  void TearDown() override {
    if (b_.name.empty()) return;
    try {
      auto c = b_.Connect();
      c->DeleteQueue(q_);
      c->DeleteQueue(q_ + "_b");
    } catch (const Error&) {
    }
  }
  Message Msg(const std::string& body) {
    Message m;
    m.routing_key = q_;
    m.body = body;
    m.properties.content_type = "application/json";
    return m;
  }
  std::optional<Delivery> NextWithin(Broker& c, int ms = 3000) {
    auto deadline = std::chrono::steady_clock::now() + milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto d = c.Next(milliseconds(100))) return d;
    }
    return std::nullopt;
  }
  Backend b_;
  std::string q_;
};

TEST_P(BrokerContract, PublishConsumeAckKeepsPropertiesAndHeaderTypes) {
  auto c = b_.Connect();
  celery::DeclareTaskQueue(*c, q_);
  Message m = Msg("hello");
  m.properties.correlation_id = "cid";
  m.properties.reply_to = "rq";
  m.properties.delivery_mode = 2;
  m.properties.priority = 0;
  m.properties.headers = Json{{"s", "text"},   {"t", true},     {"i", -7},        {"big", int64_t{5000000000}},
                              {"d", 2.5},      {"v", nullptr},  {"a", Json::array({1, "x", nullptr})},
                              {"f", Json{{"inner", Json::array({150, 130})}}}};
  c->Publish(m);
  c->SetPrefetch(1);
  std::string tag = c->Consume(q_, false);
  auto d = NextWithin(*c);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message.body, "hello");
  EXPECT_EQ(d->queue, q_);
  EXPECT_EQ(d->consumer_tag, tag);
  EXPECT_FALSE(d->redelivered);
  EXPECT_EQ(d->message.properties.correlation_id, "cid");
  EXPECT_EQ(d->message.properties.reply_to, "rq");
  EXPECT_EQ(d->message.properties.content_type, "application/json");
  EXPECT_EQ(d->message.properties.delivery_mode, 2);
  EXPECT_EQ(d->message.properties.headers, m.properties.headers) << b_.name;
  c->Ack(d->delivery_tag);
  EXPECT_FALSE(c->Next(milliseconds(200)));
}

TEST_P(BrokerContract, PrefetchOneHoldsTheSecondMessageUntilTheAck) {
  auto c = b_.Connect();
  celery::DeclareTaskQueue(*c, q_);
  c->Publish(Msg("1"));
  c->Publish(Msg("2"));
  c->SetPrefetch(1);
  c->Consume(q_, false);
  auto first = NextWithin(*c);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->message.body, "1");
  EXPECT_FALSE(c->Next(milliseconds(500))) << "prefetch 1 must hold the second message";
  c->Ack(first->delivery_tag);
  auto second = NextWithin(*c);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->message.body, "2");
  c->Ack(second->delivery_tag);
}

TEST_P(BrokerContract, UnackedMessageIsRedeliveredWhenItsConnectionDies) {
  auto producer = b_.Connect();
  celery::DeclareTaskQueue(*producer, q_);
  producer->Publish(Msg("job"));
  {
    auto dying = b_.Connect();
    dying->SetPrefetch(1);
    dying->Consume(q_, false);
    auto d = NextWithin(*dying);
    ASSERT_TRUE(d);
    EXPECT_FALSE(d->redelivered);
  }  // closed without an ack (as a killed process's socket)
  auto other = b_.Connect();
  other->SetPrefetch(1);
  other->Consume(q_, false);
  auto again = NextWithin(*other, 5000);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->message.body, "job");
  EXPECT_TRUE(again->redelivered);
  other->Ack(again->delivery_tag);
}

TEST_P(BrokerContract, RejectRequeuesOrDrops) {
  auto c = b_.Connect();
  celery::DeclareTaskQueue(*c, q_);
  c->Publish(Msg("a"));
  c->SetPrefetch(1);
  c->Consume(q_, false);
  auto d = NextWithin(*c);
  ASSERT_TRUE(d);
  c->Reject(d->delivery_tag, /*requeue=*/true);
  auto again = NextWithin(*c);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->redelivered);
  c->Reject(again->delivery_tag, /*requeue=*/false);
  EXPECT_FALSE(c->Next(milliseconds(300)));
}

TEST_P(BrokerContract, InequivalentRedeclareIsAChannelError) {
  auto c = b_.Connect();
  celery::DeclareTaskQueue(*c, q_);
  QueueSpec other = celery::TaskQueue(q_);
  other.arguments = Json{{"x-max-length", 10}};
  Error e = ExpectError(ErrorKind::kIO, [&] { c->DeclareQueue(other); });
  EXPECT_NE(std::string(e.what()).find("406"), std::string::npos) << e.what();
  ExpectError(ErrorKind::kIO, [&] { c->Publish(Msg("x")); });  // the connection is gone
}

TEST_P(BrokerContract, FanoutReachesEveryBoundQueueAndDefaultExchangeNeedsTheQueue) {
  auto c = b_.Connect();
  const std::string ex = "kf_test_fanout_" + NewUuid();
  c->DeclareExchange(ExchangeSpec{ex, "fanout", false, true});
  c->DeclareQueue(QueueSpec{q_, false, false, false, Json::object()});
  c->DeclareQueue(QueueSpec{q_ + "_b", false, false, false, Json::object()});
  c->BindQueue(q_, ex, "");
  c->BindQueue(q_ + "_b", ex, "");
  Message m = Msg("all");
  m.exchange = ex;
  m.routing_key = "";
  c->Publish(m);
  Message nowhere = Msg("lost");
  nowhere.routing_key = "kf_no_such_queue_" + NewUuid();
  c->Publish(nowhere);  // routed nowhere: dropped, not an error (why clients declare before publishing)
  c->Consume(q_, true);
  c->Consume(q_ + "_b", true);
  std::multiset<std::string> got;
  for (int i = 0; i < 2; ++i) {
    auto d = NextWithin(*c);
    ASSERT_TRUE(d);
    got.insert(d->queue);
    EXPECT_EQ(d->message.body, "all");
  }
  EXPECT_EQ(got, (std::multiset<std::string>{q_, q_ + "_b"}));
}

TEST_P(BrokerContract, BodiesOverTheLimitAreRefusedBeforeSending) {
  auto c = b_.Connect(/*max_bytes=*/1000);
  celery::DeclareTaskQueue(*c, q_);
  Error e = ExpectError(ErrorKind::kLimit, [&] { c->Publish(Msg(std::string(1001, 'x'))); });
  EXPECT_NE(std::string(e.what()).find("1001"), std::string::npos);
  c->Publish(Msg(std::string(1000, 'x')));  // the connection is still fine
}

INSTANTIATE_TEST_SUITE_P(Backends, BrokerContract, ::testing::Values("memory", "rabbitmq"),
                         [](const auto& param_info) { return param_info.param; });

TEST(MemoryBrokerTest, DropConnectionsRequeuesAndBreaksConnections) {
  MemoryBroker hub;
  auto c = hub.Connect();
  celery::DeclareTaskQueue(*c, "q");
  Message m;
  m.routing_key = "q";
  m.body = "x";
  c->Publish(m);
  c->Consume("q", false);
  ASSERT_TRUE(c->Next(milliseconds(100)));
  EXPECT_EQ(hub.Unacked("q"), 1u);
  hub.DropConnections();
  ExpectError(ErrorKind::kIO, [&] { c->Next(milliseconds(10)); });
  EXPECT_EQ(hub.Ready("q"), 1u);
  EXPECT_EQ(hub.Unacked("q"), 0u);
  auto fresh = hub.Connect();
  fresh->Consume("q", false);
  auto d = fresh->Next(milliseconds(100));
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->redelivered);
}

TEST(AmqpBrokerTest, UnreachableBrokerIsAnIoErrorNamingTheUrl) {
  Error e = ExpectError(ErrorKind::kIO, [] { ConnectAmqp(ParseBrokerUrl("amqp://guest:secret@127.0.0.1:1//")); });
  EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos);
  EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << "the password must not be printed";
}

TEST(AmqpBrokerTest, ASilentConnectionDiesOfMissedHeartbeats) {
  // Why the worker services its connection while a job runs: with a 1 s heartbeat, a connection that makes
  // no call for a few seconds is closed by the broker (or given up by rabbitmq-c).
  const std::string url = testing::TestBroker();
  if (url.empty()) GTEST_SKIP() << "rabbitmq-server is not installed";
  AmqpOptions o;
  o.heartbeat_s = 1;
  auto silent = ConnectAmqp(ParseBrokerUrl(url), o);
  auto busy = ConnectAmqp(ParseBrokerUrl(url), o);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < until) busy->Next(milliseconds(200));
  ExpectError(ErrorKind::kIO, [&] {
    silent->Next(milliseconds(100));
    silent->DeclareQueue(QueueSpec{"kf_test_" + NewUuid(), false, false, true, Json::object()});
  });
  busy->DeclareQueue(QueueSpec{"kf_test_" + NewUuid(), false, false, true, Json::object()});  // still fine
}

TEST(AmqpBrokerTest, WrongPasswordIsRefusedAtLogin) {
  const std::string url = testing::TestBroker();
  if (url.empty()) GTEST_SKIP() << "rabbitmq-server is not installed";
  BrokerUrl u = ParseBrokerUrl(url);
  u.password = "wrong";
  Error e = ExpectError(ErrorKind::kIO, [&] { ConnectAmqp(u); });
  EXPECT_NE(std::string(e.what()).find("login"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace kf
