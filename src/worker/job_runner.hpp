// How a worker slot runs one job: in a child process (production: `kf worker-child`, killable, dies with
// the worker) or on a thread (unit tests with fake bodies). Internal to the worker module.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/device_slots.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/worker.hpp"

namespace kf::worker_internal {

/// One job for a runner: {"task", "args", "kwargs", "queue", "work_root", "verdict_cache"}.
/// The answer: {"result": value} or {"failure": {"exc_type", "exc_module", "message"}}.
class JobRunner {
 public:
  virtual ~JobRunner() = default;
  /// Starts the job process ahead of the first job (no-op when running or in-process). Throws kf::Error(kIO).
  virtual void Prepare() {}
  /// Starts a job (one at a time). Throws kf::Error(kIO) when no job process can be started.
  virtual void Start(const Json& request) = 0;
  /// Waits up to `timeout` for the answer; nullopt while the job runs. A job process that died gives a
  /// failure answer (WorkerLostError naming the signal or exit code).
  virtual std::optional<Json> Wait(std::chrono::milliseconds timeout) = 0;
  /// Asks the running job to stop (its stop_token: the running process tree is killed, no further phase
  /// starts); the answer still comes through Wait. No-op when idle.
  virtual void RequestStop() = 0;
  /// Kills the running job and everything it started; the next Start gets a fresh process. No-op when idle.
  virtual void Kill() = 0;
  /// Pid of the job process (0 for the in-process runner or before the first Start).
  virtual int pid() const = 0;
};

/// A runner with a persistent child process started from `argv` (spawned on the first Start and again
/// after a Kill or a crash). The child gets a pipe on stdin (its lifeline; also stop requests and lease
/// grants) and one on stdout (answers, lease requests and releases). Its device leases are taken from
/// `slots` (which must outlive the runner) on threads of the runner, and all released when the job ends,
/// is killed or its process dies.
std::unique_ptr<JobRunner> MakeChildJobRunner(std::vector<std::string> argv, DeviceSlots& slots);

using BodyFn = std::function<TaskBodyResult(std::string_view, const Json&, const Json&, const TaskBodyContext&)>;
/// A runner that calls `body` on a thread with a DeviceGate over `slots` in its context; RequestStop
/// requests its stop_token, Kill requests it and waits for the thread.
std::unique_ptr<JobRunner> MakeThreadJobRunner(BodyFn body, DeviceSlots& slots);

/// Frames between the worker and its child: 8-byte little-endian length, then msgpack.
/// Writes a whole frame (blocking). Returns false when the reader is gone (EPIPE).
bool WriteFrame(int fd, const Json& value);
/// Reads one whole frame (blocking). nullopt at EOF before the first byte; throws kf::Error(kIO) on a torn
/// frame or a read error, kf::Error(kParse) on bad msgpack.
std::optional<Json> ReadFrame(int fd);

/// The answer for a body result (plus {"cached": entry} for a value from the verdict cache).
Json AnswerFor(const TaskBodyResult& r);

/// The context of a body from a job request's queue, work_root and verdict_cache (stop, devices and harness
/// are the runner's to set).
TaskBodyContext ContextFor(const Json& request);

}  // namespace kf::worker_internal
