// What a farm worker's store holds for every finished job (see RecordWorkerJob in kernelfoundry/record.hpp;
// reference spec §5.6 tables): a jobs row, the tasks row, and job_logs rows (an INFO summary with the Celery
// facts, one RAW row per process result in the reference's format, kf::RawProcessLog).
#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/task.hpp"

namespace kf {

namespace {

// One RAW job_logs row per ProcessResult in a SUCCESS value, named as the reference names them (build: the
// two build results; test: every variant's correctness, performance and profiler results).
void AddProcessLogs(const WorkerJob& job, int64_t job_id, std::vector<JobLog>& logs) {
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
  const Json& r = job.result;
  if (!r.is_object()) return;
  if (job.body == WorkerBody::kBuild) {
    for (const char* key : {"build_result", "build_result_reference"}) {
      if (!r.contains(key) || !r[key].is_object()) continue;
      const Json& br = r[key];
      add(BuildLogName(std::string(key) == "build_result_reference"), br.value("result", Json(nullptr)),
          br.value("worker_info", Json(nullptr)));
    }
  } else if (job.body == WorkerBody::kTest) {
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

// The encoded Task a build or test body was given (args[0]), or nullopt (another body, or it does not decode).
std::optional<Task> JobTask(const WorkerJob& job) {
  const Json& args = job.args;
  if (job.body == WorkerBody::kOther || !args.is_array() || args.empty() || !args[0].is_object()) return std::nullopt;
  try {
    return Task::Decode(args[0]);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The INFO / ERROR summary row of a job: what ran where, how it ended, and the verdict or the exception.
JobLog SummaryLog(const WorkerJob& job, int64_t job_id) {
  const bool success = job.status == WorkerJobStatus::kSuccess;
  const std::string_view status = WorkerJobStatusName(job.status);
  JobLog summary;
  summary.job_id = job_id;
  summary.hostname = job.node;
  summary.level = success ? "INFO" : "ERROR";
  std::string verdict;
  if (success && job.body == WorkerBody::kTest) verdict = TestSummary(job.result);
  if (!success) {
    const Json& m = job.result.value("exc_message", Json::array());
    verdict = job.result.value("exc_type", "") + ": " +
              (m.is_array() && !m.empty() && m[0].is_string() ? m[0].get<std::string>() : DumpJson(m));
  }
  if (!job.cached.is_null()) {
    verdict += fmt::format("{}cached: verdict from {}", verdict.empty() ? "" : "; ",
                           job.cached.value("created_at", std::string("an earlier job")));
  }
  summary.message = fmt::format("celery {} {} on {} from {} (delivery {}): {} in {:.2f} s{}", job.task_short,
                                job.celery_id, job.node, job.queue, job.delivery, status, job.seconds,
                                verdict.empty() ? "" : " - " + verdict);
  summary.extra = Json{{"celery_task_id", job.celery_id},
                       {"task", job.task},
                       {"queue", job.queue},
                       {"node", job.node},
                       {"delivery", job.delivery},
                       {"status", status},
                       {"seconds", job.seconds},
                       {"exception", success ? Json(nullptr) : job.result}};
  if (!job.cached.is_null()) summary.extra["verdict_cache"] = job.cached;
  return summary;
}

}  // namespace

std::string_view WorkerJobStatusName(WorkerJobStatus status) {
  switch (status) {
    case WorkerJobStatus::kSuccess:
      return "SUCCESS";
    case WorkerJobStatus::kFailure:
      return "FAILURE";
    case WorkerJobStatus::kRevoked:
      return "REVOKED";
  }
  return "FAILURE";
}

std::string RecordWorkerJob(Store& store, const WorkerJob& job) {
  try {
    const std::optional<Task> task = JobTask(job);
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
    std::vector<JobLog> logs{SummaryLog(job, job_id)};
    if (job.status == WorkerJobStatus::kSuccess) AddProcessLogs(job, job_id, logs);
    store.InsertJobLogs(logs);
    JobUpdate end;
    end.status = job.status == WorkerJobStatus::kSuccess ? JobStatus::kComplete : JobStatus::kFail;
    (void)store.UpdateJob(job_id, end);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace kf
