// Evaluate (reference spec §4.1 step 2–4, §4.9 Evaluator.run): candidate -> WithBlocks -> build stage ->
// test stage -> scoring. Differences from the reference: a failed candidate build does not go on to test
// the reference (nothing to compare), a failed reference build is a typed verdict (reference_failed), not
// an assertion, and a reference-only run returns a verdict (B20).
#include <chrono>
#include <set>

#include "core/strings.hpp"
#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/profile.hpp"
#include "kernelfoundry/worker_info.hpp"
#include "pipeline/eval_log.hpp"
#include "pipeline/build_internal.hpp"

namespace kf {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string EvolveCode(const Task& task) {
  auto it = task.blocks.find("EVOLVE");
  return it == task.blocks.end() ? std::string() : BlocksToStr(it->second);
}

// Adds {"compile_worker_info": info} to each arch's metadata of a per-arch verdict.
void AddCompileInfo(EvalResult& r, const std::optional<BuildRun>& build) {
  if (build && build->result.worker_info) r.metadata["compile_worker_info"] = *build->result.worker_info;
}

void Finish(Evaluation& ev, Clock::time_point t0) {
  // [issue 10, 25] the verdict says how children were isolated and limited (a config the harness refused has
  // already ended the evaluation with its error; the defaults describe such a verdict).
  std::optional<HarnessLimits> limits;
  try {
    limits = HarnessLimits::FromConfig(ev.task.config);
  } catch (const Error&) {
  }
  NoteIsolation(ev.result, limits ? &*limits : nullptr);
  ev.wall_s = SecondsSince(t0);
  ev.combined_score = ev.result.perf_score >= 0 ? ComputePerformanceScore(ev.result) : -1;
}

// Where the candidate's code ran (result.isolation.candidate_process): in its correctness runs, as their reports
// say (one value, or one per "arch variant" when they differ; kernelfoundry.isolation), and in its timed runs,
// which pair it with the reference in one test process.
void NoteCandidateProcess(EvalResult& r, const TestStageResult& tests) {
  Json per_run = Json::object();
  std::set<std::string> values;
  bool timed = false;
  for (const auto& [arch, runs] : tests.per_arch) {
    for (const auto& [key, run] : runs) {
      if (key == "reference") continue;
      timed = timed || run.result.performance_result.has_value();
      if (run.candidate_process.empty()) continue;
      per_run[arch + " " + key] = run.candidate_process;
      values.insert(run.candidate_process);
    }
  }
  if (values.empty() && !timed) return;
  if (!r.isolation.is_object()) r.isolation = Json::object();
  Json& where = r.isolation["candidate_process"];
  where["correctness"] = values.size() == 1 ? Json(*values.begin()) : values.empty() ? Json(nullptr) : per_run;
  if (timed) where["timing"] = "test process (paired with the reference)";
}

// The verdict of an evaluation cancelled at `where`.
EvalResult CanceledResult(const std::string& where) {
  EvalResult r;
  r.status = EvalStatus::kCanceled;
  r.perf_score = PerfScoreFor(EvalStatus::kCanceled);
  r.status_detail = "the evaluation was canceled " + where;
  r.eval_log = r.status_detail + "\n";
  return r;
}

}  // namespace

std::string BuildLogName(bool reference) { return reference ? "build_reference" : "build"; }

std::string TestLogName(std::string_view variant, std::string_view run, std::string_view trace) {
  std::string name = "test_" + std::string(variant) + "_" + std::string(run);
  if (!trace.empty()) name += "_" + std::string(trace);
  return name;
}

