// Worker job slots (see worker.hpp): one connection per slot, prefetch 1, STARTED → run in the job process →
// SUCCESS/FAILURE → ack; delivery counting, time limits, expiry, graceful stop, reconnects.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "core/clock.hpp"
#include "kernelfoundry/device_slots.hpp"
#include "kernelfoundry/error.hpp"
#include "worker/job_runner.hpp"
#include "worker/worker_impl.hpp"

namespace kf {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr const char* kDeliveriesHeader = "kf_deliveries";

int PriorDeliveries(const Message& m) {
  const Json& h = m.properties.headers;
  if (h.is_object() && h.contains(kDeliveriesHeader) && h[kDeliveriesHeader].is_number_integer()) {
    return std::max(0, h[kDeliveriesHeader].get<int>());
  }
  return 0;
}

std::string Traceback(const std::string& exc_module, const std::string& exc_type, const std::string& message,
                      const std::string& node) {
  return fmt::format("Traceback (most recent call last):\n  raised by kf worker {}\n{}.{}: {}\n", node, exc_module,
                     exc_type, message);
}

// The traceback text of an exception dict.
std::string TracebackOf(const Json& exc, const std::string& node) {
  std::string message;
  const Json& m = exc.value("exc_message", Json::array());
  if (m.is_array() && !m.empty()) message = m[0].is_string() ? m[0].get<std::string>() : DumpJson(m[0]);
  return Traceback(exc.value("exc_module", "builtins"), exc.value("exc_type", "RuntimeError"), message, node);
}

// A best-effort id/reply_to of a message that did not decode, so it can still be answered.
std::pair<std::string, std::string> IdentityOf(const Message& m) {
  std::string id;
  const Json& h = m.properties.headers;
  if (h.is_object() && h.contains("id") && h["id"].is_string()) id = h["id"].get<std::string>();
  if (id.empty()) id = m.properties.correlation_id;
  return {id, m.properties.reply_to};
}

celery::ContentType ReplyTypeFor(const Message&) { return celery::ContentType::kMsgpack; }

class Slot {
 public:
  Slot(Worker::Impl& w, int index) : w_(w), index_(index) {
    DeviceSlots& devices = w.o.device_slots ? *w.o.device_slots : ProcessDeviceSlots();
    if (w.o.run_in_process) {
      runner_ = worker_internal::MakeThreadJobRunner(w.o.body ? w.o.body : worker_internal::BodyFn(RunTaskBody),
                                                     devices);
    } else {
      std::vector<std::string> argv = w.o.child_argv;
      if (argv.empty()) argv = {"/proc/self/exe", "worker-child"};
      runner_ = worker_internal::MakeChildJobRunner(std::move(argv), devices);
    }
  }

  void Run() {
    try {
      runner_->Prepare();  // the job process warms up (worker_info) while the slot connects
    } catch (const Error& e) {
      w_.Log(fmt::format("slot {}: {}", index_, e.what()));
    }
    milliseconds backoff = w_.o.reconnect_min;
    bool first = true;
    while (!w_.stopping) {
      std::unique_ptr<Broker> broker;
      try {
        broker = w_.o.connect();
        Setup(*broker);
      } catch (const Error& e) {
        w_.Log(fmt::format("slot {}: cannot connect to {}: {}; retrying in {:.1f} s", index_, w_.o.broker_display,
                           e.what(), static_cast<double>(backoff.count()) / 1000));
        if (w_.SleepUnlessStopped(backoff)) break;
        backoff = std::min(backoff * 2, w_.o.reconnect_max);
        continue;
      }
      if (!first) {
        ++w_.stats.reconnects;
        w_.Log(fmt::format("slot {}: reconnected to {}", index_, w_.o.broker_display));
      }
      first = false;
      backoff = w_.o.reconnect_min;
      try {
        if (pending_reply_) {
          broker->Publish(*pending_reply_);
          pending_reply_.reset();
          w_.Log(fmt::format("slot {}: published the reply of a job that finished while disconnected", index_));
        }
        while (!w_.stopping) {
          std::optional<Delivery> d = broker->Next(milliseconds(200));
          if (d) Handle(*broker, *d);
        }
        CancelConsumers(*broker);
        // Deliveries already on their way when the consumers were cancelled go back uncounted.
        while (std::optional<Delivery> d = broker->Next(milliseconds(100))) PutBack(*broker, *d, PriorDeliveries(d->message));
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kIO) throw;
        w_.Log(fmt::format("slot {}: broker connection lost ({}); reconnecting", index_, e.what()));
      }
    }
    runner_->Kill();
  }

