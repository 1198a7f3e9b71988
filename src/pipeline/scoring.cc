// Scoring: timing statistics, convert_test_result_to_exec_result, arch and template combination, combined
// fitness (reference spec §4.9). Fixes: B16 (speedups from unrounded means, zero guard), B18 (empty runtime
// list), B20 (reference-only result), NaN from combining without a reference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kernelfoundry/error.hpp"
#include "core/strings.hpp"
#include "kernelfoundry/scoring.hpp"
#include "pipeline/eval_log.hpp"

namespace kf {
namespace {

/// One benchmark's measurements as reported by the performance run.
struct Bench {
  std::string name;
  std::vector<double> samples;
  std::string problem;  ///< non-empty when the samples are unusable
  bool Valid() const { return problem.empty(); }
};

/// Reads {"runtimes": {node id: [ms, …]}} from a performance result. nullopt when there are none (no
/// result, no output_data, no or empty runtimes) — the reference's "missing runtimes".
std::optional<std::vector<Bench>> ExtractRuntimes(const std::optional<ProcessResult>& perf) {
  if (!perf || !perf->output_data || !perf->output_data->is_object()) return std::nullopt;
  auto it = perf->output_data->find("runtimes");
  if (it == perf->output_data->end() || !it->is_object() || it->empty()) return std::nullopt;
  std::vector<Bench> benches;
  for (auto b = it->begin(); b != it->end(); ++b) {
    Bench bench{b.key(), {}, {}};
    if (!b.value().is_array()) {
      bench.problem = "its runtimes are not a list";
    } else {
      for (const Json& v : b.value()) {
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
          bench.problem = "its runtimes contain an invalid value";
          break;
        }
        bench.samples.push_back(v.get<double>());
      }
      if (bench.problem.empty() && bench.samples.empty()) bench.problem = "it recorded no runtimes";
    }
    benches.push_back(std::move(bench));
  }
  return benches;
}

/// The reference's stats dict for a benchmark without measurement (runtime kMissingRuntimeMs).
Json MissingStatsJson(int num_trials) {
  Json j = TimingStatsToReferenceJson(ComputeTimingStats(std::vector<double>{kMissingRuntimeMs}));
  j["num_trials"] = num_trials;
  return j;
}

std::string GpuName(const std::optional<Json>& worker_info) {
  // The reference indexes worker_info["gpu_name"] and raises TypeError when it is None; we say "unknown".
  if (worker_info && worker_info->is_object()) {
    auto it = worker_info->find("gpu_name");
    if (it != worker_info->end() && it->is_string()) return it->get<std::string>();
  }
  return "unknown";
}

double Sanitize(double v) { return std::isfinite(v) ? v : -1.0; }

// The statuses a paired performance run's timing can give (PairedStatus, JudgeTiming).
bool IsTimingVerdict(EvalStatus s) {
  return s == EvalStatus::kCorrect || s == EvalStatus::kNoisy || s == EvalStatus::kSuspicious ||
         s == EvalStatus::kInputMutated || s == EvalStatus::kOutputChangedUnderTiming;
}

void SetStatus(EvalResult& r, EvalStatus status, std::string detail) {
  r.status = status;
  r.perf_score = PerfScoreFor(status);
  r.status_detail = std::move(detail);
}


}  // namespace

Json TimingStatsToReferenceJson(const TimingStats& stats) {
  TimingStats r = RoundTimingStats(stats);
  Json j = Json::object();
  j["mean"] = r.mean;
  j["std"] = r.std;
  j["min"] = r.min;
  j["max"] = r.max;
  j["median"] = r.median;
  j["speedup"] = -1;
  j["ref_speed"] = -1;
  j["num_trials"] = r.num_trials;
  return j;
}

