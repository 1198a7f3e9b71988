// Test stage (reference spec §4.4): variants (template instantiations, reference), one tree per arch with the
// build artifacts overlaid, every variant through the harness (correctness with the device shared, then
// performance with it exclusive), per-arch results merged.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <cstdlib>
#include <regex>

#include <fmt/format.h>

#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/paired_wire.hpp"
#include "kernelfoundry/profile.hpp"
#include "kernelfoundry/timing_keys.hpp"
#include "kernelfoundry/worker_info.hpp"
#include "core/strings.hpp"
#include "core/temp_dir.hpp"
#include "pipeline/eval_log.hpp"
#include "pipeline/paired_processes.hpp"
#include "pipeline/profile_stage.hpp"

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

// The conditions every test process runs under, the same for both sides (issue: trustworthy speed signal):
// a steady heap (glibc's dynamic mmap/trim thresholds otherwise make page faults per call depend on the
// process's allocation history: 203 vs 7,957 minor faults per call measured for the same expression), one
// declared thread count (OpenMP, MKL, OpenBLAS, torch through KF_THREADS), and idle OpenMP threads that sleep
// instead of spinning (so CPU used after a call returned is the kernel's, not a pool's).
struct TimedConditions {
  int threads = 1;
  std::string allocator;  // "jemalloc <path>" or "glibc"
  std::map<std::string, std::string> env;
};

// jemalloc's shared library where a distribution installs it (Debian: libjemalloc2), or "".
std::string JemallocLibrary() {
  for (const char* path : {"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
                           "/usr/lib64/libjemalloc.so.2", "/usr/lib/libjemalloc.so.2", "/usr/local/lib/libjemalloc.so.2"}) {
    if (access(path, R_OK) == 0) return path;
  }
  return "";
}

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

// The default thread count of timed processes: every usable CPU. One CPU fewer measured tighter (2-vCPU machine,
// 2026-12-05: the README example's processes spread by 1.6-3.6 % with 1 thread against 6.1-8.3 % with 2), but the
// declared count is only an environment variable, and a candidate that ran two OpenMP threads anyway took the
// spare CPU and scored 3.77x where the honest one scores 2.4x (stranger test, same day). Until the loop checks
// the CPU time inside the timed windows against the declared threads, no CPU is left spare by default.
int DefaultThreads() { return UsableCpus(); }

// The most threads eval_config.threads may declare (stranger test, 2026-12-05: 100000 was valid, and both sides
// then hung until the inactivity timeout).
constexpr int kMaxThreads = 1024;

TimedConditions TimedConditionsFromConfig(const Json& config) {
  TimedConditions c;
  const ConfigView view(config);
  const int64_t threads = view.Int("eval_config.threads", DefaultThreads());
  if (threads < 1 || threads > kMaxThreads) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("expected a thread count from 1 to {}, got {}", kMaxThreads, threads), "config.yaml",
                "eval_config.threads");
  }
  c.threads = static_cast<int>(threads);
  const std::string n = std::to_string(c.threads);
  c.env = {{"KF_THREADS", n},           {"OMP_NUM_THREADS", n},          {"MKL_NUM_THREADS", n},
           {"OPENBLAS_NUM_THREADS", n}, {"OMP_WAIT_POLICY", "PASSIVE"},  {"MALLOC_MMAP_THRESHOLD_", "1073741824"},
           {"MALLOC_TRIM_THRESHOLD_", "1073741824"}};
  // The allocator (eval_config.allocator: auto | jemalloc | glibc). glibc's heap with the two thresholds above has
  // no page faults per call, but where a large buffer lands (its offset within a page, relative to the other
  // buffers) is fixed for the life of a process by its allocation history, and two processes running the same
  // code differed by up to 7 % (bias_relu, measured 2026-12-01: 0.945-1.012 over six processes of one plain
  // loop). jemalloc (opt.cache_oblivious, on by default) places every large allocation at a random cache-line
  // offset within its first page, so those layouts are sampled afresh on every call and average out within one
  // run (0.963-0.978 over six processes); with decay off (MALLOC_CONF below) it keeps freed memory: no page
  // faults per call either (0 measured, the same as glibc with the thresholds).
  const std::string wanted = view.String("eval_config.allocator", "auto");
  if (wanted != "auto" && wanted != "jemalloc" && wanted != "glibc") {
    throw Error(ErrorKind::kInvalidArgument, "expected auto, jemalloc or glibc, got '" + wanted + "'", "config.yaml",
                "eval_config.allocator");
  }
  const std::string jemalloc = wanted == "glibc" ? "" : JemallocLibrary();
  if (wanted == "jemalloc" && jemalloc.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "jemalloc was asked for but libjemalloc.so.2 is not installed (Debian: apt-get install libjemalloc2)",
                "config.yaml", "eval_config.allocator");
  }
  if (jemalloc.empty()) {
    c.allocator = "glibc";
  } else {
    c.allocator = "jemalloc " + jemalloc;
    c.env["LD_PRELOAD"] = jemalloc;
    c.env["MALLOC_CONF"] = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
  }
  return c;
}

