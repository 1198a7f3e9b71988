// Harness factory and the helpers every harness shares: limits from config, artifact collection (B15),
// termination messages, the task-side Python and the persistent cache directory.
#include "kernelfoundry/harness.hpp"

#include <sys/stat.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/resources.hpp"

namespace kf {
namespace fs = std::filesystem;

const char* BuildTargetName(BuildTarget target) {
  return target == BuildTarget::kCandidate ? "custom" : "reference";
}

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kBuildCandidate: return "build candidate";
    case Phase::kBuildReference: return "build reference";
    case Phase::kCorrectness: return "correctness";
    case Phase::kPerformance: return "performance";
  }
  return "unknown";
}

const char* PhaseOutcomeName(PhaseOutcome outcome) {
  switch (outcome) {
    case PhaseOutcome::kNotRun: return "not_run";
    case PhaseOutcome::kPassed: return "passed";
    case PhaseOutcome::kTestsFailed: return "tests_failed";
    case PhaseOutcome::kError: return "error";
    case PhaseOutcome::kTimedOut: return "timed_out";
    case PhaseOutcome::kInactive: return "inactive";
    case PhaseOutcome::kKilled: return "killed";
    case PhaseOutcome::kSpawnFailed: return "spawn_failed";
    case PhaseOutcome::kNoRuntimes: return "no_runtimes";
  }
  return "unknown";
}

namespace {

// Reads config[key] as seconds. Absent -> nullopt (keep default). null/0 -> `zero` (0 ms). Bad -> Error.
std::optional<std::chrono::milliseconds> ConfigSeconds(const Json& config, const char* key, bool* present) {
  *present = false;
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  *present = true;
  const Json& v = config.at(key);
  if (v.is_null()) return std::chrono::milliseconds{0};
  if (!v.is_number()) {
    throw Error(ErrorKind::kInvalidArgument, "expected a number of seconds, got " + DumpJson(v), "config.yaml",
                key);
  }
  double s = v.get<double>();
  if (!std::isfinite(s) || s < 0 || s > 1e7) {
    throw Error(ErrorKind::kInvalidArgument, "expected a number of seconds in [0, 1e7], got " + DumpJson(v),
                "config.yaml", key);
  }
  return std::chrono::milliseconds{static_cast<int64_t>(std::llround(s * 1000.0))};
}

std::string FormatSeconds(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000);
  return fmt::format("{:g}", static_cast<double>(ms.count()) / 1000.0);
}

}  // namespace

HarnessLimits HarnessLimits::FromConfig(const Json& config) {
  HarnessLimits limits;
  bool present = false;
  // Wall-clock limits: null or 0 fall back to the default (the reference's `timeout or 120`).
  if (auto v = ConfigSeconds(config, "build_timeout", &present); v && v->count() > 0) limits.build_timeout = *v;
  if (auto v = ConfigSeconds(config, "test_timeout", &present); v && v->count() > 0) limits.test_timeout = *v;
  // Inactivity limits: null or 0 disable.
  if (auto v = ConfigSeconds(config, "build_output_inactivity_timeout", &present); present) {
    limits.build_inactivity_timeout = v->count() > 0 ? v : std::nullopt;
  }
  if (auto v = ConfigSeconds(config, "test_output_inactivity_timeout", &present); present) {
    limits.test_inactivity_timeout = v->count() > 0 ? v : std::nullopt;
  }
  return limits;
}

std::unique_ptr<Harness> MakeHarness(const Task& task) {
  std::string name;
  if (task.config.is_object() && task.config.contains("harness") && !task.config["harness"].is_null()) {
    const Json& h = task.config["harness"];
    if (!h.is_string()) {
      throw Error(ErrorKind::kInvalidArgument, "expected a string (pytest or native), got " + DumpJson(h),
                  "config.yaml", "harness");
    }
    name = h.get<std::string>();
  }
  if (name.empty()) {
    if (!task.task_data.Contains("task.py")) {
      throw Error(ErrorKind::kInvalidArgument,
                  "the task has no task.py and names no harness (set `harness: pytest` or `harness: native`)",
                  "config.yaml", "harness");
    }
    name = "pytest";
  }
  if (name == "pytest") return MakePytestHarness();
  if (name == "native") {
    // Config mistakes are the task's, not the candidate's: refuse before building anything (kf run: exit 3).
    std::vector<ConfigProblem> problems = ConfigProblems(task.config, task.task_data);
    if (!problems.empty()) {
      throw Error(ErrorKind::kInvalidArgument, problems.front().message, "config.yaml", problems.front().field);
    }
    return MakeNativeHarness(task.config);
  }
  throw Error(ErrorKind::kUnsupported, "unknown harness '" + name + "' (expected pytest or native)",
              "config.yaml", "harness");
}

