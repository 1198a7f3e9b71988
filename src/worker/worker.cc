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
#include "kernelfoundry/record.hpp"
#include "worker/admission.hpp"
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

  void BadMessage(Broker& b, const Delivery& d, const std::string& error) {
    auto [id, reply_to] = IdentityOf(d.message);
    w_.Log(fmt::format("slot {}: bad message from {} (id {}): {}", index_, d.queue, id.empty() ? "?" : id, error));
    if (!id.empty() && !reply_to.empty()) {
      const std::string text = "kf worker cannot run this message: " + error;
      celery::TaskResult r{id, std::string(celery::kFailure), celery::ExceptionInfo("ValueError", text),
                           Traceback("builtins", "ValueError", text, w_.node), Json::array()};
      Reply(b, reply_to, d.message.properties.correlation_id, r);
      ++w_.stats.failed;
    }
    b.Reject(d.delivery_tag, /*requeue=*/false);
    ++w_.stats.rejected;
  }

  // An unknown task name: Celery answers NotRegistered and drops the message (not recorded).
  void NotRegistered(Broker& b, const Delivery& d, const celery::TaskMessage& m) {
    w_.Log(fmt::format("slot {}: unknown task '{}' ({}); rejected", index_, m.task, m.id));
    celery::TaskResult r{m.id, std::string(celery::kFailure), celery::ExceptionInfo("NotRegistered", m.task, "celery.exceptions"),
                         Traceback("celery.exceptions", "NotRegistered", m.task, w_.node), Json::array()};
    Reply(b, m.reply_to, m.correlation_id, r);
    b.Reject(d.delivery_tag, /*requeue=*/false);
    ++w_.stats.rejected;
  }

  // The reply of a finished job (or of one answered without running).
  celery::TaskResult ResultOf(const celery::TaskMessage& m, const JobRecord& rec) const {
    celery::TaskResult r{m.id, std::string(WorkerJobStatusName(rec.status)), rec.result, nullptr, Json::array()};
    if (rec.status != WorkerJobStatus::kSuccess) r.traceback = TracebackOf(rec.result, w_.node);
    return r;
  }

  void Finish(Broker& b, const Delivery& d, const celery::TaskMessage& m, JobRecord rec, bool ack) {
    if (!m.reply_to.empty()) {
      Message reply = celery::EncodeResultMessage(ResultOf(m, rec), m.reply_to, m.correlation_id, ReplyTypeFor(d.message));
      if (reply.body.size() > b.max_message_bytes()) {
        const std::string text = fmt::format(
            "the result of {} bytes exceeds the broker's message size limit of {} bytes (RabbitMQ max_message_size); "
            "the task's outputs or artifacts are too large",
            reply.body.size(), b.max_message_bytes());
        w_.Log(fmt::format("slot {}: {} {}: {}", index_, celery::TaskShortName(m.task), m.id, text));
        rec.status = WorkerJobStatus::kFailure;
        rec.result = celery::ExceptionInfo("RuntimeError", text);
        rec.cached = nullptr;
        reply = celery::EncodeResultMessage(ResultOf(m, rec), m.reply_to, m.correlation_id, ReplyTypeFor(d.message));
      }
      b.Publish(reply);
    }
    if (ack) b.Ack(d.delivery_tag);
    (rec.status == WorkerJobStatus::kSuccess ? w_.stats.succeeded : w_.stats.failed)++;
    {
      std::lock_guard<std::mutex> lock(w_.mu);
      ++w_.totals[m.task];
    }
    Record(rec);
    w_.Log(fmt::format("slot {}: {} {} (delivery {}) {} in {:.2f} s", index_, celery::TaskShortName(m.task), m.id,
                       rec.delivery, WorkerJobStatusName(rec.status), rec.seconds));
  }

  void Record(const JobRecord& rec) {
    if (w_.o.store == nullptr) return;
    std::string err = RecordWorkerJob(*w_.o.store, ToWorkerJob(rec));
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

  // What the slot knows about a delivery of `m` besides the message (worker_internal::Admit's input).
  worker_internal::AdmitFacts FactsOf(const celery::TaskMessage& m, const Delivery& d) {
    worker_internal::AdmitFacts f;
    f.redelivered = d.redelivered;
    f.prior = PriorDeliveries(d.message);
    {
      std::lock_guard<std::mutex> lock(w_.mu);
      f.answered_after_loss = w_.completed_after_loss.count(m.id) > 0;
    }
    f.stopping = w_.stopping;
    f.revoked = w_.RevokedState(m.id).has_value();
    f.registered = IsRegisteredTask(m.task);
    f.now = UnixTimeNow();
    f.max_deliveries = w_.o.max_deliveries;
    return f;
  }

  // One delivery: decode, admit (admission.hpp), then run, requeue or answer as admitted.
  void Handle(Broker& b, const Delivery& d) {
    using worker_internal::AdmitAction;
    ++w_.stats.received;
    celery::TaskMessage m;
    try {
      m = celery::DecodeTaskMessage(d.message);
    } catch (const Error& e) {
      BadMessage(b, d, e.what());
      return;
    }
    const worker_internal::AdmitFacts facts = FactsOf(m, d);
    const worker_internal::Admission a = worker_internal::Admit(m, facts);
    switch (a.action) {
      case AdmitAction::kDrop:
        w_.Log(fmt::format("slot {}: {} was answered after a reconnect; dropping its redelivery", index_, m.id));
        b.Ack(d.delivery_tag);
        return;
      case AdmitAction::kRequeue:
        if (facts.redelivered) {
          w_.Log(fmt::format("slot {}: {} {} was redelivered (worker lost {} time(s)); requeued as delivery {}", index_,
                             celery::TaskShortName(m.task), m.id, a.prior, a.prior + 1));
        }
        PutBack(b, d, a.prior);
        return;
      case AdmitAction::kReply: {
        JobRecord rec = MakeRecord(m, d, a.delivery);
        rec.status = a.status;
        rec.result = celery::ExceptionInfo(a.failure.exc_type, a.failure.message, a.failure.exc_module);
        Finish(b, d, m, std::move(rec), true);
        return;
      }
      case AdmitAction::kNotRegistered:
        NotRegistered(b, d, m);
        return;
      case AdmitAction::kBadMessage:
        BadMessage(b, d, a.error);
        return;
      case AdmitAction::kRun:
        if (a.eta && !AwaitEta(b, d, *a.eta, a.prior)) return;
        Run(b, d, m, MakeRecord(m, d, a.delivery), a.prior);
        return;
    }
  }

  // Holds a delivery until `eta` (Unix time); false when the worker began stopping meanwhile (it was put back).
  bool AwaitEta(Broker& b, const Delivery& d, double eta, int prior) {
    while (UnixTimeNow() < eta) {
      if (w_.stopping) {
        PutBack(b, d, prior);
        return false;
      }
      // Prefetch 1: nothing else should arrive; the call keeps heartbeats going.
      if (std::optional<Delivery> extra = b.Next(milliseconds(200))) PutBack(b, *extra, PriorDeliveries(extra->message));
    }
    return true;
  }

  // A job the slot supervises, from its start to its answer.
  struct Running {
    Clock::time_point t0 = Clock::now();
    bool connected = true;
    std::string lost_reason;
    /// A job asked to stop cooperatively (soft time limit, revoke with terminate) ends with this outcome,
    /// whatever it returns; it is killed when it has not ended after cancel_grace.
    std::optional<std::pair<WorkerJobStatus, Json>> canceled;   // (status, exception dict)
    Clock::time_point canceled_at{};
    std::optional<Json> answer;  ///< the job's answer, or the failure of a kill
    bool put_back = false;       ///< killed by a stop and put back: no reply
  };

  // Starts the job process on `m`, marks the slot active and replies STARTED. Throws kf::Error(kInternal)
  // (after putting the message back) when no job can be started.
  void StartJob(Broker& b, const Delivery& d, const celery::TaskMessage& m, const JobRecord& rec, int prior,
                Running& run) {
    Json request = {{"task", m.task},   {"args", m.args},
                    {"kwargs", m.kwargs}, {"queue", d.queue},
                    {"work_root", w_.o.work_root.string()}, {"verdict_cache", w_.o.verdict_cache}};
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
    w_.Log(fmt::format("slot {}: {} {} from {} (delivery {}) started", index_, celery::TaskShortName(m.task), m.id,
                       d.queue, rec.delivery));
    try {
      Reply(b, m.reply_to, m.correlation_id,
            celery::TaskResult{m.id, std::string(celery::kStarted),
                               Json{{"pid", pid}, {"hostname", w_.node}, {"kf_acks_late", true}}, nullptr,
                               Json::array()});
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIO) throw;
      run.connected = false;
      run.lost_reason = e.what();
    }
    run.t0 = Clock::now();
  }

  // Asks the running job to stop cooperatively; it will end with `status` / `exc`.
  void Cancel(const celery::TaskMessage& m, Running& run, WorkerJobStatus status, Json exc, const std::string& why) {
    run.canceled.emplace(status, std::move(exc));
    run.canceled_at = Clock::now();
    runner_->RequestStop();
    ++w_.stats.canceled;
    w_.Log(fmt::format("slot {}: {} {}: {}; asked the job to stop", index_, celery::TaskShortName(m.task), m.id, why));
  }

  // Keeps the connection serviced while a job runs (heartbeats; a stopping worker cancels its consumers).
  void ServiceConnection(Broker& b, const celery::TaskMessage& m, Running& run) {
    if (!run.connected) return;
    try {
      if (w_.stopping) CancelConsumers(b);
      // Prefetch 1: nothing else arrives; the call services heartbeats.
      if (std::optional<Delivery> extra = b.Next(milliseconds(1))) PutBack(b, *extra, PriorDeliveries(extra->message));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIO) throw;
      run.connected = false;
      run.lost_reason = e.what();
      w_.Log(fmt::format("slot {}: broker connection lost during {} ({}); the job goes on", index_, m.id,
                         run.lost_reason));
    }
  }

  // One supervision step of a running job: wait up to 200 ms for its answer, then enforce the time limits,
  // revoke, the cancel grace and a stop.
  void Supervise(Broker& b, const Delivery& d, const celery::TaskMessage& m, int prior, Running& run) {
    run.answer = runner_->Wait(milliseconds(200));
    if (run.answer) return;
    ServiceConnection(b, m, run);
    const double elapsed = std::chrono::duration<double>(Clock::now() - run.t0).count();
    const std::string name = celery::TaskShortName(m.task);
    if (m.hard_time_limit && *m.hard_time_limit > 0 && elapsed > *m.hard_time_limit) {
      run.canceled.reset();  // the hard limit wins: the job is killed
      runner_->Kill();
      run.answer = Json{{"failure", Json{{"exc_type", "TimeLimitExceeded"}, {"exc_module", "celery.exceptions"},
                                         {"message", fmt::format("{:g}", *m.hard_time_limit)}}}};
    } else if (!run.canceled && m.soft_time_limit && *m.soft_time_limit > 0 && elapsed > *m.soft_time_limit) {
      const std::string text = fmt::format("SoftTimeLimitExceeded({:g})", *m.soft_time_limit);
      Cancel(m, run, WorkerJobStatus::kFailure, celery::ExceptionInfo("SoftTimeLimitExceeded", text, "celery.exceptions"),
             fmt::format("soft time limit of {:g} s", *m.soft_time_limit));
    } else if (!run.canceled && w_.RevokedState(m.id).value_or(false)) {
      Cancel(m, run, WorkerJobStatus::kRevoked, celery::ExceptionInfo("TaskRevokedError", "terminated", "celery.exceptions"),
             "revoked with terminate");
    } else if (run.canceled && Clock::now() - run.canceled_at > w_.o.cancel_grace) {
      runner_->Kill();
      w_.Log(fmt::format("slot {}: {} {} did not stop within {:.1f} s; killed", index_, name, m.id,
                         std::chrono::duration<double>(w_.o.cancel_grace).count()));
      run.answer = Json{{"canceled", true}};
    } else if (w_.stopping && (w_.immediate || Clock::now() - w_.stop_requested_at > w_.o.stop_grace)) {
      runner_->Kill();
      w_.Log(fmt::format("slot {}: stopping: {} {} killed and put back", index_, name, m.id));
      if (run.connected) PutBack(b, d, prior);  // not connected: RabbitMQ has requeued it already
      run.put_back = true;
    }
  }

  // The job's outcome from how it ended: a cooperative stop's, its answer's, or its failure's.
  static void Conclude(const Running& run, JobRecord& rec) {
    rec.seconds = std::chrono::duration<double>(Clock::now() - run.t0).count();
    if (run.canceled) {
      rec.status = run.canceled->first;
      rec.result = run.canceled->second;
    } else if (run.answer->contains("result")) {
      rec.status = WorkerJobStatus::kSuccess;
      rec.result = (*run.answer)["result"];
      rec.cached = run.answer->value("cached", Json(nullptr));
    } else {
      const Json& f = (*run.answer)["failure"];
      rec.status = WorkerJobStatus::kFailure;
      rec.result = celery::ExceptionInfo(f.value("exc_type", "RuntimeError"), f.value("message", ""),
                                         f.value("exc_module", "builtins"));
    }
  }

  void Run(Broker& b, const Delivery& d, const celery::TaskMessage& m, JobRecord rec, int prior) {
    struct ClearActive {
      Worker::Impl& w;
      int index;
      ~ClearActive() {
        std::lock_guard<std::mutex> lock(w.mu);
        w.active.erase(index);
      }
    } clear{w_, index_};
    Running run;
    StartJob(b, d, m, rec, prior, run);
    while (!run.answer && !run.put_back) Supervise(b, d, m, prior, run);
    if (run.put_back) return;
    Conclude(run, rec);
    if (run.connected) {
      Finish(b, d, m, rec, true);
      return;
    }
    // The delivery is gone with the connection (RabbitMQ requeued it). Publish the reply once reconnected
    // and drop the redelivered copy if it comes back here.
    {
      std::lock_guard<std::mutex> lock(w_.mu);
      w_.completed_after_loss.insert(m.id);
    }
    if (!m.reply_to.empty()) pending_reply_ = celery::EncodeResultMessage(ResultOf(m, rec), m.reply_to, m.correlation_id);
    (rec.status == WorkerJobStatus::kSuccess ? w_.stats.succeeded : w_.stats.failed)++;
    Record(rec);
    throw Error(ErrorKind::kIO, "connection lost during job " + m.id + ": " + run.lost_reason);
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