// Whether correctness runs keep the candidate's code out of the test process (eval_config.candidate_process:
// executor, the default, or test_process). Regression (2026-12-05): in one process with the reference, a bias_relu
// candidate that returned zeros and set torch.relu to return zeros too scored `correct` at 3.5x; with its module in
// an executor (kernelfoundry.isolation) the same candidate is value_mismatch. test_process is for tasks whose
// tests need the candidate's objects in the test process (autograd through it, isinstance on its classes).
bool IsolateCandidate(const Json& config) {
  const std::string where = ConfigView(config).String("eval_config.candidate_process", "executor");
  if (where != "executor" && where != "test_process") {
    throw Error(ErrorKind::kInvalidArgument, "expected executor or test_process, got '" + where + "'", "config.yaml",
                "eval_config.candidate_process");
  }
  return where == "executor";
}

// The keys of eval_config.timing that no PairedOptions reader checks (the pytest plugin's own and the pipeline's:
// kernelfoundry/timing_keys.hpp), checked here before anything is built; any key that neither kf nor the plugin
// knows is refused too. Regression (stranger test, 2026-12-03): `output_rtol: -1` was built and
// then judged a cheat (output_changed_under_timing), `value_sets: -1` silently ran one value set (no rotation),
// an unknown key built and ended `no_measurement` with exit code 0.
void CheckTimingKeys(const Json& o) {
  for (const auto& [name, value] : o.items()) {
    const TimingKey* key = FindTimingKey(name);
    if (key == nullptr) {
      std::string known;
      for (const TimingKey& k : TimingKeys()) known += (known.empty() ? "" : ", ") + std::string(k.name);
      throw Error(ErrorKind::kInvalidArgument, "unknown timing option; expected one of " + known, "config.yaml",
                  "eval_config.timing." + name);
    }
    if (key->reader == TimingKeyReader::kLoop) continue;  // PairedOptionsFromJson checked it
    const bool ok = key->kind == TimingKeyKind::kBool
                        ? value.is_boolean()
                        : (key->kind == TimingKeyKind::kWhole ? value.is_number_integer() : value.is_number()) &&
                              value.get<double>() >= key->low && value.get<double>() <= key->high;
    if (!ok) {
      throw Error(ErrorKind::kInvalidArgument, "expected " + std::string(key->expected) + ", got " + value.dump(),
                  "config.yaml", "eval_config.timing." + name);
    }
  }
}

