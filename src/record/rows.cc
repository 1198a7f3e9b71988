// The database rows and the JSON document of an evaluation (see kernelfoundry/record.hpp; spec §5.6).

#include <fmt/format.h>

#include "core/strings.hpp"
#include "kernelfoundry/record.hpp"

namespace kf {
namespace {

constexpr std::string_view kStatusPrefix = "kf status: ";

Json ConfigString(const Json& config, const char* key) {
  if (config.is_object() && config.contains(key) && config[key].is_string()) return config[key];
  return nullptr;
}

}  // namespace

std::string NewUuid4() { return RandomUuid4(); }

std::string CachedNote(const Evaluation& ev) {
  if (ev.cached.is_null()) return "";
  const Json& job = ev.cached.contains("job_id") ? ev.cached["job_id"] : Json(nullptr);
  const Json& at = ev.cached.contains("created_at") ? ev.cached["created_at"] : Json(nullptr);
  return "cached: verdict of " + (job.is_number_integer() ? "job " + std::to_string(job.get<int64_t>()) : std::string("an unrecorded run")) +
         " from " + (at.is_string() ? at.get<std::string>() : std::string("?")) +
         (ev.cached.value("batch_copy", false) ? " (the same candidate earlier in this batch)" : "") + "\n";
}

Json KernelRow(const Evaluation& ev, const std::string& uuid, const std::string& task_id,
               std::optional<int64_t> job_id) {
  const EvalResult& r = ev.result;
  const Json& config = ev.task.config;
  Json row = Json::object();
  row["uuid"] = uuid;
  row["task_name"] = ConfigString(config, "task_name");
  row["job_name"] = ConfigString(config, "job_name");
  row["input_code"] = ev.input_code;
  row["input_language"] = ConfigString(config, "language");
  row["output_code"] = ev.output_code;
  row["output_language"] = ConfigString(config, "language");
  row["status"] = std::string(r.ReferenceStatus());
  row["runtime"] = r.runtime;
  row["runtime_stats"] = r.runtime_stats.empty() ? Json(nullptr) : r.runtime_stats;
  row["improve_over_native"] = r.runtime_improvement;
  row["improve_over_compile"] = r.improve_over_compile;
  row["score"] = r.perf_score;
  row["eval_log"] = std::string(kStatusPrefix) + std::string(EvalStatusName(r.status)) +
                    (r.status_detail.empty() ? "" : " (" + r.status_detail + ")") + "\n" + CachedNote(ev) + r.eval_log;
  ProfilerDataColumns prof = SplitProfilerData(r.profiler_data);
  row["profiler_data"] = prof.profiler_data;
  row["profiler_data_reference"] = prof.profiler_data_reference;
  row["profiler_data_detail"] = prof.profiler_data_detail;
  row["profiler_data_detail_reference"] = prof.profiler_data_detail_reference;
  row["template_results"] = r.template_results.empty() ? Json(nullptr) : r.template_results;
  row["gpu_arch"] = Join(ev.archs, ",");
  WorkerInfoColumns infos = SplitWorkerInfos(r.metadata);
  row["eval_worker_info"] = infos.eval_worker_info;
  row["compile_worker_info"] = infos.compile_worker_info;
  row["config"] = config;
  row["task_id"] = task_id;
  row["job_id"] = job_id ? Json(*job_id) : Json(nullptr);
  return row;
}

std::vector<JobLog> ProcessLogs(const Evaluation& ev, int64_t job_id, const std::string& kernel_uuid) {
  std::vector<JobLog> logs;
  for (const ProcessLog& p : ev.logs) {
    JobLog log;
    log.job_id = job_id;
    if (p.worker_info.is_object() && p.worker_info.contains("hostname") && p.worker_info["hostname"].is_string()) {
      log.hostname = p.worker_info["hostname"].get<std::string>();
    }
    log.kernel_uuid = kernel_uuid;
    log.level = "RAW";
    log.message = p.result.CombineOutput(true);
    log.extra = Json{{"log", p.name},
                     {"returncode", p.result.returncode},
                     {"output_data", p.result.output_data.value_or(nullptr)},
                     {"worker_info", p.worker_info},
                     {"trial", 0},
                     {"version", 0}};
    logs.push_back(std::move(log));
  }
  return logs;
}

bool IsCorrectVerdict(const EvalResult& r) { return r.perf_score == 5 && r.correctness; }

Json EvaluationDocument(const Evaluation& ev, const RecordedRun* recorded) {
  const EvalResult& r = ev.result;
  Json j = Json::object();
  j["task"] = ConfigString(ev.task.config, "task_name");
  j["gpu_arch"] = ev.archs;
  j["status"] = std::string(EvalStatusName(r.status));
  j["reference_status"] = std::string(r.ReferenceStatus());
  j["status_detail"] = r.status_detail;
  j["perf_score"] = r.perf_score;
  j["speedup"] = r.runtime_improvement;
  j["runtime_ms"] = r.runtime;
  j["combined_score"] = ev.combined_score;
  j["correct"] = IsCorrectVerdict(r);
  j["result"] = r.ToJson();
  auto encode = [](const auto& value) { return value ? value->Encode() : Json(nullptr); };
  j["build_result"] = encode(ev.task.build_result);
  j["build_result_reference"] = encode(ev.task.build_result_reference);
  j["test_result"] = encode(ev.task.test_result);
  j["test_result_reference"] = encode(ev.task.test_result_reference);
  Json timings = Json::object();
  timings["build_s"] = ev.build_s;
  timings["test_s"] = ev.test_s;
  timings["wall_s"] = ev.wall_s;
  Json phases = Json::array();
  for (const PhaseTiming& p : ev.timings) phases.push_back(Json{{"phase", p.name}, {"seconds", p.seconds}});
  timings["phases"] = std::move(phases);
  j["timings"] = std::move(timings);
  if (recorded != nullptr) {
    j["db"] = recorded->store;
    j["job_id"] = recorded->job_id;
    j["kernel_uuid"] = recorded->kernel_uuid;
    if (recorded->canceled) j["canceled"] = true;
  }
  j["cached"] = !ev.cached.is_null();
  if (!ev.cached.is_null()) j["cached_from"] = ev.cached;
  Json kept = Json::array();
  for (const auto& d : ev.kept_dirs) kept.push_back(d.string());
  j["work_dirs"] = std::move(kept);
  return j;
}

}  // namespace kf