double GeometricMean(const std::vector<double>& values) {
  std::vector<double> pos;
  for (double v : values) {
    if (std::isfinite(v) && v > 0) pos.push_back(v);
  }
  if (pos.empty()) return -1;
  if (pos.size() == 1) return pos.front();
  double sum_log = 0;
  for (double v : pos) sum_log += std::log(v);
  return Sanitize(std::exp(sum_log / static_cast<double>(pos.size())));
}

Json EvalResult::ToReferenceJson() const {
  Json j = Json::object();
  j["compiled"] = compiled;
  j["correctness"] = correctness;
  j["metadata"] = metadata;
  j["runtime"] = Sanitize(runtime);
  j["runtime_stats"] = runtime_stats;
  j["runtime_improvement"] = Sanitize(runtime_improvement);
  j["improve_over_compile"] = Sanitize(improve_over_compile);
  j["perf_score"] = perf_score;
  j["profiler_data"] = profiler_data;
  j["template_results"] = template_results;
  return j;
}

Json EvalResult::ToJson() const {
  Json j = ToReferenceJson();
  j["eval_log"] = eval_log;
  j["status"] = std::string(EvalStatusName(status));
  j["status_detail"] = status_detail;
  j["reference_status"] = std::string(ReferenceStatus());
  Json rows = Json::array();
  for (const BenchmarkRow& b : benchmarks) {
    rows.push_back({{"arch", b.arch},
                    {"name", b.name},
                    {"reference_mean_ms", Sanitize(b.reference_mean_ms)},
                    {"candidate_mean_ms", Sanitize(b.candidate_mean_ms)},
                    {"speedup", Sanitize(b.speedup)},
                    {"num_trials", b.num_trials},
                    {"paired", b.paired},
                    {"speedup_ci", b.paired ? Json::array({Sanitize(b.speedup_ci_low), Sanitize(b.speedup_ci_high)})
                                            : Json(nullptr)}});
  }
  j["benchmarks"] = std::move(rows);
  j["timing"] = timing;
  j["isolation"] = isolation;
  return j;
}

namespace {

/// convert_test_result_to_exec_result in steps (ConvertTestResult): each step fills `r` and says whether the
/// result is final.
class Converter {
 public:
  Converter(const TestResult& candidate, const std::optional<TestResult>& reference, const ConvertOptions& options)
      : candidate_(candidate), reference_(reference), options_(options) {}

  EvalResult Run() {
    r_.compiled = true;
    r_.metadata["eval_worker_info"] = candidate_.worker_info ? *candidate_.worker_info : Json(nullptr);
    if (ReferenceFailed() || !Correct()) return std::move(r_);
    CandidateRuntimes();
    PerformanceFailure();
    if (options_.timing) r_.timing = options_.timing->ToJson();
    if (!reference_) return Finish(EvalStatus::kNoReference, "no reference run to compare with");
    return Speedups();
  }

 private:
  // The reference raises "Reference test failed, cannot proceed…" (an evaluation error, perf 0).
  bool ReferenceFailed() {
    const bool failed =
        reference_ && reference_->correctness_result &&
        (options_.reference_correctness ? !IsCorrectFamily(options_.reference_correctness->status) &&
                                              options_.reference_correctness->status != EvalStatus::kSkipped
                                        : reference_->correctness_result->returncode != 0);
    if (!failed) return false;
    const ProcessResult& ref = *reference_->correctness_result;
    r_.eval_log = "Reference test failed, cannot proceed with the evaluation.\n" +
                  PostprocessPytestOutput(ref.stdout_text + "\n" + ref.stderr_text, options_.log_cap_chars) + "\n";
    const Classification c = options_.reference_correctness ? *options_.reference_correctness : ClassifyFromWire(ref);
    SetStatus(r_, EvalStatus::kReferenceFailed, "reference: " + std::string(EvalStatusName(c.status)) +
                                                    (c.detail.empty() ? "" : " (" + c.detail + ")"));
    return true;
  }

