// The Celery protocol codec: task messages, rpc:// results, remote control, topology, serialization, URLs
// (celery-interop.md §1.2, §2.1–§2.3, §2.6, §4.1).
#include <cstdlib>

#include <gtest/gtest.h>

#include "kernelfoundry/celery.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::ExpectError;

TEST(CeleryTaskMessage, EncodesTheReferenceHeaderSetAndProperties) {
  celery::SendOptions o;
  o.queue = "build_custom_task_sycl";
  o.reply_to = "reply-oid";
  o.retries = 1;
  o.hard_time_limit = 150;
  o.soft_time_limit = 130;
  Json task = Json{{"config", Json{{"language", "sycl"}}}};
  Message m = celery::EncodeTaskMessage("id-1", celery::kBuildTaskName, Json::array({task}), Json::object(), o);
  EXPECT_EQ(m.exchange, "");
  EXPECT_EQ(m.routing_key, "build_custom_task_sycl");
  EXPECT_EQ(m.properties.content_type, "application/x-msgpack");
  EXPECT_EQ(m.properties.content_encoding, "binary");
  EXPECT_EQ(m.properties.delivery_mode, 2);
  EXPECT_EQ(m.properties.priority, 0);
  EXPECT_EQ(m.properties.correlation_id, "id-1");
  EXPECT_EQ(m.properties.reply_to, "reply-oid");
  const Json& h = m.properties.headers;
  std::vector<std::string> keys;
  for (auto it = h.begin(); it != h.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"lang", "task", "id", "shadow", "eta", "expires", "group", "group_index",
                                            "retries", "timelimit", "root_id", "parent_id", "argsrepr", "kwargsrepr",
                                            "origin", "ignore_result"}));
  EXPECT_EQ(h["lang"], "py");
  EXPECT_EQ(h["task"], std::string(celery::kBuildTaskName));
  EXPECT_EQ(h["timelimit"], Json::array({150, 130}));  // hard first, as Celery's code (not its docs)
  EXPECT_EQ(h["retries"], 1);
  EXPECT_EQ(h["root_id"], "id-1");
  EXPECT_TRUE(h["parent_id"].is_null());
  EXPECT_EQ(h["ignore_result"], false);
  EXPECT_EQ(h["origin"].get<std::string>().rfind("gen", 0), 0u);
  // Observed Celery bytes start 93 91 8x: array(3), args array(1), the task map.
  ASSERT_GE(m.body.size(), 3u);
  EXPECT_EQ(static_cast<unsigned char>(m.body[0]), 0x93);
  EXPECT_EQ(static_cast<unsigned char>(m.body[1]), 0x91);
  EXPECT_EQ(static_cast<unsigned char>(m.body[2]) & 0xf0, 0x80);

  celery::TaskMessage back = celery::DecodeTaskMessage(m);
  EXPECT_EQ(back.id, "id-1");
  EXPECT_EQ(back.task, std::string(celery::kBuildTaskName));
  EXPECT_EQ(back.args, Json::array({task}));
  EXPECT_EQ(back.kwargs, Json::object());
  EXPECT_EQ(back.hard_time_limit, 150);
  EXPECT_EQ(back.soft_time_limit, 130);
  EXPECT_EQ(back.retries, 1);
  EXPECT_TRUE(back.embed["chain"].is_null());
}

TEST(CeleryTaskMessage, DecodesAMinimalJsonMessage) {
  Message m;
  m.properties.content_type = "application/json";
  m.properties.content_encoding = "utf-8";
  m.properties.correlation_id = "abc";
  m.properties.reply_to = "r";
  m.properties.headers = Json{{"lang", "py"}, {"task", "t"}, {"id", "abc"}, {"timelimit", Json::array({nullptr, nullptr})}};
  m.body = R"([[1, "two"], {"k": 3}, {"callbacks": null, "errbacks": null, "chain": null, "chord": null}])";
  celery::TaskMessage t = celery::DecodeTaskMessage(m);
  EXPECT_EQ(t.args, Json::array({1, "two"}));
  EXPECT_EQ(t.kwargs, (Json{{"k", 3}}));
  EXPECT_FALSE(t.hard_time_limit.has_value());
  EXPECT_EQ(t.content_type, celery::ContentType::kJson);
}

