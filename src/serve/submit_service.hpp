// The job side of kf serve's submission API (include/kernelfoundry/serve.hpp): bearer-token authentication,
// per-user limits, the queue of submitted jobs and the pool that evaluates them through kf::RecordRun (the
// RecordJobFn of SubmitOptions). Internal to the serve module; the HTTP side is submit_api.cc.
//
// A job is stored before it is queued (Store::CreateSubmission: the jobs row INIT and the encoded task in one
// transaction), so a restart finds it again: Start() queues every submission whose job is still active.
// Scheduling is first come, first served, skipping the jobs of a user who already has
// SubmitLimits::max_running_jobs running. Cancel marks the job CANCELED and requests the stop of a running
// evaluation (its process tree is killed; RecordRun leaves the job CANCELED without a kernels row).
//
// Thread-safe: HTTP handler threads call everything concurrently with the pool's threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kernelfoundry/serve.hpp"

namespace kf::serve {

/// A refused request: the HTTP status (400, 403, 404, 413, 429) and the message.
struct ApiRefusal {
  int status = 400;
  std::string message;
  int retry_after_s = 0;  ///< 429: seconds after which a retry may succeed (0: no header)
};

class SubmitService {
 public:
  /// `store` must be read-write and outlive the service.
  SubmitService(Store& store, SubmitOptions options);
  /// Stops taking queued jobs and waits for the running ones to finish (a signal that ends kf kills them
  /// instead, and the next start runs them again).
  ~SubmitService();
  SubmitService(const SubmitService&) = delete;
  SubmitService& operator=(const SubmitService&) = delete;

  /// The store the service records into (for checks a request needs before it is queued).
  Store& GetStore() { return store_; }

  /// Queues the stored submissions whose job is still active (a restart) and starts the pool.
  void Start();

  /// The token of an "Authorization: Bearer <token>" header value, or nullopt (missing, malformed, unknown
  /// or revoked token). The stored hash is compared in constant time.
  std::optional<ApiToken> Authenticate(std::string_view authorization) const;

  /// Takes one request from `user`'s token bucket (SubmitLimits::requests_per_minute); a refusal 429 when it
  /// is empty.
  std::optional<ApiRefusal> TakeRequest(const std::string& user);

  /// Stores and queues the task package `archive` of `user` (LoadTaskForRun's checks: refused archives and
  /// invalid tasks answer 400, an archive over the limit 413, too many active jobs 429; nothing is stored
  /// then). Returns the job id.
  int64_t Submit(const std::string& user, std::string_view archive, const std::string& filename,
                 const Lineage& lineage);

  /// Cancels job `job_id` (CANCELED in the store; a running evaluation is stopped). Returns the job's status
  /// afterwards (a job that had ended keeps its status).
  JobStatus Cancel(int64_t job_id);

  /// Whether `who` may see job `job_id`: admins every job, users the jobs they submitted.
  bool MaySee(const ApiToken& who, int64_t job_id) const;

  /// Jobs queued and running now (for tests and the load bench).
  std::pair<size_t, size_t> QueuedAndRunning();

  const SubmitOptions& options() const { return options_; }

 private:
  struct Queued {
    int64_t job_id;
    std::string user;
  };
  void Worker(std::stop_token stop);
  void RunJob(const Queued& job, std::stop_token pool_stop);
  /// The next job a worker may take (mu_ held), removing it from the queue.
  std::optional<Queued> TakeNext();

  Store& store_;
  SubmitOptions options_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::deque<Queued> queue_;
  std::map<std::string, int> running_by_user_;
  std::map<std::string, int> active_by_user_;  ///< queued + running
  std::map<int64_t, std::stop_source> running_;
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at{};
  };
  std::map<std::string, Bucket> buckets_;
  std::vector<std::jthread> workers_;
};

}  // namespace kf::serve
