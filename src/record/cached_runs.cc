// The front ends' one way to the verdict cache (see kernelfoundry/verdict_cache.hpp): evaluations of kf run,
// kf submit's batches and the Python API, and farm workers' test bodies.
#include "kernelfoundry/test_discovery.hpp"
#include "kernelfoundry/verdict_cache.hpp"

namespace kf {

RecordedEvaluation EvaluateWithVerdictCache(const Task& task, const std::optional<BlockUpdate>& candidate,
                                            const EvaluateOptions& options, Store* store, const RecordOptions& record,
                                            bool verdict_cache, const Evaluation* known) {
  RecordedEvaluation out;
  std::string cache_key;
  std::optional<Evaluation> cached;
  const std::filesystem::path cache_dir = DefaultCacheDir();
  if (known != nullptr) {
    cached = *known;
  } else if (verdict_cache && options.runner == nullptr && options.harness == nullptr) {
    cache_key = VerdictCacheKey(task, candidate, options);
    cached = LookupVerdict(cache_dir, cache_key, task, candidate);
  }
  if (store != nullptr) {
    if (cached) {
      out.recorded = RecordRun(*store, task, [&](std::stop_token) { return *cached; }, record, &out.ev);
    } else {
      out.recorded = EvaluateAndRecord(*store, task, candidate, options, record, &out.ev);
    }
  } else {
    out.ev = cached ? std::move(*cached) : Evaluate(task, candidate, options);
  }
  if (!cache_key.empty() && !(out.recorded && out.recorded->canceled)) {
    (void)StoreVerdict(cache_dir, cache_key, out.ev,
                       out.recorded ? std::optional<int64_t>(out.recorded->job_id) : std::nullopt);
  }
  return out;
}

TestBodyValue TestThroughVerdictCache(const std::string& key,
                                      const std::function<std::pair<Json, TestStageResult>()>& run) {
  const std::filesystem::path cache_dir = DefaultCacheDir();
  if (std::optional<CachedTestStage> hit = LookupTestStage(cache_dir, key)) {
    return TestBodyValue{std::move(hit->value), std::move(hit->cached)};
  }
  auto [value, stage] = run();
  (void)StoreTestStage(cache_dir, key, value, stage);
  return TestBodyValue{std::move(value), nullptr};
}

}  // namespace kf
