// Admission — what a worker slot does with a delivered task message before anything runs (worker.hpp,
// README "Farm"): the one place of the rules for redelivery counting, the poison limit, a stopping worker,
// revoked ids, unknown task names, Celery canvas, expiry and eta. Internal to the worker module.
//
// The rules, in order (each the first that applies):
//  1. A redelivery (the broker's redelivered flag: the previous worker never acknowledged it) of a task whose
//     reply already went out after a reconnect is dropped (acknowledged, no reply). Otherwise it counts one
//     more lost worker: at max_deliveries the reply is FAILURE WorkerLostError (billiard.exceptions), below
//     it the message is requeued with the new count (kf_deliveries header) and runs on a later delivery.
//  2. A stopping worker requeues the message uncounted.
//  3. A revoked id (remote control revoke) is answered REVOKED TaskRevokedError "revoked" without running.
//  4. An unknown task name is answered FAILURE NotRegistered and rejected (dropped, not recorded).
//  5. Celery canvas (callbacks, errbacks, chain, chord) is answered FAILURE NotImplementedError.
//  6. An expires time in the past is answered REVOKED TaskRevokedError "expired"; one that does not parse
//     makes a bad message (FAILURE ValueError naming it, rejected).
//  7. Otherwise the job runs, not before its eta (an eta that does not parse: a bad message).
#pragma once

#include <optional>
#include <string>

#include "kernelfoundry/celery.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/worker.hpp"

namespace kf::worker_internal {

/// What the slot does with a decoded delivery.
enum class AdmitAction {
  kRun,            ///< run the job (not before Admission::eta when set)
  kRequeue,        ///< put a copy back with Admission::prior deliveries counted, ack the original
  kReply,          ///< answer Admission::status / failure without running, ack, record the job
  kNotRegistered,  ///< unknown task name: answer FAILURE NotRegistered and reject (not recorded)
  kBadMessage,     ///< a field does not parse: answer FAILURE ValueError (Admission::error) and reject
  kDrop,           ///< acknowledge without an answer: the task was answered already after a reconnect
};

/// What the slot knows about a delivery besides the message.
struct AdmitFacts {
  bool redelivered = false;          ///< the broker's redelivered flag
  int prior = 0;                     ///< deliveries counted before (the kf_deliveries header; 0 when absent)
  bool answered_after_loss = false;  ///< its reply went out after a reconnect (Worker::Impl::completed_after_loss)
  bool stopping = false;             ///< the worker is stopping
  bool revoked = false;              ///< its id was revoked through remote control
  bool registered = true;            ///< IsRegisteredTask(task name)
  double now = 0;                    ///< Unix time in seconds (compared with expires)
  int max_deliveries = 3;            ///< WorkerOptions::max_deliveries (the poison limit)
};

/// The decision of Admit.
struct Admission {
  AdmitAction action = AdmitAction::kRun;
  /// kRequeue: the deliveries counted in the copy put back; kRun: those before this one.
  int prior = 0;
  /// kRun, kReply: the number of this delivery as recorded (a poison reply: the count of lost deliveries).
  int delivery = 1;
  std::optional<double> eta{};                         ///< kRun: Unix time before which it must not start
  WorkerJobStatus status = WorkerJobStatus::kFailure;  ///< kReply: kFailure or kRevoked
  TaskFailure failure{};                               ///< kReply: the exception replied
  std::string error{};                                 ///< kBadMessage: what does not parse
};

/// Decides what happens to message `m` delivered with `facts` (the rules of the file comment). Pure.
Admission Admit(const celery::TaskMessage& m, const AdmitFacts& facts);

}  // namespace kf::worker_internal
