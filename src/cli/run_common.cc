// Shared parts of `kf run` and `kf validate --run` (see run_common.hpp).
#include "cli/run_common.hpp"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "cli/exit_codes.hpp"
#include "kernelfoundry/error.hpp"

namespace kf::cli {

ProgressFn StderrProgress() {
  auto t0 = std::chrono::steady_clock::now();
  auto mu = std::make_shared<std::mutex>();
  return [t0, mu](const PhaseEvent& e) {
    double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string what = PhaseName(e.phase);
    if (e.phase == Phase::kCorrectness || e.phase == Phase::kPerformance) {
      what += " " + e.variant + " (" + e.gpu_arch + ")";
    }
    std::string line;
    if (!e.finished) {
      line = fmt::format("kf: [{:7.1f}s] {} ...", now, what);
    } else {
      line = fmt::format("kf: [{:7.1f}s] {} {} in {:.1f} s", now, what, e.ok ? "passed" : "FAILED", e.elapsed_s);
      if (!e.ok && !e.note.empty()) {
        std::string note = e.note.substr(0, e.note.find('\n'));
        line += ": " + note;
      }
    }
    std::lock_guard<std::mutex> lock(*mu);
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
}

std::string NewUuid4() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}() ^
                             static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count())};
  uint64_t a, b;
  {
    std::lock_guard<std::mutex> lock(mu);
    a = rng();
    b = rng();
  }
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 10
  std::string hex = fmt::format("{:016x}{:016x}", a, b);
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20);
}

namespace {

Json ConfigString(const Json& config, const char* key) {
  if (config.is_object() && config.contains(key) && config[key].is_string()) return config[key];
  return nullptr;
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// The task's config with the fields the DB requires (task_origin defaults to "custom").
Task WithDbDefaults(const Task& task) {
  Task t = task;
  if (!t.config.is_object()) t.config = Json::object();
  if (!t.config.contains("task_origin") || t.config["task_origin"].is_null()) t.config["task_origin"] = "custom";
  return t;
}

}  // namespace

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
  row["eval_log"] = "kf status: " + std::string(EvalStatusName(r.status)) +
                    (r.status_detail.empty() ? "" : " (" + r.status_detail + ")") + "\n" + r.eval_log;
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

RecordedRun RecordRun(Store& store, const Task& task, bool validate, const std::function<Evaluation()>& run,
                      Evaluation* out) {
  const Task t = WithDbDefaults(task);
  RecordedRun rec;
  rec.job_id = store.CreateJob(t.config["task_origin"].is_string() ? t.config["task_origin"].get<std::string>()
                                                                  : "custom",
                               t.config);
  auto set_status = [&](JobStatus s) {
    JobUpdate u;
    u.status = s;
    u.started = s == JobStatus::kRun || s == JobStatus::kValidating;
    (void)store.UpdateJob(rec.job_id, u);
  };
  std::string task_id;
  try {
    Json task_row = t.ToDatabaseTask();
    task_id = task_row["id"].get<std::string>();
    store.InsertTask(task_row);  // false: already stored (the reference logs it as info)
    JobUpdate init;
    init.status = JobStatus::kInit;
    init.task_id = task_id;
    init.config = t.config;
    (void)store.UpdateJob(rec.job_id, init);
    set_status(validate ? JobStatus::kValidating : JobStatus::kRun);
    *out = run();
    rec.kernel_uuid = NewUuid4();
    store.InsertKernel(KernelRow(*out, rec.kernel_uuid, task_id, rec.job_id));
    store.InsertJobLogs(ProcessLogs(*out, rec.job_id, rec.kernel_uuid));
    set_status(validate ? JobStatus::kValidated : JobStatus::kComplete);
  } catch (...) {
    try {
      set_status(JobStatus::kFail);
    } catch (...) {
    }
    throw;
  }
  return rec;
}

namespace {

std::string Ms(double v) { return v > 0 ? fmt::format("{:.4g}", v) : "-"; }
std::string Speedup(double v) { return v > 0 ? fmt::format("{:.3f}x", v) : "-"; }

}  // namespace

void PrintVerdict(const Evaluation& ev, std::FILE* out) {
  const EvalResult& r = ev.result;
  bool multi_arch = ev.archs.size() > 1;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"benchmark", "reference ms", "candidate ms", "speedup"};
  if (multi_arch) header.insert(header.begin(), "arch");
  for (const BenchmarkRow& b : r.benchmarks) {
    std::vector<std::string> row = {b.name, Ms(b.reference_mean_ms), Ms(b.candidate_mean_ms), Speedup(b.speedup)};
    if (multi_arch) row.insert(row.begin(), b.arch);
    rows.push_back(std::move(row));
  }
  if (!rows.empty()) {
    std::vector<size_t> width(header.size());
    for (size_t i = 0; i < header.size(); ++i) {
      width[i] = header[i].size();
      for (const auto& row : rows) width[i] = std::max(width[i], row[i].size());
    }
    auto print = [&](const std::vector<std::string>& row) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) {
        bool text = i + 3 < row.size();  // arch/benchmark columns left-aligned, numbers right-aligned
        if (i) line += "  ";
        line += text ? fmt::format("{:<{}}", row[i], width[i]) : fmt::format("{:>{}}", row[i], width[i]);
      }
      std::fprintf(out, "%s\n", line.c_str());
    };
    print(header);
    for (const auto& row : rows) print(row);
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "overall speedup (geomean): %s\n", Speedup(r.runtime_improvement).c_str());
  std::fprintf(out, "candidate runtime: %s ms\n", Ms(r.runtime).c_str());
  std::fprintf(out, "perf_score: %d   combined score: %s\n", r.perf_score,
              ev.combined_score >= 0 ? fmt::format("{:.4g}", ev.combined_score).c_str() : "-");
  std::string status = std::string(EvalStatusName(r.status));
  std::fprintf(out, "status: %s%s   (reference-compatible status: %s)\n", status.c_str(),
              r.status_detail.empty() ? "" : (" - " + r.status_detail).c_str(), std::string(r.ReferenceStatus()).c_str());
  if (!IsCorrectVerdict(r) && r.status != EvalStatus::kSkipped && !r.eval_log.empty()) {
    // Why it failed, without -v or --json: the last lines of the log (compiler errors, failed asserts).
    constexpr size_t kTail = 20;
    std::vector<std::string> lines;
    size_t pos = 0;
    while (pos < r.eval_log.size()) {
      size_t nl = r.eval_log.find('\n', pos);
      std::string line = r.eval_log.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(std::move(line));
      pos = nl == std::string::npos ? r.eval_log.size() : nl + 1;
    }
    size_t from = lines.size() > kTail ? lines.size() - kTail : 0;
    std::fprintf(out, "log (last %zu of %zu lines; all of it: --json or -v):\n", lines.size() - from, lines.size());
    for (size_t i = from; i < lines.size(); ++i) std::fprintf(out, "  %s\n", lines[i].c_str());
  }
}