namespace {

// The key of `path` (canonical) inside `root` (canonical); kUnsafe when it lies outside.
std::string KeyInside(const fs::path& path, const fs::path& root, const std::string& given) {
  fs::path rel = path.lexically_relative(root);
  std::string key = rel.generic_string();
  if (rel.empty() || key == "." || key == ".." || key.rfind("../", 0) == 0) {
    throw Error(ErrorKind::kUnsafe, "artifact resolves to " + path.string() + ", outside the task tree " +
                                        root.string(), "artifacts.json", given);
  }
  return key;
}

void AddArtifactFile(MemoryFileMap& out, const fs::path& file, const fs::path& root, const std::string& given) {
  std::string key = KeyInside(file, root, given);
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    throw Error(ErrorKind::kIO, std::string("cannot stat artifact: ") + std::strerror(errno), "artifacts.json",
                given);
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIO, "cannot read artifact " + file.string(), "artifacts.json", given);
  std::ostringstream ss;
  ss << in.rdbuf();
  FileMeta meta;
  meta.mode = static_cast<uint32_t>(st.st_mode & 0777);
  meta.mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
  out.Set(key, ss.str(), meta);
}

}  // namespace

MemoryFileMap CollectArtifacts(const fs::path& task_dir, const std::vector<std::string>& paths) {
  std::error_code ec;
  fs::path root = fs::canonical(task_dir, ec);
  if (ec) throw Error(ErrorKind::kIO, "cannot resolve the task tree: " + ec.message(), task_dir.string());
  MemoryFileMap out;
  for (const std::string& given : paths) {
    if (given.empty()) {
      throw Error(ErrorKind::kInvalidArgument, "empty artifact path", "artifacts.json", "artifacts");
    }
    fs::path p(given);
    if (p.is_relative()) p = root / p;
    if (!fs::exists(p, ec)) {
      throw Error(ErrorKind::kNotFound, "artifact does not exist (looked for " + p.lexically_normal().string() +
                                            ")", "artifacts.json", given);
    }
    fs::path resolved = fs::canonical(p, ec);
    if (ec) throw Error(ErrorKind::kIO, "cannot resolve artifact: " + ec.message(), "artifacts.json", given);
    if (fs::is_directory(resolved)) {
      if (resolved == root) {
        throw Error(ErrorKind::kInvalidArgument, "the artifact is the whole task tree", "artifacts.json", given);
      }
      KeyInside(resolved, root, given);  // a directory outside the tree is refused as a whole
      for (auto it = fs::recursive_directory_iterator(resolved, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        if (!it->is_regular_file()) continue;
        AddArtifactFile(out, fs::canonical(it->path()), root, given);
      }
      if (ec) throw Error(ErrorKind::kIO, "cannot list artifact directory: " + ec.message(), "artifacts.json", given);
    } else if (fs::is_regular_file(resolved)) {
      AddArtifactFile(out, resolved, root, given);
    } else {
      throw Error(ErrorKind::kUnsafe, "artifact is not a regular file or directory", "artifacts.json", given);
    }
  }
  return out;
}

std::optional<std::string> TerminationMessage(const ProcessRun& run, const ProcessOptions& options) {
  switch (run.reason) {
    case TerminationReason::kExited: return std::nullopt;
    case TerminationReason::kSignaled: {
      int sig = -run.result.returncode;
      const char* name = sig > 0 ? sigabbrev_np(sig) : nullptr;
      return fmt::format("Process terminated by signal {}{}", sig, name ? fmt::format(" (SIG{})", name) : "");
    }
    case TerminationReason::kWallTimeout:
      return "Process timed out after " +
             FormatSeconds(options.wall_timeout.value_or(std::chrono::milliseconds{0})) + " seconds";
    case TerminationReason::kInactivity: return "Process killed due to inactivity";
    case TerminationReason::kEndMarkerGrace:
      return "Process did not exit within " +
             FormatSeconds(options.end_marker ? options.end_marker->grace : std::chrono::milliseconds{0}) +
             " seconds after its end marker and was terminated";
    case TerminationReason::kMemoryLimit: return "Process killed: memory limit exceeded";
    case TerminationReason::kOutputLimit: return "Process killed: output limit exceeded";
    case TerminationReason::kCpuLimit: return "Process killed: CPU time limit exceeded";
    case TerminationReason::kProcessLimit: return "Process killed: process limit exceeded";
    case TerminationReason::kFileSizeLimit: return "Process killed: file size limit exceeded";
    case TerminationReason::kSpawnFailed:
      return run.result.message && !run.result.message->empty() ? *run.result.message
                                                                 : std::string("Process could not be started");
  }
  return std::nullopt;
}

std::string TaskPython() { return TaskPythonInterpreter(); }

fs::path TaskPythonPath() { return TaskPythonDir().path; }

}  // namespace kf
