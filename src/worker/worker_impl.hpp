// Shared state of a running Worker (worker.cc: job slots; worker_control.cc: remote control; the store is
// written by the record module, kf::RecordWorkerJob). Internal to the worker module.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernelfoundry/celery.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/worker.hpp"

namespace kf {

/// A job a slot is running (for the `active` control command).
struct ActiveJob {
  std::string id;
  std::string task;
  std::string queue;
  std::string args_repr;
  double time_start = 0;   ///< epoch seconds
  int pid = 0;
  int delivery = 1;
};

struct Worker::Impl {
  WorkerOptions o;
  std::string node;
  WorkerStats stats;
  std::atomic<bool> stopping{false};
  std::atomic<bool> immediate{false};
  std::atomic<bool> slots_done{false};
  std::chrono::steady_clock::time_point stop_requested_at{};
  std::atomic<int64_t> clock{0};
  std::mutex mu;
  std::condition_variable cv;           ///< wakes backoff sleeps on stop
  std::map<int, ActiveJob> active;      ///< by slot
  std::set<std::string> completed_after_loss;   ///< ids whose reply went out after a reconnect
  std::map<std::string, int64_t> totals;        ///< finished jobs per task name (stats)
  /// Revoked task ids (remote control revoke), true when terminate was asked; the oldest are forgotten
  /// beyond kMaxRevoked (Celery keeps 50000 too).
  std::map<std::string, bool> revoked;
  std::deque<std::string> revoked_order;
  static constexpr size_t kMaxRevoked = 50000;

  /// Remembers revoked ids (thread-safe).
  void Revoke(const std::vector<std::string>& ids, bool terminate);
  /// nullopt when `id` is not revoked; else whether terminate was asked (thread-safe).
  std::optional<bool> RevokedState(const std::string& id);

  void Log(const std::string& line);
  /// Sleeps up to `d`, returning early (true) when a stop is requested.
  bool SleepUnlessStopped(std::chrono::milliseconds d);
  /// The remote-control loop (worker_control.cc); returns when slots_done.
  void ServeControl();
  /// The answer to one control method (worker_control.cc).
  Json ControlAnswer(const celery::ControlRequest& request);
};

/// Everything a worker knows about one finished job: its reply and, through ToWorkerJob, its record in the
/// store (kf::RecordWorkerJob, the record module's writer).
struct JobRecord {
  celery::TaskMessage message;
  std::string node;
  std::string queue;
  int delivery = 1;
  WorkerJobStatus status = WorkerJobStatus::kFailure;
  Json result = nullptr;       ///< the SUCCESS value, or the exception dict
  double seconds = 0;
  double started_epoch = 0;
  Json cached = nullptr;       ///< the verdict cache entry of a test body's value ({key, created_at}), or null
};

/// The record module's view of a finished job (the body kind from the task name, the Celery facts).
WorkerJob ToWorkerJob(const JobRecord& record);

}  // namespace kf
