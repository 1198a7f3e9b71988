// Shared parts of `kf run` and `kf validate --run`: live progress lines, the result table, the storage
// wiring (jobs / tasks / kernels / job_logs rows, reference spec §5.5–§5.6) and the reference check.
#pragma once

#include <cstdio>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/store.hpp"
#include "kernelfoundry/task.hpp"

namespace kf::cli {

/// Prints one progress line per phase start/end to stderr: "kf: [  12.3s] correctness custom (cpu) passed
/// in 2.1 s". Times are measured from the returned callback's creation. Thread-safe.
ProgressFn StderrProgress();

/// A random RFC 4122 version-4 UUID ("xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx").
std::string NewUuid4();

/// The `kernels` row of an evaluation (spec §5.6 mapping from EvalResult): uuid, task_name, job_name,
/// status (the reference's string), score, runtime, improve_over_native/_compile, runtime_stats (null when
/// empty), template_results, eval_log (first line: our typed status), gpu_arch, eval/compile worker_info,
/// profiler columns, config, task_id, job_id, input_code (the task's EVOLVE block), output_code (the
/// evaluated EVOLVE content), input/output_language.
Json KernelRow(const Evaluation& ev, const std::string& uuid, const std::string& task_id,
               std::optional<int64_t> job_id);

/// One `job_logs` row per process result of the evaluation (level RAW, extra {log, output_data,
/// worker_info, trial, version}, hostname from the worker info).
std::vector<JobLog> ProcessLogs(const Evaluation& ev, int64_t job_id, const std::string& kernel_uuid);

/// Records a run in the database: creates the job (INIT), stores the task row (a stored id is kept),
/// sets the job's task_id and config, marks it RUN; `run` evaluates; then the kernel row and the process
/// logs are inserted and the job marked COMPLETE. An exception from `run` marks the job FAIL and is
/// rethrown. `validate` uses the VALIDATING / VALIDATED statuses instead of RUN / COMPLETE.
struct RecordedRun {
  int64_t job_id = 0;
  std::string kernel_uuid;
};
RecordedRun RecordRun(Store& store, const Task& task, bool validate, const std::function<Evaluation()>& run,
                      Evaluation* out);

/// Prints the verdict table to `out`: per benchmark the reference ms, candidate ms and speedup; then the
/// overall speedup (geometric mean), perf_score, combined score and status; for a negative verdict the last
/// 20 non-blank lines of the evaluation log (compiler errors, failed assertions).
void PrintVerdict(const Evaluation& ev, std::FILE* out = stdout);

/// The JSON document of `kf run --json`: task, status, reference_status, status_detail, perf_score,
/// speedup, combined_score, result (EvalResult::ToJson), build results, test results, timings, job/kernel.
Json EvaluationJson(const Evaluation& ev, const std::optional<RecordedRun>& recorded, const std::string& db);

/// True when the verdict counts as correct for the exit code (perf_score 5).
bool IsCorrectVerdict(const EvalResult& r);

/// Options of the `--run` step of `kf validate`.
struct ValidateRunOptions {
  std::string gpu_arch;    ///< empty = config gpu_arch
  bool keep_workdir = false;
  std::string db;          ///< empty = DefaultDbPath()
  bool store = true;       ///< record a VALIDATED job and a kernels row
};

/// `kf validate TASK --run`: builds and tests the task's reference (`--ref`) and reports pass/fail on
/// stdout. Returns kExitOk when the reference passes its own tests, kExitVerdictFailed otherwise.
int RunReferenceCheck(const Task& task, const ValidateRunOptions& options);

}  // namespace kf::cli
