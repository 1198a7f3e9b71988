// What every harness shares: names, limits from config, the pytest end marker, artifact collection (B15),
// the task-side Python, and the ProcessOptions of build and test runs. The kind table is in kinds.cc.
#include "kernelfoundry/harness.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/files.hpp"
#include "harness/harness_internal.hpp"
#include "harness/isolation.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/pytest_summary.hpp"
#include "kernelfoundry/resources.hpp"
#include "kernelfoundry/test_discovery.hpp"

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
    case Phase::kProfile: return "profile";
  }
  return "unknown";
}

namespace {

// A memory limit as given (bytes; 0 = none): below 16 MiB no interpreter or compiler starts, so every run, the
// reference's too, would fail. Throws kf::Error(kInvalidArgument) naming `file`/`field`.
std::optional<uint64_t> CheckedMemoryLimit(uint64_t bytes, const char* file, const char* field) {
  if (bytes > 0 && bytes < (uint64_t{16} << 20)) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("expected at least 16M (or off for none), got {} bytes", bytes),
                file, field);
  }
  return bytes > 0 ? std::optional(bytes) : std::nullopt;
}

// A process limit as given (tasks; 0 = none): above the kernel's PID_MAX_LIMIT (4,194,304 on 64-bit Linux) the pids
// cgroup refuses the value and the run would go without a limit while the verdict named one (stranger test,
// 2026-12-04: `process_limit: 4294967296`). Throws kf::Error(kInvalidArgument) naming `file`/`field`.
std::optional<uint64_t> CheckedProcessLimit(uint64_t tasks, const char* file, const char* field) {
  constexpr uint64_t kPidMaxLimit = uint64_t{4} << 20;
  if (tasks > kPidMaxLimit) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("expected at most {} (the kernel's largest number of tasks), got {}", kPidMaxLimit, tasks),
                file, field);
  }
  return tasks > 0 ? std::optional(tasks) : std::nullopt;
}

}  // namespace

HarnessLimits HarnessLimits::FromConfig(const Json& config) {
  const ConfigView view(config);
  auto ms = [](double s) { return std::chrono::milliseconds{static_cast<int64_t>(std::llround(s * 1000.0))}; };
  HarnessLimits limits;
  // Wall-clock limits: null or 0 fall back to the default (the reference's `timeout or 120`).
  if (auto s = view.Seconds("build_timeout"); s && *s > 0) limits.build_timeout = ms(*s);
  if (auto s = view.Seconds("test_timeout"); s && *s > 0) limits.test_timeout = ms(*s);
  // Inactivity limits: null or 0 disable.
  if (auto s = view.Seconds("build_output_inactivity_timeout")) {
    limits.build_inactivity_timeout = *s > 0 ? std::optional(ms(*s)) : std::nullopt;
  }
  if (auto s = view.Seconds("test_output_inactivity_timeout")) {
    limits.test_inactivity_timeout = *s > 0 ? std::optional(ms(*s)) : std::nullopt;
  }
  if (auto b = view.Bytes("memory_limit")) limits.memory_limit_bytes = CheckedMemoryLimit(*b, "config.yaml", "memory_limit");
  if (auto n = view.Count("process_limit")) limits.process_limit = CheckedProcessLimit(*n, "config.yaml", "process_limit");
  return limits;
}

std::optional<uint64_t> HarnessLimits::DefaultProcessLimit() {
  const char* env = std::getenv("KF_PROCESS_LIMIT");
  if (env == nullptr || *env == '\0') return 4096;
  const std::string text = env;
  if (text == "off") return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || errno != 0 || text[0] == '-') {
    throw Error(ErrorKind::kInvalidArgument, "expected a whole number of processes or \"off\", got '" + text + "'",
                "environment", "KF_PROCESS_LIMIT");
  }
  return CheckedProcessLimit(n, "environment", "KF_PROCESS_LIMIT");
}

std::optional<uint64_t> HarnessLimits::DefaultMemoryLimit() {
  if (const char* env = std::getenv("KF_MEMORY_LIMIT"); env != nullptr && *env != '\0') {
    const std::string text = env;
    if (text == "off") return std::nullopt;
    const std::optional<uint64_t> bytes = ParseByteSize(text);
    if (!bytes) {
      throw Error(ErrorKind::kInvalidArgument, "expected a size like 16G or \"off\", got '" + text + "'",
                  "environment", "KF_MEMORY_LIMIT");
    }
    return CheckedMemoryLimit(*bytes, "environment", "KF_MEMORY_LIMIT");
  }
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::nullopt;
  return static_cast<uint64_t>(pages) / 4 * 3 * static_cast<uint64_t>(page);
}

