// The shared flow of `kf run` and `kf validate --run` (see run_common.hpp).
#include "cli/run_common.hpp"

#include <memory>

#include "cli/exit_codes.hpp"
#include "kernelfoundry/store.hpp"
#include "kernelfoundry/test_discovery.hpp"
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

  Evaluation ev;
  std::optional<RecordedRun> recorded;
  // The verdict cache (verdict_cache.hpp): an identical earlier evaluation is reused as it was.
  std::string cache_key;
  std::optional<Evaluation> cached;
  const std::filesystem::path cache_dir = DefaultCacheDir();
  if (request.verdict_cache && !request.reference_check && request.options.runner == nullptr &&
      request.options.harness == nullptr) {
    cache_key = VerdictCacheKey(task, request.candidate, request.options);
    cached = LookupVerdict(cache_dir, cache_key, task, request.candidate);
  }
  if (store) {
    RecordOptions record;
    record.validate = request.reference_check;
    if (cached) {
      recorded = RecordRun(*store, task, [&](std::stop_token) { return *cached; }, record, &ev);
    } else {
      recorded = EvaluateAndRecord(*store, task, request.candidate, request.options, record, &ev);
    }
  } else {
    ev = cached ? std::move(*cached) : Evaluate(task, request.candidate, request.options);
  }
  if (!cache_key.empty() && !(recorded && recorded->canceled)) {
    (void)StoreVerdict(cache_dir, cache_key, ev, recorded ? std::optional<int64_t>(recorded->job_id) : std::nullopt);
  }
  reporter.ReportVerdict(ev, recorded ? &*recorded : nullptr);
  if (recorded && recorded->canceled) return kExitVerdictFailed;
  bool ok = request.reference_check ? ev.result.status == EvalStatus::kReferenceOnly : IsCorrectVerdict(ev.result);
  return ok ? kExitOk : kExitVerdictFailed;
}

}  // namespace kf::cli
