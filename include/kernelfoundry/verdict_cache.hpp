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
//  * Every front end reaches the cache through this module alike: kf run, kf submit's batches and the
//    Python API's evaluate(verdict_cache=True) through EvaluateWithVerdictCache; a farm worker's
//    test_custom_task body (kf worker --verdict-cache) through TestThroughVerdictCache, which stores the
//    body's value under a key of the task as received (candidate, config with the arch and variants, the
//    digests of the build artifacts it tests) and this worker's fingerprint, only when every verdict in it is
//    a property of the candidate (IsCacheableTestStage: the same statuses as above, and a passing reference).
//
// Thread safety: all functions may be called concurrently; concurrent stores of one key leave one complete
// entry (last rename wins; both entries hold the same verdict).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/record.hpp"
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

// ------------------------------------------------------------------------------------------ front ends

/// An evaluation and, when it was recorded, its job.
struct RecordedEvaluation {
  Evaluation ev;
  std::optional<RecordedRun> recorded;
};

/// Evaluates `candidate` on `task` with `options` and records it in `store` (null: not recorded; else
/// EvaluateAndRecord / RecordRun with `record`). With `verdict_cache` (and no farm runner or injected harness
/// in `options`), an identical earlier evaluation is reused from the cache in DefaultCacheDir() (recorded as a
/// new job holding the stored verdict) and a fresh cacheable verdict is stored. `known`, when not null, is an
/// evaluation of this very candidate to record instead of looking it up or evaluating (a copy in a batch
/// reusing the first's noisy verdict). Throws what kf::Evaluate / kf::EvaluateAndRecord throw.
RecordedEvaluation EvaluateWithVerdictCache(const Task& task, const std::optional<BlockUpdate>& candidate,
                                            const EvaluateOptions& options, Store* store, const RecordOptions& record,
                                            bool verdict_cache, const Evaluation* known = nullptr);

// ------------------------------------------------------------------------------------------ farm test bodies

/// The key of a farm worker's test body on `task` as it was received (candidate code in its files, config
/// with gpu_arch and the variants, build_result / build_result_reference from the build body) for `archs`,
/// testing the candidate and/or the reference: the evaluation key's fields with "stage": "test" and, per
/// build result, whether it passed and the SHA-256 of its artifacts. 64 hex characters.
std::string TestStageCacheKey(const Task& task, const std::vector<std::string>& archs, bool test_candidate,
                              bool test_reference);

/// True when a test stage's outcome may be reused: a candidate variant ran, every run has a correctness
/// verdict, the candidate's verdicts (correctness and performance) are IsCacheableStatus, and the reference's
/// correctness run, when it ran, is correct and its performance verdict cacheable (noisy and suspicious
/// timing, timeouts, limits, crashes and a failing reference are never stored).
bool IsCacheableTestStage(const TestStageResult& stage);

/// A test body's value found in the cache.
struct CachedTestStage {
  Json value;                 ///< the body's value as it was stored
  Json cached = nullptr;      ///< {"key", "created_at"} of the entry
};

/// The stored value of a test body under `key`, or nullopt (miss, unreadable or malformed entry).
std::optional<CachedTestStage> LookupTestStage(const std::filesystem::path& cache_dir, const std::string& key);

/// Stores a test body's `value` under `key` when IsCacheableTestStage(stage). Returns true when stored;
/// never throws.
bool StoreTestStage(const std::filesystem::path& cache_dir, const std::string& key, const Json& value,
                    const TestStageResult& stage);

/// What a test body returns through the cache: its value and, for a stored one, the entry it came from.
struct TestBodyValue {
  Json value;
  Json cached = nullptr;  ///< CachedTestStage::cached on a hit, null when `run` ran
};

/// A farm worker's test body through the verdict cache in DefaultCacheDir(): the stored value of `key` when
/// there is one, else `run()` — the body's value and the stage result it came from — stored when
/// IsCacheableTestStage. Throws what `run` throws.
TestBodyValue TestThroughVerdictCache(const std::string& key,
                                      const std::function<std::pair<Json, TestStageResult>()>& run);

}  // namespace kf
