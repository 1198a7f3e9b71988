// The RabbitMQ backend of Broker on rabbitmq-c (Debian librabbitmq): one connection, channel 1, heartbeats
// serviced inside Next() (rabbitmq-c sends and checks them while it waits for frames).
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <sys/time.h>

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/queue.hpp"
#include "queue/amqp_table.hpp"

namespace kf {

namespace {

using queue_internal::TableBuilder;
using queue_internal::TableToJson;

constexpr amqp_channel_t kChannel = 1;

amqp_bytes_t B(const std::string& s) {
  amqp_bytes_t b;
  b.len = s.size();
  b.bytes = s.empty() ? nullptr : const_cast<char*>(s.data());
  return b;
}

std::string S(amqp_bytes_t b) { return b.len ? std::string(static_cast<const char*>(b.bytes), b.len) : ""; }

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// "406 PRECONDITION_FAILED - …" from a server close method, or the library's error text.
std::string DescribeReply(const amqp_rpc_reply_t& r) {
  switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL: return "ok";
    case AMQP_RESPONSE_NONE: return "missing RPC reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: return amqp_error_string2(r.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
        return fmt::format("channel closed by the server: {} {}", m->reply_code, S(m->reply_text));
      }
      if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        auto* m = static_cast<amqp_connection_close_t*>(r.reply.decoded);
        return fmt::format("connection closed by the server: {} {}", m->reply_code, S(m->reply_text));
      }
      return fmt::format("server exception, method 0x{:08x}", r.reply.id);
  }
  return "unknown reply";
}

class AmqpBroker final : public Broker {
 public:
  AmqpBroker(const BrokerUrl& url, const AmqpOptions& options) : url_(url), options_(options) {
    conn_ = amqp_new_connection();
    if (conn_ == nullptr) throw Error(ErrorKind::kIO, "out of memory creating an AMQP connection");
    try {
      Open();
    } catch (...) {
      amqp_destroy_connection(conn_);
      conn_ = nullptr;
      throw;
    }
  }

