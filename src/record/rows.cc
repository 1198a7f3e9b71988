// The database rows and the JSON document of an evaluation (see kernelfoundry/record.hpp; spec §5.6).

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/strings.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/worker_info.hpp"

namespace kf {
namespace {

constexpr std::string_view kStatusPrefix = "kf status: ";

Json ConfigString(const Json& config, const char* key) {
  if (config.is_object() && config.contains(key) && config[key].is_string()) return config[key];
  return nullptr;
}

/// Python's `text.strip() != ""` for the reference's blank check (ASCII whitespace).
bool NotBlank(const std::string& text) {
  return std::any_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c) == 0; });
}

/// Number of UTF-8 code points (what a VARCHAR(n) counts).
size_t Utf8Length(std::string_view s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

Json Opt(const std::optional<std::string>& s) { return s ? Json(*s) : Json(nullptr); }
Json Opt(const std::optional<int64_t>& v) { return v ? Json(*v) : Json(nullptr); }

/// One arch's paired timing ({"paired": {name: record}, "conditions": {...}}, PairedTiming's JSON) as stored
/// with the row: per benchmark the speedup, its 95 % interval, the timing verdict, rounds and processes; the
/// conditions as measured. Null when there is no paired record.
Json TimingSummary(const Json& timing) {
  if (!timing.is_object() || !timing.contains("paired") || !timing["paired"].is_object()) return nullptr;
  Json benchmarks = Json::object();
  for (const auto& [name, rec] : timing["paired"].items()) {
    if (!rec.is_object()) continue;
    Json b = Json::object();
    for (const char* key : {"speedup", "ci", "rel_half_width", "status", "rounds", "processes"}) {
      if (rec.contains(key)) b[key] = rec[key];
    }
    benchmarks[name] = std::move(b);
  }
  if (benchmarks.empty()) return nullptr;
  return Json{{"benchmarks", std::move(benchmarks)}, {"conditions", timing.value("conditions", Json::object())}};
}

/// eval_worker_info ({arch: worker info}) with each arch's timing summary added under "timing" (TimingSummary of
/// EvalResult::timing: one arch's object, or {arch: object} for several), so that a speedup read back from the
/// database says how sure it was and what it was measured under; the reference's keys stay as they are.
Json WithTimingSummaries(Json eval_worker_info, const Json& timing, const std::vector<std::string>& archs) {
  if (!timing.is_object() || timing.empty()) return eval_worker_info;
  auto add = [&](const std::string& arch, const Json& arch_timing) {
    Json summary = TimingSummary(arch_timing);
    if (summary.is_null()) return;
    if (!eval_worker_info.is_object()) eval_worker_info = Json::object();
    Json& info = eval_worker_info[arch];
    if (!info.is_object()) info = Json::object();
    info["timing"] = std::move(summary);
  };
  if (timing.contains("paired")) {
    if (archs.size() == 1) add(archs.front(), timing);
  } else {
    for (const auto& [arch, arch_timing] : timing.items()) add(arch, arch_timing);
  }
  return eval_worker_info;
}

}  // namespace

std::string NewUuid4() { return RandomUuid4(); }

Lineage LineageFromJson(const Json& j, const std::string& source) {
  if (!j.is_object()) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("lineage must be a JSON object, got {}", j.type_name()),
                source, "lineage");
  }
  Lineage l;
  for (const auto& [key, value] : j.items()) {
    const bool known = std::any_of(std::begin(kLineageKeys), std::end(kLineageKeys),
                                   [&key](const char* k) { return key == k; });
    if (!known) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("unknown lineage key (expected one of {})", fmt::join(kLineageKeys, ", ")), source, key);
    }
    if (value.is_null()) continue;
    if (key == "trial" || key == "version") {
      if (!value.is_number_integer()) {
        throw Error(ErrorKind::kInvalidArgument, fmt::format("expected an integer, got {}", value.type_name()), source,
                    key);
      }
      (key == "trial" ? l.trial : l.version) = value.get<int64_t>();
      continue;
    }
    if (!value.is_string()) {
      throw Error(ErrorKind::kInvalidArgument, fmt::format("expected a string, got {}", value.type_name()), source, key);
    }
    const std::string text = value.get<std::string>();
    const int max_chars = ColumnMaxChars("kernels", key);
    if (max_chars > 0 && Utf8Length(text) > static_cast<size_t>(max_chars)) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("value has {} characters, the column holds at most {}", Utf8Length(text), max_chars),
                  source, key);
    }
    std::optional<std::string>* field = key == "parent_uuid"      ? &l.parent_uuid
                                        : key == "prompt"         ? &l.prompt
                                        : key == "answer"         ? &l.answer
                                        : key == "language_model" ? &l.language_model
                                        : key == "agent_session_id" ? &l.agent_session_id
                                                                    : &l.db_user;
    *field = text;
  }
  return l;
}

