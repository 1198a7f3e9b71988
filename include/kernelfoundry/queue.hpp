// Queue — a message broker seen as AMQP 0-9-1 primitives (declare, publish, consume, ack, reject), with a
// RabbitMQ backend (rabbitmq-c) and an in-memory backend for tests (the idea of LevelDB's NewMemEnv).
//
// Contract:
//  * A Broker is one connection with one channel. It is NOT thread-safe: use it from one thread (several
//    threads = several Brokers). Next() must be called regularly (at least every few seconds) while the
//    connection is idle: AMQP heartbeats are sent and checked only inside the broker's calls.
//  * Every failure of the connection (refused, closed by the server, heartbeat timeout, channel error such
//    as a 406 on an inequivalent declare) throws kf::Error(kIO) whose message says what the server said;
//    the Broker is unusable afterwards (make a new one: reconnecting is the caller's policy).
//  * Messages cross the API as plain values. AMQP headers are a JSON object: strings, booleans, integers,
//    floats, null, arrays and objects map to the field types S, t, I (l beyond 32 bits), d, V, A, F, which
//    every client reads the same way; on input every field type is accepted (celery-interop.md §2.6).
//  * Unacknowledged deliveries go back to their queue, marked redelivered, when the connection closes or the
//    process dies (RabbitMQ does this; the memory backend imitates it when a Broker is destroyed or the
//    hub drops its connections).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"

