// Worker — `kf worker`: a Celery worker for the reference's build and test tasks, on RabbitMQ
// (../shared/spec/celery-interop.md; reference spec §4.3, §4.4, §5).
//
// What a Worker does:
//  * Consumes the given queues with channel-global prefetch 1 per slot (`concurrency` slots, each with its
//    own connection and job process) and declares them exactly as Celery does.
//  * Runs the reference's task names with our build and test stages (RunTaskBody): build_custom_task
//    returns the encoded Task with build_result / build_result_reference, test_custom_task returns
//    {variant: TestResult}, test_sleep returns its message.
//  * Replies on rpc://: STARTED, then SUCCESS or FAILURE (REVOKED for an expired message); acknowledges a
//    message only after its reply is published (acks late), so a worker that dies mid-job loses nothing:
//    RabbitMQ redelivers the message.
//  * Counts deliveries in a header (kf_deliveries) it adds when it puts a redelivered message back: a
//    message whose worker was lost `max_deliveries` times is answered with FAILURE WorkerLostError.
//  * Runs every job in a child process (`kf worker-child`, a prefork pool of one per slot): the hard time
//    limit kills it (FAILURE TimeLimitExceeded), and when the worker dies the child and its process trees
//    die with it (the child watches a pipe from the worker). The soft time limit and a remote-control
//    `revoke` with terminate ask the job to stop (its stop_token: the running build/test process tree is
//    killed, no further phase starts) and reply FAILURE SoftTimeLimitExceeded / REVOKED "terminated"; a job
//    that has not stopped after cancel_grace is killed. A revoked task id that arrives later is REVOKED
//    "revoked" without running.
//  * Device exclusivity across slots (`-c N`): every build, correctness run and timed run of every slot's
//    job takes its lease from one DeviceSlots of the worker (device_slots.hpp: a timed phase holds its
//    device exclusively), through a DeviceGate; job processes ask the worker for leases over their pipes.
//    So two jobs are never timed on one device at the same time, while builds and correctness runs of
//    different jobs still overlap.
//  * Answers remote control (ping, active_queues, active, stats, hello, revoke, revoked, shutdown) on its own
//    connection and thread, within a second, also while jobs run.
//  * Records every job it finishes in its store through the record module (kf::RecordWorkerJob): a jobs row
//    (COMPLETE or FAIL), the tasks row, and job_logs rows (a summary and every process result).
//  * What happens to a delivery before anything runs (redelivery count, poison limit, stop, revoke, unknown
//    task, canvas, expiry, eta) is one typed decision, worker_internal::Admit (src/worker/admission.hpp).
//  * Reconnects with exponential backoff when the broker goes away; a job that finishes while the
//    connection is down has its reply published after reconnecting.
// Thread-safety: Worker::RequestStop may be called from any thread (or a signal-handling thread) while
// Run() runs; other members are for one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/celery.hpp"
#include "kernelfoundry/device_slots.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/queue.hpp"
#include "kernelfoundry/store.hpp"

