// The shared flow of `kf run` and `kf validate --run` (see run_common.hpp).
#include "cli/run_common.hpp"

#include <memory>

#include "cli/exit_codes.hpp"
#include "kernelfoundry/store.hpp"
#include "kernelfoundry/verdict_cache.hpp"

namespace kf::cli {

std::string StoreUrlOf(const std::string& db) { return db.empty() ? DefaultStoreUrl() : db; }

int RunAndReport(const Task& task, RunRequest request, EvaluationReporter& reporter) {
  std::unique_ptr<Store> store;
  if (request.store) store = OpenStore(StoreUrlOf(request.db));
  if (request.reference_check) {
    request.options.test_candidate = false;
    request.options.test_reference = true;
  }
  AttachReporter(reporter, request.options, request.output_lines);
  RunContext context;
  const Json& name = task.config.is_object() && task.config.contains("task_name") ? task.config["task_name"] : Json();
  context.task = name.is_string() ? name.get<std::string>() : "";
  context.reference_check = request.reference_check;
  context.store = store ? store->Describe() : "";
  reporter.ReportContext(context);

  RecordOptions record;
  record.validate = request.reference_check;
  record.lineage = request.lineage;
  // The verdict cache (verdict_cache.hpp): an identical earlier evaluation is reused as it was.
  RecordedEvaluation run = EvaluateWithVerdictCache(task, request.candidate, request.options, store.get(), record,
                                                    request.verdict_cache && !request.reference_check);
  const Evaluation& ev = run.ev;
  const std::optional<RecordedRun>& recorded = run.recorded;
  reporter.ReportVerdict(ev, recorded ? &*recorded : nullptr);
  if (recorded && recorded->canceled) return kExitVerdictFailed;
  bool ok = request.reference_check ? ev.result.status == EvalStatus::kReferenceOnly : IsCorrectVerdict(ev.result);
  return ok ? kExitOk : kExitVerdictFailed;
}

}  // namespace kf::cli