std::optional<ProcessOptions> Harness::ProfileCommand(const TestRequest& /*request*/) const { return std::nullopt; }

std::unique_ptr<Harness> MakeHarness(const Task& task) { return HarnessDescriptorFor(task.config).make(task); }

EndMarker PytestEndMarker(std::chrono::milliseconds grace) {
  EndMarker m;
  m.grace = grace;
  m.match = [](std::string_view line) -> std::optional<std::string> {
    std::optional<PytestSummary> summary = ParsePytestSummaryLine(line);
    if (!summary) return std::nullopt;
    const bool all_passed = summary->Count("passed") > 0 && summary->Count("failed") == 0 &&
                            summary->Count("errors") == 0;
    return all_passed ? std::string("All tests passed but the process did not exit cleanly and had to be terminated.")
                      : std::string();
  };
  return m;
}

std::string TaskPython() { return TaskPythonInterpreter(); }

fs::path TaskPythonPath() { return TaskPythonDir().path; }

namespace harness_internal {

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
  std::optional<std::string> bytes = ReadFileBytes(file);
  if (!bytes) throw Error(ErrorKind::kIO, "cannot read artifact " + file.string(), "artifacts.json", given);
  FileMeta meta;
  meta.mode = static_cast<uint32_t>(st.st_mode & 0777);
  meta.mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
  out.Set(key, std::move(*bytes), meta);
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

std::map<std::string, std::string> PythonEnv(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  env["PYTHONUNBUFFERED"] = "1";
  env["PYTHONDONTWRITEBYTECODE"] = "1";
  env["KF_CACHE_DIR"] = fs::absolute(DefaultCacheDir()).string();
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

std::string JoinNotes(const std::optional<std::string>& a, const std::string& b) {
  if (!a || a->empty()) return b;
  return *a + "\n" + b;
}

// The memory and process limits of a build or test run's tree, through cgroups only (HarnessLimits).
static void ApplyTreeLimits(const HarnessLimits& limits, ProcessOptions& o) {
  o.memory_limit_bytes = limits.memory_limit_bytes;
  o.process_limit = limits.process_limit;
  o.cgroup_limits_only = true;
}

ProcessOptions TestProcessOptions(const TestRequest& req) {
  ProcessOptions o;
  o.cwd = req.task_dir;
  o.env_add = req.env;
  o.env_add["KERNELFOUNDRY_TEST"] = "1";
  o.wall_timeout = req.limits.test_timeout;
  o.inactivity_timeout = req.limits.test_inactivity_timeout;
  ApplyTreeLimits(req.limits, o);
  o.on_line = req.on_line;
  o.stop = req.stop;
  o.result_pipe = true;
  // Issue 10: a test run writes only a fresh private directory; the task tree (with the reference's
  // artifacts) and everything else stay read-only to the candidate. Issue 25: it reads only the task tree (shared
  // read-only with the sandbox user's group), the task-side resources and the system; the work dir is
  // traversable, not listable, for that group.
  OpenToChildren(req.work_dir);
  ShareWithChildren(req.task_dir);
  IsolateChild(o, {}, FreshRunDir(req.work_dir, "run_" + req.variant.key + "_"), {req.task_dir});
  return o;
}


ProcessOptions BuildProcessOptions(const BuildRequest& req) {
  ProcessOptions o;
  o.cwd = req.task_dir;
  o.env_add = req.env;
  o.env_add["KERNELFOUNDRY_BUILD"] = "1";
  o.wall_timeout = req.limits.build_timeout;
  o.inactivity_timeout = req.limits.build_inactivity_timeout;
  ApplyTreeLimits(req.limits, o);
  o.on_line = req.on_line;
  o.stop = req.stop;
  // Issue 10: a build writes only its own work dir (task tree, inputs, outputs, its private temp dir).
  // Issue 25: and reads only that, the task-side resources, what the stage names (precompiled headers) and
  // the system.
  IsolateChild(o, {req.work_dir}, req.work_dir / "tmp", req.readable);
  return o;
}

}  // namespace harness_internal

}  // namespace kf
