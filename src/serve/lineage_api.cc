// Kernel lineage for kf serve and kf results --lineage (include/kernelfoundry/serve.hpp): a kernel's ancestry
// through kernels.parent_uuid, and a task's generation graph (parent -> child), as the reference GUI's
// kernel_graph page draws it.
#include <fmt/format.h>

#include <set>
#include <unordered_map>

#include "kernelfoundry/serve.hpp"

namespace kf {
namespace {

/// The kernels columns a lineage node is made of.
const std::vector<std::string> kNodeColumns = {"id",        "uuid",  "parent_uuid", "task_name",
                                               "job_id",    "kf_status", "status",  "score",
                                               "improve_over_native", "trial",  "version",
                                               "timestamp", "db_user", "language_model"};

std::optional<Json> ByUuid(Store& store, const std::string& uuid) {
  KernelQuery q;
  q.uuid = uuid;
  q.columns = kNodeColumns;
  q.limit = 1;
  auto rows = store.ListKernels(q);
  if (rows.empty()) return std::nullopt;
  return std::move(rows[0]);
}

std::string Text(const Json& row, const char* key) {
  auto it = row.find(key);
  return it != row.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

Json LineageNode(const Json& k) {
  const Json& sp = k.contains("improve_over_native") ? k["improve_over_native"] : Json(nullptr);
  // The reference's "not measured" -1 and "no reference" 9.999e-10 are no speedup.
  const Json speedup = sp.is_number() && sp.get<double>() > 1e-9 ? sp : Json(nullptr);
  auto get = [&k](const char* key) { return k.contains(key) ? k[key] : Json(nullptr); };
  return {{"id", get("id")},
          {"uuid", get("uuid")},
          {"parent_uuid", get("parent_uuid")},
          {"task_name", get("task_name")},
          {"job_id", get("job_id")},
          {"status", get("kf_status")},
          {"reference_status", get("status")},
          {"score", get("score")},
          {"speedup", speedup},
          {"trial", get("trial")},
          {"version", get("version")},
          {"timestamp", get("timestamp")},
          {"db_user", get("db_user")},
          {"language_model", get("language_model")}};
}

std::optional<Json> KernelLineage(Store& store, const std::string& uuid, int max_depth) {
  auto self = ByUuid(store, uuid);
  if (!self) return std::nullopt;
  Json ancestors = Json::array();
  Json missing = nullptr;
  std::set<std::string> seen{uuid};
  std::string parent = Text(*self, "parent_uuid");
  for (int depth = 0; !parent.empty() && depth < max_depth && seen.insert(parent).second; ++depth) {
    auto row = ByUuid(store, parent);
    if (!row) {
      missing = parent;
      break;
    }
    ancestors.insert(ancestors.begin(), LineageNode(*row));
    parent = Text(*row, "parent_uuid");
  }
  KernelQuery q;
  q.parent_uuid = uuid;
  q.columns = kNodeColumns;
  q.limit = 1000;
  Json children = Json::array();
  for (const Json& c : store.ListKernels(q)) children.push_back(LineageNode(c));
  return Json{{"kernel", LineageNode(*self)},
              {"ancestors", std::move(ancestors)},
              {"children", std::move(children)},
              {"missing_parent", missing}};
}

std::optional<Json> KernelEvalLog(Store& store, int64_t id) {
  auto detail = KernelDetail(store, id);
  if (!detail) return std::nullopt;
  auto k = store.GetKernel(id);
  if (!k) return std::nullopt;
  const Json& sp = (*k)["improve_over_native"];
  const Json& benchmarks = (*detail)["benchmarks"];
  return Json{{"id", id},
              {"uuid", (*k)["uuid"]},
              {"parent_uuid", (*k)["parent_uuid"]},
              {"job_id", (*k)["job_id"]},
              {"task_name", (*k)["task_name"]},
              {"eval_log", Text(*k, "eval_log")},
              {"runtime_stats", (*k)["runtime_stats"].is_object() ? (*k)["runtime_stats"] : Json::object()},
              {"speedup", sp.is_number() && sp.get<double>() > 1e-9 ? sp : Json("N/A")},
              {"speedup_ci", benchmarks.size() == 1 ? benchmarks[0]["speedup_ci"] : Json(nullptr)},
              {"status", (*k)["kf_status"]},
              {"reference_status", (*k)["status"]},
              {"score", (*k)["score"]},
              {"benchmarks", benchmarks},
              {"output_code", (*k)["output_code"]}};
}

Json VerdictExtras(const Evaluation& ev, const std::string& kernel_uuid) {
  return {{"kernel_uuid", kernel_uuid}, {"benchmarks", ev.result.ToJson()["benchmarks"]}, {"cached", !ev.cached.is_null()}};
}

void MergeVerdictExtras(Json& log, const Json& extras) {
  if (!extras.is_object() || !log.is_object() || extras.value("kernel_uuid", "") != Text(log, "uuid")) return;
  const Json& rows = extras.contains("benchmarks") && extras["benchmarks"].is_array() ? extras["benchmarks"] : Json::array();
  if (rows.size() == 1 && rows[0].contains("speedup_ci")) log["speedup_ci"] = rows[0]["speedup_ci"];
  if (log.contains("benchmarks") && log["benchmarks"].is_array()) {
    for (Json& b : log["benchmarks"]) {
      for (const Json& r : rows) {
        const bool same_arch = Text(r, "arch").empty() || Text(r, "arch") == Text(b, "arch");
        if (Text(r, "name") != Text(b, "name") || !same_arch) continue;
        b["speedup_ci"] = r.value("speedup_ci", Json(nullptr));
        b["paired"] = r.value("paired", false);
      }
    }
  }
  log["cached"] = extras.value("cached", false);
}

Json TaskGraph(Store& store, const std::string& task, int64_t limit) {
  KernelQuery q;
  q.task_name = task;
  q.columns = kNodeColumns;
  q.last_n = limit;
  const std::vector<Json> rows = store.ListKernels(q);
  std::unordered_map<std::string, int64_t> id_of;
  for (const Json& r : rows) {
    const std::string u = Text(r, "uuid");
    if (!u.empty()) id_of.emplace(u, r["id"].get<int64_t>());
  }
  Json nodes = Json::array(), edges = Json::array();
  for (const Json& r : rows) {
    nodes.push_back(LineageNode(r));
    auto parent = id_of.find(Text(r, "parent_uuid"));
    if (parent != id_of.end()) edges.push_back({{"parent", parent->second}, {"child", r["id"]}});
  }
  const bool truncated = static_cast<int64_t>(rows.size()) == limit && store.CountKernels(q) > limit;
  return {{"task", task}, {"nodes", std::move(nodes)}, {"edges", std::move(edges)}, {"truncated", truncated}};
}

}  // namespace kf
