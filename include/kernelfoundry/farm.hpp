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
//  * QueueStageRunner runs Evaluate's two stages on the farm: the build on build_custom_task_<language>, one
//    test per arch on test_custom_task_<arch>, with the reference's timeouts.
//  * EvaluateOnFarm is Evaluate with the stages on the farm (same scoring, same Evaluation): a temporary
//    copy of Evaluate's flow until Evaluate takes a StageRunner.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
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

/// Evaluate's stages on a farm (the signatures of RunBuildStage/RunTestStage, so that it plugs into
/// Evaluate's StageRunner seam). Not thread-safe (one client).
class QueueStageRunner {
 public:
  QueueStageRunner(CeleryClient& client, FarmOptions options = {});
  /// Sends one build_custom_task (config test_custom / test_reference set to the builds wanted) and waits
  /// build_timeout + 40 s (time limits t+30 / t+10, as the reference). A FAILURE reply becomes a failed
  /// BuildResult with the worker's exception as its message.
  BuildStageResult Build(const Harness& harness, Task& task, bool build_candidate, bool build_reference,
                         const std::string& arch_list, const EvaluateOptions& options);
  /// Sends one test_custom_task per arch (config gpu_arch = that arch), one after the other as the
  /// reference's Evaluator does, and waits test_timeout × 5 + 40 s for each. A FAILURE reply becomes a failed correctness result per variant.
  TestStageResult Test(const Harness& harness, const Task& task, const std::vector<TestVariant>& variants,
                       const std::vector<std::string>& archs, const EvaluateOptions& options);

 private:
  CeleryClient& client_;
  FarmOptions options_;
};

/// Evaluate (evaluate.hpp) with the stages run by `runner` (temporary: see the file comment).
Evaluation EvaluateOnFarm(const Task& task, const std::optional<BlockUpdate>& candidate,
                          const EvaluateOptions& options, QueueStageRunner& runner);

}  // namespace kf
