// The in-memory Broker for unit tests (see queue.hpp): the AMQP behaviours the worker relies on —
// routing through the default, direct and fanout exchanges, channel-global prefetch, acknowledgements,
// redelivery of unacknowledged messages when a connection closes or drops, 406/404 channel errors.
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/queue.hpp"

namespace kf {

// The broker's state types, named (not anonymous) because MemoryBroker::State, which has external linkage, holds
// them.
namespace memory_broker_internal {

struct StoredMessage {
  Message message;
  bool redelivered = false;
};

struct QueueState {
  QueueSpec spec;
  std::deque<StoredMessage> ready;
  size_t unacked = 0;
  int consumers = 0;
  bool had_consumer = false;
};

struct ExchangeState {
  ExchangeSpec spec;
  std::vector<std::pair<std::string, std::string>> bindings;  // (queue, routing key)
};

struct Consumer {
  std::string tag;
  std::string queue;
  bool no_ack = false;
};

struct Unacked {
  std::string queue;
  StoredMessage message;
};

struct ConnState {
  bool open = true;
  bool dropped = false;
  std::vector<Consumer> consumers;
  size_t next_consumer = 0;  // round robin over this connection's consumers
  uint16_t prefetch = 0;     // 0 = unlimited
  std::map<uint64_t, Unacked> unacked;
  uint64_t next_tag = 1;
};

}  // namespace memory_broker_internal

using namespace memory_broker_internal;  // NOLINT(google-build-using-namespace): this file's own types

struct MemoryBroker::State {
  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, QueueState> queues;
  std::map<std::string, ExchangeState> exchanges;
  std::map<uint64_t, ConnState> conns;
  uint64_t next_conn = 1;
  uint64_t next_consumer_tag = 1;
  size_t max_message_bytes = kDefaultMaxMessageBytes;

  // Routes a message; unknown exchange = 404 (the publisher's channel dies).
  bool Route(const Message& m) {
    std::vector<std::string> targets;
    if (m.exchange.empty()) {
      targets.push_back(m.routing_key);
    } else {
      auto it = exchanges.find(m.exchange);
      if (it == exchanges.end()) return false;
      for (const auto& [queue, key] : it->second.bindings) {
        if (it->second.spec.type == "fanout" || key == m.routing_key) targets.push_back(queue);
      }
    }
    for (const std::string& q : targets) {
      auto qi = queues.find(q);
      if (qi != queues.end()) qi->second.ready.push_back(StoredMessage{m, false});
    }
    cv.notify_all();
    return true;
  }

  void Requeue(ConnState& c) {
    for (auto it = c.unacked.rbegin(); it != c.unacked.rend(); ++it) {
      auto qi = queues.find(it->second.queue);
      if (qi == queues.end()) continue;
      --qi->second.unacked;
      StoredMessage m = it->second.message;
      m.redelivered = true;
      qi->second.ready.push_front(std::move(m));
    }
    c.unacked.clear();
    for (const Consumer& con : c.consumers) DropConsumer(con.queue);
    c.consumers.clear();
    cv.notify_all();
  }

  void DropConsumer(const std::string& queue) {
    auto qi = queues.find(queue);
    if (qi == queues.end()) return;
    --qi->second.consumers;
    if (qi->second.spec.auto_delete && qi->second.had_consumer && qi->second.consumers <= 0) queues.erase(qi);
  }
};

namespace {

class MemoryConnection final : public Broker {
 public:
  MemoryConnection(std::shared_ptr<MemoryBroker::State> state, uint64_t id) : s_(std::move(state)), id_(id) {
    max_bytes_ = s_->max_message_bytes;
  }

  ~MemoryConnection() override {
    std::lock_guard<std::mutex> lock(s_->mu);
    auto it = s_->conns.find(id_);
    if (it == s_->conns.end()) return;
    s_->Requeue(it->second);
    s_->conns.erase(it);
  }