  // The candidate's correctness run: false when it decides the result (missing, or not correct).
  bool Correct() {
    if (!candidate_.correctness_result) {
      r_.eval_log = "No test results found for " + options_.variant + " task.\n";
      SetStatus(r_, EvalStatus::kNoTestResult, "no correctness result for variant " + options_.variant);
      return false;
    }
    const ProcessResult& corr = *candidate_.correctness_result;
    r_.eval_log = "\nTest result on platform " + GpuName(candidate_.worker_info) + ":\n" +
                  PostprocessPytestOutput(corr.stdout_text + "\n" + corr.stderr_text, options_.log_cap_chars) +
                  "\n";
    if (corr.message && !corr.message->empty()) r_.eval_log += *corr.message + "\n";
    correctness_ = options_.correctness ? *options_.correctness : ClassifyFromWire(corr);
    if (!IsCorrectFamily(correctness_.status)) {
      SetStatus(r_, correctness_.status, correctness_.detail);
      if (correctness_.status == EvalStatus::kBuildError) r_.compiled = false;  // a kernel built at test time
      return false;
    }
    r_.correctness = true;
    r_.eval_log += "The kernel compiles and is correct, great job!\n";
    return true;
  }

  // The candidate's benchmarks: runtime_stats, benchmark rows, the mean runtime; problems for missing ones.
  void CandidateRuntimes() {
    if (auto runtimes = ExtractRuntimes(candidate_.performance_result)) {
      benches_ = std::move(*runtimes);
    } else {
      none_reported_ = true;
      r_.eval_log += "\nNo runtime measurement found for " + options_.variant + ". Setting runtime to high value.\n";
      benches_.push_back({"timed_out_test", {}, "no runtimes were reported"});
      problems_.push_back("no runtimes were reported");
    }
    cand_mean_.assign(benches_.size(), -1);
    double sum_means = 0;
    for (size_t i = 0; i < benches_.size(); ++i) {
      const Bench& b = benches_[i];
      BenchmarkRow row;
      row.name = b.name;
      if (!b.Valid()) {
        // B18: the reference crashed on an empty list; we record the reference's "high value".
        r_.runtime_stats[b.name] = MissingStatsJson(none_reported_ ? 1 : 0);
        if (!none_reported_) {
          r_.eval_log += "\nNo runtime measurement found for " + options_.variant + " benchmark " + b.name +
                         ". Setting runtime to high value.\n";
          problems_.push_back(b.name + ": " + b.problem);
        }
      } else {
        TimingStats s = ComputeTimingStats(b.samples);
        r_.runtime_stats[b.name] = TimingStatsToReferenceJson(s);
        cand_mean_[i] = s.mean;
        row.candidate_mean_ms = s.mean;
        row.num_trials = s.num_trials;
        if (!(s.mean > 0)) problems_.push_back(b.name + ": a mean of 0 ms is not a valid time");
      }
      sum_means += r_.runtime_stats[b.name]["mean"].get<double>();
      r_.benchmarks.push_back(std::move(row));
    }
    // runtime = mean of the (rounded) benchmark means, like the reference.
    r_.runtime = sum_means / static_cast<double>(benches_.size());
  }

