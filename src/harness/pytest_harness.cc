// The pytest harness: reference-format tasks (task.py with a kernelfoundry.TestBase class, conftest.py that
// loads the kernelfoundry pytest plugin). Builds run the task's build hooks through
// `python -m kernelfoundry.build_target`; tests run pytest twice per variant (correctness, then — only when
// it passed — performance with --performance-out). Reference spec §4.3 steps 6–7 and §4.4 step 8, with
// B14 (termination message kept, output never replaced), B15 (artifact paths resolved in the task tree,
// missing ones are errors) and the end-marker bug (a passing run killed after its summary stays passing)
// fixed.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "harness/isolation.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/harness.hpp"

namespace kf {
namespace fs = std::filesystem;

namespace {

std::string ReadText(const fs::path& p, bool* ok) {
  std::ifstream in(p, std::ios::binary);
  *ok = static_cast<bool>(in);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.good()) throw Error(ErrorKind::kIO, "cannot write file", p.string());
}

// The environment of every task-side Python child: unbuffered output, no bytecode files in the task tree,
// the persistent cache; then the caller's additions. PYTHONPATH gets the package dir via pythonpath_prepend.
std::map<std::string, std::string> PythonEnv(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  env["PYTHONUNBUFFERED"] = "1";
  env["PYTHONDONTWRITEBYTECODE"] = "1";
  env["KF_CACHE_DIR"] = std::filesystem::absolute(DefaultCacheDir()).string();
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

std::string JoinNotes(const std::optional<std::string>& a, const std::string& b) {
  if (!a || a->empty()) return b;
  return *a + "\n" + b;
}

// The exit code pytest's final summary line implies: 0 all passed (or only skipped/deselected), 1 some
// failed or errored, 5 no tests ran; nullopt when there is no summary line.
std::optional<int> SummaryExitCode(const std::string& stdout_text) {
  static const std::regex kSummary(R"(^=+ (.*) in [0-9.]+s.*=+\s*$)");
  size_t end = stdout_text.size();
  int lines_checked = 0;
  while (end > 0 && lines_checked < 200) {
    size_t start = stdout_text.rfind('\n', end - 1);
    size_t from = start == std::string::npos ? 0 : start + 1;
    std::string line = stdout_text.substr(from, end - from);
    end = start == std::string::npos ? 0 : start;
    ++lines_checked;
    std::smatch m;
    if (!std::regex_match(line, m, kSummary)) continue;
    std::string counts = m[1];
    if (counts.find("no tests ran") != std::string::npos) return 5;
    static const std::regex kBad(R"(\b[0-9]+ (failed|errors?)\b)");
    if (std::regex_search(counts, kBad)) return 1;
    static const std::regex kCount(R"(\b[0-9]+ (passed|skipped|deselected|xfailed|xpassed|warnings?|rerun)\b)");
    if (std::regex_search(counts, kCount)) return 0;
    return std::nullopt;
  }
  return std::nullopt;
}

// Runs one pytest invocation and classifies it. Emits the phase's progress events.
struct PhaseRun {
  ProcessResult result;
  PhaseOutcome outcome = PhaseOutcome::kNotRun;
  TerminationReason reason = TerminationReason::kExited;
  double wall_s = 0;
};

// `run_dir`: the run's private directory, the only place it may write (isolation.hpp).
PhaseRun RunPytestPhase(const TestRequest& req, Phase phase, std::vector<std::string> argv,
                        const fs::path& run_dir) {
  ProcessOptions o;
  o.argv = std::move(argv);
  o.cwd = req.task_dir;
  std::map<std::string, std::string> extra = req.env;
  extra["KERNELFOUNDRY_TEST"] = "1";
  o.env_add = PythonEnv(extra);
  o.pythonpath_prepend = {TaskPythonPath().string()};
  o.wall_timeout = req.limits.test_timeout;
  o.inactivity_timeout = req.limits.test_inactivity_timeout;
  o.end_marker = EndMarker{"pytest", req.limits.end_marker_grace};
  o.on_line = req.on_line;
  IsolateChild(o, {}, run_dir);

  if (req.progress) req.progress(PhaseEvent{phase, req.variant.key, req.gpu_arch, false, false, 0, ""});
  ProcessRun run = RunProcess(o);
  PhaseRun out;
  out.result = run.result;
  out.reason = run.reason;
  out.wall_s = run.wall_seconds;
  out.result.message = TerminationMessage(run, o);
  switch (run.reason) {
    case TerminationReason::kExited:
      out.outcome = run.result.returncode == 0   ? PhaseOutcome::kPassed
                    : run.result.returncode == 1 ? PhaseOutcome::kTestsFailed
                                                 : PhaseOutcome::kError;
      break;
    case TerminationReason::kEndMarkerGrace: {
      // pytest finished (its summary is out) but the process hung, e.g. in a non-daemon thread. Judge the
      // run by its summary; the reference scored a passing run as a crash here.
      std::optional<int> code = SummaryExitCode(run.result.stdout_text);
      out.result.returncode = code.value_or(run.result.returncode);
      if (code == 0) {
        out.outcome = PhaseOutcome::kPassed;
        out.result.message = "All tests passed but the process did not exit cleanly and had to be terminated.";
      } else {
        out.outcome = code == 1 ? PhaseOutcome::kTestsFailed : PhaseOutcome::kError;
      }
      break;
    }
    case TerminationReason::kSignaled: out.outcome = PhaseOutcome::kError; break;
    case TerminationReason::kWallTimeout: out.outcome = PhaseOutcome::kTimedOut; break;
    case TerminationReason::kInactivity: out.outcome = PhaseOutcome::kInactive; break;
    case TerminationReason::kMemoryLimit:
    case TerminationReason::kOutputLimit:
    case TerminationReason::kCpuLimit:
    case TerminationReason::kProcessLimit:
    case TerminationReason::kFileSizeLimit: out.outcome = PhaseOutcome::kKilled; break;
    case TerminationReason::kSpawnFailed: out.outcome = PhaseOutcome::kSpawnFailed; break;
  }
  return out;
}

void EmitDone(const TestRequest& req, Phase phase, const PhaseRun& r) {
  if (!req.progress) return;
  std::string note;
  if (r.outcome != PhaseOutcome::kPassed) {
    note = r.result.message && !r.result.message->empty()
               ? *r.result.message
               : std::string(PhaseOutcomeName(r.outcome)) + " (exit " + std::to_string(r.result.returncode) + ")";
  }
  req.progress(PhaseEvent{phase, req.variant.key, req.gpu_arch, true, r.outcome == PhaseOutcome::kPassed,
                          r.wall_s, note});
}

class PytestHarness final : public Harness {
 public:
  std::string_view Name() const override { return "pytest"; }

  BuildRun Build(const BuildRequest& req) const override {
    const fs::path input = req.work_dir / "input.json";
    const fs::path output = req.work_dir / "artifacts.json";
    Json in = Json::object();
    in["gpu_arch"] = req.gpu_arch;
    in["hyperparameters"] = req.hyperparameters;
    WriteText(input, DumpJson(in, 4));
    std::error_code ec;
    fs::remove(output, ec);

    ProcessOptions o;
    o.argv = {TaskPython(), "-u", "-m", "kernelfoundry.build_target", "--config", input.string(),
              "--build_function", req.target == BuildTarget::kCandidate ? "build" : "build_reference",
              "--output", output.string()};
    o.cwd = req.task_dir;
    std::map<std::string, std::string> extra = req.env;
    extra["KERNELFOUNDRY_BUILD"] = "1";
    o.env_add = PythonEnv(extra);
    o.pythonpath_prepend = {TaskPythonPath().string()};
    o.wall_timeout = req.limits.build_timeout;
    o.inactivity_timeout = req.limits.build_inactivity_timeout;
    o.on_line = req.on_line;
    IsolateChild(o, {req.work_dir}, req.work_dir / "tmp");

    ProcessRun run = RunProcess(o);
    BuildRun out;
    out.reason = run.reason;
    out.wall_s = run.wall_seconds;
    ProcessResult r = run.result;
    std::optional<std::string> note = TerminationMessage(run, o);
    if (run.reason != TerminationReason::kExited || r.returncode != 0) {
      // B14 fixed: the termination note ("timed out", "inactivity") stays in front of the failure line.
      r.message = JoinNotes(note, "Build failed with non-zero return code");
      out.result.result = std::move(r);
      return out;
    }
    auto fail = [&](const std::string& why) {
      r.returncode = -1;  // the reference's code for a pipeline-side failure; stdout/stderr are kept (B14)
      r.message = "Build failed with error: " + why;
      out.result.result = r;
      return out;
    };
    bool ok = false;
    std::string text = ReadText(output, &ok);
    if (!ok) return fail("the build target wrote no " + output.filename().string());
    Json doc;
    try {
      doc = ParseJson(text, output.string());
    } catch (const Error& e) {
      return fail(e.what());
    }
    if (!doc.is_object() || !doc.contains("artifacts")) {
      return fail(output.filename().string() + " has no \"artifacts\" key");
    }
    const Json& list = doc["artifacts"];
    if (list.is_null()) {
      r.message = "No artifacts were produced during build";
      out.result.result = r;
      return out;
    }
    std::vector<std::string> paths;
    if (list.is_string()) {
      paths.push_back(list.get<std::string>());
    } else if (list.is_array()) {
      for (const Json& p : list) {
        if (!p.is_string()) return fail("artifact paths must be strings, got " + DumpJson(p));
        paths.push_back(p.get<std::string>());
      }
    } else {
      return fail("\"artifacts\" must be a list of paths, got " + DumpJson(list));
    }
    try {
      out.result.artifacts = CollectArtifacts(req.task_dir, paths);
    } catch (const Error& e) {
      return fail(e.what());
    }
    r.message = "Build completed successfully";
    out.result.result = std::move(r);
    return out;
  }

  VariantRun Test(const TestRequest& req) const override {
    std::vector<std::string> options;
    if (req.variant.reference) options.push_back("--ref");
    if (req.variant.template_params) {
      options.push_back("--is_templated");
      options.push_back("--template_params=" + DumpJson(*req.variant.template_params));
    }
    if (req.runtime_params.is_object() && !req.runtime_params.empty()) {
      options.push_back("--runtime_params=" + DumpJson(req.runtime_params));
    }
    auto base = [&](const std::string& marker) {
      std::vector<std::string> argv = {TaskPython(), "-u", "-m", "pytest", "--color=no", "-p", "no:cacheprovider",
                                       "-m", marker};
      return argv;
    };

    VariantRun out;
    std::vector<std::string> argv = base("not performance");
    argv.insert(argv.end(), options.begin(), options.end());
    argv.push_back("task.py");
    PhaseRun correctness =
        RunPytestPhase(req, Phase::kCorrectness, argv, req.work_dir / ("run_" + req.variant.key + "_correctness"));
    EmitDone(req, Phase::kCorrectness, correctness);
    out.correctness = correctness.outcome;
    out.correctness_stop = correctness.reason;
    out.correctness_s = correctness.wall_s;
    out.result.correctness_result = std::move(correctness.result);
    if (out.correctness != PhaseOutcome::kPassed) return out;

    // The runtimes file lives in the run's private directory (recreated empty by RunPytestPhase).
    const fs::path perf_dir = req.work_dir / ("run_" + req.variant.key + "_performance");
    const fs::path runtimes = perf_dir / ("runtimes_" + req.variant.key + ".json");
    argv = base("performance");
    argv.push_back("--performance-out=" + runtimes.string());
    argv.insert(argv.end(), options.begin(), options.end());
    argv.push_back("task.py");
    PhaseRun perf = RunPytestPhase(req, Phase::kPerformance, argv, perf_dir);
    if (perf.outcome == PhaseOutcome::kPassed) {
      bool ok = false;
      std::string text = ReadText(runtimes, &ok);
      std::string why;
      Json data;
      if (!ok) {
        why = "the file was not written";
      } else {
        try {
          data = ParseJson(text, runtimes.string());
          if (!data.is_object()) why = "expected a JSON object {node id: [ms, ...]}";
        } catch (const Error& e) {
          why = e.what();
        }
      }
      if (why.empty()) {
        perf.result.output_data = Json{{"runtimes", std::move(data)}};
      } else {
        perf.outcome = PhaseOutcome::kNoRuntimes;
        perf.result.returncode = -1;
        perf.result.message = JoinNotes(perf.result.message,
                                        "Failed to read profile output file: " + runtimes.string() + ": " + why);
      }
    }
    EmitDone(req, Phase::kPerformance, perf);
    out.performance = perf.outcome;
    out.performance_stop = perf.reason;
    out.performance_s = perf.wall_s;
    out.result.performance_result = std::move(perf.result);
    return out;
  }
};

}  // namespace

std::unique_ptr<Harness> MakePytestHarness() { return std::make_unique<PytestHarness>(); }

}  // namespace kf
