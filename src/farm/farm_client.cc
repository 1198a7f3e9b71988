// CeleryClient, Call and InspectWorkers (see farm.hpp).
#include <thread>

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/farm.hpp"

namespace kf {

namespace {
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
}  // namespace

struct CeleryClient::Impl {
  std::unique_ptr<Broker> broker;
  std::string reply_queue;
  std::string control_oid;             // empty until the first broadcast
  std::string control_queue;
  std::set<std::string> declared;
  std::map<std::string, celery::TaskResult> ready;
  std::set<std::string> consumed;
  std::map<std::string, Json> started;
  std::map<std::string, std::vector<celery::ControlReply>> control;  // by ticket
  int64_t clock = 0;
};

CeleryClient::CeleryClient(std::unique_ptr<Broker> broker) : impl_(std::make_unique<Impl>()) {
  impl_->broker = std::move(broker);
  impl_->reply_queue = NewUuid();
  impl_->broker->DeclareQueue(celery::ReplyQueue(impl_->reply_queue));
  impl_->broker->Consume(impl_->reply_queue, /*no_ack=*/true);
}

CeleryClient::~CeleryClient() = default;

const std::string& CeleryClient::reply_queue() const { return impl_->reply_queue; }
Broker& CeleryClient::broker() { return *impl_->broker; }

std::string CeleryClient::Send(std::string_view task, const Json& args, celery::SendOptions options) {
  if (options.queue.empty()) throw Error(ErrorKind::kInvalidArgument, "no queue to send the task to", "", "queue");
  if (!impl_->declared.count(options.queue)) {
    celery::DeclareTaskQueue(*impl_->broker, options.queue);
    impl_->declared.insert(options.queue);
  }
  options.reply_to = impl_->reply_queue;
  const std::string id = NewUuid();
  impl_->broker->Publish(celery::EncodeTaskMessage(id, task, args, Json::object(), options));
  return id;
}

void CeleryClient::Pump(milliseconds timeout) {
  std::optional<Delivery> d = impl_->broker->Next(timeout);
  while (d) {
    try {
      if (d->queue == impl_->reply_queue) {
        celery::TaskResult r = celery::DecodeResultMessage(d->message);
        if (celery::IsReadyState(r.status)) {
          if (!impl_->consumed.count(r.task_id) && !impl_->ready.count(r.task_id)) impl_->ready[r.task_id] = std::move(r);
        } else if (r.status == celery::kStarted) {
          impl_->started[r.task_id] = r.result;
        }
      } else if (d->queue == impl_->control_queue) {
        celery::ControlReply c = celery::DecodeControlReply(d->message);
        impl_->control[c.ticket].push_back(std::move(c));
      }
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kIO) throw;  // undecodable replies are ignored, as Celery does
    }
    d = impl_->broker->Next(milliseconds(0));
  }
}

std::optional<celery::TaskResult> CeleryClient::WaitAny(const std::set<std::string>& ids, milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    for (const std::string& id : ids) {
      auto it = impl_->ready.find(id);
      if (it == impl_->ready.end()) continue;
      celery::TaskResult r = std::move(it->second);
      impl_->ready.erase(it);
      impl_->consumed.insert(id);
      return r;
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return std::nullopt;
    Pump(std::min(std::chrono::duration_cast<milliseconds>(deadline - now), milliseconds(200)));
  }
}

void CeleryClient::Forget(const std::set<std::string>& ids) {
  for (const std::string& id : ids) {
    impl_->consumed.insert(id);
    impl_->ready.erase(id);
    impl_->started.erase(id);
  }
}

Json CeleryClient::Started(const std::string& id) const {
  auto it = impl_->started.find(id);
  return it == impl_->started.end() ? Json(nullptr) : it->second;
}

namespace {

void EnsureControlQueue(CeleryClient::Impl& s) {
  if (!s.control_oid.empty()) return;
  s.control_oid = NewUuid();
  s.broker->DeclareExchange(celery::PidboxExchange());
  s.broker->DeclareExchange(celery::PidboxReplyExchange());
  const QueueSpec q = celery::PidboxReplyQueue(s.control_oid);
  s.broker->DeclareQueue(q);
  s.broker->BindQueue(q.name, celery::PidboxReplyExchange().name, s.control_oid);
  s.broker->Consume(q.name, /*no_ack=*/true);
  s.control_queue = q.name;
}

}  // namespace

std::map<std::string, std::map<std::string, Json>> CeleryClient::Broadcast(const std::vector<std::string>& methods,
                                                                           milliseconds timeout) {
  EnsureControlQueue(*impl_);
  std::map<std::string, std::string> tickets;  // ticket -> method
  for (const std::string& method : methods) {
    const std::string ticket = NewUuid();
    tickets[ticket] = method;
    impl_->broker->Publish(celery::EncodeControlRequest(method, Json::object(), impl_->control_oid, ticket,
                                                        static_cast<double>(timeout.count()) / 1000, ++impl_->clock));
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    Pump(std::min(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()), milliseconds(100)));
  }
  std::map<std::string, std::map<std::string, Json>> out;
  for (const auto& [ticket, method] : tickets) {
    std::map<std::string, Json>& answers = out[method];
    for (celery::ControlReply& r : impl_->control[ticket]) answers[r.node] = std::move(r.data);
    impl_->control.erase(ticket);
  }
  return out;
}