namespace kf {

/// The AMQP basic properties a Celery peer uses. Empty strings and nullopt are not sent.
struct MessageProperties {
  std::string content_type;       ///< "application/x-msgpack", "application/json"
  std::string content_encoding;   ///< "binary", "utf-8"
  std::optional<uint8_t> delivery_mode;   ///< 1 transient, 2 persistent
  std::optional<uint8_t> priority;
  std::string correlation_id;
  std::string reply_to;
  std::string expiration;          ///< per-message TTL in ms, as text
  std::string message_id;
  Json headers = Json::object();   ///< the AMQP header table (see the file comment for the type mapping)
};

/// A message to publish (exchange "" = the default exchange: routing_key names the queue).
struct Message {
  std::string exchange;
  std::string routing_key;
  MessageProperties properties;
  std::string body;   ///< raw bytes
};

/// A message received from a consumed queue.
struct Delivery {
  Message message;              ///< exchange/routing_key as published
  uint64_t delivery_tag = 0;    ///< for Ack/Reject on the Broker that delivered it
  bool redelivered = false;     ///< the broker delivered it before (a consumer died or rejected it)
  std::string consumer_tag;
  std::string queue;            ///< the queue the consumer reads (the Consume argument)
};

/// exchange.declare arguments.
struct ExchangeSpec {
  std::string name;
  std::string type = "direct";   ///< direct, fanout, topic
  bool durable = true;
  bool auto_delete = false;
};

/// queue.declare arguments. `arguments` is a JSON object of x-arguments (e.g. {"x-expires": 10000}).
struct QueueSpec {
  std::string name;
  bool durable = true;
  bool exclusive = false;
  bool auto_delete = false;
  Json arguments = Json::object();
};

/// RabbitMQ's default max_message_size (3.8+): 128 MiB. Bodies above it are refused by the server, which
/// closes the channel.
inline constexpr size_t kDefaultMaxMessageBytes = 134217728;

/// The broker connection interface. See the file comment for the threading and error contract.
class Broker {
 public:
  virtual ~Broker() = default;
  /// Declares an exchange; an inequivalent redeclare is a channel error (kf::Error(kIO), "406 …").
  virtual void DeclareExchange(const ExchangeSpec& spec) = 0;
  /// Declares a queue; returns the number of ready messages in it.
  virtual uint32_t DeclareQueue(const QueueSpec& spec) = 0;
  virtual void BindQueue(const std::string& queue, const std::string& exchange, const std::string& routing_key) = 0;
  /// Deletes a queue (tests and tools). Unknown queues are ignored.
  virtual void DeleteQueue(const std::string& queue) = 0;
  /// Channel-wide prefetch (basic.qos, global): at most `count` unacknowledged deliveries on this Broker.
  virtual void SetPrefetch(uint16_t count) = 0;
  /// Starts consuming `queue`; with no_ack the broker forgets a message once delivered. Returns the tag.
  virtual std::string Consume(const std::string& queue, bool no_ack) = 0;
  /// Stops a consumer; deliveries already received stay unacknowledged until Ack/Reject.
  virtual void CancelConsumer(const std::string& consumer_tag) = 0;
  /// Publishes (not mandatory: a message routed nowhere is dropped, as AMQP does). Throws kf::Error(kLimit)
  /// when the body exceeds max_message_bytes() (nothing is sent).
  virtual void Publish(const Message& message) = 0;
  /// Waits up to `timeout` for the next delivery of any consumer; nullopt when none arrived. Services
  /// heartbeats. Throws kf::Error(kIO) when the connection is lost.
  virtual std::optional<Delivery> Next(std::chrono::milliseconds timeout) = 0;
  virtual void Ack(uint64_t delivery_tag) = 0;
  /// basic.reject: requeue puts the message back (marked redelivered), otherwise it is dropped.
  virtual void Reject(uint64_t delivery_tag, bool requeue) = 0;
  /// The largest body Publish accepts, in bytes.
  virtual size_t max_message_bytes() const = 0;
};

/// A function that opens a new Broker connection (the worker reconnects through it).
using BrokerFactory = std::function<std::unique_ptr<Broker>()>;

/// A parsed broker URL `amqp://user:password@host:port/vhost` (also `pyamqp://`, kombu's spelling).
/// Defaults: guest/guest, localhost, 5672, vhost "/". The path is the vhost, percent-decoded; an empty path
/// and "/" (as in kombu's "…:5672//") both mean "/".
struct BrokerUrl {
  std::string user = "guest";
  std::string password = "guest";
  std::string host = "localhost";
  int port = 5672;
  std::string vhost = "/";
  /// The URL without the password ("amqp://guest:***@localhost:5672//"), for logs.
  std::string Redacted() const;
};

/// Parses a broker URL. Throws kf::Error(kInvalidArgument, field "broker") naming what is wrong (unknown
/// scheme, bad port).
BrokerUrl ParseBrokerUrl(std::string_view url);

/// The default broker URL: $KF_BROKER_URL when set and non-empty; else the reference's
/// amqp://$RABBITMQ_USERNAME:$RABBITMQ_PASSWORD@$RABBITMQ_IP:5672// (each defaulting to guest, guest,
/// localhost).
std::string DefaultBrokerUrl();

/// Options of the RabbitMQ backend.
struct AmqpOptions {
  /// Heartbeat interval asked for (seconds); the server may lower it (RabbitMQ's default is 60). 0 = none.
  int heartbeat_s = 60;
  std::chrono::milliseconds connect_timeout{10'000};
  size_t max_message_bytes = kDefaultMaxMessageBytes;
  /// Shown in the RabbitMQ management UI (client property connection_name).
  std::string connection_name = "kf";
};

/// Connects to RabbitMQ (rabbitmq-c, channel 1). Throws kf::Error(kIO) when the server cannot be reached or
/// refuses the login (the message names the redacted URL).
std::unique_ptr<Broker> ConnectAmqp(const BrokerUrl& url, const AmqpOptions& options = {});

/// An in-memory broker shared by the Brokers it hands out (for unit tests): direct, fanout and topic-less
/// routing, durable/auto_delete queues, channel-global prefetch, redelivery of unacknowledged messages
/// when a connection closes, 406 on inequivalent redeclares, 404 on publishing to an unknown exchange.
/// Thread-safe.
class MemoryBroker {
 public:
  MemoryBroker();
  ~MemoryBroker();
  MemoryBroker(const MemoryBroker&) = delete;
  MemoryBroker& operator=(const MemoryBroker&) = delete;

  /// A new connection. The MemoryBroker must outlive it.
  std::unique_ptr<Broker> Connect();
  /// A factory for Connect().
  BrokerFactory Factory();
  /// Closes every open connection as a network failure would: their next call throws kf::Error(kIO) and
  /// their unacknowledged messages are requeued (redelivered). Later Connect() calls work again.
  void DropConnections();
  /// Ready messages in a queue (0 when it does not exist).
  size_t Ready(const std::string& queue) const;
  /// Delivered but unacknowledged messages of a queue.
  size_t Unacked(const std::string& queue) const;
  /// True when the queue exists.
  bool HasQueue(const std::string& queue) const;
  /// Removes and returns the ready messages of a queue (for inspecting replies in tests).
  std::vector<Message> Drain(const std::string& queue);
  /// Sets the max message size of connections made afterwards.
  void set_max_message_bytes(size_t bytes);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

/// A random RFC 4122 version-4 UUID ("xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx"), as Celery task ids and reply
/// queue names are. Thread-safe.
std::string NewUuid();

}  // namespace kf