// The paired timing options: config eval_config.timing (kernelfoundry.paired.DEFAULTS keys), with the time
// budget per benchmark capped so that all of the task's benchmarks fit in 60 % of its test_timeout.
Json TimingOptions(const Task& task, const HarnessLimits& limits) {
  Json o = Json::object();
  const ConfigView view(task.config);
  if (const Json* t = view.Find("eval_config.timing")) {
    if (!t->is_object()) {
      throw Error(ErrorKind::kInvalidArgument,
                  "expected a mapping of timing options (budget_s, …), got " + t->dump() + ColonValueHint(*t),
                  "config.yaml", "eval_config.timing");
    }
    o = *t;
    // Every timing knob (type and range) is checked as written, by the one rule that reads them
    // (PairedOptionsFromJson), before the budget below is capped and clamped and before anything is built: a bad
    // value is a config error naming its key (a negative budget_s had run as 0.5 s).
    try {
      (void)PairedOptionsFromJson(o);
    } catch (const Error& e) {
      throw Error(ErrorKind::kInvalidArgument, e.message(), "config.yaml",
                  "eval_config.timing" + (e.field().empty() ? std::string() : "." + e.field()));
    }
  }
  const double benchmarks = static_cast<double>(std::max<size_t>(1, task.profile_tests.size()));
  const double cap = 0.6 * static_cast<double>(limits.test_timeout.count()) / 1000.0 / benchmarks;
  double wanted = o.contains("budget_s") && o["budget_s"].is_number() ? o["budget_s"].get<double>()
                                                                     : TimingDefault("budget_s");
  // $KF_TIMING_BUDGET_S caps it for a whole machine (e.g. a CI run that only needs verdicts, not precision).
  // A value that is not a number of seconds > 0 is refused (regression, stranger test 2026-12-04: -1 was ignored).
  if (const char* env = std::getenv("KF_TIMING_BUDGET_S"); env && *env) {
    static const std::regex kDecimal(R"(\d+(\.\d*)?([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?)");
    const double seconds = std::regex_match(env, kDecimal) ? std::strtod(env, nullptr) : -1;
    if (!std::isfinite(seconds) || !(seconds > 0)) {
      throw Error(ErrorKind::kInvalidArgument,
                  std::string("expected a finite number of seconds > 0 (digits, e.g. 5 or 2.5), got '") + env + "'",
                  "environment", "KF_TIMING_BUDGET_S");
    }
    wanted = std::min(wanted, seconds);
  }
  o["budget_s"] = std::max(0.5, std::min(wanted, cap));
  // Keys of mechanisms that were removed: refused, naming what replaced them (eval_config.timing exists only in
  // task packages written for kf, so no reference package carries them, and a request that is no longer honoured
  // must not pass silently: separate timing would come back paired).
  for (const auto& [key, why] : {std::pair<const char*, const char*>{"mode", "timing is always paired with the reference "
                                     "(separate timing was removed; bench/noise_bench keeps it as its baseline)"},
                                 {"layouts", "process layouts were removed; eval_config.timing.processes repeats the "
                                     "paired phase in fresh processes"},
                                 {"layout_block", "process layouts were removed"}}) {
    if (o.contains(key)) {
      throw Error(ErrorKind::kInvalidArgument, std::string("expected no '") + key + "': " + why, "config.yaml",
                  std::string("eval_config.timing.") + key);
    }
  }
  // eval_config.timing.processes: paired runs per candidate that always run, each a fresh test process, merged at
  // the process level (pipeline/paired_processes.hpp). With one process, 9 of 20 intervals of identical
  // candidates under a CPU hog missed 1.00 (a per-process offset); with three, 40 of 40 covered it
  // (bench/noise_bench, 2026-12-01, README). eval_config.timing.max_processes: more
  // processes run while the merged interval misses the target and the budget allows, each with budget_s /
  // max_processes of loop time (its default and why: ProcessPlan::FromJson, paired_processes.cc).
  // $KF_TIMING_PROCESSES changes the default machine-wide (a CI run that needs verdicts, not precision).
  const bool explicit_processes = o.contains("processes");
  if (!explicit_processes) {
    o["processes"] = static_cast<int64_t>(TimingDefault("processes"));
    if (const char* env = std::getenv("KF_TIMING_PROCESSES"); env && *env) {
      const std::string text = env;
      const bool digits = text.size() <= 2 && std::all_of(text.begin(), text.end(), [](char c) {
        return c >= '0' && c <= '9';
      });
      const long n = digits ? std::stol(text) : 0;
      if (n < 1 || n > 16) {
        throw Error(ErrorKind::kInvalidArgument,
                    std::string("expected a whole number from 1 to 16, got '") + env + "'", "environment",
                    "KF_TIMING_PROCESSES");
      }
      o["processes"] = n;
    }
  }
  // eval_config.timing.l2_flush: cold-cache timing on a device (a buffer of 2 x L2 overwritten before every sample;
  // python/task/kernelfoundry/device_timing.py, sdk/device_timing.hpp), checked with the plugin's keys below.
  CheckTimingKeys(o);
  // max_processes below processes: a config that set both contradicts itself; one that set only max_processes
  // caps the default (or $KF_TIMING_PROCESSES) processes.
  if (o.contains("max_processes") && o["max_processes"].get<int64_t>() < o["processes"].get<int64_t>()) {
    if (explicit_processes) {
      throw Error(ErrorKind::kInvalidArgument,
                  "expected at least processes (" + o["processes"].dump() + "), got " + o["max_processes"].dump(),
                  "config.yaml", "eval_config.timing.max_processes");
    }
    o["processes"] = o["max_processes"];
  }
  return o;
}

