// Paired timing repeated in several test processes (pipeline/paired_processes.hpp).
#include "pipeline/paired_processes.hpp"

#include <fmt/format.h>

#include <string>

#include "harness/test_report.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/paired.hpp"
#include "kernelfoundry/timing_keys.hpp"

namespace kf::paired_processes {
namespace {

// A record the merge can pool: paired, and judged correct or noisy in its process.
bool Poolable(const PairedRecord& r) {
  return r.paired && (r.status == PairedStatus::kCorrect || r.status == PairedStatus::kNoisy);
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
/// Throws kf::Error(kInvalidArgument) for a record whose two lists differ in length, are empty or hold a
/// value ≤ 0.
void PerRoundRatios(const std::vector<PairedRecord>& records, std::vector<double>* ratios,
                    std::vector<int64_t>* groups) {
  for (size_t i = 0; i < records.size(); ++i) {
    const std::vector<double>& c = records[i].candidate_ms;
    const std::vector<double>& ref = records[i].reference_ms;
    if (c.size() != ref.size() || c.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("expected as many reference as candidate rounds (at least one), got {} and {}",
                              ref.size(), c.size()),
                  "paired record", "reference_ms");
    }
    for (size_t j = 0; j < c.size(); ++j) {
      if (!(c[j] > 0) || !(ref[j] > 0)) {
        throw Error(ErrorKind::kInvalidArgument, fmt::format("expected per-round times > 0, got {} and {}", c[j], ref[j]),
                    "paired record", c[j] > 0 ? "reference_ms" : "candidate_ms");
      }
      ratios->push_back(ref[j] / c[j]);
      groups->push_back(static_cast<int64_t>(i));
    }
  }
}

// The records of benchmark `name` in `runs` (the first run's, then every other run that has one).
std::vector<PairedRecord> RecordsOf(const std::vector<PhaseRun>& runs, const std::string& name,
                                    const PairedRecord& first) {
  std::vector<PairedRecord> records{first};
  for (size_t i = 1; i < runs.size(); ++i) {
    if (const PairedRecord* r = runs[i].timing ? runs[i].timing->Find(name) : nullptr) records.push_back(*r);
  }
  return records;
}

// True when `run` ends the merge as it is: a verdict outside the correct family, or no timing.
bool Decides(const PhaseRun& run) { return !IsCorrectFamily(run.verdict.status) || !run.timing; }

}  // namespace

ProcessPlan ProcessPlan::FromJson(const Json& o) {
  ProcessPlan plan;
  // The loop's defaults as a test process gets them (timing_keys.hpp), then the config's values.
  Json defaults = Json::object();
  for (const TimingKey& k : TimingKeys()) {
    if (k.reader != TimingKeyReader::kLoop) continue;
    const std::string name(k.name);
    if (k.kind == TimingKeyKind::kWhole) {
      defaults[name] = static_cast<int64_t>(k.default_value);
    } else {
      defaults[name] = k.default_value;
    }
  }
  plan.timing = PairedOptionsFromJson(o, PairedOptionsFromJson(defaults));
  plan.processes = o.value("processes", int64_t{1});  // the test stage always sets it (TimingOptions)
  // Default 6 × processes (24 with the default 4); one process stays one unless max_processes asks for more
  // ($KF_TIMING_PROCESSES=1 in scripts/test.sh: one process per timed phase). A process start costs ~0.3 s and
  // each process's median carries an offset of its own (3-5 % sd on the 2-vCPU machine, 2026-12-05, where its
  // ~35 rounds explain ~1 %), so the budget buys a narrower interval as more, shorter processes: with offset sd
  // 4 %, 12 processes of 1.7 s give t(11) x 4.1 % / sqrt(12) = 2.6 %, 24 of 0.83 s give t(23) x 4.3 % / sqrt(24)
  // = 1.8 %, for 12 more process starts (~4 s) when all of them run (README "Decisive verdicts").
  const int64_t default_max = plan.processes == 1 ? 1 : 6 * plan.processes;
  plan.max_processes = std::max(plan.processes, o.value("max_processes", default_max));
  return plan;
}

double ProcessPlan::ProcessBudget() const {
  return std::max(0.5, timing.budget_s / static_cast<double>(max_processes));
}

PairedRecord MergeRecords(const std::vector<PairedRecord>& records, const PairedOptions& options) {
  if (records.empty()) throw Error(ErrorKind::kInvalidArgument, "no records to merge", "", "records");
  if (records.size() == 1) return records.front();
  const int64_t k = static_cast<int64_t>(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    if (!Poolable(records[i])) {
      PairedRecord out = records[i];
      out.processes = k;
      out.process = static_cast<int64_t>(i);
      return out;
    }
  }
  std::vector<double> ratios;
  std::vector<int64_t> groups;
  PerRoundRatios(records, &ratios, &groups);
  PairedRecord out = records.front();
  out.detail.clear();
  out.remeasured.reset();
  out.candidate_ms.clear();
  out.reference_ms.clear();
  out.rounds = out.warmup_rounds = out.checked_rounds = 0;
  out.elapsed_s = out.elapsed_raw_s = out.candidate_window_s = out.reference_window_s = 0;
  out.candidate_after_cpu_s = out.reference_after_cpu_s = 0;
  for (const PairedRecord& r : records) {
    out.candidate_ms.insert(out.candidate_ms.end(), r.candidate_ms.begin(), r.candidate_ms.end());
    out.reference_ms.insert(out.reference_ms.end(), r.reference_ms.begin(), r.reference_ms.end());
    out.rounds += r.rounds;
    out.warmup_rounds += r.warmup_rounds;
    out.checked_rounds += r.checked_rounds;
    out.elapsed_s += r.elapsed_s;
    out.elapsed_raw_s += r.elapsed_raw_s;
    out.candidate_window_s += r.candidate_window_s;
    out.reference_window_s += r.reference_window_s;
    out.candidate_after_cpu_s += r.candidate_after_cpu_s;
    out.reference_after_cpu_s += r.reference_after_cpu_s;
    out.process_rounds.push_back(static_cast<int64_t>(r.candidate_ms.size()));
    out.process_speedups.push_back(r.speedup);
  }
  out.speedup = GroupedMedianCI(ratios, groups, kResamples, options.seed);
  out.rel_half_width = out.speedup.median > 0 ? (out.speedup.high - out.speedup.low) / 2.0 / out.speedup.median : 0;
  out.status = PairedStatus::kCorrect;
  out.stop = "processes";
  out.processes = k;
  return JudgePaired(std::move(out), options);
}

bool ReachedTarget(const std::vector<PhaseRun>& runs, const PairedOptions& options) {
  for (const PhaseRun& run : runs) {
    if (Decides(run)) return true;
  }
  if (runs.empty()) return false;
  try {
    for (const auto& [name, first] : runs.front().timing->records) {
      if (MergeRecords(RecordsOf(runs, name, first), options).status == PairedStatus::kNoisy) return false;
    }
  } catch (const Error&) {
    return true;
  }
  return true;
}

PhaseRun MergeRuns(std::vector<PhaseRun> runs, const PairedOptions& options) {
  if (runs.empty()) throw Error(ErrorKind::kInvalidArgument, "no runs to merge", "", "runs");
  for (PhaseRun& run : runs) {
    if (Decides(run)) return std::move(run);
  }
  if (runs.size() == 1) return std::move(runs.front());
  PhaseRun out = std::move(runs.front());
  for (auto& [name, record] : out.timing->records) {
    try {
      record = MergeRecords(RecordsOf(runs, name, record), options);
    } catch (const Error& e) {  // our own protocol broke (the candidate cannot write the records): not scored
      out.verdict = {EvalStatus::kTestError, "protocol error: the timing records of " + name + " cannot be merged: " +
                                                 e.what()};
      return out;
    }
  }
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
  out.verdict = harness_internal::JudgeTiming(*out.timing);
  return out;
}

}  // namespace kf::paired_processes