 private:
  void Setup(Broker& b) {
    consumer_tags_.clear();
    consumers_cancelled_ = false;
    for (const std::string& q : w_.o.queues) celery::DeclareTaskQueue(b, q);
    b.SetPrefetch(1);
    for (const std::string& q : w_.o.queues) consumer_tags_.push_back(b.Consume(q, /*no_ack=*/false));
  }

  void CancelConsumers(Broker& b) {
    if (consumers_cancelled_) return;
    consumers_cancelled_ = true;
    for (const std::string& tag : consumer_tags_) b.CancelConsumer(tag);
  }

  void Reply(Broker& b, const std::string& reply_to, const std::string& correlation_id, const celery::TaskResult& r) {
    if (reply_to.empty()) return;
    b.Publish(celery::EncodeResultMessage(r, reply_to, correlation_id, celery::ContentType::kMsgpack));
  }

  // Puts a delivery back without counting a lost worker: a copy with the delivery count so far, then ack.
  void PutBack(Broker& b, const Delivery& d, int prior) {
    Message copy = d.message;
    copy.exchange = "";
    copy.routing_key = d.queue;
    if (!copy.properties.headers.is_object()) copy.properties.headers = Json::object();
    copy.properties.headers[kDeliveriesHeader] = prior;
    b.Publish(copy);
    b.Ack(d.delivery_tag);
    ++w_.stats.requeued;
  }

  void BadMessage(Broker& b, const Delivery& d, const Error& e) {
    auto [id, reply_to] = IdentityOf(d.message);
    w_.Log(fmt::format("slot {}: bad message from {} (id {}): {}", index_, d.queue, id.empty() ? "?" : id, e.what()));
    if (!id.empty() && !reply_to.empty()) {
      const std::string text = std::string("kf worker cannot run this message: ") + e.what();
      celery::TaskResult r{id, std::string(celery::kFailure), celery::ExceptionInfo("ValueError", text),
                           Traceback("builtins", "ValueError", text, w_.node), Json::array()};
      Reply(b, reply_to, d.message.properties.correlation_id, r);
      ++w_.stats.failed;
    }
    b.Reject(d.delivery_tag, /*requeue=*/false);
    ++w_.stats.rejected;
  }

  void Finish(Broker& b, const Delivery& d, const celery::TaskMessage& m, JobRecord rec, bool ack) {
    celery::TaskResult r;
    r.task_id = m.id;
    r.status = rec.status;
    if (rec.status == celery::kSuccess) {
      r.result = rec.result;
    } else {
      r.result = rec.result;
      r.traceback = TracebackOf(rec.result, w_.node);
    }
    if (!m.reply_to.empty()) {
      Message reply = celery::EncodeResultMessage(r, m.reply_to, m.correlation_id, ReplyTypeFor(d.message));
      if (reply.body.size() > b.max_message_bytes()) {
        const std::string text = fmt::format(
            "the result of {} bytes exceeds the broker's message size limit of {} bytes (RabbitMQ max_message_size); "
            "the task's outputs or artifacts are too large",
            reply.body.size(), b.max_message_bytes());
        w_.Log(fmt::format("slot {}: {} {}: {}", index_, celery::TaskShortName(m.task), m.id, text));
        rec.status = std::string(celery::kFailure);
        rec.result = celery::ExceptionInfo("RuntimeError", text);
        r.status = rec.status;
        r.result = rec.result;
        r.traceback = Traceback("builtins", "RuntimeError", text, w_.node);
        reply = celery::EncodeResultMessage(r, m.reply_to, m.correlation_id, ReplyTypeFor(d.message));
      }
      b.Publish(reply);
    }
    if (ack) b.Ack(d.delivery_tag);
    (rec.status == celery::kSuccess ? w_.stats.succeeded : w_.stats.failed)++;
    {
      std::lock_guard<std::mutex> lock(w_.mu);
      ++w_.totals[m.task];
    }
    Record(rec);
    w_.Log(fmt::format("slot {}: {} {} (delivery {}) {} in {:.2f} s", index_, celery::TaskShortName(m.task), m.id, rec.delivery,
                       rec.status, rec.seconds));
  }