  void Open() {
    const BrokerUrl& url = url_;
    const AmqpOptions& options = options_;
    amqp_socket_t* socket = amqp_tcp_socket_new(conn_);
    if (socket == nullptr) Fail("cannot create a TCP socket");
    timeval tv = ToTimeval(options.connect_timeout);
    amqp_set_handshake_timeout(conn_, &tv);
    timeval rpc = ToTimeval(std::chrono::milliseconds{60'000});
    amqp_set_rpc_timeout(conn_, &rpc);
    int rc = amqp_socket_open_noblock(socket, url.host.c_str(), url.port, &tv);
    if (rc != AMQP_STATUS_OK) Fail(std::string("cannot connect: ") + amqp_error_string2(rc));
    TableBuilder props_builder;
    Json client_properties = Json{{"product", "kf"},
                                  {"connection_name", options.connection_name},
                                  {"capabilities", Json{{"consumer_cancel_notify", true},
                                                        {"connection.blocked", true},
                                                        {"authentication_failure_close", true}}}};
    amqp_table_t props = props_builder.Table(client_properties);
    amqp_rpc_reply_t login = amqp_login_with_properties(conn_, url.vhost.c_str(), 0, AMQP_DEFAULT_FRAME_SIZE,
                                                        options.heartbeat_s, &props, AMQP_SASL_METHOD_PLAIN,
                                                        url.user.c_str(), url.password.c_str());
    if (login.reply_type != AMQP_RESPONSE_NORMAL) Fail("login refused: " + DescribeReply(login));
    amqp_channel_open(conn_, kChannel);
    Check("channel.open");
  }

  ~AmqpBroker() override {
    if (conn_ == nullptr) return;
    if (!broken_) {
      amqp_channel_close(conn_, kChannel, AMQP_REPLY_SUCCESS);
      amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
    }
    amqp_destroy_connection(conn_);
  }

  void DeclareExchange(const ExchangeSpec& spec) override {
    Usable();
    amqp_exchange_declare(conn_, kChannel, B(spec.name), B(spec.type), 0, spec.durable, spec.auto_delete, 0,
                          amqp_empty_table);
    Check("exchange.declare " + spec.name);
  }

  uint32_t DeclareQueue(const QueueSpec& spec) override {
    Usable();
    TableBuilder tb;
    amqp_queue_declare_ok_t* ok = amqp_queue_declare(conn_, kChannel, B(spec.name), 0, spec.durable, spec.exclusive,
                                                     spec.auto_delete, tb.Table(spec.arguments));
    Check("queue.declare " + spec.name);
    return ok ? ok->message_count : 0;
  }

  void BindQueue(const std::string& queue, const std::string& exchange, const std::string& routing_key) override {
    Usable();
    amqp_queue_bind(conn_, kChannel, B(queue), B(exchange), B(routing_key), amqp_empty_table);
    Check("queue.bind " + queue);
  }

  void DeleteQueue(const std::string& queue) override {
    Usable();
    amqp_queue_delete(conn_, kChannel, B(queue), 0, 0);
    Check("queue.delete " + queue);
  }

  void SetPrefetch(uint16_t count) override {
    Usable();
    amqp_basic_qos(conn_, kChannel, 0, count, 1);
    Check("basic.qos");
  }

  std::string Consume(const std::string& queue, bool no_ack) override {
    Usable();
    amqp_basic_consume_ok_t* ok =
        amqp_basic_consume(conn_, kChannel, B(queue), amqp_empty_bytes, 0, no_ack ? 1 : 0, 0, amqp_empty_table);
    Check("basic.consume " + queue);
    std::string tag = ok ? S(ok->consumer_tag) : "";
    consumers_.emplace_back(tag, queue);
    return tag;
  }

  void CancelConsumer(const std::string& consumer_tag) override {
    Usable();
    amqp_basic_cancel(conn_, kChannel, B(consumer_tag));
    Check("basic.cancel");
  }

  void Publish(const Message& m) override {
    Usable();
    if (m.body.size() > options_.max_message_bytes) {
      throw Error(ErrorKind::kLimit, fmt::format("message of {} bytes exceeds the broker's limit of {} bytes",
                                                 m.body.size(), options_.max_message_bytes));
    }
    const MessageProperties& p = m.properties;
    amqp_basic_properties_t props{};
    TableBuilder tb;
    auto set = [&](const std::string& value, amqp_flags_t flag, amqp_bytes_t* field) {
      if (value.empty()) return;
      props._flags |= flag;
      *field = B(value);
    };
    set(p.content_type, AMQP_BASIC_CONTENT_TYPE_FLAG, &props.content_type);
    set(p.content_encoding, AMQP_BASIC_CONTENT_ENCODING_FLAG, &props.content_encoding);
    set(p.correlation_id, AMQP_BASIC_CORRELATION_ID_FLAG, &props.correlation_id);
    set(p.reply_to, AMQP_BASIC_REPLY_TO_FLAG, &props.reply_to);
    set(p.expiration, AMQP_BASIC_EXPIRATION_FLAG, &props.expiration);
    set(p.message_id, AMQP_BASIC_MESSAGE_ID_FLAG, &props.message_id);
    if (p.delivery_mode) {
      props._flags |= AMQP_BASIC_DELIVERY_MODE_FLAG;
      props.delivery_mode = *p.delivery_mode;
    }
    if (p.priority) {
      props._flags |= AMQP_BASIC_PRIORITY_FLAG;
      props.priority = *p.priority;
    }
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers = tb.Table(p.headers);
    int rc = amqp_basic_publish(conn_, kChannel, B(m.exchange), B(m.routing_key), 0, 0, &props, B(m.body));
    if (rc != AMQP_STATUS_OK) Fail(std::string("basic.publish: ") + amqp_error_string2(rc));
  }

  std::optional<Delivery> Next(std::chrono::milliseconds timeout) override {
    Usable();
    amqp_maybe_release_buffers(conn_);
    amqp_envelope_t env{};
    timeval tv = ToTimeval(timeout);
    amqp_rpc_reply_t r = amqp_consume_message(conn_, &env, &tv, 0);
    if (r.reply_type == AMQP_RESPONSE_NORMAL) {
      Delivery d = ToDelivery(env);
      amqp_destroy_envelope(&env);
      return d;
    }
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT) return std::nullopt;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
      HandleOtherFrame();
      return std::nullopt;
    }
    Fail("waiting for deliveries: " + DescribeReply(r));
  }

  void Ack(uint64_t delivery_tag) override {
    Usable();
    int rc = amqp_basic_ack(conn_, kChannel, delivery_tag, 0);
    if (rc != AMQP_STATUS_OK) Fail(std::string("basic.ack: ") + amqp_error_string2(rc));
  }

