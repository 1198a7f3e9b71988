// Paired timing repeated in several test processes (pipeline/paired_processes.hpp).
#include "pipeline/paired_processes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "harness/test_report.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/paired.hpp"

namespace kf::paired_processes {
namespace {

// A record the merge can pool: paired, and judged correct or noisy in its process.
bool Poolable(const Json& r) {
  if (!r.is_object() || r.value("paired", false) != true) return false;
  const std::string status = r.value("status", std::string());
  return status == "correct" || status == "noisy";
}

std::vector<double> Doubles(const Json& r, const char* key) {
  std::vector<double> out;
  const Json list = r.value(key, Json::array());
  if (!list.is_array()) throw Error(ErrorKind::kInvalidArgument, "expected a list of numbers", "paired record", key);
  for (const Json& v : list) {
    if (!v.is_number() || !(v.get<double>() > 0)) {
      throw Error(ErrorKind::kInvalidArgument, "expected per-round times > 0, got " + v.dump(), "paired record", key);
    }
    out.push_back(v.get<double>());
  }
  return out;
}

double Number(const Json& r, const char* key) {
  const Json v = r.value(key, Json(0));
  return v.is_number() ? v.get<double>() : 0.0;
}

// Appends list b to list a (both JSON arrays; a non-array b is ignored).
void Append(Json& a, const Json& b) {
  if (!a.is_array() || !b.is_array()) return;
  for (const Json& v : b) a.push_back(v);
}

// Concatenates the runtime lists of `from` ({"runtimes": {name: [ms…]}}) onto those of `into`.
void AppendRuntimes(std::optional<Json>& into, const std::optional<Json>& from) {
  if (!into || !from || !into->is_object() || !from->is_object()) return;
  Json& mine = (*into)["runtimes"];
  const Json theirs = from->value("runtimes", Json::object());
  if (!mine.is_object() || !theirs.is_object()) return;
  for (const auto& [name, list] : theirs.items()) {
    if (mine.contains(name)) {
      Append(mine[name], list);
    } else {
      mine[name] = list;
    }
  }
}

/// Resamples of the merged interval's bootstrap (GroupedMedianCI).
constexpr int64_t kResamples = 2000;

/// Every round's reference_ms / candidate_ms of `records`, with the index of its record as its group.
/// Throws kf::Error(kInvalidArgument) for a record whose two lists differ in length or are empty.
void PerRoundRatios(const std::vector<Json>& records, std::vector<double>* ratios, std::vector<int64_t>* groups) {
  for (size_t i = 0; i < records.size(); ++i) {
    const std::vector<double> c = Doubles(records[i], "candidate_ms"), ref = Doubles(records[i], "reference_ms");
    if (c.size() != ref.size() || c.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("expected as many reference as candidate rounds (at least one), got {} and {}",
                              ref.size(), c.size()),
                  "paired record", "reference_ms");
    }
    for (size_t j = 0; j < c.size(); ++j) {
      ratios->push_back(ref[j] / c[j]);
      groups->push_back(static_cast<int64_t>(i));
    }
  }
}

}  // namespace

Json MergeRecords(const std::vector<Json>& records, double target_rel_half_width, uint64_t seed) {
  if (records.empty()) throw Error(ErrorKind::kInvalidArgument, "no records to merge", "", "records");
  if (records.size() == 1) return records.front();
  const int64_t k = static_cast<int64_t>(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    if (!Poolable(records[i])) {
      Json out = records[i];
      if (out.is_object()) {
        out["processes"] = k;
        out["process"] = static_cast<int64_t>(i);
      }
      return out;
    }
  }
  std::vector<double> ratios;
  std::vector<int64_t> groups;
  Json out = records.front();
  Json cand_ms = Json::array(), ref_ms = Json::array(), layout_speedups = Json::array();
  Json process_speedups = Json::array(), process_cis = Json::array();
  double after_cand = 0, after_ref = 0;
  int64_t rounds = 0, warmup = 0, checked = 0;
  double elapsed = 0;
  PerRoundRatios(records, &ratios, &groups);
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& r = records[i];
    for (double v : Doubles(r, "candidate_ms")) cand_ms.push_back(v);
    for (double v : Doubles(r, "reference_ms")) ref_ms.push_back(v);
    rounds += static_cast<int64_t>(Number(r, "rounds"));
    warmup += static_cast<int64_t>(Number(r, "warmup_rounds"));
    checked += static_cast<int64_t>(Number(r, "checked_rounds"));
    elapsed += Number(r, "elapsed_s");
    const Json after = r.value("after_return_cpu_ms", Json::object());
    if (after.is_object()) {
      after_cand += Number(after, "candidate");
      after_ref += Number(after, "reference");
    }
    Append(layout_speedups, r.value("layout_speedups", Json::array()));
    process_speedups.push_back(r.value("speedup", Json(nullptr)));
    process_cis.push_back(r.value("ci", Json(nullptr)));
  }
  const MedianCI ci = GroupedMedianCI(ratios, groups, kResamples, seed);
  const double rel = ci.median > 0 ? (ci.high - ci.low) / 2.0 / ci.median : 0;
  const bool reached = rel <= target_rel_half_width;
  out["status"] = reached ? "correct" : "noisy";
  out["detail"] = reached ? std::string()
                          : fmt::format("the 95 % interval [{:.3f}, {:.3f}] is ±{:.1f} % after {} rounds in {} "
                                        "processes (target ±{:.1f} %)",
                                        ci.low, ci.high, rel * 100, ratios.size(), k, target_rel_half_width * 100);
  out["speedup"] = ci.median;
  out["ci"] = Json::array({ci.low, ci.high});
  out["rel_half_width"] = rel;
  out["rounds"] = rounds;
  out["warmup_rounds"] = warmup;
  out["checked_rounds"] = checked;
  out["stop"] = "processes";
  out["candidate_ms"] = std::move(cand_ms);
  out["reference_ms"] = std::move(ref_ms);
  out["elapsed_s"] = elapsed;
  out["after_return_cpu_ms"] = Json{{"candidate", after_cand}, {"reference", after_ref}};
  out["layout_speedups"] = std::move(layout_speedups);
  out["processes"] = k;
  out["process_speedups"] = std::move(process_speedups);
  out["process_cis"] = std::move(process_cis);
  out.erase("remeasured");
  return out;
}

