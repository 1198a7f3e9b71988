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

// The statuses a paired performance run's timing can give (paired.py records).
bool IsTimingVerdict(EvalStatus s) {
  return s == EvalStatus::kCorrect || s == EvalStatus::kNoisy || s == EvalStatus::kSuspicious ||
         s == EvalStatus::kInputMutated || s == EvalStatus::kOutputChangedUnderTiming;
}

// The paired record of benchmark `name` in a timing document, or nullptr (absent, or not paired).
const Json* PairedRecord(const Json& timing, const std::string& name) {
  if (!timing.is_object() || !timing.contains("paired") || !timing["paired"].is_object()) return nullptr;
  auto it = timing["paired"].find(name);
  if (it == timing["paired"].end() || !it->is_object() || !it->value("paired", false)) return nullptr;
  return &*it;
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

EvalResult ConvertTestResult(const TestResult& candidate, const std::optional<TestResult>& reference,
                             const ConvertOptions& options) {
  EvalResult r;
  r.compiled = true;
  r.metadata["eval_worker_info"] = candidate.worker_info ? *candidate.worker_info : Json(nullptr);

  // The reference raises "Reference test failed, cannot proceed…" (an evaluation error, perf 0).
  const bool reference_failed =
      reference && reference->correctness_result &&
      (options.reference_correctness ? !IsCorrectFamily(options.reference_correctness->status) &&
                                           options.reference_correctness->status != EvalStatus::kSkipped
                                     : reference->correctness_result->returncode != 0);
  if (reference_failed) {
    const ProcessResult& ref = *reference->correctness_result;
    r.eval_log = "Reference test failed, cannot proceed with the evaluation.\n" +
                 PostprocessPytestOutput(ref.stdout_text + "\n" + ref.stderr_text, options.log_cap_chars) + "\n";
    const Classification c = options.reference_correctness ? *options.reference_correctness : ClassifyFromWire(ref);
    SetStatus(r, EvalStatus::kReferenceFailed, "reference: " + std::string(EvalStatusName(c.status)) +
                                                   (c.detail.empty() ? "" : " (" + c.detail + ")"));
    return r;
  }

  if (!candidate.correctness_result) {
    r.eval_log = "No test results found for " + options.variant + " task.\n";
    SetStatus(r, EvalStatus::kNoTestResult, "no correctness result for variant " + options.variant);
    return r;
  }
  const ProcessResult& corr = *candidate.correctness_result;
  r.eval_log = "\nTest result on platform " + GpuName(candidate.worker_info) + ":\n" +
               PostprocessPytestOutput(corr.stdout_text + "\n" + corr.stderr_text, options.log_cap_chars) +
               "\n";
  if (corr.message && !corr.message->empty()) r.eval_log += *corr.message + "\n";

  const Classification c = options.correctness ? *options.correctness : ClassifyFromWire(corr);
  if (!IsCorrectFamily(c.status)) {
    SetStatus(r, c.status, c.detail);
    if (c.status == EvalStatus::kBuildError) r.compiled = false;  // a kernel built at test time (JIT) failed
    return r;
  }
  r.correctness = true;
  r.eval_log += "The kernel compiles and is correct, great job!\n";

  // --- candidate timings ---
  std::vector<std::string> problems;  // non-empty -> kNoMeasurement
  std::vector<Bench> benches;
  const std::optional<ProcessResult>& perf = candidate.performance_result;
  bool none_reported = false;  // the reference's single "timed_out_test" benchmark
  if (auto runtimes = ExtractRuntimes(perf)) {
    benches = std::move(*runtimes);
  } else {
    none_reported = true;
    r.eval_log += "\nNo runtime measurement found for " + options.variant + ". Setting runtime to high value.\n";
    benches.push_back({"timed_out_test", {}, "no runtimes were reported"});
    problems.push_back("no runtimes were reported");
  }
  // A paired run's timing verdicts (noisy, suspicious, input_mutated, output_changed_under_timing) come with
  // runtimes: they decide the status below, they are not a failed performance run.
  const bool timing_verdict = options.performance && IsTimingVerdict(options.performance->status);
  const bool perf_failed = options.performance ? !IsCorrectFamily(options.performance->status) && !timing_verdict
                                               : perf && perf->returncode != 0;
  if (perf && perf_failed) {
    const std::string msg = perf->message.value_or("");
    const bool timeout = options.performance ? options.performance->status == EvalStatus::kTestTimeout
                                             : msg.find("timed out") != std::string::npos ||
                                                   msg.find("inactivity") != std::string::npos;
    r.eval_log += timeout ? std::string("There was a timeout error during benchmarking.\n")
                          : "There was an error during benchmarking (exit code " +
                                std::to_string(perf->returncode) + ").\n";
    std::string out = CapMiddle(CollapseTensorDumps(perf->stdout_text + "\n" + perf->stderr_text),
                                options.log_cap_chars);
    r.eval_log += out;
    if (out.empty() || out.back() != '\n') r.eval_log += "\n";
    problems.push_back(timeout ? "the performance run timed out"
                       : options.performance && !options.performance->detail.empty()
                           ? "the performance run failed: " + options.performance->detail
                           : "the performance run failed with exit code " + std::to_string(perf->returncode));
  }

  std::vector<double> cand_mean(benches.size(), -1);
  double sum_means = 0;
  for (size_t i = 0; i < benches.size(); ++i) {
    const Bench& b = benches[i];
    BenchmarkRow row;
    row.name = b.name;
    if (!b.Valid()) {
      // B18: the reference crashed on an empty list; we record the reference's "high value".
      r.runtime_stats[b.name] = MissingStatsJson(none_reported ? 1 : 0);
      if (!none_reported) {
        r.eval_log += "\nNo runtime measurement found for " + options.variant + " benchmark " + b.name +
                      ". Setting runtime to high value.\n";
        problems.push_back(b.name + ": " + b.problem);
      }
    } else {
      TimingStats s = ComputeTimingStats(b.samples);
      r.runtime_stats[b.name] = TimingStatsToReferenceJson(s);
      cand_mean[i] = s.mean;
      row.candidate_mean_ms = s.mean;
      row.num_trials = s.num_trials;
      if (!(s.mean > 0)) problems.push_back(b.name + ": a mean of 0 ms is not a valid time");
    }
    sum_means += r.runtime_stats[b.name]["mean"].get<double>();
    r.benchmarks.push_back(std::move(row));
  }
  // runtime = mean of the (rounded) benchmark means, like the reference.
  r.runtime = sum_means / static_cast<double>(benches.size());

  if (options.timing.is_object()) r.timing = options.timing;
  auto finish = [&](EvalStatus ok_status, const std::string& detail) {
    if (timing_verdict && options.performance->status != EvalStatus::kCorrect && problems.empty()) {
      // The timed calls were not trustworthy (or only noisy): that, not "correct", is the verdict.
      SetStatus(r, options.performance->status, options.performance->detail);
      r.correctness = IsCorrectFamily(r.status);
      return r;
    }
    std::vector<std::string> notes;
    if (!c.detail.empty()) notes.push_back(c.detail);  // e.g. a passing run killed after its summary
    if (!problems.empty()) {
      notes.insert(notes.end(), problems.begin(), problems.end());
      SetStatus(r, EvalStatus::kNoMeasurement, Join(notes, "; "));
    } else {
      if (!detail.empty()) notes.push_back(detail);
      SetStatus(r, ok_status, Join(notes, "; "));
    }
    return r;
  };
  if (!reference) return finish(EvalStatus::kNoReference, "no reference run to compare with");

  // --- speedups against the reference ---
  auto ref_runtimes = ExtractRuntimes(reference->performance_result);
  if (!ref_runtimes) {
    for (auto& [name, stats] : r.runtime_stats.items()) stats["speedup"] = kInvalidSpeedup;
    r.runtime_improvement = kInvalidSpeedup;  // the reference's value, set directly (no geometric mean)
    return finish(EvalStatus::kNoReference, "the reference run reported no runtimes");
  }
  std::vector<double> speedups;
  std::vector<std::string> unmatched;
  for (size_t i = 0; i < benches.size(); ++i) {
    const std::string& name = benches[i].name;
    Json& stats = r.runtime_stats[name];
    BenchmarkRow& row = r.benchmarks[i];
    double ref_mean = -1;
    for (const Bench& rb : *ref_runtimes) {
      if (rb.name == name && rb.Valid()) ref_mean = ComputeTimingStats(rb.samples).mean;
    }
    double speedup = kInvalidSpeedup;
    if (ref_mean > 0) row.reference_mean_ms = ref_mean;
    // B16: both means unrounded; no division by a zero, missing or invalid mean.
    if (ref_mean > 0 && cand_mean[i] > 0) {
      speedup = ref_mean / cand_mean[i];
      if (!std::isfinite(speedup) || !(speedup > 0)) speedup = kInvalidSpeedup;
    }
    if (speedup != kInvalidSpeedup) {
      stats["ref_speed"] = RoundSignificant(ref_mean);
      row.speedup = speedup;
    } else if (benches[i].Valid() && cand_mean[i] > 0) {
      unmatched.push_back(name);
    }
    // Paired: the median of the per-round ratios measured in one process, with its interval.
    if (const Json* rec = PairedRecord(options.timing, name)) {
      const double paired = rec->value("speedup", -1.0);
      if (std::isfinite(paired) && paired > 0 && cand_mean[i] > 0) {
        speedup = paired;
        row.speedup = paired;
        row.paired = true;
        row.num_trials = rec->value("rounds", 0);
        const Json ci = rec->value("ci", Json::array());
        if (ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number()) {
          row.speedup_ci_low = ci[0].get<double>();
          row.speedup_ci_high = ci[1].get<double>();
        }
        if (ref_mean > 0) stats["ref_speed"] = RoundSignificant(ref_mean);
      }
    }
    stats["speedup"] = speedup;
    speedups.push_back(speedup);
  }
  // The reference's geometric mean includes the sentinels (e.g. 4.5e-05 for 2.03 and 9.999e-10).
  r.runtime_improvement = GeometricMean(speedups);
  const size_t matched = static_cast<size_t>(
      std::count_if(r.benchmarks.begin(), r.benchmarks.end(), [](const BenchmarkRow& b) { return b.speedup > 0; }));
  if (matched == 0) return finish(EvalStatus::kNoReference, "no benchmark has a reference timing");
  return finish(EvalStatus::kCorrect,
                unmatched.empty() ? "" : "no reference timing for: " + Join(unmatched, ", "));
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
  SetStatus(r, violation ? EvalStatus::kIsolationViolation : timeout ? EvalStatus::kBuildTimeout : EvalStatus::kBuildError,
            std::move(detail));
  return r;
}

}  // namespace kf