Json LineageToJson(const Lineage& l) {
  Json j = {{"parent_uuid", Opt(l.parent_uuid)}, {"trial", Opt(l.trial)},
            {"version", Opt(l.version)},         {"prompt", Opt(l.prompt)},
            {"answer", Opt(l.answer)},           {"language_model", Opt(l.language_model)},
            {"agent_session_id", Opt(l.agent_session_id)}, {"db_user", Opt(l.db_user)}};
  Json out = Json::object();
  for (const char* key : kLineageKeys) {
    if (!j[key].is_null()) out[key] = j[key];
  }
  return out;
}

std::string CachedNote(const Evaluation& ev) {
  if (ev.cached.is_null()) return "";
  const Json& job = ev.cached.contains("job_id") ? ev.cached["job_id"] : Json(nullptr);
  const Json& at = ev.cached.contains("created_at") ? ev.cached["created_at"] : Json(nullptr);
  return "cached: verdict of " + (job.is_number_integer() ? "job " + std::to_string(job.get<int64_t>()) : std::string("an unrecorded run")) +
         " from " + (at.is_string() ? at.get<std::string>() : std::string("?")) +
         (ev.cached.value("batch_copy", false) ? " (the same candidate earlier in this batch)" : "") + "\n";
}

Json KernelRow(const Evaluation& ev, const std::string& uuid, const std::string& task_id,
               std::optional<int64_t> job_id, const Lineage& lineage) {
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
  row["kf_status"] = std::string(EvalStatusName(r.status));
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
  row["eval_worker_info"] = WithTimingSummaries(infos.eval_worker_info, r.timing, ev.archs);
  row["compile_worker_info"] = infos.compile_worker_info;
  row["config"] = config;
  row["task_id"] = task_id;
  row["job_id"] = job_id ? Json(*job_id) : Json(nullptr);
  const Json lineage_columns = LineageToJson(lineage);
  for (const auto& [key, value] : lineage_columns.items()) row[key] = value;
  return row;
}

std::string RawLogText(const ProcessResult& result) {
  std::string text = fmt::format("Return code: {}\n", result.returncode);
  if (result.message) text += "Message: " + *result.message + "\n";
  if (NotBlank(result.stdout_text)) text += "------ Standard Output ------\n" + result.stdout_text + "\n";
  if (NotBlank(result.stderr_text)) text += "------ Standard Error ------\n" + result.stderr_text + "\n";
  return text;
}

JobLog RawProcessLog(int64_t job_id, const std::string& name, const ProcessResult& result, const Json& worker_info,
                     const std::optional<std::string>& kernel_uuid, const Lineage& lineage) {
  JobLog log;
  log.job_id = job_id;
  if (worker_info.is_object() && worker_info.contains("hostname") && worker_info["hostname"].is_string()) {
    log.hostname = worker_info["hostname"].get<std::string>();
  } else {
    log.hostname = HostName();
  }
  log.kernel_uuid = kernel_uuid;
  log.agent_session_id = lineage.agent_session_id;
  log.level = "RAW";
  log.message = name;
  const int64_t trial = lineage.trial.value_or(0), version = lineage.version.value_or(0);
  log.extra = Json{{"log", RawLogText(result)},
                   {"output_data", result.output_data.value_or(nullptr)},
                   {"worker_info", worker_info},
                   {"trial", trial},
                   {"version", version},
                   {"iteration", trial},
                   {"branch", version}};
  return log;
}

std::vector<JobLog> ProcessLogs(const Evaluation& ev, int64_t job_id, const std::string& kernel_uuid,
                                const Lineage& lineage) {
  std::vector<JobLog> logs;
  for (const ProcessLog& p : ev.logs) {
    logs.push_back(RawProcessLog(job_id, p.log_name.empty() ? p.name : p.log_name, p.result, p.worker_info,
                                 kernel_uuid, lineage));
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