  void DeclareExchange(const ExchangeSpec& spec) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    ConnState& c = Conn();
    auto it = s_->exchanges.find(spec.name);
    if (it == s_->exchanges.end()) {
      s_->exchanges[spec.name] = ExchangeState{spec, {}};
      return;
    }
    const ExchangeSpec& old = it->second.spec;
    if (old.type != spec.type || old.durable != spec.durable || old.auto_delete != spec.auto_delete) {
      ChannelError(c, "406 PRECONDITION_FAILED - inequivalent arg for exchange '" + spec.name + "'");
    }
  }

  uint32_t DeclareQueue(const QueueSpec& spec) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    ConnState& c = Conn();
    auto it = s_->queues.find(spec.name);
    if (it == s_->queues.end()) {
      s_->queues[spec.name].spec = spec;
      return 0;
    }
    const QueueSpec& old = it->second.spec;
    if (old.durable != spec.durable || old.exclusive != spec.exclusive || old.auto_delete != spec.auto_delete ||
        old.arguments != spec.arguments) {
      ChannelError(c, "406 PRECONDITION_FAILED - inequivalent arg for queue '" + spec.name + "'");
    }
    return static_cast<uint32_t>(it->second.ready.size());
  }

  void BindQueue(const std::string& queue, const std::string& exchange, const std::string& key) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    ConnState& c = Conn();
    auto ex = s_->exchanges.find(exchange);
    if (ex == s_->exchanges.end() || !s_->queues.count(queue)) {
      ChannelError(c, "404 NOT_FOUND - no exchange or queue for binding '" + queue + "'");
    }
    for (const auto& b : ex->second.bindings) {
      if (b.first == queue && b.second == key) return;
    }
    ex->second.bindings.emplace_back(queue, key);
  }

  void DeleteQueue(const std::string& queue) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    Conn();
    s_->queues.erase(queue);
  }

  void SetPrefetch(uint16_t count) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    Conn().prefetch = count;
  }

  std::string Consume(const std::string& queue, bool no_ack) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    ConnState& c = Conn();
    auto qi = s_->queues.find(queue);
    if (qi == s_->queues.end()) ChannelError(c, "404 NOT_FOUND - no queue '" + queue + "'");
    ++qi->second.consumers;
    qi->second.had_consumer = true;
    std::string tag = fmt::format("amq.ctag-mem-{}", s_->next_consumer_tag++);
    c.consumers.push_back(Consumer{tag, queue, no_ack});
    s_->cv.notify_all();
    return tag;
  }

  void CancelConsumer(const std::string& tag) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    ConnState& c = Conn();
    for (auto it = c.consumers.begin(); it != c.consumers.end(); ++it) {
      if (it->tag == tag) {
        s_->DropConsumer(it->queue);
        c.consumers.erase(it);
        return;
      }
    }
  }

  void Publish(const Message& m) override {
    if (m.body.size() > max_bytes_) {
      throw Error(ErrorKind::kLimit,
                  fmt::format("message of {} bytes exceeds the broker's limit of {} bytes", m.body.size(), max_bytes_));
    }
    std::lock_guard<std::mutex> lock(s_->mu);
    ConnState& c = Conn();
    if (!s_->Route(m)) ChannelError(c, "404 NOT_FOUND - no exchange '" + m.exchange + "'");
  }

  std::optional<Delivery> Next(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(s_->mu);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      ConnState& c = Conn();
      if (std::optional<Delivery> d = TryDeliver(c)) return d;
      if (s_->cv.wait_until(lock, deadline) == std::cv_status::timeout) {
        Conn();
        return TryDeliver(Conn());
      }
    }
  }

  void Ack(uint64_t tag) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    ConnState& c = Conn();
    auto it = c.unacked.find(tag);
    if (it == c.unacked.end()) ChannelError(c, fmt::format("406 PRECONDITION_FAILED - unknown delivery tag {}", tag));
    auto qi = s_->queues.find(it->second.queue);
    if (qi != s_->queues.end()) --qi->second.unacked;
    c.unacked.erase(it);
    s_->cv.notify_all();
  }

  void Reject(uint64_t tag, bool requeue) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    ConnState& c = Conn();
    auto it = c.unacked.find(tag);
    if (it == c.unacked.end()) ChannelError(c, fmt::format("406 PRECONDITION_FAILED - unknown delivery tag {}", tag));
    auto qi = s_->queues.find(it->second.queue);
    if (qi != s_->queues.end()) {
      --qi->second.unacked;
      if (requeue) {
        StoredMessage m = std::move(it->second.message);
        m.redelivered = true;
        qi->second.ready.push_front(std::move(m));
      }
    }
    c.unacked.erase(it);
    s_->cv.notify_all();
  }

  size_t max_message_bytes() const override { return max_bytes_; }

 private:
  // The connection's state; throws kf::Error(kIO) once it is closed or dropped.
  ConnState& Conn() {
    auto it = s_->conns.find(id_);
    if (it == s_->conns.end() || !it->second.open) {
      throw Error(ErrorKind::kIO, broken_reason_.empty() ? "memory broker: connection lost" : broken_reason_);
    }
    return it->second;
  }

  [[noreturn]] void ChannelError(ConnState& c, const std::string& what) {
    broken_reason_ = "memory broker: channel closed by the server: " + what;
    s_->Requeue(c);
    c.open = false;
    throw Error(ErrorKind::kIO, broken_reason_);
  }

  std::optional<Delivery> TryDeliver(ConnState& c) {
    if (c.consumers.empty()) return std::nullopt;
    for (size_t n = 0; n < c.consumers.size(); ++n) {
      const Consumer& con = c.consumers[(c.next_consumer + n) % c.consumers.size()];
      if (!con.no_ack && c.prefetch > 0 && c.unacked.size() >= c.prefetch) continue;
      auto qi = s_->queues.find(con.queue);
      if (qi == s_->queues.end() || qi->second.ready.empty()) continue;
      StoredMessage m = std::move(qi->second.ready.front());
      qi->second.ready.pop_front();
      c.next_consumer = (c.next_consumer + n + 1) % c.consumers.size();
      Delivery d;
      d.message = m.message;
      d.redelivered = m.redelivered;
      d.consumer_tag = con.tag;
      d.queue = con.queue;
      d.delivery_tag = c.next_tag++;
      if (!con.no_ack) {
        ++qi->second.unacked;
        c.unacked[d.delivery_tag] = Unacked{con.queue, std::move(m)};
      }
      return d;
    }
    return std::nullopt;
  }

  std::shared_ptr<MemoryBroker::State> s_;
  uint64_t id_;
  size_t max_bytes_;
  std::string broken_reason_;
};

}  // namespace

