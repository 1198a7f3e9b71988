#include "serve/summary_cache.hpp"

#include <algorithm>

namespace kf::serve {
namespace {

std::string Text(const Json& row, const char* key) {
  auto it = row.find(key);
  return it != row.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// Adds one kernels row to the summaries, as ListTaskSummaries counts it.
void Fold(std::vector<TaskSummary>& summaries, const Json& row) {
  const std::string task = Text(row, "task_name");
  auto it = std::lower_bound(summaries.begin(), summaries.end(), task,
                             [](const TaskSummary& s, const std::string& name) { return s.task_name < name; });
  if (it == summaries.end() || it->task_name != task) {
    TaskSummary fresh;
    fresh.task_name = task;
    it = summaries.insert(it, std::move(fresh));
  }
  TaskSummary& s = *it;
  ++s.kernels;
  ++s.by_kf_status[Text(row, "kf_status")];
  ++s.by_status[Text(row, "status")];
  const Json& score = row["score"];
  const Json& speedup = row["improve_over_native"];
  if (score.is_number() && score.get<double>() == 5 && speedup.is_number() && speedup.get<double>() > 1e-9 &&
      (!s.best_speedup || speedup.get<double>() > *s.best_speedup)) {
    s.best_speedup = speedup.get<double>();
  }
  s.last_timestamp = std::max(s.last_timestamp, Text(row, "timestamp"));
}

}  // namespace

std::vector<TaskSummary> SummaryCache::Get(Store& store) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t count = store.CountKernels({});
  auto newest = store.ListKernels({.last_n = 1, .columns = {"id"}});
  const int64_t newest_id = newest.empty() ? 0 : newest[0]["id"].get<int64_t>();
  if (valid_ && count == count_ && newest_id == newest_id_) return summaries_;
  if (valid_ && count > count_ && newest_id > newest_id_) {
    // The newest rows, with some slack for rows inserted since the count; only ids in (newest_id_, newest_id]
    // are folded, and they must account for the whole change of the count.
    auto rows = store.ListKernels({.limit = count - count_ + 64, .descending = true,
                                   .columns = {"id", "task_name", "status", "kf_status", "score",
                                               "improve_over_native", "timestamp"}});
    std::vector<const Json*> added;
    for (const Json& r : rows) {
      const int64_t id = r["id"].get<int64_t>();
      if (id > newest_id_ && id <= newest_id) added.push_back(&r);
    }
    if (static_cast<int64_t>(added.size()) == count - count_) {
      for (auto r = added.rbegin(); r != added.rend(); ++r) Fold(summaries_, **r);
      count_ = count;
      newest_id_ = newest_id;
      return summaries_;
    }
  }
  summaries_ = store.ListTaskSummaries();
  // Rows written while the summaries were computed may or may not be in them: recompute next time then.
  auto after = store.ListKernels({.last_n = 1, .columns = {"id"}});
  valid_ = store.CountKernels({}) == count && (after.empty() ? 0 : after[0]["id"].get<int64_t>()) == newest_id;
  count_ = count;
  newest_id_ = newest_id;
  return summaries_;
}

}  // namespace kf::serve