  void Record(const JobRecord& rec) {
    if (w_.o.store == nullptr) return;
    std::string err = RecordJob(*w_.o.store, rec);
    if (!err.empty()) w_.Log(fmt::format("slot {}: could not record job {}: {}", index_, rec.message.id, err));
  }

  JobRecord MakeRecord(const celery::TaskMessage& m, const Delivery& d, int delivery) {
    JobRecord rec;
    rec.message = m;
    rec.node = w_.node;
    rec.queue = d.queue;
    rec.delivery = delivery;
    rec.started_epoch = UnixTimeNow();
    return rec;
  }

  void Handle(Broker& b, const Delivery& d) {
    ++w_.stats.received;
    celery::TaskMessage m;
    try {
      m = celery::DecodeTaskMessage(d.message);
    } catch (const Error& e) {
      BadMessage(b, d, e);
      return;
    }
    int prior = PriorDeliveries(d.message);
    if (d.redelivered) {
      {
        std::lock_guard<std::mutex> lock(w_.mu);
        if (w_.completed_after_loss.count(m.id)) {
          w_.Log(fmt::format("slot {}: {} was answered after a reconnect; dropping its redelivery", index_, m.id));
          b.Ack(d.delivery_tag);
          return;
        }
      }
      ++prior;  // the previous delivery was never acknowledged: its worker was lost
      if (prior >= w_.o.max_deliveries) {
        JobRecord rec = MakeRecord(m, d, prior);
        rec.status = std::string(celery::kFailure);
        rec.result = celery::ExceptionInfo(
            "WorkerLostError",
            fmt::format("the worker was lost during each of {} deliveries of this task (poison limit {}, "
                        "kf worker --max-deliveries)",
                        prior, w_.o.max_deliveries),
            "billiard.exceptions");
        Finish(b, d, m, rec, true);
        return;
      }
      w_.Log(fmt::format("slot {}: {} {} was redelivered (worker lost {} time(s)); requeued as delivery {}", index_,
                         celery::TaskShortName(m.task), m.id, prior, prior + 1));
      PutBack(b, d, prior);
      return;
    }
    const int delivery = prior + 1;
    if (w_.stopping) {
      PutBack(b, d, prior);
      return;
    }
    if (w_.RevokedState(m.id)) {
      // Revoked (remote control) before it reached us: Celery answers REVOKED "revoked" and drops it.
      JobRecord rec = MakeRecord(m, d, delivery);
      rec.status = std::string(celery::kRevoked);
      rec.result = celery::ExceptionInfo("TaskRevokedError", "revoked", "celery.exceptions");
      Finish(b, d, m, rec, true);
      return;
    }
    if (!IsRegisteredTask(m.task)) {
      w_.Log(fmt::format("slot {}: unknown task '{}' ({}); rejected", index_, m.task, m.id));
      celery::TaskResult r{m.id, std::string(celery::kFailure), celery::ExceptionInfo("NotRegistered", m.task, "celery.exceptions"),
                           Traceback("celery.exceptions", "NotRegistered", m.task, w_.node), Json::array()};
      Reply(b, m.reply_to, m.correlation_id, r);
      b.Reject(d.delivery_tag, /*requeue=*/false);
      ++w_.stats.rejected;
      return;
    }
    JobRecord rec = MakeRecord(m, d, delivery);
    for (const char* key : {"callbacks", "errbacks", "chain", "chord"}) {
      const Json& v = m.embed.contains(key) ? m.embed[key] : Json(nullptr);
      if (!v.is_null() && !(v.is_array() && v.empty())) {
        rec.status = std::string(celery::kFailure);
        rec.result = celery::ExceptionInfo(
            "NotImplementedError",
            fmt::format("kf worker does not support Celery canvas: the message has '{}' set (unsupported)", key));
        Finish(b, d, m, rec, true);
        return;
      }
    }
    if (m.expires) {
      double expires = 0;
      try {
        expires = celery::ParseIsoTime(*m.expires);
      } catch (const Error& e) {
        BadMessage(b, d, e);
        return;
      }
      if (UnixTimeNow() > expires) {
        rec.status = std::string(celery::kRevoked);
        rec.result = celery::ExceptionInfo("TaskRevokedError", "expired", "celery.exceptions");
        Finish(b, d, m, rec, true);
        return;
      }
    }
    if (m.eta) {
      double eta = 0;
      try {
        eta = celery::ParseIsoTime(*m.eta);
      } catch (const Error& e) {
        BadMessage(b, d, e);
        return;
      }
      while (UnixTimeNow() < eta) {
        if (w_.stopping) {
          PutBack(b, d, prior);
          return;
        }
        // Prefetch 1: nothing else should arrive; the call keeps heartbeats going.
        if (std::optional<Delivery> extra = b.Next(milliseconds(200))) PutBack(b, *extra, PriorDeliveries(extra->message));
      }
    }
    Run(b, d, m, rec, prior);
  }

