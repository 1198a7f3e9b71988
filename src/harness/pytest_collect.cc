// Pytest test discovery through our python package's collector (see pytest_collect.hpp).
#include "kernelfoundry/pytest_collect.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "core/files.hpp"
#include "core/sha256.hpp"
#include "core/strings.hpp"
#include "core/temp_dir.hpp"
#include "harness/isolation.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/process.hpp"
#include "kernelfoundry/resources.hpp"

namespace kf {
namespace {

constexpr std::string_view kPrefix = "KF_COLLECT_JSON:";
constexpr const char* kTaskFile = "task.py";

std::filesystem::path PythonDir(const PytestCollectOptions& options) {
  return options.python_dir.empty() ? TaskPythonDir().path : options.python_dir;
}

// One line of a collector error: its first line plus pytest's "E   ..." lines, else its last line.
std::string Summarise(const std::string& text) {
  std::vector<std::string> e_lines;
  std::string first, last;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::string t(Trim(line));
    if (t.empty()) continue;
    if (first.empty()) first = t;
    last = t;
    if (t.size() > 1 && t[0] == 'E' && (t[1] == ' ' || t[1] == '\t')) {
      e_lines.emplace_back(Trim(std::string_view(t).substr(1)));
    }
  }
  if (e_lines.empty()) return first == last || first.empty() ? last : first + ": " + last;
  std::string out;
  for (const std::string& l : e_lines) out += (out.empty() ? "" : " | ") + l;
  return first.rfind("ERROR", 0) == 0 ? first + ": " + out : out;
}

std::string ErrorText(const Json& e) {
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object()) {  // tolerate {"nodeid": ..., "message"/"longrepr": ...}
    std::string text;
    for (const char* key : {"message", "longrepr", "error", "text"})
      if (e.contains(key) && e[key].is_string()) text = e[key].get<std::string>();
    if (text.empty()) text = e.dump();
    if (e.contains("nodeid") && e["nodeid"].is_string() && !e["nodeid"].get<std::string>().empty())
      return e["nodeid"].get<std::string>() + ": " + text;
    return text;
  }
  return e.dump();
}

std::string StripTaskPrefix(std::string nodeid) {
  for (std::string_view prefix : {"./task.py::", "task.py::"})
    if (nodeid.rfind(prefix, 0) == 0) return nodeid.substr(prefix.size());
  return nodeid;
}

void ReplaceAll(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
}

}  // namespace

TestLists ParseCollectOutput(const std::string& stdout_text, const std::string& stderr_text) {
  std::optional<std::string> payload;
  std::istringstream in(stdout_text);
  for (std::string line; std::getline(in, line);) {
    size_t at = line.find(kPrefix);
    if (at != std::string::npos) payload = line.substr(at + kPrefix.size());
  }
  if (!payload) {
    std::string why = Summarise(stderr_text);
    if (why.empty()) why = Summarise(stdout_text);
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("test collection failed (no result from the collector): {}", why.empty() ? "no output" : why),
                kTaskFile);
  }
  Json j;
  try {
    j = Json::parse(*payload);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kInternal, fmt::format("unreadable collector output: {}", e.what()), kTaskFile);
  }
  if (!j.is_object() || !j.contains("tests") || !j["tests"].is_array())
    throw Error(ErrorKind::kInternal, "collector output has no 'tests' list", kTaskFile);
  if (j.contains("errors") && j["errors"].is_array() && !j["errors"].empty()) {
    std::string joined;
    for (const Json& e : j["errors"]) joined += (joined.empty() ? "" : "; ") + Summarise(ErrorText(e));
    if (joined.find("see stderr") != std::string::npos && !Trim(stderr_text).empty())
      joined += ": " + Summarise(stderr_text);
    throw Error(ErrorKind::kInvalidArgument, fmt::format("test collection failed: {}", joined), kTaskFile);
  }
  TestLists lists;
  for (const Json& t : j["tests"]) {
    if (!t.is_object() || !t.contains("nodeid") || !t["nodeid"].is_string())
      throw Error(ErrorKind::kInternal, fmt::format("collector test entry without nodeid: {}", t.dump()), kTaskFile);
    std::string id = StripTaskPrefix(t["nodeid"].get<std::string>());
    bool perf = t.contains("performance") && t["performance"].is_boolean() && t["performance"].get<bool>();
    (perf ? lists.profile : lists.correctness).push_back(std::move(id));
  }
  return lists;
}

