// The JSON API of kf serve (include/kernelfoundry/serve.hpp): parameter parsing, store queries, the
// evaluation document.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/serve.hpp"
#include "serve/summary_cache.hpp"

namespace kf {
namespace {

constexpr int64_t kDefaultLimit = 50;
constexpr int64_t kMaxLimit = 1000;
constexpr int64_t kDefaultHistoryLimit = 2000;
constexpr int64_t kMaxHistoryLimit = 10000;

/// A 400 answer naming the parameter.
struct BadParameter {
  std::string parameter;
  std::string message;
};

using Params = std::multimap<std::string, std::string>;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

ApiResponse JsonAnswer(int status, const Json& body) { return {status, kJsonType, Dump(body)}; }

std::optional<std::string> Param(const Params& params, const std::string& name) {
  auto it = params.find(name);
  if (it == params.end() || it->second.empty()) return std::nullopt;
  if (params.count(name) > 1) throw BadParameter{name, "given more than once"};
  return it->second;
}

std::optional<int64_t> IntParam(const Params& params, const std::string& name, int64_t min, int64_t max) {
  auto text = Param(params, name);
  if (!text) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size()) {
    throw BadParameter{name, fmt::format("expected an integer, got \"{}\"", *text)};
  }
  if (v < min || v > max) throw BadParameter{name, fmt::format("expected {}..{}, got {}", min, max, v)};
  return v;
}

/// limit (1..1000, default 50) and offset (>= 0, default 0).
std::pair<int64_t, int64_t> Page(const Params& params) {
  return {IntParam(params, "limit", 1, kMaxLimit).value_or(kDefaultLimit),
          IntParam(params, "offset", 0, INT64_MAX / 2).value_or(0)};
}

/// Summary columns of a kernels page (no code, no logs).
const std::vector<std::string> kPageColumns = {"id",    "timestamp", "uuid",    "task_name",           "job_id",
                                               "status", "kf_status", "score",  "runtime",
                                               "improve_over_native", "gpu_arch", "parent_uuid"};

ApiResponse Tasks(Store& store, serve::SummaryCache* cache) {
  Json tasks = Json::array();
  for (const TaskSummary& s : cache ? cache->Get(store) : store.ListTaskSummaries()) tasks.push_back(s.ToJson());
  return JsonAnswer(200, {{"tasks", std::move(tasks)}});
}

ApiResponse Jobs(Store& store, const Params& params) {
  JobQuery q;
  q.task_name = Param(params, "task");
  if (auto s = Param(params, "status")) {
    try {
      q.status = ParseJobStatus(*s);
    } catch (const Error&) {
      throw BadParameter{"status", fmt::format("expected INIT, RUN, VALIDATING, COMPLETE, FAIL, CANCELED or "
                                               "VALIDATED, got \"{}\"", *s)};
    }
  }
  std::tie(q.limit, q.offset) = Page(params);
  Json jobs = Json::array();
  for (Json& j : store.ListJobs(q)) jobs.push_back(std::move(j));
  return JsonAnswer(200, {{"total", store.CountJobs(q)}, {"limit", q.limit}, {"offset", q.offset}, {"jobs", jobs}});
}

ApiResponse Kernels(Store& store, const Params& params) {
  KernelQuery q;
  q.task_name = Param(params, "task");
  q.kf_status = Param(params, "status");
  q.status = Param(params, "ref_status");
  q.job_id = IntParam(params, "job", 0, INT64_MAX);
  q.uuid = Param(params, "uuid");
  q.db_user = Param(params, "user");
  if (auto s = Param(params, "sort")) {
    try {
      q.sort = ParseKernelSort(*s);
    } catch (const Error&) {
      throw BadParameter{"sort", fmt::format("expected id, timestamp, score, runtime or speedup, got \"{}\"", *s)};
    }
  }
  if (auto o = Param(params, "order")) {
    if (*o != "asc" && *o != "desc") throw BadParameter{"order", fmt::format("expected asc or desc, got \"{}\"", *o)};
    q.descending = *o == "desc";
  }
  std::tie(q.limit, q.offset) = Page(params);
  q.columns = kPageColumns;
  Json kernels = Json::array();
  for (Json& k : store.ListKernels(q)) kernels.push_back(std::move(k));
  return JsonAnswer(200,
                    {{"total", store.CountKernels(q)}, {"limit", q.limit}, {"offset", q.offset}, {"kernels", kernels}});
}

ApiResponse LineageAnswer(Store& store, const Params& params) {
  auto uuid = Param(params, "uuid");
  if (!uuid) throw BadParameter{"uuid", "required"};
  auto lineage = KernelLineage(store, *uuid);
  if (!lineage) return JsonAnswer(404, {{"error", fmt::format("no kernel with uuid {}", *uuid)}});
  return JsonAnswer(200, *lineage);
}

ApiResponse GraphAnswer(Store& store, const Params& params) {
  auto task = Param(params, "task");
  if (!task) throw BadParameter{"task", "required"};
  return JsonAnswer(200, TaskGraph(store, *task, IntParam(params, "limit", 1, kMaxHistoryLimit).value_or(500)));
}

ApiResponse History(Store& store, const Params& params) {
  HistoryQuery q;
  auto task = Param(params, "task");
  if (!task) throw BadParameter{"task", "required"};
  q.task_name = *task;
  q.after_id = IntParam(params, "after_id", 0, INT64_MAX).value_or(0);
  q.limit = IntParam(params, "limit", 1, kMaxHistoryLimit).value_or(kDefaultHistoryLimit);
  Json points = Json::array();
  for (const KernelPoint& p : store.KernelHistory(q)) points.push_back(p.ToJson());
  const bool more = static_cast<int64_t>(points.size()) == q.limit;
  return JsonAnswer(200, {{"task", *task}, {"points", std::move(points)}, {"more", more}});
}

std::optional<double> Number(const Json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}
Json OrNull(std::optional<double> v) { return v ? Json(*v) : Json(nullptr); }
/// The reference's "not measured" -1 and "no reference" 9.999e-10 read as null.
Json Measured(std::optional<double> v) { return v && *v > 1e-9 ? Json(*v) : Json(nullptr); }

bool IsStats(const Json& j) { return j.is_object() && j.contains("mean"); }

void AddBenchmark(Json& out, const std::string& arch, const std::string& name, const Json& s) {
  Json ci = nullptr;
  if (auto it = s.find("speedup_ci"); it != s.end() && it->is_array() && it->size() == 2) ci = *it;
  out.push_back({{"arch", arch},
                 {"name", name},
                 {"reference_ms", Measured(Number(s, "ref_speed"))},
                 {"candidate_ms", Measured(Number(s, "mean"))},
                 {"speedup", Measured(Number(s, "speedup"))},
                 {"std_ms", OrNull(Number(s, "std"))},
                 {"min_ms", OrNull(Number(s, "min"))},
                 {"max_ms", OrNull(Number(s, "max"))},
                 {"median_ms", OrNull(Number(s, "median"))},
                 {"num_trials", OrNull(Number(s, "num_trials"))},
                 {"paired", s.value("paired", !ci.is_null())},
                 {"speedup_ci", ci}});
}

/// Benchmarks from runtime_stats: {bench: stats} or, over several archs, {arch: {bench: stats}}.
Json Benchmarks(const Json& runtime_stats, const std::string& gpu_arch) {
  Json out = Json::array();
  if (!runtime_stats.is_object()) return out;
  for (const auto& [key, value] : runtime_stats.items()) {
    if (IsStats(value)) {
      AddBenchmark(out, gpu_arch, key, value);
    } else if (value.is_object()) {
      for (const auto& [name, s] : value.items()) {
        if (IsStats(s)) AddBenchmark(out, key, name, s);
      }
    }
  }
  return out;
}

std::string Str(const Json& row, const char* key) {
  auto it = row.find(key);
  return it != row.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Json BestJson(Store& store, int64_t id, double speedup) {
  auto k = store.GetKernel(id);
  if (!k) return nullptr;
  return {{"id", id}, {"speedup", speedup}, {"code", (*k)["output_code"]}};
}

/// The best correct (score 5) candidate of `task` stored before kernel `id`, with a real speedup: first from
/// the fastest rows of the task (a few pages), else by walking the task's history up to `id` (bounded by the
/// rows before it).
Json BestBefore(Store& store, const std::string& task, int64_t id) {
  KernelQuery q;
  q.task_name = task;
  q.sort = KernelSort::kSpeedup;
  q.descending = true;
  q.columns = {"id", "score", "improve_over_native"};
  constexpr int64_t kPage = 200, kPages = 5;
  q.limit = kPage;
  for (int64_t page = 0; page < kPages; ++page) {
    q.offset = page * kPage;
    auto rows = store.ListKernels(q);
    for (const Json& r : rows) {
      auto sp = Number(r, "improve_over_native");
      if (!sp || !(*sp > 1e-9)) return nullptr;  // sorted: nothing better follows
      if (r["id"].get<int64_t>() < id && Number(r, "score") == 5.0) return BestJson(store, r["id"].get<int64_t>(), *sp);
    }
    if (static_cast<int64_t>(rows.size()) < kPage) return nullptr;
  }
  std::optional<std::pair<int64_t, double>> best;
  for (int64_t after = 0;;) {
    auto points = store.KernelHistory({.task_name = task, .after_id = after, .limit = 5000});
    for (const KernelPoint& p : points) {
      if (p.id >= id) break;
      if (p.score == 5 && p.speedup && *p.speedup > 1e-9 && (!best || *p.speedup > best->second)) {
        best = std::make_pair(p.id, *p.speedup);
      }
    }
    if (points.size() < 5000 || points.back().id >= id) break;
    after = points.back().id;
  }
  return best ? BestJson(store, best->first, best->second) : Json(nullptr);
}

/// The status detail in eval_log's first line "kf status: <status> (<detail>)".
std::string StatusDetail(const std::string& eval_log) {
  std::string first = eval_log.substr(0, eval_log.find('\n'));
  auto open = first.find(" (");
  if (first.rfind("kf status: ", 0) != 0 || open == std::string::npos || first.back() != ')') return "";
  return first.substr(open + 2, first.size() - open - 3);
}

ApiResponse Kernel(Store& store, std::string_view id_text) {
  int64_t id = 0;
  auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
  if (ec != std::errc() || end != id_text.data() + id_text.size() || id < 1) {
    throw BadParameter{"id", fmt::format("expected a positive kernel id, got \"{}\"", id_text)};
  }
  auto detail = KernelDetail(store, id);
  if (!detail) return JsonAnswer(404, {{"error", fmt::format("no kernel with id {}", id)}});
  return JsonAnswer(200, *detail);
}

/// The return code in the first line of a job log's text as the reference writes it ("Return code: N"), or
/// null.
Json ReturnCodeOf(const std::string& text) {
  constexpr std::string_view kPrefix = "Return code: ";
  if (text.rfind(kPrefix, 0) != 0) return nullptr;
  int64_t code = 0;
  const char* begin = text.data() + kPrefix.size();
  const char* line_end = text.data() + std::min(text.find('\n'), text.size());
  auto [end, ec] = std::from_chars(begin, line_end, code);
  return ec == std::errc() && end == line_end ? Json(code) : Json(nullptr);
}

/// One job_logs row for the page: {name, level, returncode, timestamp, message (the output text)}. Rows in
/// the reference's format (kf::RawProcessLog: the name in `message`, the text in extra["log"]) and rows of
/// older kf versions (the name in extra["log"], the text in `message`, extra["returncode"]) both read right.
Json LogEntry(const Json& l) {
  const Json& extra = l["extra"];
  std::string name, text = Str(l, "message");
  Json returncode = nullptr;
  if (extra.is_object() && extra.contains("log") && extra["log"].is_string()) {
    if (extra.contains("returncode")) {  // an older kf row
      name = extra["log"].get<std::string>();
      returncode = extra["returncode"];
    } else {
      name = text;
      text = extra["log"].get<std::string>();
      returncode = ReturnCodeOf(text);
    }
  }
  return {{"name", name}, {"level", l["level"]}, {"returncode", returncode}, {"timestamp", l["timestamp"]},
          {"message", text}};
}

}  // namespace

std::optional<Json> KernelDetail(Store& store, int64_t id) {
  auto row = store.GetKernel(id);
  if (!row) return std::nullopt;
  const Json& k = *row;
  const std::string eval_log = Str(k, "eval_log");
  const std::string uuid = Str(k, "uuid");
  Json d = {{"id", k["id"]},         {"uuid", k["uuid"]},           {"task_name", k["task_name"]},
            {"job_id", k["job_id"]}, {"job_status", k["job_status"]}, {"timestamp", k["timestamp"]},
            {"gpu_arch", k["gpu_arch"]}};
  d["verdict"] = {{"status", k["kf_status"]},
                  {"detail", StatusDetail(eval_log)},
                  {"reference_status", k["status"]},
                  {"score", k["score"]},
                  {"runtime_ms", Measured(Number(k, "runtime"))},
                  {"speedup", Measured(Number(k, "improve_over_native"))}};
  d["benchmarks"] = Benchmarks(k["runtime_stats"], Str(k, "gpu_arch"));
  d["runtime_stats"] = k["runtime_stats"];
  d["code"] = {{"input", k["input_code"]}, {"output", k["output_code"]}, {"language", k["output_language"]}};
  const std::string task = Str(k, "task_name");
  d["best"] = task.empty() ? Json(nullptr) : BestBefore(store, task, id);
  d["eval_log"] = eval_log;
  Json logs = Json::array();
  Json samples = Json::object();
  if (k["job_id"].is_number_integer()) {
    for (const Json& l : store.ListJobLogs(k["job_id"].get<int64_t>())) {
      if (!uuid.empty() && Str(l, "kernel_uuid") != uuid) continue;
      const Json& extra = l["extra"];
      Json entry = LogEntry(l);
      const std::string name = entry["name"].get<std::string>();
      logs.push_back(std::move(entry));
      // Raw runtime samples (ms) of performance runs: output_data {"runtimes": {bench: [ms…]}}.
      if (extra.is_object() && extra.contains("output_data") && extra["output_data"].is_object()) {
        const Json& od = extra["output_data"];
        if (od.contains("runtimes") && od["runtimes"].is_object() && !od["runtimes"].empty()) {
          samples[name] = od["runtimes"];
        }
      }
    }
  }
  d["runtime_samples"] = std::move(samples);
  d["logs"] = std::move(logs);
  return d;
}

ApiResponse HandleApiRequest(Store& store, std::string_view path, const Params& params,
                             serve::SummaryCache* summaries) {
  try {
    if (path == "/api/tasks") return Tasks(store, summaries);
    if (path == "/api/jobs") return Jobs(store, params);
    if (path == "/api/kernels") return Kernels(store, params);
    if (path == "/api/history") return History(store, params);
    if (path == "/api/lineage") return LineageAnswer(store, params);
    if (path == "/api/graph") return GraphAnswer(store, params);
    constexpr std::string_view kKernelPrefix = "/api/kernels/";
    if (path.substr(0, kKernelPrefix.size()) == kKernelPrefix) return Kernel(store, path.substr(kKernelPrefix.size()));
    return JsonAnswer(404, {{"error", fmt::format("no API path {}", path)}});
  } catch (const BadParameter& e) {
    return JsonAnswer(400, {{"error", fmt::format("{}: {}", e.parameter, e.message)}, {"parameter", e.parameter}});
  } catch (const Error& e) {
    const int status = e.kind() == ErrorKind::kInvalidArgument ? 400 : e.kind() == ErrorKind::kNotFound ? 404 : 500;
    return JsonAnswer(status, {{"error", e.what()}});
  } catch (const std::exception& e) {
    return JsonAnswer(500, {{"error", e.what()}});
  }
}

}  // namespace kf