  void Run(Broker& b, const Delivery& d, const celery::TaskMessage& m, JobRecord rec, int prior) {
    Json request = {{"task", m.task}, {"args", m.args}, {"kwargs", m.kwargs}, {"queue", d.queue},
                    {"work_root", w_.o.work_root.string()}};
    try {
      runner_->Start(request);
    } catch (const Error& e) {
      // Not the message's fault: put it back uncounted and stop this worker (its supervisor restarts it).
      PutBack(b, d, prior);
      throw Error(ErrorKind::kInternal, std::string("cannot run jobs: ") + e.what());
    }
    const int pid = runner_->pid() > 0 ? runner_->pid() : static_cast<int>(::getpid());
    {
      std::lock_guard<std::mutex> lock(w_.mu);
      w_.active[index_] = ActiveJob{m.id, m.task, d.queue, m.headers.value("argsrepr", ""), rec.started_epoch, pid,
                                    rec.delivery};
    }
    struct ClearActive {
      Worker::Impl& w;
      int index;
      ~ClearActive() {
        std::lock_guard<std::mutex> lock(w.mu);
        w.active.erase(index);
      }
    } clear{w_, index_};
    w_.Log(fmt::format("slot {}: {} {} from {} (delivery {}) started", index_, celery::TaskShortName(m.task), m.id, d.queue,
                       rec.delivery));
    bool connected = true;
    std::string lost_reason;
    try {
      Reply(b, m.reply_to, m.correlation_id,
            celery::TaskResult{m.id, std::string(celery::kStarted),
                               Json{{"pid", pid}, {"hostname", w_.node}, {"kf_acks_late", true}}, nullptr,
                               Json::array()});
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIO) throw;
      connected = false;
      lost_reason = e.what();
    }
    const Clock::time_point t0 = Clock::now();
    std::optional<Json> answer;
    // A job asked to stop cooperatively (soft time limit, revoke with terminate) ends with this outcome,
    // whatever it returns; it is killed when it has not ended after cancel_grace.
    std::optional<std::pair<std::string, Json>> canceled;   // (status, exception dict)
    Clock::time_point canceled_at{};
    auto cancel = [&](std::string status, Json exc, const std::string& why) {
      canceled.emplace(std::move(status), std::move(exc));
      canceled_at = Clock::now();
      runner_->RequestStop();
      ++w_.stats.canceled;
      w_.Log(fmt::format("slot {}: {} {}: {}; asked the job to stop", index_, celery::TaskShortName(m.task), m.id, why));
    };
    while (!answer) {
      answer = runner_->Wait(milliseconds(200));
      if (answer) break;
      if (connected) {
        try {
          if (w_.stopping) CancelConsumers(b);
          // Prefetch 1: nothing else arrives; the call services heartbeats.
          if (std::optional<Delivery> extra = b.Next(milliseconds(1))) PutBack(b, *extra, PriorDeliveries(extra->message));
        } catch (const Error& e) {
          if (e.kind() != ErrorKind::kIO) throw;
          connected = false;
          lost_reason = e.what();
          w_.Log(fmt::format("slot {}: broker connection lost during {} ({}); the job goes on", index_, m.id,
                             lost_reason));
        }
      }
      const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      auto fail = [&](const char* type, const std::string& text) {
        runner_->Kill();
        answer = Json{{"failure", Json{{"exc_type", type}, {"exc_module", "celery.exceptions"}, {"message", text}}}};
      };
      if (m.hard_time_limit && *m.hard_time_limit > 0 && elapsed > *m.hard_time_limit) {
        canceled.reset();  // the hard limit wins: the job is killed
        fail("TimeLimitExceeded", fmt::format("{:g}", *m.hard_time_limit));
      } else if (!canceled && m.soft_time_limit && *m.soft_time_limit > 0 && elapsed > *m.soft_time_limit) {
        const std::string text = fmt::format("SoftTimeLimitExceeded({:g})", *m.soft_time_limit);
        cancel(std::string(celery::kFailure), celery::ExceptionInfo("SoftTimeLimitExceeded", text, "celery.exceptions"),
               fmt::format("soft time limit of {:g} s", *m.soft_time_limit));
      } else if (!canceled && w_.RevokedState(m.id).value_or(false)) {
        cancel(std::string(celery::kRevoked), celery::ExceptionInfo("TaskRevokedError", "terminated", "celery.exceptions"),
               "revoked with terminate");
      } else if (canceled && Clock::now() - canceled_at > w_.o.cancel_grace) {
        runner_->Kill();
        w_.Log(fmt::format("slot {}: {} {} did not stop within {:.1f} s; killed", index_, celery::TaskShortName(m.task), m.id,
                           std::chrono::duration<double>(w_.o.cancel_grace).count()));
        answer = Json{{"canceled", true}};
      } else if (w_.stopping &&
                 (w_.immediate || Clock::now() - w_.stop_requested_at > w_.o.stop_grace)) {
        runner_->Kill();
        w_.Log(fmt::format("slot {}: stopping: {} {} killed and put back", index_, celery::TaskShortName(m.task), m.id));
        if (connected) PutBack(b, d, prior);
        return;  // not connected: RabbitMQ has requeued it already
      }
    }
    rec.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (canceled) {
      rec.status = canceled->first;
      rec.result = canceled->second;
    } else if (answer->contains("result")) {
      rec.status = std::string(celery::kSuccess);
      rec.result = std::move((*answer)["result"]);
    } else {
      const Json& f = (*answer)["failure"];
      rec.status = std::string(celery::kFailure);
      rec.result = celery::ExceptionInfo(f.value("exc_type", "RuntimeError"), f.value("message", ""),
                                         f.value("exc_module", "builtins"));
    }
    if (connected) {
      Finish(b, d, m, rec, true);
      return;
    }
    // The delivery is gone with the connection (RabbitMQ requeued it). Publish the reply once reconnected
    // and drop the redelivered copy if it comes back here.
    {
      std::lock_guard<std::mutex> lock(w_.mu);
      w_.completed_after_loss.insert(m.id);
    }
    celery::TaskResult r{m.id, rec.status, rec.result, nullptr, Json::array()};
    if (rec.status != celery::kSuccess) r.traceback = TracebackOf(rec.result, w_.node);
    if (!m.reply_to.empty()) pending_reply_ = celery::EncodeResultMessage(r, m.reply_to, m.correlation_id);
    (rec.status == celery::kSuccess ? w_.stats.succeeded : w_.stats.failed)++;
    Record(rec);
    throw Error(ErrorKind::kIO, "connection lost during job " + m.id + ": " + lost_reason);
  }

  Worker::Impl& w_;
  int index_;
  std::unique_ptr<worker_internal::JobRunner> runner_;
  std::vector<std::string> consumer_tags_;
  bool consumers_cancelled_ = false;
  std::optional<Message> pending_reply_;
};

}  // namespace