  // A failed performance run (not a paired run's timing verdict, which comes with runtimes): logged, a problem.
  void PerformanceFailure() {
    const std::optional<ProcessResult>& perf = candidate_.performance_result;
    const std::optional<Classification>& verdict = options_.performance;
    timing_verdict_ = verdict && IsTimingVerdict(verdict->status);
    const bool failed = verdict ? !IsCorrectFamily(verdict->status) && !timing_verdict_ : perf && perf->returncode != 0;
    if (!perf || !failed) return;
    const std::string msg = perf->message.value_or("");
    const bool timeout = verdict ? verdict->status == EvalStatus::kTestTimeout
                                 : msg.find("timed out") != std::string::npos ||
                                       msg.find("inactivity") != std::string::npos;
    r_.eval_log += timeout ? std::string("There was a timeout error during benchmarking.\n")
                           : "There was an error during benchmarking (exit code " + std::to_string(perf->returncode) +
                                 ").\n";
    std::string out = CapMiddle(CollapseTensorDumps(perf->stdout_text + "\n" + perf->stderr_text), options_.log_cap_chars);
    r_.eval_log += out;
    if (out.empty() || out.back() != '\n') r_.eval_log += "\n";
    problems_.push_back(timeout ? "the performance run timed out"
                        : verdict && !verdict->detail.empty()
                            ? "the performance run failed: " + verdict->detail
                            : "the performance run failed with exit code " + std::to_string(perf->returncode));
    // The candidate itself ended the timed run (a crash, a resource limit, a forbidden system call: e.g. memory
    // that grows with every call): that is the verdict, not "correct without a measurement" (stranger test: an
    // allocation past memory_limit after 2,000 calls scored no_measurement, perf 5, and was cached).
    if (verdict && (verdict->status == EvalStatus::kCrash || verdict->status == EvalStatus::kResourceLimit ||
                    verdict->status == EvalStatus::kIsolationViolation)) {
      fatal_ = Classification{verdict->status, "the performance run: " + verdict->detail};
    }
  }

  // The status: a paired run's timing verdict when it is not correct (and nothing is missing), else
  // no_measurement with the problems, else `ok_status` with the notes.
  EvalResult Finish(EvalStatus ok_status, const std::string& detail) {
    if (fatal_) {
      SetStatus(r_, fatal_->status, fatal_->detail);
      r_.correctness = false;
      return std::move(r_);
    }
    if (timing_verdict_ && options_.performance->status != EvalStatus::kCorrect && problems_.empty()) {
      // The timed calls were not trustworthy (or only noisy): that, not "correct", is the verdict — and the log,
      // which said "correct, great job" after the correctness run, says so (stranger test, 2026-12-05).
      SetStatus(r_, options_.performance->status, options_.performance->detail);
      if (!IsCorrectFamily(options_.performance->status)) {
        r_.eval_log += "But the timed calls did not hold: " + std::string(EvalStatusName(options_.performance->status)) +
                       ": " + options_.performance->detail + "\n";
      }
      r_.correctness = IsCorrectFamily(r_.status);
      return std::move(r_);
    }
    std::vector<std::string> notes;
    if (!correctness_.detail.empty()) notes.push_back(correctness_.detail);  // e.g. a run killed after its summary
    if (!problems_.empty()) {
      notes.insert(notes.end(), problems_.begin(), problems_.end());
      SetStatus(r_, EvalStatus::kNoMeasurement, Join(notes, "; "));
    } else {
      if (!detail.empty()) notes.push_back(detail);
      SetStatus(r_, ok_status, Join(notes, "; "));
    }
    return std::move(r_);
  }

  // Speedups against the reference's runtimes, or the paired record's where the benchmark has one.
  EvalResult Speedups() {
    auto ref_runtimes = ExtractRuntimes(reference_->performance_result);
    if (!ref_runtimes) {
      for (auto& [name, stats] : r_.runtime_stats.items()) stats["speedup"] = kInvalidSpeedup;
      r_.runtime_improvement = kInvalidSpeedup;  // the reference's value, set directly (no geometric mean)
      return Finish(EvalStatus::kNoReference, "the reference run reported no runtimes");
    }
    std::vector<double> speedups;
    std::vector<std::string> unmatched;
    for (size_t i = 0; i < benches_.size(); ++i) {
      double ref_mean = -1;
      for (const Bench& rb : *ref_runtimes) {
        if (rb.name == benches_[i].name && rb.Valid()) ref_mean = ComputeTimingStats(rb.samples).mean;
      }
      speedups.push_back(Speedup(i, ref_mean, &unmatched));
    }
    // The reference's geometric mean includes the sentinels (e.g. 4.5e-05 for 2.03 and 9.999e-10).
    r_.runtime_improvement = GeometricMean(speedups);
    const bool matched = std::any_of(r_.benchmarks.begin(), r_.benchmarks.end(),
                                     [](const BenchmarkRow& b) { return b.speedup > 0; });
    if (!matched) return Finish(EvalStatus::kNoReference, "no benchmark has a reference timing");
    return Finish(EvalStatus::kCorrect, unmatched.empty() ? "" : "no reference timing for: " + Join(unmatched, ", "));
  }

