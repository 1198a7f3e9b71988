// kf run's evaluation path as a RecordJobFn (see record_job.hpp).
#include "cli/record_job.hpp"

#include "kernelfoundry/verdict_cache.hpp"

namespace kf::cli {

RecordJobFn VerdictCachedRecord(bool verdict_cache) {
  return [verdict_cache](Store& store, const Task& task, const std::optional<BlockUpdate>& candidate,
                         const EvaluateOptions& options, const RecordOptions& record, Evaluation* out) {
    RecordedEvaluation r = EvaluateWithVerdictCache(task, candidate, options, &store, record, verdict_cache);
    if (out != nullptr) *out = std::move(r.ev);
    return r.recorded.value_or(RecordedRun{});
  };
}

}  // namespace kf::cli
