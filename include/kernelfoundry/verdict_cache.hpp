// Verdict cache — an evaluation whose inputs are identical to an earlier one returns the earlier verdict
// without building or testing anything (issue 15, "verdict cache").
//
// Contract:
//  * The key (VerdictCacheKey) is the SHA-256 of: the hash id of the candidate task (Task::HashId() after the
//    block update: task content and candidate code), its merged config (overrides.yml applied; includes
//    hyperparameters and gpu_arch), the hyperparameters, the archs evaluated, whether the reference is
//    tested, and the worker fingerprint (WorkerFingerprint: host, CPU, memory, compiler / nvcc / Python /
//    torch versions, kf version, the identity of the running kf build — its file's path, size and
//    modification time — so a rebuilt kf never reuses verdicts of another build, and the environment the
//    children run in: the filesystem isolation mode, the machine-wide timing settings ($KF_TIMING_BUDGET_S,
//    $KF_TIMING_PROCESSES), and the task-side resources of the harness kind (the
//    SDK for native, the Python package and interpreter otherwise: where found, with their files' sizes and
//    modification times). A resource that cannot be found (a hidden SDK, a wrong KF_SDK_DIR) or an unusable
//    KF_ISOLATION is part of the key as its error, so such a run never reuses a verdict: it fails as a
//    fresh run does.
//  * The WHOLE verdict is reused, timings included (the stored speedup is the one measured then). Only
//    verdicts that are properties of the candidate are stored (IsCacheableStatus): correct, no reference /
//    measurement, wrong values or shapes, failed tests, input mutation, output changed under timing, build
//    error, extraction failure. Environment failures (timeouts, resource limits, crashes that may be OOM
//    kills, test errors, infrastructure errors, cancellation) and timing that needs re-measuring (noisy,
//    suspicious) are never stored. `kf run --no-verdict-cache` skips the lookup and the store.
//  * Entries live in <cache dir>/verdicts/<key>.json (cache dir: $KF_CACHE_DIR, else ~/.cache/kernelfoundry),
//    written to a temp file and renamed, so a reader never sees a torn entry; an unreadable or malformed
//    entry is a miss.
//  * A reused Evaluation carries Evaluation::cached {"key", "job_id" (of the run that produced it, or
//    null), "created_at" (UTC ISO 8601)}; its logs, work dirs and stage timings are empty.
//
// Thread safety: all functions may be called concurrently; concurrent stores of one key leave one complete
// entry (last rename wins; both entries hold the same verdict).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/scoring.hpp"
#include "kernelfoundry/task.hpp"

namespace kf {

/// True for the statuses whose verdict may be reused (see the header comment).
bool IsCacheableStatus(EvalStatus status);

/// The worker fingerprint of the key: GetWorkerInfo(harness_kind) without volatile fields, plus the
/// running kf build's identity (path, size, mtime of the executable or shared object holding this code) and
/// the children's environment ("environment": isolation mode, task-side resources; see the header comment).
/// Never throws for a missing resource (its error is part of the fingerprint).
Json WorkerFingerprint(std::string_view harness_kind);

/// The cache key of evaluating `candidate` on `task` with `options` (64 hex characters). Throws what
/// Task::WithBlocks / ResolveGpuArchs throw for unusable input.
std::string VerdictCacheKey(const Task& task, const std::optional<BlockUpdate>& candidate,
                            const EvaluateOptions& options);

/// Rebuilds an EvalResult from EvalResult::ToJson(). Throws kf::Error(kParse) for a malformed document.
EvalResult EvalResultFromJson(const Json& j);

/// The stored verdict under `key` as an Evaluation of `task` + `candidate` (task, codes, archs, result,
/// combined score, build/test results; Evaluation::cached set), or nullopt (miss, unreadable entry).
std::optional<Evaluation> LookupVerdict(const std::filesystem::path& cache_dir, const std::string& key,
                                        const Task& task, const std::optional<BlockUpdate>& candidate);

/// Stores `ev` under `key` when IsCacheableStatus(ev.result.status) and ev is not itself cached; `job_id`
/// is the job that recorded it (nullopt: not recorded). Returns true when stored. Never throws (a cache
/// that cannot be written is only slower).
bool StoreVerdict(const std::filesystem::path& cache_dir, const std::string& key, const Evaluation& ev,
                  std::optional<int64_t> job_id);

}  // namespace kf