  // Benchmark i's speedup (B16: both means unrounded, no division by a zero, missing or invalid mean); a paired
  // record's median per-round ratio, with its interval, where there is one. Fills its row and stats; a valid
  // candidate mean without a reference mean goes to *unmatched.
  double Speedup(size_t i, double ref_mean, std::vector<std::string>* unmatched) {
    Json& stats = r_.runtime_stats[benches_[i].name];
    BenchmarkRow& row = r_.benchmarks[i];
    double speedup = kInvalidSpeedup;
    if (ref_mean > 0) row.reference_mean_ms = ref_mean;
    if (ref_mean > 0 && cand_mean_[i] > 0) {
      speedup = ref_mean / cand_mean_[i];
      if (!std::isfinite(speedup) || !(speedup > 0)) speedup = kInvalidSpeedup;
    }
    if (speedup != kInvalidSpeedup) {
      stats["ref_speed"] = RoundSignificant(ref_mean);
      row.speedup = speedup;
    } else if (benches_[i].Valid() && cand_mean_[i] > 0) {
      unmatched->push_back(benches_[i].name);
    }
    const PairedRecord* rec = options_.timing ? options_.timing->Find(benches_[i].name) : nullptr;
    if (rec && rec->paired && std::isfinite(rec->speedup.median) && rec->speedup.median > 0 && cand_mean_[i] > 0) {
      speedup = rec->speedup.median;
      row.speedup = speedup;
      row.paired = true;
      row.num_trials = rec->rounds;
      row.speedup_ci_low = rec->speedup.low;
      row.speedup_ci_high = rec->speedup.high;
      if (ref_mean > 0) stats["ref_speed"] = RoundSignificant(ref_mean);
    }
    stats["speedup"] = speedup;
    return speedup;
  }

  const TestResult& candidate_;
  const std::optional<TestResult>& reference_;
  const ConvertOptions& options_;
  EvalResult r_;
  Classification correctness_{EvalStatus::kCorrect, ""};
  std::vector<Bench> benches_;
  std::vector<double> cand_mean_;
  std::vector<std::string> problems_;  // non-empty -> kNoMeasurement
  std::optional<Classification> fatal_;  // the candidate ended a performance run: the verdict
  bool none_reported_ = false;         // the reference's single "timed_out_test" benchmark
  bool timing_verdict_ = false;        // a paired run's timing verdict (comes with runtimes)
};

}  // namespace

EvalResult ConvertTestResult(const TestResult& candidate, const std::optional<TestResult>& reference,
                             const ConvertOptions& options) {
  return Converter(candidate, reference, options).Run();
}

EvalResult ReferenceOnlyResult(const TestResult& reference, const ConvertOptions& options) {
  ConvertOptions o = options;
  o.variant = "reference";
  EvalResult r = ConvertTestResult(reference, std::nullopt, o);
  if (r.status == EvalStatus::kNoReference) {
    SetStatus(r, EvalStatus::kReferenceOnly, "only the reference was tested");
  } else if (!IsCorrectFamily(r.status) && r.status != EvalStatus::kNotEvaluated) {
    SetStatus(r, EvalStatus::kReferenceFailed,
              "reference: " + std::string(EvalStatusName(r.status)) +
                  (r.status_detail.empty() ? "" : " (" + r.status_detail + ")"));
  }
  return r;
}

