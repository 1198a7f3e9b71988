// Test stage (reference spec §4.4): variants (template instantiations, reference), one tree per arch with the
// build artifacts overlaid, every variant through the harness (correctness with the device shared, then
// performance with it exclusive), per-arch results merged.
#include <cmath>
#include <cstdlib>
#include <regex>

#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/worker_info.hpp"
#include "core/strings.hpp"
#include "core/temp_dir.hpp"
#include "pipeline/eval_log.hpp"

namespace kf {
namespace fs = std::filesystem;

namespace {

// One template argument typed as the reference does: float() parse -> int when the raw text has no '.',
// else float; true/false -> bool; anything else the stripped string.
Json TypeTemplateArgument(const std::string& raw) {
  std::string text(Trim(raw));
  if (!text.empty()) {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() + text.size() && std::isfinite(v)) {
      if (raw.find('.') == std::string::npos && std::fabs(v) < 9.2e18) return static_cast<int64_t>(v);
      return v;
    }
  }
  std::string lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true") return true;
  if (lower == "false") return false;
  return text;
}

// B13: the documented eval_config measurement knobs, wired into the pytest plugin's measure_runtime
// defaults (KERNELFOUNDRY_MEASURE_OPTIONS). Only keys the config sets are passed; num_perf_trials is the
// minimum number of timed trials. Empty when none is set.
std::string MeasureOptionsJson(const Json& config) {
  static const std::pair<const char*, const char*> kKeys[] = {{"warmup_min_time", "warmup_min_time"},
                                                              {"warmup_min_iters", "warmup_min_iters"},
                                                              {"inner_loop_min_time", "inner_loop_min_time"},
                                                              {"num_perf_trials", "perf_trials_min_iters"},
                                                              {"perf_trials_min_time", "perf_trials_min_time"}};
  const ConfigView view(config);
  Json out = Json::object();
  for (const auto& [from, to] : kKeys) {
    const std::string key = std::string("eval_config.") + from;
    if (view.Has(key)) out[to] = view.Number(key, 0);
  }
  return out.empty() ? "" : DumpJson(out);
}

// Emits the start and end events of one test phase around `run`.
PhaseRun RunPhase(const EvaluateOptions& options, Phase phase, const TestRequest& req,
                  const std::function<PhaseRun()>& run) {
  if (options.progress) options.progress(PhaseEvent{phase, req.variant.key, req.gpu_arch, false, false, 0, ""});
  PhaseRun out = run();
  if (options.progress) {
    const bool ok = out.verdict.status == EvalStatus::kCorrect;
    std::string note;
    if (!ok) {
      note = std::string(EvalStatusName(out.verdict.status)) +
             (out.verdict.detail.empty() ? "" : ": " + out.verdict.detail);
    }
    options.progress(PhaseEvent{phase, req.variant.key, req.gpu_arch, true, ok, out.wall_s, note});
  }
  return out;
}

}  // namespace

