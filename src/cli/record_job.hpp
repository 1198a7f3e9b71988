// kf run's evaluation path (EvaluateWithVerdictCache: the verdict cache, then kf::EvaluateAndRecord) as the
// RecordJobFn that kf serve --submit and kf mcp evaluate their jobs with.
#pragma once

#include "kernelfoundry/serve.hpp"

namespace kf::cli {

/// A RecordJobFn over EvaluateWithVerdictCache (record module, verdict_cache.hpp) into the job of record.job_id; with
/// `verdict_cache` an identical earlier evaluation is reused.
RecordJobFn VerdictCachedRecord(bool verdict_cache);

}  // namespace kf::cli