TEST(CeleryTaskMessage, NamesWhatIsWrongWithABadMessage) {
  Message m;
  m.properties.content_type = "application/json";
  m.properties.headers = Json{{"id", "x"}};
  m.body = "[[], {}, {}]";
  EXPECT_EQ(ExpectError(ErrorKind::kParse, [&] { celery::DecodeTaskMessage(m); }).field(), "headers.task");

  m.properties.headers = Json{{"id", "x"}, {"task", "t"}};
  m.body = "not json";
  Error e = ExpectError(ErrorKind::kParse, [&] { celery::DecodeTaskMessage(m); });
  EXPECT_EQ(e.field(), "body");
  EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos);

  m.body = R"({"task": "t", "id": "x", "args": []})";  // protocol 1 body
  EXPECT_EQ(ExpectError(ErrorKind::kParse, [&] { celery::DecodeTaskMessage(m); }).field(), "body");

  m.body = R"(["a", {}, null])";
  EXPECT_EQ(ExpectError(ErrorKind::kParse, [&] { celery::DecodeTaskMessage(m); }).field(), "body[0]");

  m.properties.content_type = "application/x-msgpack";
  m.body = "\xc1";  // never used in msgpack
  EXPECT_NE(std::string(ExpectError(ErrorKind::kParse, [&] { celery::DecodeTaskMessage(m); }).what()).find("msgpack"),
            std::string::npos);

  m.properties.content_type = "application/x-python-serialize";
  EXPECT_EQ(ExpectError(ErrorKind::kUnsupported, [&] { celery::DecodeTaskMessage(m); }).field(), "content_type");

  m.properties.content_type = "application/json";
  m.body = "[[], {}]";
  m.properties.headers = Json{{"id", "x"}, {"task", "t"}, {"timelimit", 5}};
  EXPECT_EQ(ExpectError(ErrorKind::kParse, [&] { celery::DecodeTaskMessage(m); }).field(), "headers.timelimit");
}

TEST(CelerySerialization, MsgpackStringsAreValidUtf8AndKeysStrings) {
  Json v = Json{{"stdout", std::string("ok \xff\xfe bad")}, {std::string("k\xff"), 1}};
  std::string bytes = celery::SerializeBody(v, celery::ContentType::kMsgpack);
  Json back = celery::DeserializeBody(bytes, "application/x-msgpack");
  EXPECT_EQ(back["stdout"], "ok \xef\xbf\xbd\xef\xbf\xbd bad");
  EXPECT_TRUE(back.contains("k\xef\xbf\xbd"));
  // A map with an integer key (Python's strict_map_key refuses it; so do we).
  const std::string int_key("\x81\x01\x02", 3);
  ExpectError(ErrorKind::kParse, [&] { celery::DeserializeBody(int_key, "application/x-msgpack"); });
  // bin values (Python bytes) arrive as strings.
  const std::string bin("\xc4\x03" "abc", 5);
  EXPECT_EQ(celery::DeserializeBody(bin, "application/x-msgpack"), "abc");
  // Floats survive as numbers, None as nil.
  Json f = celery::DeserializeBody(celery::SerializeBody(Json::array({0.1, 1.5, nullptr}), celery::ContentType::kMsgpack),
                                   "application/x-msgpack");
  EXPECT_DOUBLE_EQ(f[0].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(f[1].get<double>(), 1.5);
  EXPECT_TRUE(f[2].is_null());
}

TEST(CelerySerialization, JsonUnwrapsKombuEnvelopes) {
  Json v = celery::DeserializeBody(
      R"({"a": {"__type__": "bytes", "__value__": "hi"}, "b": {"__type__": "base64", "__value__": "aGk="},
          "c": {"__type__": "datetime", "__value__": "2026-01-01T00:00:00"}, "d": {"__type__": "x", "y": 1}})",
      "application/json");
  EXPECT_EQ(v["a"], "hi");
  EXPECT_EQ(v["b"], "hi");
  EXPECT_EQ(v["c"], "2026-01-01T00:00:00");
  EXPECT_EQ(v["d"]["y"], 1);  // not exactly {__type__, __value__}: left alone
  ExpectError(ErrorKind::kParse,
              [] { celery::DeserializeBody(R"({"__type__": "pickle", "__value__": "x"})", "application/json"); });
}

TEST(CeleryResult, ReplyMessageHasTheRpcShape) {
  celery::TaskResult r{"tid", std::string(celery::kFailure),
                       celery::ExceptionInfo("TimeLimitExceeded", "150", "celery.exceptions"), "tb", Json::array()};
  Message m = celery::EncodeResultMessage(r, "reply-q", "corr");
  EXPECT_EQ(m.exchange, "");
  EXPECT_EQ(m.routing_key, "reply-q");
  EXPECT_EQ(m.properties.correlation_id, "corr");
  EXPECT_EQ(m.properties.delivery_mode, 1);
  EXPECT_EQ(m.properties.content_type, "application/x-msgpack");
  EXPECT_TRUE(m.properties.reply_to.empty());
  Json body = celery::DeserializeBody(m.body, m.properties.content_type);
  std::vector<std::string> keys;
  for (auto it = body.begin(); it != body.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"task_id", "status", "result", "traceback", "children"}));
  EXPECT_EQ(body["result"], (Json{{"exc_type", "TimeLimitExceeded"}, {"exc_message", Json::array({"150"})},
                                  {"exc_module", "celery.exceptions"}}));
  celery::TaskResult back = celery::DecodeResultMessage(m);
  EXPECT_EQ(back.task_id, "tid");
  EXPECT_EQ(back.status, "FAILURE");
  EXPECT_TRUE(celery::IsReadyState(back.status));
  EXPECT_FALSE(celery::IsReadyState("STARTED"));
}