std::vector<Json> FindTemplateParameters(std::string_view code) {
  std::vector<Json> out;
  if (code.find("forward_templated") == std::string_view::npos) return out;
  static const std::regex kPattern(R"(forward_templated<([^>]*)>)");
  std::string text(code);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kPattern); it != std::sregex_iterator(); ++it) {
    Json params = Json::array();
    std::string args = (*it)[1];
    size_t start = 0;
    while (true) {
      size_t comma = args.find(',', start);
      params.push_back(TypeTemplateArgument(args.substr(start, comma == std::string::npos ? std::string::npos
                                                                                          : comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    bool seen = false;
    for (const Json& p : out) seen = seen || p == params;
    if (!seen) out.push_back(std::move(params));
  }
  return out;
}

std::string TemplateVariantKey(const Json& params) {
  std::string key = "custom";
  for (const Json& v : params) key += "_" + (v.is_string() ? v.get<std::string>() : PythonRepr(v));
  return key;
}

std::vector<TestVariant> MakeTestVariants(const Task& task, bool candidate, bool reference) {
  std::vector<TestVariant> out;
  if (candidate) {
    std::string code;
    if (auto it = task.blocks.find("EVOLVE"); it != task.blocks.end()) code = BlocksToStr(it->second);
    std::vector<Json> params = FindTemplateParameters(code);
    if (params.empty()) {
      out.push_back(TestVariant{"custom", false, std::nullopt});
    } else {
      for (Json& p : params) {
        std::string key = TemplateVariantKey(p);
        out.push_back(TestVariant{key, false, std::move(p)});
      }
    }
  }
  if (reference) out.push_back(TestVariant{"reference", true, std::nullopt});
  return out;
}

TestStageResult RunTestStage(const Harness& harness, const Task& task, const std::vector<TestVariant>& variants,
                             const std::vector<std::string>& archs, const EvaluateOptions& options) {
  TestStageResult out;
  const HarnessLimits limits = HarnessLimits::FromConfig(task.config);
  Json runtime_params = nullptr;
  if (task.hyperparameters.is_object() && task.hyperparameters.contains("runtime")) {
    runtime_params = task.hyperparameters["runtime"];
  }
  std::map<std::string, std::string> env = {{"KF_CACHE_DIR", std::filesystem::absolute(DefaultCacheDir()).string()}};
  if (std::string m = MeasureOptionsJson(task.config); !m.empty()) env["KERNELFOUNDRY_MEASURE_OPTIONS"] = m;
  DeviceSlots& slots = options.slots ? *options.slots : ProcessDeviceSlots();
  for (const std::string& arch : archs) {
    if (options.stop.stop_requested()) break;
    TempDir dir(options.work_root, "kf_test_", options.keep_workdir);
    if (options.keep_workdir) out.kept_dirs.push_back(dir.path());
    const fs::path task_dir = dir.path() / "task_data";
    task.task_data.ToDisk(task_dir);
    // The candidate's artifacts, then the reference's, on the same tree (the reference's order).
    if (task.build_result && task.build_result->artifacts) task.build_result->artifacts->ToDisk(task_dir);
    if (task.build_result_reference && task.build_result_reference->artifacts) {
      task.build_result_reference->artifacts->ToDisk(task_dir);
    }
    std::vector<std::pair<std::string, VariantRun>> runs;
    for (const TestVariant& variant : variants) {
      if (options.stop.stop_requested()) break;
      TestRequest req;
      req.variant = variant;
      req.work_dir = dir.path();
      req.task_dir = task_dir;
      req.gpu_arch = arch;
      req.runtime_params = runtime_params;
      req.limits = limits;
      req.env = env;
      req.on_line = options.on_output_line;
      req.stop = options.stop;
      VariantRun run;
      {
        DeviceSlots::Lease lease = slots.ForTest(arch, options.stop);
        if (!lease.held()) break;
        req.expected_tests = task.correctness_tests;
        PhaseRun c = RunPhase(options, Phase::kCorrectness, req, [&] { return harness.Correctness(req); });
        run.result.correctness_result = std::move(c.result);
        run.correctness = std::move(c.verdict);
        run.correctness_s = c.wall_s;
      }
      if (run.correctness->status == EvalStatus::kCorrect && !options.stop.stop_requested()) {
        DeviceSlots::Lease lease = slots.ForTiming(arch, options.stop);
        if (lease.held()) {
          req.expected_tests = task.profile_tests;
          PhaseRun p = RunPhase(options, Phase::kPerformance, req, [&] { return harness.Performance(req); });
          run.result.performance_result = std::move(p.result);
          run.performance = std::move(p.verdict);
          run.performance_s = p.wall_s;
        }
      }
      run.result.worker_info = GetWorkerInfo(harness.Name());
      runs.emplace_back(variant.key, std::move(run));
    }
    out.per_arch.emplace_back(arch, std::move(runs));
  }
  for (const TestVariant& variant : variants) {
    std::vector<std::pair<std::string, TestResult>> per_arch;
    for (const auto& [arch, runs] : out.per_arch) {
      for (const auto& [key, run] : runs) {
        if (key == variant.key) per_arch.emplace_back(arch, run.result);
      }
    }
    if (!per_arch.empty()) out.merged.emplace_back(variant.key, TestResult::Merge(per_arch));
  }
  return out;
}

TestStageResult LocalStageRunner::Test(const Task& task, const std::vector<TestVariant>& variants,
                                       const std::vector<std::string>& archs, const EvaluateOptions& options) {
  return RunTestStage(harness_, task, variants, archs, options);
}

}  // namespace kf
