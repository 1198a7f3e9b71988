// Farm client — sending the reference's build and test tasks to Celery workers (ours or the reference's)
// and waiting for their rpc:// results, as the reference's TaskRunner does (reference spec §4.2;
// celery-interop.md §1.4, §4.11–§4.13); listing live workers through remote control.
//
// Contract:
//  * A CeleryClient owns one Broker connection and one reply queue (a fresh UUID, declared as Celery does:
//    not durable, auto-delete, x-expires one day). Before publishing to a queue it declares that queue, its
//    exchange and the binding (a message published to a queue that does not exist is dropped silently).
//    Replies are matched by their body's task_id; progress states (STARTED) are remembered, late or
//    duplicate replies are ignored. Not thread-safe: one client per thread.
//  * Call(): sends, waits up to the timeout, and resends once with a new task id when no result came or the
//    worker that started the task was lost (an early-acking worker — the reference's — that stopped
//    answering pings; a kf worker acks late, so RabbitMQ redelivers its message instead). A result for
//    either id is accepted. Duplicates are harmless: every task is a pure function of its arguments.
//  * Cancellation (CallOptions::stop, EvaluateOptions::stop): the wait ends within ~250 ms and the sent
//    task ids are revoked with terminate through remote control (`app.control.revoke(ids, terminate=True)`:
//    a kf worker asks the job to stop, a Celery worker terminates its pool process).
//  * QueueStageRunner is Evaluate's StageRunner for the farm (`kf run --broker` = Evaluate with
//    options.runner): the build on build_custom_task_<language>, one test per arch on
//    test_custom_task_<arch>, with the reference's timeouts. Results arrive as text; the typed verdicts of
//    each variant are a kf worker's own (output_data "kf_verdict", removed again) or, from other workers,
//    ClassifyFromWire of the correctness result. A farm failure of a test (FAILURE/REVOKED reply) is a typed
//    verdict (time limit → test_timeout, worker lost every delivery → crash, revoked → canceled, anything
//    else → infrastructure_error); a farm failure of a build that says nothing about the candidate
//    (NotRegistered, a task that does not decode, …) is thrown as kf::Error(kIO): Evaluate has no
//    infrastructure verdict for builds.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "kernelfoundry/celery.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/queue.hpp"

namespace kf {

/// A Celery client over one connection (see the file comment).
class CeleryClient {
 public:
  /// Declares and consumes the reply queue. Throws kf::Error(kIO) on broker errors.
  explicit CeleryClient(std::unique_ptr<Broker> broker);
  ~CeleryClient();
  CeleryClient(const CeleryClient&) = delete;
  CeleryClient& operator=(const CeleryClient&) = delete;

  /// Declares options.queue like Celery (once per client) and publishes the task (options.reply_to is set
  /// to this client's reply queue). Returns the task id (new UUID).
  std::string Send(std::string_view task, const Json& args, celery::SendOptions options);
  /// Waits up to `timeout` for a ready result (SUCCESS, FAILURE, REVOKED) of one of `ids`; results that
  /// arrived earlier are returned first. Each id's result is returned once. nullopt on timeout.
  std::optional<celery::TaskResult> WaitAny(const std::set<std::string>& ids, std::chrono::milliseconds timeout);
  /// Drops results of `ids` that are still to come (e.g. the other sends of one task).
  void Forget(const std::set<std::string>& ids);
  /// The STARTED meta of a task ({pid, hostname[, kf_acks_late]}), or null when none arrived.
  Json Started(const std::string& id) const;
  /// Broadcasts Celery's revoke for `ids` (no reply wanted): every worker forgets them, and with `terminate`
  /// a worker running one stops it.
  void Revoke(const std::set<std::string>& ids, bool terminate);
  /// Pings one node through remote control; true when it answered within `timeout`.
  bool Ping(const std::string& node, std::chrono::milliseconds timeout);
  /// Broadcasts control methods (all at once) and collects {method: {node: answer}} for `timeout`.
  std::map<std::string, std::map<std::string, Json>> Broadcast(const std::vector<std::string>& methods,
                                                               std::chrono::milliseconds timeout);
  const std::string& reply_queue() const;
  Broker& broker();