TEST(CeleryTopology, DeclarationsAreCelerys) {
  QueueSpec q = celery::TaskQueue("test_custom_task_bmg");
  EXPECT_TRUE(q.durable);
  EXPECT_FALSE(q.exclusive);
  EXPECT_FALSE(q.auto_delete);
  EXPECT_TRUE(q.arguments.empty());
  ExchangeSpec e = celery::TaskExchange("test_custom_task_bmg");
  EXPECT_EQ(e.type, "direct");
  EXPECT_TRUE(e.durable);
  QueueSpec r = celery::ReplyQueue("oid");
  EXPECT_FALSE(r.durable);
  EXPECT_TRUE(r.auto_delete);
  EXPECT_EQ(r.arguments, (Json{{"x-expires", 86400000}}));
  QueueSpec p = celery::PidboxQueue("kf@host");
  EXPECT_EQ(p.name, "kf@host.celery.pidbox");
  EXPECT_FALSE(p.durable);
  EXPECT_TRUE(p.auto_delete);
  EXPECT_EQ(p.arguments, (Json{{"x-expires", 10000}, {"x-message-ttl", 300000}}));
  EXPECT_EQ(celery::PidboxExchange().type, "fanout");
  EXPECT_FALSE(celery::PidboxExchange().durable);
  EXPECT_EQ(celery::PidboxReplyExchange().type, "direct");
  EXPECT_EQ(celery::BuildQueueName("SYCL"), "build_custom_task_sycl");
  EXPECT_EQ(celery::TestQueueName("Ampere"), "test_custom_task_Ampere");
  EXPECT_EQ(celery::QueueAsDict("q")["name"], "q");
  // kombu's key order (what `active_queues` replies carry on the wire).
  EXPECT_EQ(celery::QueueAsDict("q").dump(),
            R"({"name":"q","exchange":{"name":"q","type":"direct","arguments":null,"durable":true,"passive":false,)"
            R"("auto_delete":false,"delivery_mode":null,"no_declare":false},"routing_key":"q","queue_arguments":null,)"
            R"("binding_arguments":null,"consumer_arguments":null,"durable":true,"exclusive":false,"auto_delete":false,)"
            R"("no_ack":false,"alias":null,"bindings":[],"no_declare":null,"expires":null,"message_ttl":null,)"
            R"("max_length":null,"max_length_bytes":null,"max_priority":null})");
}

TEST(CeleryControl, RequestAndReplyRoundTrip) {
  Message req = celery::EncodeControlRequest("active_queues", Json::object(), "client-oid", "ticket-1", 5.0, 7);
  EXPECT_EQ(req.exchange, "celery.pidbox");
  celery::ControlRequest r = celery::DecodeControlRequest(req);
  EXPECT_EQ(r.method, "active_queues");
  EXPECT_EQ(r.ticket, "ticket-1");
  EXPECT_EQ(r.reply_exchange, "reply.celery.pidbox");
  EXPECT_EQ(r.reply_routing_key, "client-oid");
  EXPECT_FALSE(r.destination.has_value());
  EXPECT_GT(r.expires, 0);
  EXPECT_TRUE(celery::ControlRequestIsFor(r, "kf@a", r.expires - 1));
  EXPECT_FALSE(celery::ControlRequestIsFor(r, "kf@a", r.expires + 1));  // expired: dropped
  Message dest = celery::EncodeControlRequest("ping", Json::object(), "o", "t", 5.0, 1, {"kf@b"});
  celery::ControlRequest d = celery::DecodeControlRequest(dest);
  EXPECT_FALSE(celery::ControlRequestIsFor(d, "kf@a", d.expires - 1));
  EXPECT_TRUE(celery::ControlRequestIsFor(d, "kf@b", d.expires - 1));

  Message reply = celery::EncodeControlReply(r, "kf@a", Json{{"ok", "pong"}}, 9);
  EXPECT_EQ(reply.exchange, "reply.celery.pidbox");
  EXPECT_EQ(reply.routing_key, "client-oid");
  EXPECT_EQ(reply.properties.headers["ticket"], "ticket-1");
  EXPECT_EQ(reply.properties.headers["clock"], 9);
  celery::ControlReply back = celery::DecodeControlReply(reply);
  EXPECT_EQ(back.node, "kf@a");
  EXPECT_EQ(back.ticket, "ticket-1");
  EXPECT_EQ(back.data["ok"], "pong");
}

