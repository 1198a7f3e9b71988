// What a worker writes to its store for every finished job (reference spec §5.6 tables): a jobs row, the
// tasks row, and job_logs rows (an INFO summary with the Celery facts, one RAW row per process result in the
// reference's format, kf::RawProcessLog).
// --db is any store URL kf::OpenStore takes (OpenWorkerStore).
#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/task.hpp"
#include "worker/worker_impl.hpp"

namespace kf {

namespace {

// One RAW job_logs row per ProcessResult in a SUCCESS value, named as the reference names them (build: the
// two build results; test: every variant's correctness, performance and profiler results).
void AddProcessLogs(const JobRecord& rec, int64_t job_id, std::vector<JobLog>& logs) {
  auto add = [&](const std::string& name, const Json& pr, const Json& worker_info) {
    if (!pr.is_object()) return;
    std::optional<ProcessResult> p;
    try {
      p = ProcessResult::Decode(pr);
    } catch (const Error&) {
      return;
    }
    logs.push_back(RawProcessLog(job_id, name, *p, worker_info, std::nullopt));
  };
  const Json& r = rec.result;
  if (!r.is_object()) return;
  if (rec.message.task == celery::kBuildTaskName) {
    for (const char* key : {"build_result", "build_result_reference"}) {
      if (!r.contains(key) || !r[key].is_object()) continue;
      const Json& br = r[key];
      add(BuildLogName(std::string(key) == "build_result_reference"), br.value("result", Json(nullptr)),
          br.value("worker_info", Json(nullptr)));
    }
  } else if (rec.message.task == celery::kTestTaskName) {
    for (auto it = r.begin(); it != r.end(); ++it) {
      if (!it.value().is_object()) continue;
      const Json info = it.value().value("worker_info", Json(nullptr));
      add(TestLogName(it.key(), "correctness"), it.value().value("correctness_result", Json(nullptr)), info);
      add(TestLogName(it.key(), "performance"), it.value().value("performance_result", Json(nullptr)), info);
      const Json traces = it.value().value("trace_results", Json(nullptr));
      if (!traces.is_object()) continue;
      for (auto t = traces.begin(); t != traces.end(); ++t) add(TestLogName(it.key(), "trace", t.key()), t.value(), info);
    }
  }
}

// A one-line verdict of a test result: "custom: passed (correctness 0, performance 0)".
std::string TestSummary(const Json& r) {
  std::string out;
  if (!r.is_object()) return out;
  for (auto it = r.begin(); it != r.end(); ++it) {
    if (!it.value().is_object()) continue;
    auto code = [&](const char* key) -> std::string {
      const Json& pr = it.value().value(key, Json(nullptr));
      return pr.is_object() && pr.contains("returncode") ? DumpJson(pr["returncode"]) : "-";
    };
    const std::string c = code("correctness_result"), p = code("performance_result");
    out += fmt::format("{}{}: {} (correctness {}, performance {})", out.empty() ? "" : "; ", it.key(),
                       c == "0" && (p == "0" || p == "-") ? "passed" : "failed", c, p);
  }
  return out;
}

}  // namespace

std::string RecordJob(Store& store, const JobRecord& rec) {
  try {
    std::optional<Task> task;
    const Json& args = rec.message.args;
    if ((rec.message.task == celery::kBuildTaskName || rec.message.task == celery::kTestTaskName) && args.is_array() &&
        !args.empty() && args[0].is_object()) {
      try {
        task = Task::Decode(args[0]);
      } catch (const Error&) {
      }
    }
    Json config = task && task->config.is_object() ? task->config : Json::object();
    std::string origin = config.contains("task_origin") && config["task_origin"].is_string()
                             ? config["task_origin"].get<std::string>()
                             : (task ? "custom" : "celery");
    const int64_t job_id = store.CreateJob(origin, config);
    JobUpdate start;
    start.status = JobStatus::kRun;
    start.started = true;
    if (task) {
      try {
        Task t = *task;
        if (!t.config.contains("task_origin")) t.config["task_origin"] = origin;
        Json row = t.ToDatabaseTask();
        store.InsertTask(row);
        start.task_id = row["id"].get<std::string>();
      } catch (const Error&) {
        // No task_name: the job is still recorded, without a tasks row.
      }
    }
    (void)store.UpdateJob(job_id, start);

    std::vector<JobLog> logs;
    JobLog summary;
    summary.job_id = job_id;
    summary.hostname = rec.node;
    summary.level = rec.status == celery::kSuccess ? "INFO" : "ERROR";
    std::string verdict;
    if (rec.status == celery::kSuccess && rec.message.task == celery::kTestTaskName) verdict = TestSummary(rec.result);
    if (rec.status != celery::kSuccess) {
      const Json& m = rec.result.value("exc_message", Json::array());
      verdict = rec.result.value("exc_type", "") + ": " +
                (m.is_array() && !m.empty() && m[0].is_string() ? m[0].get<std::string>() : DumpJson(m));
    }
    summary.message = fmt::format("celery {} {} on {} from {} (delivery {}): {} in {:.2f} s{}", celery::TaskShortName(rec.message.task),
                                  rec.message.id, rec.node, rec.queue, rec.delivery, rec.status, rec.seconds,
                                  verdict.empty() ? "" : " - " + verdict);
    summary.extra = Json{{"celery_task_id", rec.message.id},
                         {"task", rec.message.task},
                         {"queue", rec.queue},
                         {"node", rec.node},
                         {"delivery", rec.delivery},
                         {"status", rec.status},
                         {"seconds", rec.seconds},
                         {"exception", rec.status == celery::kSuccess ? Json(nullptr) : rec.result}};
    logs.push_back(std::move(summary));
    if (rec.status == celery::kSuccess) AddProcessLogs(rec, job_id, logs);
    store.InsertJobLogs(logs);
    JobUpdate end;
    end.status = rec.status == celery::kSuccess ? JobStatus::kComplete : JobStatus::kFail;
    (void)store.UpdateJob(job_id, end);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::unique_ptr<Store> OpenWorkerStore(const std::string& db) {
  if (db.empty()) return nullptr;
  return OpenStore(db);
}

}  // namespace kf