EvalResult CombineArchResults(const std::vector<std::pair<std::string, EvalResult>>& per_arch) {
  if (per_arch.empty()) throw Error(ErrorKind::kInvalidArgument, "no per-arch results to combine");
  EvalResult r;
  r.compiled = true;
  r.correctness = true;
  const EvalResult* worst = nullptr;
  std::string worst_arch;
  for (const auto& [arch, res] : per_arch) {
    r.metadata[arch] = res.metadata;
    r.eval_log += res.eval_log;
    r.compiled = r.compiled && res.compiled;
    r.correctness = r.correctness && res.correctness;
    if (!worst || res.perf_score < worst->perf_score) {
      worst = &res;
      worst_arch = arch;
    }
    for (BenchmarkRow row : res.benchmarks) {
      row.arch = arch;
      r.benchmarks.push_back(std::move(row));
    }
  }
  if (!r.compiled || !r.correctness || worst->perf_score != 5) {
    // The minimum perf_score wins (a not-compiled arch gives 1, an incorrect one its own score).
    SetStatus(r, worst->status, worst_arch + ": " + worst->status_detail);
    r.perf_score = worst->perf_score;
    r.correctness = false;
    return r;
  }
  double sum_runtime = 0;
  std::vector<double> speedups;
  std::vector<std::string> details;
  EvalStatus status = EvalStatus::kCorrect;
  int with_templates = 0;
  for (const auto& [arch, res] : per_arch) {
    sum_runtime += res.runtime;
    r.runtime_stats[arch] = res.runtime_stats;
    for (const auto& [name, stats] : res.runtime_stats.items()) {
      auto it = stats.find("speedup");
      if (it != stats.end() && it->is_number()) speedups.push_back(it->get<double>());
    }
    if (!res.status_detail.empty()) details.push_back(arch + ": " + res.status_detail);
    if (res.status == EvalStatus::kNoMeasurement) status = EvalStatus::kNoMeasurement;
    if (res.status == EvalStatus::kNoisy && status == EvalStatus::kCorrect) status = EvalStatus::kNoisy;
    if (!res.timing.empty()) r.timing[arch] = res.timing;
    if (res.status == EvalStatus::kReferenceOnly && status == EvalStatus::kCorrect) status = res.status;
    if (!res.template_results.empty()) ++with_templates;
  }
  r.runtime = sum_runtime / static_cast<double>(per_arch.size());
  // Only positive speedups: the reference's geometric mean of -1 values was NaN.
  r.runtime_improvement = GeometricMean(speedups);
  if (r.runtime_improvement == -1 && status == EvalStatus::kCorrect) status = EvalStatus::kNoReference;
  SetStatus(r, status, Join(details, "; "));
  r.profiler_data = per_arch.front().second.profiler_data;
  if (per_arch.size() == 1) r.timing = per_arch.front().second.timing;
  if (per_arch.size() == 1) {
    r.template_results = per_arch.front().second.template_results;
  } else if (with_templates > 0) {
    for (const auto& [arch, res] : per_arch) {
      if (!res.template_results.empty()) r.template_results[arch] = res.template_results;
    }
  }
  return r;
}

std::string PythonRepr(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return value.get<bool>() ? "True" : "False";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return value.dump();
    case Json::value_t::string: {
      const std::string s = value.get<std::string>();
      const char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
      std::string out(1, quote);
      for (char ch : s) {
        auto u = static_cast<unsigned char>(ch);
        if (ch == '\\' || ch == quote) {
          out += '\\';
          out += ch;
        } else if (ch == '\n') {
          out += "\\n";
        } else if (ch == '\t') {
          out += "\\t";
        } else if (ch == '\r') {
          out += "\\r";
        } else if (u < 0x20 || u == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", u);
          out += buf;
        } else {
          out += ch;
        }
      }
      return out + quote;
    }
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + PythonRepr(value[i]);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : value.items()) {
        out += (first ? "" : ", ") + PythonRepr(Json(k)) + ": " + PythonRepr(v);
        first = false;
      }
      return out + "}";
    }
    default: return value.dump();
  }
}