// The 1-minute load average (from /proc/loadavg), or null.
Json LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  if (in >> one) return one;
  return nullptr;
}

// Emits the start and end events of one test phase around `run`.
PhaseRun RunPhase(const EvaluateOptions& options, Phase phase, const TestRequest& req,
                  const std::function<PhaseRun()>& run) {
  // A paired run times both variants in one process: its events name both ("custom+reference").
  const std::string who = req.paired_with ? req.variant.key + "+" + req.paired_with->key : req.variant.key;
  if (options.progress) options.progress(PhaseEvent{phase, who, req.gpu_arch, false, false, 0, ""});
  PhaseRun out = run();
  if (options.progress) {
    // A correct-family verdict (noisy included) is a passed phase; its detail still shows.
    const bool ok = IsCorrectFamily(out.verdict.status);
    std::string note;
    if (out.verdict.status != EvalStatus::kCorrect) {
      note = std::string(EvalStatusName(out.verdict.status)) +
             (out.verdict.detail.empty() ? "" : ": " + out.verdict.detail);
    }
    options.progress(PhaseEvent{phase, who, req.gpu_arch, true, ok, out.wall_s, note});
  }
  return out;
}

// The paired performance phase in `processes` fresh test processes, each with 1/processes of the time budget
// and its own input values (seed + index), merged at the process level (pipeline/paired_processes.hpp). Stops
// at the first process whose verdict is not in the correct family: that is the candidate's verdict. Each
// process stops when its own interval reaches the target, but the merged one is wider (it carries the offsets
// between processes, with few degrees of freedom: Student's t(0.975, 2) = 4.30), so while the merged interval
// misses the target and another process fits in what is left of the budget, one more process runs, up to
// `max_processes` (regression, 2026-12-01: bias_relu fast.cpp was `noisy` at ±2.1 % after 5.5 s of a 20 s
// budget on a quiet machine: the phase stopped before "the target or the budget" as the issue asks).
/// Wall time (process starts included) after which no process is added for the interval, as a multiple of the
/// timing budget: 24 honest processes of the README example take 1.3-2.2x the budget.
constexpr double kMaxWallPerBudget = 3.0;