Json EvaluationJson(const Evaluation& ev, const std::optional<RecordedRun>& recorded, const std::string& db) {
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
  if (recorded) {
    j["db"] = db;
    j["job_id"] = recorded->job_id;
    j["kernel_uuid"] = recorded->kernel_uuid;
  }
  Json kept = Json::array();
  for (const auto& d : ev.kept_dirs) kept.push_back(d.string());
  j["work_dirs"] = std::move(kept);
  return j;
}

bool IsCorrectVerdict(const EvalResult& r) { return r.perf_score == 5 && r.correctness; }

int RunReferenceCheck(const Task& task, const ValidateRunOptions& options) {
  EvaluateOptions eo;
  if (!options.gpu_arch.empty()) eo.gpu_arch = options.gpu_arch;
  eo.test_candidate = false;
  eo.test_reference = true;
  eo.keep_workdir = options.keep_workdir;
  eo.progress = StderrProgress();
  Evaluation ev;
  auto run = [&] { return Evaluate(task, std::nullopt, eo); };
  if (options.store) {
    auto store = SqliteStore::Open(options.db.empty() ? DefaultDbPath() : std::filesystem::path(options.db));
    RecordRun(*store, task, /*validate=*/true, run, &ev);
  } else {
    ev = run();
  }
  const EvalResult& r = ev.result;
  bool passed = r.status == EvalStatus::kReferenceOnly;
  std::printf("reference run: %s (%s)%s\n", passed ? "PASSED" : "FAILED",
              std::string(EvalStatusName(r.status)).c_str(),
              r.status_detail.empty() ? "" : (" - " + r.status_detail).c_str());
  for (const BenchmarkRow& b : r.benchmarks) {
    std::printf("  %s%s: %s ms\n", b.arch.empty() ? "" : (b.arch + " ").c_str(), b.name.c_str(),
                Ms(b.candidate_mean_ms).c_str());
  }
  if (!passed && !r.eval_log.empty()) std::printf("%s\n", r.eval_log.c_str());
  return passed ? kExitOk : kExitVerdictFailed;
}

}  // namespace kf::cli
