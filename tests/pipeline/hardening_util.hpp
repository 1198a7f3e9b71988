// Helpers of the issue-10 regression tests (hardening_*_test.cc): example task copies with edits, `kf run`
// as a real process with a chosen environment, file checksums.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/sha256.hpp"
#include "kernelfoundry/json.hpp"
#include "pipeline_util.hpp"

namespace kf::testing {

/// examples/<kind>/<name> in the source tree.
inline std::filesystem::path ExamplePath(const std::string& kind, const std::string& name) {
  return SourceDir() / "examples" / kind / name;
}

/// A writable copy of examples/tasks/<name> at dest/<as>.
inline std::filesystem::path CopyExample(const std::string& name, const std::filesystem::path& dest,
                                         const std::string& as = "") {
  std::filesystem::path to = dest / (as.empty() ? name : as);
  CopyTree(ExamplePath("tasks", name), to);
  return to;
}

/// Replaces the first occurrence of `from` in a file (throws when absent).
void ReplaceInFile(const std::filesystem::path& file, const std::string& from, const std::string& to);

/// A copy of examples/tasks/bias_relu whose build_timeout (240 s) is raised to 1800 s: these tests are about
/// verdicts, not about how long torch takes to compile on a loaded machine.
inline std::filesystem::path CopyBiasRelu(const std::filesystem::path& dest, const std::string& as = "") {
  std::filesystem::path to = CopyExample("bias_relu", dest, as);
  ReplaceInFile(to / "config.yaml", "build_timeout: 240", "build_timeout: 1800");
  return to;
}

/// Replaces the first occurrence of `from` in a file (throws when absent).
inline void ReplaceInFile(const std::filesystem::path& file, const std::string& from, const std::string& to) {
  std::string text = ReadFile(file);
  size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error(file.string() + " has no '" + from + "'");
  text.replace(at, from.size(), to);
  WriteFile(file, text);
}

/// Shell single quotes.
inline std::string Q(const std::string& s) { return ShellQuote(s); }

struct KfRunResult {
  int rc = -1;
  std::string output;  ///< stdout + stderr
  Json json;           ///< the --json document (null when not written)
};

/// What a failed expectation on a kf run prints: its output, then the start of its JSON document.
inline std::string Why(const KfRunResult& r) { return r.output + "\n" + r.json.dump(2).substr(0, 20000); }

/// Runs `kf run TASK --candidate CANDIDATE --json OUT --no-verdict-cache <extra>` with TMPDIR = `tmp` (work dirs
/// land there), KF_CACHE_DIR = the shared test cache (unless `env` unsets it), then `env` ("NAME=value ..." and
/// "-u NAME ..." in any order; assignments in `env` override the defaults). Always a fresh evaluation: these
/// tests check what the run does (builds, cache hits, isolation), which a reused verdict would skip.
inline KfRunResult KfRun(const std::filesystem::path& tmp, const std::filesystem::path& task,
                         const std::filesystem::path& candidate, const std::string& env = "",
                         const std::string& extra = "--no-store") {
  UseTestCache();
  static int n = 0;
  const std::filesystem::path out = tmp / ("kf_run_" + std::to_string(n++) + ".json");
  // env(1) wants its "-u NAME" options before the assignments.
  // An unset KF_CACHE_DIR stays unset (the default cache dir is then under test).
  std::string unset, assign;
  bool keep_cache = true;
  std::istringstream words(env);
  for (std::string w; words >> w;) {
    if (w == "-u" && words >> w) {
      unset += " -u " + w;
      keep_cache = keep_cache && w != "KF_CACHE_DIR";
    } else {
      assign += " " + w;
    }
  }
  std::string cache = keep_cache ? " KF_CACHE_DIR=" + Q(std::getenv("KF_CACHE_DIR")) : std::string();
  std::string cmd = "env" + unset + " TMPDIR=" + Q(tmp.string()) + cache + assign + " " +
                    Q((BinaryDir() / "kf").string()) + " run " + Q(task.string()) + " --candidate " +
                    Q(candidate.string()) + " --json " + Q(out.string()) + " --no-verdict-cache " + extra;
  KfRunResult r;
  auto [rc, text] = RunShell(cmd);
  r.rc = rc;
  r.output = text;
  if (std::filesystem::exists(out)) r.json = ParseJson(ReadFile(out), out.string());
  return r;
}

/// SHA-256 of a file's bytes ("" when it does not exist).
inline std::string FileSha(const std::filesystem::path& p) {
  if (!std::filesystem::exists(p)) return "";
  return internal::Sha256Hex(ReadFile(p));
}

/// {relative path: sha256} of every regular file below `dir`.
inline std::map<std::string, std::string> TreeShas(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  if (!std::filesystem::exists(dir)) return out;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[e.path().lexically_relative(dir).string()] = FileSha(e.path());
  }
  return out;
}

/// The kf_* work dirs left in `tmp`.
inline std::vector<std::string> LeftoverWorkDirs(const std::filesystem::path& tmp) {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::directory_iterator(tmp)) {
    std::string name = e.path().filename().string();
    if (name.rfind("kf_build_", 0) == 0 || name.rfind("kf_test_", 0) == 0 || name.rfind("custom_task_create_", 0) == 0)
      out.push_back(name);
  }
  return out;
}

}  // namespace kf::testing