PhaseRun RunPairedProcesses(const EvaluateOptions& options, const Harness& harness, const TestRequest& req,
                            const paired_processes::ProcessPlan& plan) {
  const double budget = plan.timing.budget_s;
  const int64_t processes = plan.processes, max_processes = plan.max_processes;
  std::vector<PhaseRun> runs;
  double spent_s = 0;  // timing-loop seconds of the processes so far (the longest benchmark's in each)
  const auto started = std::chrono::steady_clock::now();  // wall time counts the processes' starts too
  for (int64_t i = 0; i == 0 || !options.stop.stop_requested(); ++i) {
    if (i >= processes) {
      // A process's loop ends with the round that crosses its share, so the last one that was planned for
      // may find a little less than its share left: 10 % slack. The budget counts loop time only, so the
      // processes for the interval also stop at kMaxWallPerBudget × budget of wall time: a candidate that slept
      // 3 s when imported made each of 24 processes 3 s longer (71 s for a 20 s budget, stranger test 2026-12-05).
      const double per_process = spent_s / static_cast<double>(i);
      if (i >= max_processes || spent_s + per_process > 1.1 * budget ||
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() >
              kMaxWallPerBudget * budget ||
          paired_processes::ReachedTarget(runs, plan.timing)) {
        break;
      }
    }
    TestRequest one = req;
    one.timing_options["budget_s"] = plan.ProcessBudget();
    one.timing_options["seed"] = plan.timing.seed + static_cast<uint64_t>(i);
    EvaluateOptions numbered = options;  // progress names the process: "custom+reference [2/3]"
    if (options.progress) {
      numbered.progress = [&, i](const PhaseEvent& e) {
        PhaseEvent named = e;
        named.variant += i < processes ? fmt::format(" [{}/{}]", i + 1, processes)
                                       : fmt::format(" [{}/{}, for the interval]", i + 1, max_processes);
        options.progress(named);
      };
    }
    runs.push_back(RunPhase(numbered, Phase::kPerformance, one, [&] { return harness.Performance(one); }));
    double loop_s = 0;
    if (runs.back().timing) {
      for (const auto& [name, record] : runs.back().timing->records) loop_s = std::max(loop_s, record.elapsed_s);
    }
    spent_s += loop_s > 0 ? loop_s : runs.back().wall_s;
    if (!IsCorrectFamily(runs.back().verdict.status) || !runs.back().timing) break;
  }
  return paired_processes::MergeRuns(std::move(runs), plan.timing);
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

void ValidateTestConfig(const Task& task) {
  // eval_config itself: a mapping or nothing (stranger test, 2026-12-05: `eval_config:` with the single line
  // `threads:1` under it is the string "threads:1", and `eval_config: 5` was valid, every setting silently lost).
  if (const auto e = task.config.find("eval_config"); e != task.config.end() && !e->is_null() && !e->is_object()) {
    throw Error(ErrorKind::kInvalidArgument, "expected a mapping (threads, timing, …), got " + e->dump() +
                                                 ColonValueHint(*e),
                "config.yaml", "eval_config");
  }
  TimedConditionsFromConfig(task.config);
  (void)IsolateCandidate(task.config);
  TimingOptions(task, HarnessLimits::FromConfig(task.config));
  // The profile flags too: the profile stage reads them only after the timing, so a mistyped one would cost a
  // whole evaluation first (or, without a profiler pass, never be noticed).
  for (const char* variant : {"custom", "reference"}) (void)ShouldProfileVariant(task.config, variant, std::nullopt);
}

TestStageResult RunTestStage(const Harness& harness, const Task& task, const std::vector<TestVariant>& variants,
                             const std::vector<std::string>& archs, const EvaluateOptions& options) {
  TestStageResult out;
  const HarnessLimits limits = HarnessLimits::FromConfig(task.config);
  Json runtime_params = nullptr;
  if (task.hyperparameters.is_object() && task.hyperparameters.contains("runtime")) {
    runtime_params = task.hyperparameters["runtime"];
  }
  const TimedConditions conditions = TimedConditionsFromConfig(task.config);
  const bool isolate = IsolateCandidate(task.config);
  std::map<std::string, std::string> env = conditions.env;
  env["KF_CACHE_DIR"] = std::filesystem::absolute(DefaultCacheDir()).string();
  if (std::string m = MeasureOptionsJson(task.config); !m.empty()) env["KERNELFOUNDRY_MEASURE_OPTIONS"] = m;
  for (const auto& [k, v] : options.test_env) env[k] = v;
  Json timing_options = TimingOptions(task, limits);
  const paired_processes::ProcessPlan plan = paired_processes::ProcessPlan::FromJson(timing_options);
  timing_options.erase("processes");
  timing_options.erase("max_processes");
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
    auto request = [&](const TestVariant& variant) {
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
      req.timing_options = timing_options;
      return req;
    };
    // 1. Correctness of every variant (the device shared).
    std::vector<std::pair<std::string, VariantRun>> runs;
    for (const TestVariant& variant : variants) {
      if (options.stop.stop_requested()) break;
      DeviceSlots::Lease lease = slots.ForTest(arch, options.stop);
      if (!lease.held()) break;
      TestRequest req = request(variant);
      req.expected_tests = task.correctness_tests;
      // The candidate's modules in an executor: on the host only (the executor shares CPU tensors).
      req.isolate_candidate = isolate && !variant.reference && DeviceSlots::DeviceOf(arch) == "host";
      PhaseRun c = RunPhase(options, Phase::kCorrectness, req, [&] { return harness.Correctness(req); });
      VariantRun run;
      run.candidate_process = std::move(c.candidate_process);
      if (run.candidate_process.empty() && !variant.reference && !req.isolate_candidate &&
          harness.Name() == "pytest") {
        run.candidate_process = !isolate ? "test process: eval_config.candidate_process is test_process"
                                         : "test process: the run is on " + arch + ", not the host";
      }
      run.result.correctness_result = std::move(c.result);
      run.correctness = std::move(c.verdict);
      run.correctness_s = c.wall_s;
      runs.emplace_back(variant.key, std::move(run));
    }
    // 2. Performance (the device exclusive): each passing candidate variant timed against the reference in
    // one process (paired) when the reference passed too; else alone. The reference is timed alone only in
    // a reference-only run.
    const TestVariant* reference = nullptr;
    VariantRun* reference_run = nullptr;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (variants[i].reference) {
        reference = &variants[i];
        reference_run = &runs[i].second;
      }
    }
    const bool reference_ok = reference_run && reference_run->correctness->status == EvalStatus::kCorrect;
    bool any_candidate = false;
    for (size_t i = 0; i < runs.size(); ++i) {
      VariantRun& run = runs[i].second;
      if (variants[i].reference) continue;
      any_candidate = true;
      if (run.correctness->status != EvalStatus::kCorrect || options.stop.stop_requested() ||
          options.correctness_only) {
        continue;
      }
      DeviceSlots::Lease lease = slots.ForTiming(arch, options.stop);
      if (!lease.held()) break;
      TestRequest req = request(variants[i]);
      req.expected_tests = task.profile_tests;
      if (reference_ok) req.paired_with = *reference;
      const Json load_before = LoadAverage();
      // Regression (stranger test, 2026-12-04): `processes: 1, max_processes: 2` ran one process with the whole
      // budget; the processes path decides on max_processes.
      PhaseRun p = req.paired_with && plan.max_processes > 1
                       ? RunPairedProcesses(options, harness, req, plan)
                       : RunPhase(options, Phase::kPerformance, req, [&] { return harness.Performance(req); });
      run.result.performance_result = std::move(p.result);
      run.performance = std::move(p.verdict);
      run.performance_s = p.wall_s;
      if (p.timing) {
        run.timing = std::move(p.timing);
        Json& c = run.timing->conditions;
        c["load_before"] = load_before;
        c["load_after"] = LoadAverage();
        c["threads"] = conditions.threads;
        c["allocator"] = conditions.allocator;
      }
      if (p.reference_result && reference_run) {
        reference_run->result.performance_result = std::move(p.reference_result);
        reference_run->performance = std::move(p.reference_verdict);
        reference_run->performance_s = p.wall_s;
      }
    }
    if (reference_ok && !any_candidate && !options.stop.stop_requested() && !options.correctness_only) {
      DeviceSlots::Lease lease = slots.ForTiming(arch, options.stop);
      if (lease.held()) {
        TestRequest req = request(*reference);
        req.expected_tests = task.profile_tests;
        PhaseRun p = RunPhase(options, Phase::kPerformance, req, [&] { return harness.Performance(req); });
        reference_run->result.performance_result = std::move(p.result);
        reference_run->performance = std::move(p.verdict);
        reference_run->performance_s = p.wall_s;
      }
    }
    // 3. Profiler passes (trace_results): after every timed phase of this arch, each under its own timing
    // lease, in separate processes, so they never overlap a timed run nor count in its runtimes.
    for (size_t i = 0; i < runs.size(); ++i) {
      VariantRun& run = runs[i].second;
      TestRequest req = request(variants[i]);
      run.result.trace_results = ProfileVariant(harness, task, req, run, options, slots, &run.profile_s);
    }
    for (auto& [key, run] : runs) run.result.worker_info = GetWorkerInfo(harness.Name());
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