void Worker::Impl::Log(const std::string& line) {
  if (o.log) {
    o.log(line);
    return;
  }
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  std::fprintf(stderr, "[%04d-%02d-%02d %02d:%02d:%02d %s] %s\n", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
               tm.tm_hour, tm.tm_min, tm.tm_sec, node.c_str(), line.c_str());
  std::fflush(stderr);
}

bool Worker::Impl::SleepUnlessStopped(milliseconds d) {
  std::unique_lock<std::mutex> lock(mu);
  return cv.wait_for(lock, d, [this] { return stopping.load(); });
}

std::string ExpandNodeName(const std::string& name) {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  const std::string host = buf[0] ? buf : "localhost";
  if (name.empty()) return "kf@" + host;
  const size_t dot = host.find('.');
  const std::string shortname = host.substr(0, dot);
  const std::string domain = dot == std::string::npos ? "" : host.substr(dot + 1);
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '%' || i + 1 == name.size()) {
      out += name[i];
      continue;
    }
    char c = name[++i];
    if (c == 'h') out += host;
    else if (c == 'n') out += shortname;
    else if (c == 'd') out += domain;
    else if (c == '%') out += '%';
    else out += std::string("%") + c;
  }
  if (out.find('@') == std::string::npos) out += "@" + host;  // Celery's default_nodename
  return out;
}