void CeleryClient::Revoke(const std::set<std::string>& ids, bool terminate) {
  if (ids.empty()) return;
  impl_->broker->DeclareExchange(celery::PidboxExchange());
  Json arguments = Json{{"task_id", std::vector<std::string>(ids.begin(), ids.end())},
                        {"terminate", terminate},
                        {"signal", "SIGTERM"}};
  impl_->broker->Publish(celery::EncodeControlRequest("revoke", arguments, /*reply_oid=*/"", /*ticket=*/"",
                                                      /*timeout_s=*/0, ++impl_->clock));
}

bool CeleryClient::Ping(const std::string& node, milliseconds timeout) {
  EnsureControlQueue(*impl_);
  const std::string ticket = NewUuid();
  impl_->broker->Publish(celery::EncodeControlRequest("ping", Json::object(), impl_->control_oid, ticket,
                                                      static_cast<double>(timeout.count()) / 1000, ++impl_->clock,
                                                      {node}));
  const Clock::time_point deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    Pump(milliseconds(50));
    for (const celery::ControlReply& r : impl_->control[ticket]) {
      if (r.node == node) {
        impl_->control.erase(ticket);
        return true;
      }
    }
  }
  impl_->control.erase(ticket);
  return false;
}

celery::TaskResult Call(CeleryClient& client, std::string_view task, const Json& args, celery::SendOptions options,
                        const CallOptions& call) {
  auto event = [&](const std::string& e) {
    if (call.on_event) call.on_event(e);
  };
  std::set<std::string> ids;
  std::string why = "no result";
  // Cancelled: nobody waits any more; whoever runs the task is told to stop.
  auto canceled = [&]() -> celery::TaskResult {
    client.Revoke(ids, /*terminate=*/true);
    client.Forget(ids);
    event(fmt::format("canceled; revoked {} task id(s)", ids.size()));
    return celery::TaskResult{ids.empty() ? std::string() : *ids.rbegin(), std::string(celery::kRevoked),
                              celery::ExceptionInfo("TaskRevokedError", "canceled by the client", "celery.exceptions"),
                              nullptr, Json::array()};
  };
  for (int send = 1; send <= call.max_sends; ++send) {
    if (call.stop.stop_requested()) return canceled();
    const std::string id = client.Send(task, args, options);
    ids.insert(id);
    const Clock::time_point deadline = Clock::now() + call.timeout;
    Clock::time_point last_ping = Clock::now();
    int misses = 0;
    bool announced = false;
    bool lost = false;
    while (Clock::now() < deadline && !lost) {
      if (call.stop.stop_requested()) return canceled();
      if (std::optional<celery::TaskResult> r = client.WaitAny(ids, milliseconds(250))) {
        client.Forget(ids);  // a late result of the other send is a harmless duplicate
        return *r;
      }
      const Json started = client.Started(id);
      if (!started.is_object()) continue;
      const std::string node = started.value("hostname", "");
      if (!announced) {
        event("started on " + node);
        announced = true;
      }
      if (started.value("kf_acks_late", false) || call.liveness_interval.count() == 0 || node.empty()) continue;
      if (Clock::now() - last_ping < call.liveness_interval) continue;
      last_ping = Clock::now();
      if (client.Ping(node, milliseconds(2000))) {
        misses = 0;
      } else if (++misses >= call.liveness_misses) {
        lost = true;
        why = "worker " + node + " was lost";
      }
    }
    if (!lost) why = fmt::format("no result within {:.0f} s", std::chrono::duration<double>(call.timeout).count());
    if (send < call.max_sends) event(fmt::format("resending with a new task id: {}", why));
  }
  throw Error(ErrorKind::kLimit,
              fmt::format("{}: {} after {} send(s) to queue {}", std::string(task), why, call.max_sends, options.queue));
}

std::vector<LiveWorker> InspectWorkers(CeleryClient& client, milliseconds timeout) {
  std::map<std::string, LiveWorker> workers;
  auto answers = client.Broadcast({"active_queues", "active", "stats"}, timeout);
  for (const auto& [node, answer] : answers["active_queues"]) {
    LiveWorker& w = workers[node];
    w.node = node;
    if (answer.is_array()) {
      for (const Json& q : answer) {
        if (q.is_object() && q.contains("name") && q["name"].is_string()) w.queues.push_back(q["name"].get<std::string>());
      }
    }
  }
  for (const auto& [node, answer] : answers["active"]) {
    LiveWorker& w = workers[node];
    w.node = node;
    if (answer.is_array()) w.active = answer;
  }
  for (const auto& [node, answer] : answers["stats"]) {
    LiveWorker& w = workers[node];
    w.node = node;
    w.stats = answer;
  }
  std::vector<LiveWorker> out;
  for (auto& [node, w] : workers) out.push_back(std::move(w));
  return out;
}

}  // namespace kf