namespace {

// One run of the collector; `eager` turns off its deferred imports (KF_COLLECT_EAGER=1).
// The collector imports task.py: task code, isolated like every build and test child (issue 25) — it reads the
// task tree, our package and the system, writes only a private temp dir, and runs unprivileged.
ProcessRun RunCollector(const std::filesystem::path& task_dir, const PytestCollectOptions& options, bool eager) {
  ProcessOptions p;
  p.argv = {options.python.string(), "-m", "kernelfoundry.collect", task_dir.string()};
  p.cwd = task_dir;
  p.pythonpath_prepend = {PythonDir(options).string()};
  p.env_add["PYTHONDONTWRITEBYTECODE"] = "1";  // never write __pycache__ into our source tree
  p.wall_timeout = options.timeout;
  p.output_cap_bytes = 16u << 20;
  if (eager) p.env_add["KF_COLLECT_EAGER"] = "1";
  TempDir tmp({}, "kf_collect_");
  if (options.own_copy) ShareWithChildren(task_dir);  // whatever its files' modes
  IsolateChild(p, {}, tmp.path(), {task_dir, PythonDir(options)});  // PythonDir: options may name another
  return RunProcess(p);
}

}  // namespace

TestLists CollectPytestTests(const std::filesystem::path& task_dir, const PytestCollectOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(task_dir / kTaskFile, ec))
    throw Error(ErrorKind::kInvalidArgument, "task.py is missing at the top level of the task package; it holds the tests",
                kTaskFile);
  // One collection gives both lists. It defers heavy imports (torch, numpy) until collection uses them
  // (python/task/kernelfoundry/lazy_imports.py); when that run reports a collection failure, the task is
  // collected once more with plain imports, and that run's result and error text are the answer.
  ProcessRun run = RunCollector(task_dir, options, options.eager);
  if (run.reason == TerminationReason::kExited && !options.eager) {
    try {
      (void)ParseCollectOutput(run.result.stdout_text, run.result.stderr_text);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kInvalidArgument) run = RunCollector(task_dir, options, /*eager=*/true);
    }
  }
  if (run.reason == TerminationReason::kSpawnFailed)
    throw Error(ErrorKind::kIO,
                fmt::format("cannot start {}: {}", options.python.string(), run.result.message.value_or("spawn failed")),
                kTaskFile);
  if (run.reason == TerminationReason::kWallTimeout)
    throw Error(ErrorKind::kLimit,
                fmt::format("test collection did not finish within {} s (does task.py do heavy work at import?)",
                            options.timeout.count() / 1000.0),
                kTaskFile);
  try {
    return ParseCollectOutput(run.result.stdout_text, run.result.stderr_text);
  } catch (const Error& e) {
    std::string msg = e.message();
    std::string dir = task_dir.string();
    ReplaceAll(msg, dir + "/", "");
    ReplaceAll(msg, dir, ".");
    throw Error(e.kind(), msg, e.file(), e.field());
  }
}

TestCollector PytestCollector(const PytestCollectOptions& options) {
  // Salt: interpreter + every python file of our package (path and bytes), so a plugin change re-collects.
  internal::Sha256 h;
  h.Update("pytest-collect\n" + options.python.string() + "\n");
  std::filesystem::path pkg = PythonDir(options) / "kernelfoundry";
  std::vector<std::filesystem::path> py_files;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(pkg, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().extension() == ".py") py_files.push_back(it->path());
  }
  std::sort(py_files.begin(), py_files.end());
  for (const auto& f : py_files) {
    std::string rel = f.lexically_relative(pkg).generic_string();
    std::string bytes = ReadFileBytes(f).value_or("");
    h.Update(fmt::format("{}:{}\n{}:", rel.size(), rel, bytes.size()));
    h.Update(bytes);
  }
  TestCollector c;
  c.name = "pytest";
  c.cache_salt = h.HexDigest();
  PytestCollectOptions own = options;
  own.own_copy = true;  // DiscoverTests hands the collector a copy of its own
  c.collect = [own](const std::filesystem::path& dir) { return CollectPytestTests(dir, own); };
  return c;
}

}  // namespace kf