Worker::Worker(WorkerOptions options) : impl_(std::make_unique<Impl>()) {
  if (!options.connect) throw Error(ErrorKind::kInvalidArgument, "no broker connection", "", "broker");
  if (options.queues.empty()) throw Error(ErrorKind::kInvalidArgument, "no queues to consume (-Q)", "", "queues");
  if (options.concurrency < 1) throw Error(ErrorKind::kInvalidArgument, "concurrency must be at least 1", "", "-c");
  if (options.max_deliveries < 1) {
    throw Error(ErrorKind::kInvalidArgument, "max deliveries must be at least 1", "", "--max-deliveries");
  }
  impl_->node = ExpandNodeName(options.node_name);
  impl_->o = std::move(options);
}

Worker::~Worker() = default;

void Worker::Run() {
  ::signal(SIGPIPE, SIG_IGN);  // a job process that died must not kill us through its pipe
  Impl& w = *impl_;
  w.Log(fmt::format("kf worker {} consuming {} with {} slot(s) from {}", w.node,
                    [&] {
                      std::string q;
                      for (const std::string& s : w.o.queues) q += (q.empty() ? "" : ",") + s;
                      return q;
                    }(),
                    w.o.concurrency, w.o.broker_display));
  std::thread control([&w] { w.ServeControl(); });
  std::vector<std::thread> slots;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(w.o.concurrency));
  for (int i = 0; i < w.o.concurrency; ++i) {
    slots.emplace_back([&w, &errors, i] {
      try {
        Slot(w, i).Run();
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
        w.Log(fmt::format("slot {}: stopped by an internal error", i));
        if (!w.stopping) {
          // One broken slot stops the worker: a supervisor (systemd) restarts it cleanly.
          std::lock_guard<std::mutex> lock(w.mu);
          w.stop_requested_at = std::chrono::steady_clock::now();
          w.stopping = true;
          w.cv.notify_all();
        }
      }
    });
  }
  for (std::thread& t : slots) t.join();
  w.slots_done = true;
  control.join();
  w.Log(fmt::format("kf worker {} stopped ({} succeeded, {} failed, {} rejected, {} put back)", w.node,
                    w.stats.succeeded.load(), w.stats.failed.load(), w.stats.rejected.load(), w.stats.requeued.load()));
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

void Worker::RequestStop(bool immediate) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->stopping) impl_->stop_requested_at = std::chrono::steady_clock::now();
  if (immediate) impl_->immediate = true;
  impl_->stopping = true;
  impl_->cv.notify_all();
}

const std::string& Worker::node_name() const { return impl_->node; }
const WorkerStats& Worker::stats() const { return impl_->stats; }

}  // namespace kf
