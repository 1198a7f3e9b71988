// RecordRun: the job lifecycle around one evaluation, with cancellation (see kernelfoundry/record.hpp).
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/record.hpp"

namespace kf {
namespace {

// The task's config with the fields the DB requires (task_origin defaults to "custom").
Task WithDbDefaults(const Task& task) {
  Task t = task;
  if (!t.config.is_object()) t.config = Json::object();
  if (!t.config.contains("task_origin") || t.config["task_origin"].is_null()) t.config["task_origin"] = "custom";
  return t;
}

bool IsCanceled(Store& store, int64_t job_id) {
  Json job = store.GetJob(job_id);
  return job["status"] == JobStatusName(JobStatus::kCanceled);
}

/// Polls the job's status every `poll` on its own thread and requests `stop` once the job is CANCELED.
/// Errors while reading (a database that is briefly unreachable) are ignored until the next poll.
class CancelWatcher {
 public:
  CancelWatcher(Store& store, int64_t job_id, std::chrono::milliseconds poll, std::stop_source stop) {
    if (poll.count() <= 0) return;
    thread_ = std::jthread([&store, job_id, poll, stop, this](std::stop_token own) mutable {
      std::unique_lock lock(mu_);
      for (;;) {
        cv_.wait_for(lock, own, poll, [] { return false; });  // wakes at the poll or when stopped
        if (own.stop_requested()) return;
        lock.unlock();
        bool canceled = false;
        try {
          canceled = IsCanceled(store, job_id);
        } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): try again at the next poll
        }
        if (canceled) {
          stop.request_stop();
          return;
        }
        lock.lock();
      }
    });
  }
  /// Stops and joins the thread.
  ~CancelWatcher() {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }
  CancelWatcher(const CancelWatcher&) = delete;
  CancelWatcher& operator=(const CancelWatcher&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::jthread thread_;  // last: joined before mu_ and cv_ go away
};

}  // namespace

RecordedRun RecordRun(Store& store, const Task& task, const RunFn& run, const RecordOptions& options,
                      Evaluation* out) {
  const Task t = WithDbDefaults(task);
  RecordedRun rec;
  rec.store = store.Describe();
  rec.job_id = options.job_id ? *options.job_id
                              : store.CreateJob(t.config["task_origin"].is_string()
                                                    ? t.config["task_origin"].get<std::string>()
                                                    : "custom",
                                                t.config);
  auto update = [&](const JobUpdate& u) { return store.UpdateJob(rec.job_id, u) == JobUpdateOutcome::kCanceled; };
  try {
    Json task_row = t.ToDatabaseTask();
    std::string task_id = task_row["id"].get<std::string>();
    store.InsertTask(task_row);  // false: already stored (the reference logs it as info)
    if (update({.status = JobStatus::kInit, .task_id = task_id, .config = t.config}) ||
        update({.status = options.validate ? JobStatus::kValidating : JobStatus::kRun, .started = true})) {
      rec.canceled = true;  // canceled before the start: the run never begins
      return rec;
    }
    std::stop_source stop;
    {
      CancelWatcher watcher(store, rec.job_id, options.cancel_poll, stop);
      *out = run(stop.get_token());
    }
    if (stop.stop_requested() || IsCanceled(store, rec.job_id)) {
      rec.canceled = true;  // the verdict of a canceled evaluation is not stored
      return rec;
    }
    rec.kernel_uuid = NewUuid4();
    rec.kernel_id = store.InsertKernel(KernelRow(*out, rec.kernel_uuid, task_id, rec.job_id, options.lineage));
    store.InsertJobLogs(ProcessLogs(*out, rec.job_id, rec.kernel_uuid, options.lineage));
    rec.canceled = update({.status = options.validate ? JobStatus::kValidated : JobStatus::kComplete});
  } catch (...) {
    // The job says why it failed (a config refused before any build had left a FAIL row with no log: stranger
    // test, 2026-12-03): one ERROR line in job_logs with the error's message.
    std::string why = "unknown error";
    try {
      throw;
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {  // NOLINT(bugprone-empty-catch): not an exception type: the default text above
    }
    try {
      JobLog line;
      line.job_id = rec.job_id;
      line.level = "ERROR";
      line.message = why;
      store.InsertJobLogs({line});
      (void)store.UpdateJob(rec.job_id, {.status = JobStatus::kFail});  // kCanceled: it stays CANCELED
    } catch (...) {  // NOLINT(bugprone-empty-catch): the original error matters more
    }
    throw;
  }
  return rec;
}

RecordedRun EvaluateAndRecord(Store& store, const Task& task, const std::optional<BlockUpdate>& candidate,
                              const EvaluateOptions& options, const RecordOptions& record, Evaluation* out) {
  auto run = [&](std::stop_token job_stop) {
    EvaluateOptions eo = options;
    std::stop_source either;
    auto forward = [&either] { either.request_stop(); };
    std::stop_callback<decltype(forward)> from_job(job_stop, forward);
    std::stop_callback<decltype(forward)> from_caller(options.stop, forward);
    eo.stop = either.get_token();
    return Evaluate(task, candidate, eo);
  };
  return RecordRun(store, task, run, record, out);
}

// ------------------------------------------------------------------------------------------ reporters

void EvaluationReporter::ReportContext(const RunContext&) {}
void EvaluationReporter::ReportPhase(const PhaseEvent&) {}
void EvaluationReporter::ReportOutputLine(bool, const std::string&) {}

void ReporterList::ReportContext(const RunContext& context) {
  for (auto* r : reporters_) {
    if (r != nullptr) r->ReportContext(context);
  }
}
void ReporterList::ReportPhase(const PhaseEvent& event) {
  for (auto* r : reporters_) {
    if (r != nullptr) r->ReportPhase(event);
  }
}
void ReporterList::ReportOutputLine(bool is_stderr, const std::string& line) {
  for (auto* r : reporters_) {
    if (r != nullptr) r->ReportOutputLine(is_stderr, line);
  }
}
void ReporterList::ReportVerdict(const Evaluation& ev, const RecordedRun* recorded) {
  for (auto* r : reporters_) {
    if (r != nullptr) r->ReportVerdict(ev, recorded);
  }
}

void AttachReporter(EvaluationReporter& reporter, EvaluateOptions& options, bool output_lines) {
  options.progress = [&reporter](const PhaseEvent& e) { reporter.ReportPhase(e); };
  if (output_lines) {
    options.on_output_line = [&reporter](bool is_stderr, const std::string& line) {
      reporter.ReportOutputLine(is_stderr, line);
    };
  }
}

}  // namespace kf
