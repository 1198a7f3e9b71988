// Celery — the Celery protocol v2 on AMQP, as the reference's Python clients and workers speak it
// (../shared/spec/celery-interop.md; Celery 5.2.6 / kombu 5.2.4 observed on a live RabbitMQ 3.10).
//
// Three kinds of messages:
//  * Task messages (§2.1): headers {lang, task, id, shadow, eta, expires, group, group_index, retries,
//    timelimit [hard, soft], root_id, parent_id, argsrepr, kwargsrepr, origin, ignore_result} + properties
//    (correlation_id = id, reply_to, content type) + body [args, kwargs, embed].
//  * rpc:// results (§2.2): body {task_id, status, result, traceback, children} to exchange "" with the
//    request's reply_to as routing key; FAILURE results carry {exc_type, exc_message: [args], exc_module}.
//  * Remote control over the pidbox (§2.3): requests on the fanout exchange celery.pidbox, replies
//    {nodename: data} on the direct exchange reply.celery.pidbox with the request's ticket header.
// Bodies are msgpack (the reference's serializer) or JSON; both are decoded, msgpack is what we send.
// Every string we put into a body is valid UTF-8 (invalid bytes become U+FFFD) and every map key a string:
// Python's msgpack unpacker rejects anything else (§2.6).
// Queue, exchange and binding declarations are exactly Celery's (§4.1): a Python client declares them too,
// and RabbitMQ refuses an inequivalent redeclare with 406.
// All functions are pure (no I/O) and thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/queue.hpp"