namespace kf {

// ---- task bodies (what runs inside a job) ----

/// A task body's failure as the Celery client should see it (exc_type/exc_module of the FAILURE result).
struct TaskFailure {
  std::string exc_type = "RuntimeError";
  std::string exc_module = "builtins";
  std::string message;
};

/// What a phase of a job uses a device for (DeviceSlots' three kinds of lease).
enum class DeviceUse {
  kBuild,   ///< a build: the host shared (DeviceSlots::ForBuild)
  kTest,    ///< an untimed test run on an arch: shared (DeviceSlots::ForTest)
  kTiming,  ///< a timed run on an arch: its device exclusively (DeviceSlots::ForTiming)
};
/// "build" / "test" / "timing".
const char* DeviceUseName(DeviceUse use);
/// Inverse of DeviceUseName; nullopt for another name.
std::optional<DeviceUse> DeviceUseFromName(std::string_view name);

/// Grants device leases to the phases of jobs that run in different threads or processes (the slots of one
/// worker). Thread-safe.
class DeviceGate {
 public:
  /// A granted lease; destroying it releases it.
  class Lease {
   public:
    virtual ~Lease() = default;
  };
  virtual ~DeviceGate() = default;
  /// Blocks until `use` of `arch` is granted. Returns nullptr when `stop` was requested first.
  virtual std::unique_ptr<Lease> Acquire(DeviceUse use, const std::string& arch, const std::stop_token& stop) = 0;
};
/// A gate over a DeviceSlots of this process (`slots` must outlive it).
std::unique_ptr<DeviceGate> MakeSlotsGate(DeviceSlots& slots);

/// Where and how a task body runs.
struct TaskBodyContext {
  std::string queue;                     ///< the queue the message came from (test: selects the arch)
  /// Cancellation: the running build/test process tree is killed and no further phase starts; test_sleep
  /// returns early. (The worker's soft time limit and revoke-with-terminate request it.)
  std::stop_token stop;
  std::filesystem::path work_root;       ///< parent of the work dirs; empty = system temp dir
  /// Device leases shared with other jobs (a worker's slots); nullptr = this process's DeviceSlots only.
  DeviceGate* devices = nullptr;
  /// Replaces MakeHarness(task) for build and test bodies (tests with a fake harness); nullptr = the task's.
  const Harness* harness = nullptr;
  /// test_custom_task goes through the verdict cache (kf::TestThroughVerdictCache, verdict_cache.hpp): an
  /// identical earlier test body on this machine returns its stored value without running. Never with a
  /// `harness` replaced.
  bool verdict_cache = false;
};

/// True for the task names RunTaskBody knows (the reference's build_custom_task, test_custom_task and
/// test_sleep).
bool IsRegisteredTask(std::string_view task_name);

/// Runs one task body (reference spec §4.3/§4.4/§5.2 shapes):
///  * build_custom_task(encoded_task): builds the candidate (has_build_step and config test_custom, default
///    true) and the reference (has_reference_build_step and config test_reference, default true) and returns
///    the encoded Task with build_result / build_result_reference (each with worker_info).
///  * test_custom_task(encoded_task): variants `custom` (or one per template instantiation) unless
///    test_custom is false or the task has a test_result, and `reference` when config test_reference is
///    true (worker default false, as the reference) and the task has no test_result_reference; the arch is
///    the one the queue name test_custom_task_<arch> names when the config lists several, else the config's.
///    Returns {variant: TestResult}. kf extension, for kf clients (QueueStageRunner): the output_data of
///    every correctness and performance result also holds {"kf_verdict": {"status": EvalStatusName,
///    "detail": …}}, the harness's typed verdict, and a failed build's output_data {"kf_termination":
///    TerminationReasonName}; the reference's clients ignore them (output_data is a free dict there).
///    With context.verdict_cache the test body goes through the verdict cache: a body identical to an earlier
///    one on this machine (task, candidate, build artifacts, arch, variants, worker fingerprint) returns the
///    stored value (TaskBodyResult::cached); only values whose every verdict is a property of the candidate
///    are stored (never timeouts, limits, crashes, noisy or suspicious timing).
///  * test_sleep(duration_s, message): sleeps (stop-aware), returns message.
/// Returns the result on success; on failure returns a TaskFailure (bad arguments or an encoded task that
/// does not decode → ValueError naming the field; other kf::Error → RuntimeError; unknown name →
/// NotRegistered).
struct TaskBodyResult {
  std::optional<Json> result;
  std::optional<TaskFailure> failure;
  /// A test body's value taken from the verdict cache: the entry's {key, created_at}; null when it ran.
  Json cached = nullptr;
};
TaskBodyResult RunTaskBody(std::string_view task_name, const Json& args, const Json& kwargs,
                           const TaskBodyContext& context);

/// The entry point of `kf worker-child`: reads job frames on stdin, runs them with RunTaskBody and writes
/// result frames on stdout (8-byte little-endian length + msgpack). During a job it also asks the worker for
/// device leases (frames {"lease": {id, use, arch}} / {"release": id}, answered {"granted": id}) and obeys
/// {"stop": true} (the job's stop_token). Exits when stdin closes — also in the middle of a job, so the
/// job's process trees die with a lost worker. `harness` replaces the task's harness (tests). Returns the
/// process exit code.
int RunWorkerChild(const Harness* harness = nullptr);

// ---- the worker ----

/// Options of a Worker.
struct WorkerOptions {
  BrokerFactory connect;                  ///< opens a broker connection (required)
  std::string broker_display;             ///< for log lines (a redacted URL)
  std::vector<std::string> queues;        ///< queues to consume (required, Celery's -Q)
  std::string node_name;                  ///< Celery node name; empty = "kf@<hostname>" (%h/%n/%d expanded)
  int concurrency = 1;                    ///< job slots (Celery's -c); each has its own connection
  int max_deliveries = 3;                 ///< poison limit: deliveries of one message whose worker was lost
  /// After a stop request, how long a running job may still take before it is killed and put back.
  std::chrono::milliseconds stop_grace{30'000};
  std::chrono::milliseconds reconnect_min{500};   ///< first reconnect delay (doubles up to reconnect_max)
  std::chrono::milliseconds reconnect_max{30'000};
  /// The job child's command line; empty = {"/proc/self/exe", "worker-child"}. Ignored with run_in_process.
  std::vector<std::string> child_argv;
  /// Run jobs on a thread of this process instead of a child (unit tests with fake bodies): the hard time
  /// limit then only asks the body to stop.
  bool run_in_process = false;
  /// Replaces RunTaskBody (tests). Used with run_in_process only.
  std::function<TaskBodyResult(std::string_view, const Json&, const Json&, const TaskBodyContext&)> body;
  std::filesystem::path work_root;        ///< parent of the jobs' work dirs; empty = system temp dir
  /// The devices the slots' jobs share (builds, correctness and timed runs take leases here); nullptr =
  /// ProcessDeviceSlots().
  DeviceSlots* device_slots = nullptr;
  /// After a soft time limit or a revoke with terminate asked a job to stop, how long it may take to end
  /// before it is killed.
  std::chrono::milliseconds cancel_grace{10'000};
  Store* store = nullptr;                 ///< where jobs are recorded; nullptr = not recorded
  /// Test bodies go through the verdict cache (TaskBodyContext::verdict_cache; `kf worker --verdict-cache`).
  bool verdict_cache = false;
  std::function<void(const std::string&)> log;   ///< one line per event; empty = stderr
};

/// Counters of a running or finished Worker.
struct WorkerStats {
  std::atomic<int64_t> received{0};       ///< deliveries taken (including put back)
  std::atomic<int64_t> succeeded{0};
  std::atomic<int64_t> failed{0};         ///< FAILURE and REVOKED replies
  std::atomic<int64_t> rejected{0};       ///< dropped without running (unknown task, undecodable)
  std::atomic<int64_t> requeued{0};       ///< put back (stop, redelivery count)
  std::atomic<int64_t> canceled{0};       ///< jobs asked to stop (soft time limit, revoke with terminate)
  std::atomic<int64_t> reconnects{0};
  std::atomic<int64_t> control_replies{0};
};

class Worker {
 public:
  /// Throws kf::Error(kInvalidArgument) for missing queues/connect or concurrency < 1.
  explicit Worker(WorkerOptions options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// Serves until RequestStop; returns after every slot has finished or put back its job.
  void Run();
  /// Stops consuming. immediate = false: running jobs get stop_grace to finish (then they are killed and
  /// put back); immediate = true: they are killed and put back now. Async-signal-unsafe; thread-safe.
  void RequestStop(bool immediate);
  /// The expanded node name ("kf@host").
  const std::string& node_name() const;
  const WorkerStats& stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Expands Celery's node-name variables: %h (hostname), %n (name before the first dot), %d (domain), %%.
/// An empty name gives "kf@<hostname>".
std::string ExpandNodeName(const std::string& name);

/// Opens the worker's store from a --db value with kf::OpenStore (a SQLite path, sqlite:///path or a
/// postgresql:// URL; an unknown scheme throws kf::Error(kInvalidArgument)). Empty → nullptr.
std::unique_ptr<Store> OpenWorkerStore(const std::string& db);

}  // namespace kf
