// Remote control of a Worker (celery-interop.md §2.3): its own connection and thread, consuming
// <node>.celery.pidbox (bound to the fanout exchange celery.pidbox) and answering on reply.celery.pidbox.
#include <unistd.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "core/clock.hpp"
#include "kernelfoundry/error.hpp"
#include "worker/worker_impl.hpp"

namespace kf {

namespace {

// Celery's task_id argument: one id or a list of them.
std::vector<std::string> TaskIds(const Json& arguments) {
  std::vector<std::string> ids;
  const Json& v = arguments.contains("task_id") ? arguments["task_id"] : Json(nullptr);
  if (v.is_string()) ids.push_back(v.get<std::string>());
  if (v.is_array()) {
    for (const Json& id : v) {
      if (id.is_string()) ids.push_back(id.get<std::string>());
    }
  }
  return ids;
}

std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ", ") + id;
  return out;
}

}  // namespace

void Worker::Impl::Revoke(const std::vector<std::string>& ids, bool terminate) {
  std::lock_guard<std::mutex> lock(mu);
  for (const std::string& id : ids) {
    auto [it, inserted] = revoked.emplace(id, terminate);
    if (!inserted) {
      it->second = it->second || terminate;
      continue;
    }
    revoked_order.push_back(id);
    if (revoked_order.size() > kMaxRevoked) {
      revoked.erase(revoked_order.front());
      revoked_order.pop_front();
    }
  }
}

std::optional<bool> Worker::Impl::RevokedState(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = revoked.find(id);
  if (it == revoked.end()) return std::nullopt;
  return it->second;
}

Json Worker::Impl::ControlAnswer(const celery::ControlRequest& request) {
  const std::string& method = request.method;
  if (method == "ping") return Json{{"ok", "pong"}};
  if (method == "revoke" || method == "terminate") {
    // Celery's revoke(task_id, terminate, signal) and terminate(signal, task_id). A running job is asked to
    // stop (its slot notices within 200 ms); any signal name is accepted and means "stop".
    const std::vector<std::string> ids = TaskIds(request.arguments);
    const bool terminate = method == "terminate" || request.arguments.value("terminate", false);
    Revoke(ids, terminate);
    Log(fmt::format("remote control: {} {}{}", method, JoinIds(ids), terminate ? " (terminate)" : ""));
    if (!terminate) return Json{{"ok", fmt::format("tasks {} flagged as revoked", JoinIds(ids))}};
    std::vector<std::string> running;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& [slot, job] : active) {
        if (std::find(ids.begin(), ids.end(), job.id) != ids.end()) running.push_back(job.id);
      }
    }
    if (running.empty()) return Json{{"ok", "terminate: tasks unknown"}};
    return Json{{"ok", "terminate: " + JoinIds(running)}};
  }
  if (method == "revoked") {
    std::lock_guard<std::mutex> lock(mu);
    return Json(std::vector<std::string>(revoked_order.begin(), revoked_order.end()));
  }
  if (method == "active_queues") {
    Json queues = Json::array();
    for (const std::string& q : o.queues) queues.push_back(celery::QueueAsDict(q));
    return queues;
  }
  if (method == "active") {
    Json jobs = Json::array();
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [slot, job] : active) {
      jobs.push_back(Json{{"id", job.id},
                          {"name", job.task},
                          {"args", job.args_repr},
                          {"kwargs", "{}"},
                          {"type", job.task},
                          {"hostname", node},
                          {"time_start", job.time_start},
                          {"acknowledged", false},
                          {"delivery_info", Json{{"exchange", ""}, {"routing_key", job.queue}, {"priority", 0},
                                                 {"redelivered", job.delivery > 1}}},
                          {"worker_pid", job.pid},
                          {"kf_delivery", job.delivery}});
    }
    return jobs;
  }
  if (method == "stats") {
    Json totals_json = Json::object();
    Json processes = Json::array();
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& [task, n] : totals) totals_json[task] = n;
      for (const auto& [slot, job] : active) processes.push_back(job.pid);
    }
    return Json{{"pid", static_cast<int>(::getpid())},
                {"clock", std::to_string(clock.load())},
                {"total", totals_json},
                {"pool", Json{{"max-concurrency", o.concurrency}, {"processes", processes}}},
                {"broker", Json{{"transport", "amqp"}, {"url", o.broker_display}}},
                {"kf", Json{{"received", stats.received.load()},
                            {"succeeded", stats.succeeded.load()},
                            {"failed", stats.failed.load()},
                            {"rejected", stats.rejected.load()},
                            {"requeued", stats.requeued.load()},
                            {"reconnects", stats.reconnects.load()},
                            {"max_deliveries", o.max_deliveries}}}};
  }
  if (method == "hello") return Json{{"revoked", Json::object()}, {"clock", clock.load()}};
  if (method == "shutdown") {
    Log("remote control: shutdown requested");
    std::lock_guard<std::mutex> lock(mu);
    if (!stopping) stop_requested_at = std::chrono::steady_clock::now();
    stopping = true;
    cv.notify_all();
    return Json{{"ok", "shutdown requested"}};
  }
  return Json{{"error", fmt::format("No such command: '{}'", method)}};
}

void Worker::Impl::ServeControl() {
  std::chrono::milliseconds backoff = o.reconnect_min;
  while (!slots_done) {
    std::unique_ptr<Broker> b;
    try {
      b = o.connect();
      b->DeclareExchange(celery::PidboxExchange());
      b->DeclareExchange(celery::PidboxReplyExchange());
      const QueueSpec q = celery::PidboxQueue(node);
      b->DeclareQueue(q);
      b->BindQueue(q.name, celery::PidboxExchange().name, "");
      b->Consume(q.name, /*no_ack=*/true);
      backoff = o.reconnect_min;
    } catch (const Error& e) {
      Log(fmt::format("remote control: cannot connect: {}", e.what()));
      // Sleep in short steps so that the end of the slots is noticed.
      for (auto waited = std::chrono::milliseconds(0); waited < backoff && !slots_done;
           waited += std::chrono::milliseconds(100)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      backoff = std::min(backoff * 2, o.reconnect_max);
      continue;
    }
    try {
      while (!slots_done) {
        std::optional<Delivery> d = b->Next(std::chrono::milliseconds(100));
        if (!d) continue;
        celery::ControlRequest request;
        try {
          request = celery::DecodeControlRequest(d->message);
        } catch (const Error& e) {
          Log(fmt::format("remote control: ignoring a bad request: {}", e.what()));
          continue;
        }
        const Json& h = d->message.properties.headers;
        if (h.is_object() && h.contains("clock") && h["clock"].is_number_integer()) {
          int64_t theirs = h["clock"].get<int64_t>();
          int64_t ours = clock.load();
          while (theirs > ours && !clock.compare_exchange_weak(ours, theirs)) {
          }
        }
        if (!celery::ControlRequestIsFor(request, node, UnixTimeNow())) continue;
        Json answer = ControlAnswer(request);
        if (request.reply_exchange.empty() || request.reply_routing_key.empty()) continue;
        b->Publish(celery::EncodeControlReply(request, node, answer, ++clock));
        ++stats.control_replies;
      }
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIO) {
        Log(fmt::format("remote control: {}", e.what()));
        continue;
      }
      Log(fmt::format("remote control: broker connection lost ({}); reconnecting", e.what()));
    }
  }
}

}  // namespace kf