EvalResult CombineTemplateResults(const std::vector<TemplateVariant>& variants) {
  if (variants.empty()) throw Error(ErrorKind::kInvalidArgument, "no template variants to combine");
  if (variants.size() == 1) return variants.front().result;
  size_t best = variants.size();
  double best_score = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < variants.size(); ++i) {
    if (variants[i].result.perf_score < 0) continue;
    double score = ComputePerformanceScore(variants[i].result);
    if (best == variants.size() || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  EvalResult r = variants[best == variants.size() ? 0 : best].result;
  if (best < variants.size()) r.metadata["template_parameters"] = variants[best].params;
  r.template_results = Json::object();
  r.eval_log.clear();
  for (const TemplateVariant& v : variants) {
    Json j = v.result.ToReferenceJson();
    j.erase("runtime_improvement");
    j.erase("improve_over_compile");
    j.erase("metadata");
    j.erase("template_results");
    // B21: typed parameters, so the key is "[16, 32]" (the reference derived "['16', '32']" from the key).
    r.template_results[PythonRepr(v.params)] = std::move(j);
    r.eval_log += "\nTemplate parameters " + PythonRepr(v.params) + " (" + v.key + "):\n" + v.result.eval_log;
  }
  return r;
}

double ComputePerformanceScore(const EvalResult& result) {
  if (result.perf_score == -1) {
    throw Error(ErrorKind::kInvalidArgument, "perf_score is still -1, program must be evaluated first");
  }
  double score = result.perf_score;
  if (result.runtime_improvement > 0) {
    score += result.runtime_improvement;
  } else if (result.runtime_improvement == -1 && result.correctness && result.runtime > 0) {
    score += 1.0 / result.runtime;
  }
  return Sanitize(score);
}

EvalResult ExtractionFailureResult(const ProcessResult& extract) {
  EvalResult r;
  r.eval_log = extract.stderr_text + "\n";
  SetStatus(r, EvalStatus::kExtractionFailed,
            extract.message && !extract.message->empty() ? *extract.message : "the code could not be extracted");
  return r;
}

EvalResult BuildFailureResult(const ProcessResult& build, std::optional<TerminationReason> reason,
                              std::string_view project_dir) {
  EvalResult r;
  const std::string msg = build.message.value_or("");
  const bool timeout = reason ? IsTimeLimit(*reason)
                              : (msg.find("timed out") != std::string::npos || msg.find("inactivity") != std::string::npos);
  std::string detail = timeout ? "the build timed out" : "the build failed with exit code " +
                                                             std::to_string(build.returncode);
  if (!msg.empty()) detail += ": " + msg;
  r.eval_log = (timeout ? "The build timed out" : "The code failed to compile") +
               (msg.empty() ? std::string() : " (" + msg + ")") + ":\n" +
               PostprocessCompilerOutput(build.stdout_text + "\n" + build.stderr_text, project_dir);
  // A build killed by SIGSYS made a system call the sandbox forbids (issue 25): named, not a compile error.
  const bool violation = reason == TerminationReason::kSignaled && build.returncode == -31;
  if (violation) {
    detail = "the build was killed by SIGSYS: it made a system call the sandbox forbids (loading a kernel module, "
             "kexec, mount, reboot, swap, bpf, raw I/O or setting the clock)";
  }
  // A build killed at its memory or process limit (HarnessLimits) is resource_limit, as in a test run — never a
  // compile error (the verdict cache keeps those; a limit from the environment is not part of its key).
  const bool limit = !violation && !timeout && reason && IsResourceLimit(*reason);
  if (limit) detail = "the build exceeded its limits: " + msg;
  SetStatus(r, violation ? EvalStatus::kIsolationViolation
               : timeout ? EvalStatus::kBuildTimeout
               : limit   ? EvalStatus::kResourceLimit
                         : EvalStatus::kBuildError,
            std::move(detail));
  return r;
}

}  // namespace kf