namespace kf::celery {

// ---- names of the reference (celery-interop.md §1.3, reference spec §5.2) ----
inline constexpr std::string_view kBuildTaskName = "kernelfoundry.eval_pipeline.tasks.build_custom_task.build_custom_task";
inline constexpr std::string_view kTestTaskName = "kernelfoundry.eval_pipeline.tasks.test_custom_task.test_custom_task";
inline constexpr std::string_view kSleepTaskName = "kernelfoundry.eval_pipeline.tasks.test_sleep.test_sleep";
/// "build_custom_task_<language lower-cased>".
std::string BuildQueueName(std::string_view language);
/// "test_custom_task_<gpu_arch verbatim>".
std::string TestQueueName(std::string_view gpu_arch);

// ---- serialization (§2.6) ----

/// The two body encodings Celery workers accept from the reference.
enum class ContentType { kMsgpack, kJson };
/// "application/x-msgpack" / "application/json".
std::string_view ContentTypeName(ContentType type);
/// "binary" / "utf-8".
std::string_view ContentEncodingName(ContentType type);

/// Serializes a body. msgpack: every string (keys included) made valid UTF-8 first, floats as float64
/// where they are not exact in float32. JSON: compact, UTF-8, invalid bytes replaced.
std::string SerializeBody(const Json& value, ContentType type);
/// Parses a body by its content type ("application/x-msgpack" or "application/msgpack", "application/json";
/// an empty type is tried as JSON). msgpack bin values become strings, JSON's kombu envelopes
/// {"__type__": "bytes"|"base64"|…, "__value__": v} are unwrapped. Throws kf::Error(kParse, …, field
/// "body") for invalid bytes, non-string map keys or invalid UTF-8, and kf::Error(kUnsupported, field
/// "content_type") for other content types (pickle, yaml).
Json DeserializeBody(std::string_view body, std::string_view content_type);

/// Replaces invalid UTF-8 in every string and key of a JSON value (in place).
void SanitizeUtf8(Json& value);

// ---- task messages (§2.1) ----

/// A Celery protocol-v2 task message.
struct TaskMessage {
  std::string id;                  ///< task id (UUID)
  std::string task;                ///< registered task name
  Json args = Json::array();
  Json kwargs = Json::object();
  /// {"callbacks", "errbacks", "chain", "chord"}: null unless a canvas was sent.
  Json embed = Json{{"callbacks", nullptr}, {"errbacks", nullptr}, {"chain", nullptr}, {"chord", nullptr}};
  std::string reply_to;            ///< rpc:// reply queue (empty = nobody waits)
  std::string correlation_id;      ///< = id when Celery sends it
  int retries = 0;
  std::optional<double> hard_time_limit;   ///< seconds (header timelimit[0])
  std::optional<double> soft_time_limit;   ///< seconds (header timelimit[1])
  std::optional<std::string> eta;          ///< ISO-8601
  std::optional<std::string> expires;      ///< ISO-8601
  std::string root_id, parent_id, group, origin;
  Json headers = Json::object();   ///< every header as received (decoding) or extra headers to send
  ContentType content_type = ContentType::kMsgpack;
};

/// The last dotted part of a Celery task name ("kernelfoundry.eval_pipeline.tasks.build_custom_task" →
/// "build_custom_task"), as logs and `kf workers` show it; a name without a dot is returned as it is.
std::string TaskShortName(std::string_view task);

/// Decodes a delivered task message. Throws kf::Error(kParse) naming the problem in words a client can
/// act on, with field = the header or body part ("headers.task", "body", "body[0]", "timelimit"): missing
/// `task`/`id` headers (protocol v1 messages have none), a body that is not a 3-array [args, kwargs,
/// embed] (a plain [args, kwargs] is accepted), args not an array, kwargs not an object, an unsupported
/// content type (kUnsupported).
TaskMessage DecodeTaskMessage(const Message& message);

/// Options for publishing a task as the reference's TaskRunner does.
struct SendOptions {
  std::string queue;                      ///< routing: exchange "" with routing key = queue
  std::string reply_to;                   ///< the client's reply queue
  int retries = 0;                        ///< header only (the reference's builds send 1)
  std::optional<double> hard_time_limit;  ///< seconds
  std::optional<double> soft_time_limit;
  std::optional<std::string> expires;     ///< ISO-8601
  ContentType content_type = ContentType::kMsgpack;
  Json extra_headers = Json::object();    ///< added after the standard ones
};

/// The message Celery's send_task publishes (full 5.2 header set, origin "gen<pid>@<host>", argsrepr via a
/// short Python-like repr, delivery_mode 2, priority 0, correlation_id = id).
Message EncodeTaskMessage(const std::string& id, std::string_view task, const Json& args, const Json& kwargs,
                          const SendOptions& options);

/// Parses an ISO-8601 time as Celery writes it ("2026-12-01T10:00:00.123456+00:00", "…Z", naive = UTC) into
/// seconds since the epoch. Throws kf::Error(kParse) for other text.
double ParseIsoTime(std::string_view text);
/// Formats seconds since the epoch as Celery does ("2026-12-01T10:00:00.123456+00:00").
std::string FormatIsoTime(double epoch_seconds);

// ---- results (§2.2) ----

/// Task states of the rpc:// backend.
inline constexpr std::string_view kStarted = "STARTED", kSuccess = "SUCCESS", kFailure = "FAILURE",
                                  kRevoked = "REVOKED", kRetry = "RETRY", kPending = "PENDING";
/// SUCCESS, FAILURE and REVOKED are ready (final); the others are progress.
bool IsReadyState(std::string_view status);

/// An rpc:// result message body.
struct TaskResult {
  std::string task_id;
  std::string status;
  Json result = nullptr;
  Json traceback = nullptr;   ///< str for FAILURE, else null
  Json children = Json::array();
};

/// The exception dict Celery clients turn back into an exception: {"exc_type", "exc_message": [message],
/// "exc_module"}. Modules: "builtins" (RuntimeError, ValueError, TypeError, MemoryError…) or
/// "celery.exceptions" (TimeLimitExceeded, NotRegistered, TaskRevokedError…).
Json ExceptionInfo(std::string_view exc_type, const std::string& message, std::string_view exc_module = "builtins");

/// The reply message for a result: exchange "", routing key reply_to, correlation_id, delivery_mode 1,
/// priority 0, empty headers.
Message EncodeResultMessage(const TaskResult& result, const std::string& reply_to, const std::string& correlation_id,
                            ContentType type = ContentType::kMsgpack);
/// Decodes a reply. Throws kf::Error(kParse) when the body is not a map with task_id and status.
TaskResult DecodeResultMessage(const Message& message);

// ---- topology (§1.2, §2.3, §4.1) ----

/// The direct exchange Celery declares for a missing queue: name = queue, durable, not auto-delete.
ExchangeSpec TaskExchange(const std::string& queue);
/// The queue Celery declares for a missing queue: durable, not exclusive, not auto-delete, no arguments.
QueueSpec TaskQueue(const std::string& queue);
/// The rpc:// reply queue of a client: not durable, auto-delete, x-expires 86400000 ms (1 day).
QueueSpec ReplyQueue(const std::string& oid);
/// celery.pidbox: fanout, not durable, not auto-delete.
ExchangeSpec PidboxExchange();
/// reply.celery.pidbox: direct, not durable, not auto-delete.
ExchangeSpec PidboxReplyExchange();
/// "<node>.celery.pidbox": not durable, auto-delete, x-expires 10000, x-message-ttl 300000.
QueueSpec PidboxQueue(const std::string& node);
/// A control client's reply queue "<oid>.reply.celery.pidbox": not durable, auto-delete, x-expires 10000.
QueueSpec PidboxReplyQueue(const std::string& oid);
/// kombu's Queue.as_dict for a task queue (what active_queues reports; the reference reads "name").
Json QueueAsDict(const std::string& queue);

/// Declares a task queue exactly like Celery (exchange, queue, binding key = name).
void DeclareTaskQueue(Broker& broker, const std::string& queue);

// ---- remote control (§2.3) ----

/// A pidbox request.
struct ControlRequest {
  std::string method;
  Json arguments = Json::object();
  std::optional<std::vector<std::string>> destination;   ///< nullopt = every node
  std::string ticket;
  std::string reply_exchange;        ///< "reply.celery.pidbox"; empty = no reply wanted
  std::string reply_routing_key;
  double expires = 0;                ///< epoch seconds; 0 = never
  ContentType content_type = ContentType::kMsgpack;
};

/// Decodes a pidbox request. Throws kf::Error(kParse) when the body has no method.
ControlRequest DecodeControlRequest(const Message& message);
/// True when `node` should answer: not expired at `now_epoch_s` and destination empty or naming it.
bool ControlRequestIsFor(const ControlRequest& request, const std::string& node, double now_epoch_s);
/// The reply {node: data} with headers {ticket, clock}, delivery_mode 1, the request's content type.
Message EncodeControlReply(const ControlRequest& request, const std::string& node, const Json& data, int64_t clock);
/// A broadcast request as `app.control.inspect(timeout).<method>()` sends it; `reply_oid` is the client's
/// mailbox oid (its reply queue is PidboxReplyQueue(reply_oid)); an empty `reply_oid` sends a request
/// that wants no reply (no ticket, no reply_to: `app.control.revoke(…)`), and timeout_s 0 = never expires.
/// `destination` empty = every node.
Message EncodeControlRequest(const std::string& method, const Json& arguments, const std::string& reply_oid,
                             const std::string& ticket, double timeout_s, int64_t clock,
                             const std::vector<std::string>& destination = {});
/// Decodes a control reply: the ticket header and the body {node: data}.
struct ControlReply {
  std::string ticket;
  std::string node;
  Json data;
};
/// Throws kf::Error(kParse) when the body is not a one-key map.
ControlReply DecodeControlReply(const Message& message);

}  // namespace kf::celery
