// Admission of a delivered task message (see admission.hpp).
#include "worker/admission.hpp"

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"

namespace kf::worker_internal {

namespace {

Admission Requeue(int prior) {
  Admission a;
  a.action = AdmitAction::kRequeue;
  a.prior = prior;
  return a;
}

Admission Reply(int delivery, WorkerJobStatus status, TaskFailure failure) {
  Admission a;
  a.action = AdmitAction::kReply;
  a.delivery = delivery;
  a.status = status;
  a.failure = std::move(failure);
  return a;
}

Admission BadMessage(const Error& e) {
  Admission a;
  a.action = AdmitAction::kBadMessage;
  a.error = e.what();
  return a;
}

// Rule 1: a redelivery is dropped, answered WorkerLostError at the poison limit, or requeued counted.
Admission AdmitRedelivery(const AdmitFacts& facts) {
  if (facts.answered_after_loss) {
    Admission a;
    a.action = AdmitAction::kDrop;
    return a;
  }
  const int lost = facts.prior + 1;  // the previous delivery was never acknowledged: its worker was lost
  if (lost >= facts.max_deliveries) {
    return Reply(lost, WorkerJobStatus::kFailure,
                 TaskFailure{"WorkerLostError", "billiard.exceptions",
                             fmt::format("the worker was lost during each of {} deliveries of this task (poison "
                                         "limit {}, kf worker --max-deliveries)",
                                         lost, facts.max_deliveries)});
  }
  return Requeue(lost);
}

// The canvas field the message sets (callbacks, errbacks, chain, chord), or "".
std::string CanvasField(const celery::TaskMessage& m) {
  for (const char* key : {"callbacks", "errbacks", "chain", "chord"}) {
    const Json& v = m.embed.contains(key) ? m.embed[key] : Json(nullptr);
    if (!v.is_null() && !(v.is_array() && v.empty())) return key;
  }
  return "";
}

}  // namespace

Admission Admit(const celery::TaskMessage& m, const AdmitFacts& facts) {
  if (facts.redelivered) return AdmitRedelivery(facts);
  if (facts.stopping) return Requeue(facts.prior);
  const int delivery = facts.prior + 1;
  if (facts.revoked) {
    return Reply(delivery, WorkerJobStatus::kRevoked, TaskFailure{"TaskRevokedError", "celery.exceptions", "revoked"});
  }
  if (!facts.registered) {
    Admission a;
    a.action = AdmitAction::kNotRegistered;
    return a;
  }
  if (const std::string key = CanvasField(m); !key.empty()) {
    return Reply(delivery, WorkerJobStatus::kFailure,
                 TaskFailure{"NotImplementedError", "builtins",
                             fmt::format("kf worker does not support Celery canvas: the message has '{}' set "
                                         "(unsupported)",
                                         key)});
  }
  Admission run;
  run.prior = facts.prior;
  run.delivery = delivery;
  try {
    if (m.expires && facts.now > celery::ParseIsoTime(*m.expires)) {
      return Reply(delivery, WorkerJobStatus::kRevoked, TaskFailure{"TaskRevokedError", "celery.exceptions", "expired"});
    }
    if (m.eta) run.eta = celery::ParseIsoTime(*m.eta);
  } catch (const Error& e) {
    return BadMessage(e);
  }
  return run;
}

}  // namespace kf::worker_internal