TEST(CeleryControl, ARevokeWantsNoReplyAndNeverExpires) {
  // As app.control.revoke(ids, terminate=True) sends it: no ticket, no reply_to, expires 0.
  Message req = celery::EncodeControlRequest(
      "revoke", Json{{"task_id", Json::array({"id-1", "id-2"})}, {"terminate", true}, {"signal", "SIGTERM"}}, "", "", 0, 3);
  Json body = celery::DeserializeBody(req.body, req.properties.content_type);
  EXPECT_FALSE(body.contains("ticket"));
  EXPECT_FALSE(body.contains("reply_to"));
  EXPECT_EQ(body["arguments"]["task_id"], Json::array({"id-1", "id-2"}));
  EXPECT_EQ(req.properties.headers["expires"], 0);
  celery::ControlRequest r = celery::DecodeControlRequest(req);
  EXPECT_EQ(r.method, "revoke");
  EXPECT_TRUE(r.reply_exchange.empty());
  EXPECT_TRUE(celery::ControlRequestIsFor(r, "kf@a", 4e9));
}

TEST(CeleryTime, IsoTimesAsCeleryWritesThem) {
  EXPECT_DOUBLE_EQ(celery::ParseIsoTime("1970-01-01T00:00:10+00:00"), 10);
  EXPECT_DOUBLE_EQ(celery::ParseIsoTime("1970-01-01T01:00:10.5+01:00"), 10.5);
  EXPECT_DOUBLE_EQ(celery::ParseIsoTime("1970-01-01T00:00:10Z"), 10);
  EXPECT_DOUBLE_EQ(celery::ParseIsoTime("1970-01-01T00:00:10"), 10);
  const double t = 1796000000.25;
  EXPECT_NEAR(celery::ParseIsoTime(celery::FormatIsoTime(t)), t, 1e-6);
  EXPECT_EQ(celery::FormatIsoTime(0), "1970-01-01T00:00:00.000000+00:00");
  ExpectError(ErrorKind::kParse, [] { celery::ParseIsoTime("tomorrow"); });
}

TEST(BrokerUrlTest, ParsesKombuUrlsAndTheReferenceEnvironment) {
  BrokerUrl a = ParseBrokerUrl("amqp://guest:guest@localhost:5672//");
  EXPECT_EQ(a.user, "guest");
  EXPECT_EQ(a.host, "localhost");
  EXPECT_EQ(a.port, 5672);
  EXPECT_EQ(a.vhost, "/");
  BrokerUrl b = ParseBrokerUrl("pyamqp://u:p%40ss@10.0.0.5:5673/farm");
  EXPECT_EQ(b.password, "p@ss");
  EXPECT_EQ(b.port, 5673);
  EXPECT_EQ(b.vhost, "farm");
  EXPECT_EQ(b.Redacted(), "amqp://u:***@10.0.0.5:5673/farm");
  BrokerUrl c = ParseBrokerUrl("amqp://rabbit");
  EXPECT_EQ(c.host, "rabbit");
  EXPECT_EQ(c.vhost, "/");
  EXPECT_EQ(ExpectError(ErrorKind::kInvalidArgument, [] { ParseBrokerUrl("redis://x"); }).field(), "broker");
  ExpectError(ErrorKind::kInvalidArgument, [] { ParseBrokerUrl("amqp://h:99999//"); });

  ::unsetenv("KF_BROKER_URL");
  ::setenv("RABBITMQ_USERNAME", "kf", 1);
  ::setenv("RABBITMQ_PASSWORD", "secret", 1);
  ::setenv("RABBITMQ_IP", "10.1.2.3", 1);
  EXPECT_EQ(DefaultBrokerUrl(), "amqp://kf:secret@10.1.2.3:5672//");
  ::setenv("KF_BROKER_URL", "amqp://x@y//", 1);
  EXPECT_EQ(DefaultBrokerUrl(), "amqp://x@y//");
  for (const char* v : {"KF_BROKER_URL", "RABBITMQ_USERNAME", "RABBITMQ_PASSWORD", "RABBITMQ_IP"}) ::unsetenv(v);
  EXPECT_EQ(DefaultBrokerUrl(), "amqp://guest:guest@localhost:5672//");
}

TEST(Uuid, IsVersion4) {
  std::string a = NewUuid(), b = NewUuid();
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), 36u);
  EXPECT_EQ(a[14], '4');
  EXPECT_NE(std::string("89ab").find(a[19]), std::string::npos);
}

}  // namespace
}  // namespace kf