Evaluation Evaluate(const Task& task, const std::optional<BlockUpdate>& candidate, const EvaluateOptions& options) {
  const Clock::time_point t0 = Clock::now();
  Evaluation ev;
  ev.input_code = EvolveCode(task);
  if (candidate) {
    ev.task = task.WithBlocks(*candidate, /*keep_test_result_reference=*/false);
  } else {
    ev.task = task;
    ev.task.extract_code_result.reset();
    ev.task.build_result.reset();
    ev.task.build_result_reference.reset();
    ev.task.test_result.reset();
    ev.task.test_result_reference.reset();
  }
  ev.output_code = EvolveCode(ev.task);
  ev.archs = ResolveGpuArchs(ev.task, options);
  const std::string arch_list = Join(ev.archs, ",");

  if (ev.task.extract_code_result && ev.task.extract_code_result->returncode != 0) {
    ev.result = ExtractionFailureResult(*ev.task.extract_code_result);
    Finish(ev, t0);
    return ev;
  }

  const HarnessDescriptor& kind = HarnessDescriptorFor(ev.task.config);
  const ConfigView config(ev.task.config);
  const bool want_candidate = options.test_candidate && config.Bool("test_custom", true);
  const bool want_reference = options.test_reference && config.Bool("test_reference", true);
  if (!want_candidate && !want_reference) {
    throw Error(ErrorKind::kInvalidArgument, "nothing to evaluate: the candidate and the reference are both off",
                "config.yaml", "test_reference");
  }
  // What the test stage will read from the config is checked now: a typo must not cost a build first.
  ValidateTestConfig(ev.task);
  // The stage runner: the caller's, else a local one over the caller's harness or the task's own.
  std::unique_ptr<Harness> own_harness;
  std::optional<LocalStageRunner> local;
  StageRunner* runner = options.runner;
  if (runner == nullptr) {
    const Harness* harness = options.harness;
    if (harness == nullptr) {
      own_harness = kind.make(ev.task);
      harness = own_harness.get();
    }
    local.emplace(*harness);
    runner = &*local;
  }
  if (options.stop.stop_requested()) {
    ev.result = CanceledResult("before it started");
    Finish(ev, t0);
    return ev;
  }

  // ---- build ----
  const Clock::time_point tb = Clock::now();
  const BuildPlan plan = PlanBuilds(ev.task, kind, want_candidate, want_reference, arch_list);
  BuildStageResult builds = runner->Build(ev.task, plan, options);
  ev.build_s = SecondsSince(tb);
  ev.kept_dirs = builds.kept_dirs;
  for (const auto* b : {&builds.candidate, &builds.reference}) {
    if (!*b) continue;
    const std::string name = std::string("build ") + (b == &builds.candidate ? "custom" : "reference");
    ev.timings.push_back({name, (*b)->wall_s});
    if ((*b)->result.result) {
      ev.logs.push_back({name, *(*b)->result.result, (*b)->result.worker_info.value_or(nullptr),
                         BuildLogName(b == &builds.reference)});
    }
  }
  if (options.stop.stop_requested()) {
    ev.result = CanceledResult("during the build");
    Finish(ev, t0);
    return ev;
  }
  // [issue 10 fault 5] Our environment failed (cache dir, work dir, interpreter): never a candidate score.
  if (std::optional<EvalResult> infra = InfrastructureFailure(builds)) {
    ev.result = std::move(*infra);
    Finish(ev, t0);
    return ev;
  }
  if (want_candidate && builds.candidate && !builds.candidate->result.Ok()) {
    const BuildRun& b = *builds.candidate;
    ev.result = BuildFailureResult(*b.result.result, b.reason, b.task_dir.string());
    AddCompileInfo(ev.result, builds.candidate);
    Finish(ev, t0);
    return ev;
  }
  std::optional<TestResult> reference_build_failed;
  // The build the reference runs on: its own, or (reference-only native run) the candidate's.
  const std::optional<BuildRun>& reference_build = builds.reference ? builds.reference : builds.candidate;
  if (want_reference && reference_build && !reference_build->result.Ok()) {
    // The reference asserted here; we score it as reference_failed with the build's output as the log.
    TestResult failed;
    failed.worker_info = reference_build->result.worker_info;
    ProcessResult pr = *reference_build->result.result;
    pr.message = "Reference build failed: " + pr.message.value_or("");
    if (pr.returncode == 0) pr.returncode = -1;
    failed.correctness_result = std::move(pr);
    reference_build_failed = std::move(failed);
  }

  // ---- test ----
  const Clock::time_point tt = Clock::now();
  const bool test_candidate = want_candidate && !reference_build_failed;
  const bool test_reference = want_reference && !reference_build_failed;
  std::vector<TestVariant> variants = MakeTestVariants(ev.task, test_candidate, test_reference);
  TestStageResult tests;
  if (!variants.empty()) tests = runner->Test(ev.task, variants, ev.archs, options);
  ev.test_s = SecondsSince(tt);
  ev.kept_dirs.insert(ev.kept_dirs.end(), tests.kept_dirs.begin(), tests.kept_dirs.end());
  for (const auto& [arch, runs] : tests.per_arch) {
    for (const auto& [key, run] : runs) {
      const Json info = run.result.worker_info.value_or(nullptr);
      if (run.result.correctness_result) {
        ev.timings.push_back({"correctness " + key + " " + arch, run.correctness_s});
        ev.logs.push_back({"test " + key + " " + arch + " correctness", *run.result.correctness_result, info,
                           TestLogName(key, "correctness")});
      }
      if (run.result.performance_result) {
        ev.timings.push_back({"performance " + key + " " + arch, run.performance_s});
        ev.logs.push_back({"test " + key + " " + arch + " performance", *run.result.performance_result, info,
                           TestLogName(key, "performance")});
      }
      if (run.profile_s > 0) ev.timings.push_back({"profile " + key + " " + arch, run.profile_s});
      for (const auto& [trace, result] : run.result.trace_results) {
        ev.logs.push_back({"test " + key + " " + arch + " profile " + trace, result, info,
                           TestLogName(key, "trace", trace)});
      }
    }
  }

  if (options.stop.stop_requested()) {
    ev.result = CanceledResult("during the tests");
    Finish(ev, t0);
    return ev;
  }

  // ---- score ----
  std::vector<std::pair<std::string, EvalResult>> per_arch;
  std::vector<std::pair<std::string, TestResult>> best_candidate;
  for (const std::string& arch : ev.archs) {
    const std::vector<std::pair<std::string, VariantRun>>* runs = nullptr;
    for (const auto& [a, r] : tests.per_arch) {
      if (a == arch) runs = &r;
    }
    std::optional<TestResult> reference = reference_build_failed;
    std::optional<Classification> reference_verdict, reference_perf_verdict;
    if (runs && test_reference) {
      for (const auto& [key, run] : *runs) {
        if (key != "reference") continue;
        reference = run.result;
        reference_verdict = run.correctness;
        reference_perf_verdict = run.performance;
      }
    }
    EvalResult r;
    std::string profiled_key;  // the candidate variant whose verdict this arch reports
    if (!want_candidate) {
      ConvertOptions co;
      co.correctness = reference_verdict;
      co.performance = reference_perf_verdict;
      r = ReferenceOnlyResult(reference.value_or(TestResult{}), co);
    } else if (!runs) {
      r = ConvertTestResult(TestResult{}, reference);
    } else {
      std::vector<TemplateVariant> candidates;
      for (const auto& [key, run] : *runs) {
        if (key == "reference") continue;
        ConvertOptions co;
        co.variant = key;
        co.correctness = run.correctness;
        co.performance = run.performance;
        co.reference_correctness = reference_verdict;
        co.timing = run.timing;
        TemplateVariant tv;
        tv.key = key;
        for (const TestVariant& v : variants) {
          if (v.key == key && v.template_params) tv.params = *v.template_params;
        }
        tv.result = ConvertTestResult(run.result, reference, co);
        candidates.push_back(std::move(tv));
      }
      r = candidates.size() == 1 ? candidates.front().result : CombineTemplateResults(candidates);
      std::string best_key = candidates.front().key;
      if (r.metadata.contains("template_parameters")) {
        best_key = TemplateVariantKey(r.metadata["template_parameters"]);
      }
      profiled_key = best_key;
      for (const auto& [key, run] : *runs) {
        if (key == best_key) best_candidate.emplace_back(arch, run.result);
      }
    }
    // Parsed profiler outputs of this arch (the reference's profiler_data: "<name>" for the scored candidate
    // variant, "<name>_ref" for the reference).
    if (runs) {
      for (const auto& [key, run] : *runs) {
        const bool is_reference = key == "reference";
        if (!is_reference && key != profiled_key) continue;
        const Json profiles = ProfilerDataFromTraces(run.result.trace_results);
        for (const auto& [name, data] : profiles.items()) r.profiler_data[is_reference ? name + "_ref" : name] = data;
      }
    }
    AddCompileInfo(r, builds.candidate);
    per_arch.emplace_back(arch, std::move(r));
  }
  ev.result = CombineArchResults(per_arch);
  if (!best_candidate.empty()) ev.task.test_result = TestResult::Merge(best_candidate);
  for (const auto& [key, merged] : tests.merged) {
    if (key == "reference") ev.task.test_result_reference = merged;
  }
  Finish(ev, t0);
  NoteCandidateProcess(ev.result, tests);
  return ev;
}

}  // namespace kf