bool ReachedTarget(const std::vector<PhaseRun>& runs, double target_rel_half_width, uint64_t seed) {
  for (const PhaseRun& run : runs) {
    if (!IsCorrectFamily(run.verdict.status) || !run.timing.is_object()) return true;
  }
  if (runs.empty()) return false;
  const Json firsts = runs.front().timing.value("paired", Json::object());
  try {
    for (const auto& [name, first] : firsts.items()) {
      std::vector<Json> records{first};
      for (size_t i = 1; i < runs.size(); ++i) {
        const Json paired = runs[i].timing.value("paired", Json::object());
        if (paired.contains(name)) records.push_back(paired[name]);
      }
      if (records.size() > 1 && std::all_of(records.begin(), records.end(), Poolable)) {
        std::vector<double> ratios;
        std::vector<int64_t> groups;
        PerRoundRatios(records, &ratios, &groups);
        if (!GroupedMedianCIWithin(ratios, groups, kResamples, seed, target_rel_half_width)) return false;
      } else if (MergeRecords(records, target_rel_half_width, seed).value("status", std::string()) == "noisy") {
        return false;
      }
    }
  } catch (const Error&) {
    return true;
  }
  return true;
}

PhaseRun MergeRuns(std::vector<PhaseRun> runs, double target_rel_half_width, uint64_t seed) {
  if (runs.empty()) throw Error(ErrorKind::kInvalidArgument, "no runs to merge", "", "runs");
  for (PhaseRun& run : runs) {
    if (!IsCorrectFamily(run.verdict.status) || !run.timing.is_object()) return std::move(run);
  }
  if (runs.size() == 1) return std::move(runs.front());
  PhaseRun out = std::move(runs.front());
  Json merged = Json::object();
  const Json firsts = out.timing.value("paired", Json::object());
  for (const auto& [name, first] : firsts.items()) {
    std::vector<Json> records{first};
    for (size_t i = 1; i < runs.size(); ++i) {
      const Json paired = runs[i].timing.value("paired", Json::object());
      if (paired.contains(name)) records.push_back(paired[name]);
    }
    try {
      merged[name] = MergeRecords(records, target_rel_half_width, seed);
    } catch (const Error& e) {  // our own protocol broke (the candidate cannot write the records): not scored
      out.verdict = {EvalStatus::kTestError, "protocol error: the timing records of " + name + " cannot be merged: " +
                                                 e.what()};
      return out;
    }
  }
  out.timing["paired"] = std::move(merged);
  for (size_t i = 1; i < runs.size(); ++i) {
    out.wall_s += runs[i].wall_s;
    // Every process's output stays readable in the log.
    const std::string header = fmt::format("\n----- timed process {} of {} -----\n", i + 1, runs.size());
    out.result.stdout_text += header + runs[i].result.stdout_text;
    if (!runs[i].result.stderr_text.empty()) out.result.stderr_text += header + runs[i].result.stderr_text;
    AppendRuntimes(out.result.output_data, runs[i].result.output_data);
    if (out.reference_result && runs[i].reference_result) {
      AppendRuntimes(out.reference_result->output_data, runs[i].reference_result->output_data);
    }
    // The reference's tests failing in any process is the reference's verdict.
    const bool first_failure = runs[i].reference_verdict &&
                               runs[i].reference_verdict->status != EvalStatus::kCorrect &&
                               (!out.reference_verdict || out.reference_verdict->status == EvalStatus::kCorrect);
    if (first_failure) {
      out.reference_verdict = runs[i].reference_verdict;
      out.reference_result = runs[i].reference_result;
    }
  }
  out.verdict = harness_internal::JudgeTiming(out.timing["paired"]);
  return out;
}

}  // namespace kf::paired_processes