  void Reject(uint64_t delivery_tag, bool requeue) override {
    Usable();
    int rc = amqp_basic_reject(conn_, kChannel, delivery_tag, requeue ? 1 : 0);
    if (rc != AMQP_STATUS_OK) Fail(std::string("basic.reject: ") + amqp_error_string2(rc));
  }

  size_t max_message_bytes() const override { return options_.max_message_bytes; }

 private:
  [[noreturn]] void Fail(const std::string& what) {
    broken_ = true;
    throw Error(ErrorKind::kIO, "broker " + url_.Redacted() + ": " + what);
  }

  void Usable() {
    if (broken_) throw Error(ErrorKind::kIO, "broker " + url_.Redacted() + ": the connection was lost earlier");
  }

  void Check(const std::string& what) {
    amqp_rpc_reply_t r = amqp_get_rpc_reply(conn_);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) Fail(what + ": " + DescribeReply(r));
  }

  Delivery ToDelivery(const amqp_envelope_t& env) {
    Delivery d;
    d.delivery_tag = env.delivery_tag;
    d.redelivered = env.redelivered != 0;
    d.consumer_tag = S(env.consumer_tag);
    for (const auto& [tag, queue] : consumers_) {
      if (tag == d.consumer_tag) d.queue = queue;
    }
    d.message.exchange = S(env.exchange);
    d.message.routing_key = S(env.routing_key);
    d.message.body = S(env.message.body);
    const amqp_basic_properties_t& p = env.message.properties;
    MessageProperties& out = d.message.properties;
    if (p._flags & AMQP_BASIC_CONTENT_TYPE_FLAG) out.content_type = S(p.content_type);
    if (p._flags & AMQP_BASIC_CONTENT_ENCODING_FLAG) out.content_encoding = S(p.content_encoding);
    if (p._flags & AMQP_BASIC_CORRELATION_ID_FLAG) out.correlation_id = S(p.correlation_id);
    if (p._flags & AMQP_BASIC_REPLY_TO_FLAG) out.reply_to = S(p.reply_to);
    if (p._flags & AMQP_BASIC_EXPIRATION_FLAG) out.expiration = S(p.expiration);
    if (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG) out.message_id = S(p.message_id);
    if (p._flags & AMQP_BASIC_DELIVERY_MODE_FLAG) out.delivery_mode = p.delivery_mode;
    if (p._flags & AMQP_BASIC_PRIORITY_FLAG) out.priority = p.priority;
    if (p._flags & AMQP_BASIC_HEADERS_FLAG) out.headers = TableToJson(p.headers);
    return d;
  }

  // A frame that is not a delivery: basic.return (drop the returned message), a server-side consumer
  // cancel, or a channel/connection close (the connection is then unusable).
  void HandleOtherFrame() {
    amqp_frame_t frame{};
    int rc = amqp_simple_wait_frame(conn_, &frame);
    if (rc != AMQP_STATUS_OK) Fail(std::string("reading a frame: ") + amqp_error_string2(rc));
    if (frame.frame_type != AMQP_FRAME_METHOD) return;
    switch (frame.payload.method.id) {
      case AMQP_BASIC_RETURN_METHOD: {
        amqp_message_t message{};
        amqp_rpc_reply_t r = amqp_read_message(conn_, frame.channel, &message, 0);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) Fail("reading a returned message: " + DescribeReply(r));
        amqp_destroy_message(&message);
        return;
      }
      case AMQP_CHANNEL_CLOSE_METHOD: {
        auto* m = static_cast<amqp_channel_close_t*>(frame.payload.method.decoded);
        Fail(fmt::format("channel closed by the server: {} {}", m->reply_code, S(m->reply_text)));
      }
      case AMQP_CONNECTION_CLOSE_METHOD: {
        auto* m = static_cast<amqp_connection_close_t*>(frame.payload.method.decoded);
        Fail(fmt::format("connection closed by the server: {} {}", m->reply_code, S(m->reply_text)));
      }
      case AMQP_BASIC_CANCEL_METHOD:
        Fail("the server cancelled a consumer (its queue was deleted)");
      default:
        return;
    }
  }

  BrokerUrl url_;
  AmqpOptions options_;
  amqp_connection_state_t conn_ = nullptr;
  bool broken_ = false;
  std::vector<std::pair<std::string, std::string>> consumers_;  // tag -> queue
};

}  // namespace

std::unique_ptr<Broker> ConnectAmqp(const BrokerUrl& url, const AmqpOptions& options) {
  return std::make_unique<AmqpBroker>(url, options);
}

}  // namespace kf