  struct Impl;

 private:
  void Pump(std::chrono::milliseconds timeout);
  std::unique_ptr<Impl> impl_;
};

/// How Call waits and resends.
struct CallOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};   ///< per send
  int max_sends = 2;                                            ///< 1 + one resend
  /// Ping the node that started the task this often when it acks early (0 = never).
  std::chrono::milliseconds liveness_interval{std::chrono::seconds(10)};
  int liveness_misses = 2;                                      ///< unanswered pings that mean "lost"
  std::function<void(const std::string& event)> on_event;      ///< "started <node>", "resent: <why>"
  /// Cancellation: stop waiting, revoke every id sent (terminate) and return a REVOKED result
  /// (TaskRevokedError "canceled by the client").
  std::stop_token stop;
};

/// Sends a task and returns its final result (see the file comment). Throws kf::Error(kLimit) naming the
/// task when no result arrived after max_sends sends, kf::Error(kIO) on broker errors.
celery::TaskResult Call(CeleryClient& client, std::string_view task, const Json& args, celery::SendOptions options,
                        const CallOptions& call = {});

/// Live workers as remote control reports them.
struct LiveWorker {
  std::string node;
  std::vector<std::string> queues;   ///< active_queues names
  Json active = Json::array();       ///< running tasks (Celery's `active`)
  Json stats = nullptr;              ///< Celery's `stats` (null when not answered)
};
/// Broadcasts active_queues, active and stats at once; collects answers for `timeout`.
std::vector<LiveWorker> InspectWorkers(CeleryClient& client, std::chrono::milliseconds timeout);

/// Options of the farm stages.
struct FarmOptions {
  /// Called with progress lines ("build sent to build_custom_task_cpp", "test cpu started on kf@host").
  std::function<void(const std::string&)> on_event;
  celery::ContentType content_type = celery::ContentType::kMsgpack;
  std::chrono::milliseconds liveness_interval{std::chrono::seconds(10)};
};

/// Evaluate's stages on a farm (see the file comment). Thread-safe: with a client, calls take turns on it;
/// with a connection factory, concurrent calls each use their own client (opened as needed, kept for reuse,
/// dropped after a broker error).
class QueueStageRunner final : public StageRunner {
 public:
  /// Uses `client` (which must outlive the runner) for every call.
  explicit QueueStageRunner(CeleryClient& client, FarmOptions options = {});
  /// Opens clients with `connect`.
  explicit QueueStageRunner(BrokerFactory connect, FarmOptions options = {});
  ~QueueStageRunner() override;
  QueueStageRunner(const QueueStageRunner&) = delete;
  QueueStageRunner& operator=(const QueueStageRunner&) = delete;

  /// Sends one build_custom_task (config test_custom / test_reference set to the builds of `plan`,
  /// gpu_arch = plan.arch_list) and waits build_timeout + 40 s (time limits t+30 / t+10, as the reference).
  /// Stores task.build_result / build_result_reference. A FAILURE reply of the candidate's making
  /// (TimeLimitExceeded, WorkerLostError) becomes a failed BuildResult with the worker's exception as its
  /// message; other FAILURE replies throw kf::Error(kIO). Throws kf::Error(kInvalidArgument, "config.yaml",
  /// "language") when the build queue cannot be named, kf::Error(kLimit) when no result came.
  BuildStageResult Build(Task& task, const BuildPlan& plan, const EvaluateOptions& options) override;
  /// Sends one test_custom_task per arch (config gpu_arch = that arch), one after the other as the
  /// reference's Evaluator does, and waits test_timeout × 5 + 40 s for each.
  TestStageResult Test(const Task& task, const std::vector<TestVariant>& variants,
                       const std::vector<std::string>& archs, const EvaluateOptions& options) override;

  struct Clients;

 private:
  FarmOptions options_;
  std::unique_ptr<Clients> clients_;
};

}  // namespace kf