MemoryBroker::MemoryBroker() : state_(std::make_shared<State>()) {}
MemoryBroker::~MemoryBroker() = default;

std::unique_ptr<Broker> MemoryBroker::Connect() {
  std::lock_guard<std::mutex> lock(state_->mu);
  uint64_t id = state_->next_conn++;
  state_->conns[id] = ConnState{};
  return std::make_unique<MemoryConnection>(state_, id);
}

BrokerFactory MemoryBroker::Factory() {
  return [this] { return Connect(); };
}

void MemoryBroker::DropConnections() {
  std::lock_guard<std::mutex> lock(state_->mu);
  for (auto& [id, c] : state_->conns) {
    if (!c.open) continue;
    state_->Requeue(c);
    c.open = false;
    c.dropped = true;
  }
  state_->cv.notify_all();
}

size_t MemoryBroker::Ready(const std::string& queue) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->queues.find(queue);
  return it == state_->queues.end() ? 0 : it->second.ready.size();
}

size_t MemoryBroker::Unacked(const std::string& queue) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->queues.find(queue);
  return it == state_->queues.end() ? 0 : it->second.unacked;
}

bool MemoryBroker::HasQueue(const std::string& queue) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->queues.count(queue) > 0;
}

std::vector<Message> MemoryBroker::Drain(const std::string& queue) {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<Message> out;
  auto it = state_->queues.find(queue);
  if (it == state_->queues.end()) return out;
  for (StoredMessage& m : it->second.ready) out.push_back(std::move(m.message));
  it->second.ready.clear();
  return out;
}

void MemoryBroker::set_max_message_bytes(size_t bytes) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->max_message_bytes = bytes;
}

}  // namespace kf
