// Test helpers shared by all test binaries.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"

namespace kf::testing {

/// Runs `fn`, expects it to throw kf::Error of `kind` (a test failure otherwise), and returns the error.
template <typename Fn>
Error ExpectError(ErrorKind kind, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(ErrorKindName(e.kind()), ErrorKindName(kind)) << e.what();
    return e;
  }
  ADD_FAILURE() << "expected kf::Error(" << ErrorKindName(kind) << ")";
  return Error(ErrorKind::kInternal, "no error");
}

/// Runs `fn` and returns the kf::Error it throws, of any kind (a test failure when it does not throw).
template <typename Fn>
Error ErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a kf::Error";
  return Error(ErrorKind::kInternal, "no error");
}

/// ../shared next to the source tree (read-only fixtures, kernelbench problems).
std::filesystem::path SharedDir();
/// The repository root.
std::filesystem::path SourceDir();
/// The build directory (holds bin kf).
std::filesystem::path BinaryDir();
/// `s` in POSIX shell single quotes (an embedded ' becomes '\'').
std::string ShellQuote(const std::string& s);
/// Reads a whole file; throws on failure.
std::string ReadFile(const std::filesystem::path& p);
void WriteFile(const std::filesystem::path& p, const std::string& bytes);
/// Parses shared/fixtures/golden/<name>.json once and returns the cached document (lives until exit).
const Json& Golden(const std::string& name);

/// A fresh temporary directory, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Sets (a value) or unsets (nullptr / nullopt) environment variables for a scope and restores their previous
/// state when it ends. Not thread-safe (setenv): for tests that change kf's own environment.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  explicit ScopedEnv(const std::map<std::string, std::optional<std::string>>& vars);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

/// True for the verdict of a correct, timed candidate: "correct", or "noisy" (correct, but the speedup's
/// interval is wider than the target, as on a loaded test machine). End-to-end tests accept both.
bool CorrectAndTimed(const Json& status);

/// True when `out` (kf run's console output) holds the verdict line of a correct, timed run: "status: correct"
/// or "status: noisy - …", each followed by the reference-compatible status "correct".
bool HasCorrectVerdictLine(const std::string& out);

/// Writes the files of the small pure-Python task "py_scale" into `dir`: `config_yaml` as config.yaml, the
/// conftest, kernel.py with the EVOLVE block `scale(xs)` = [2x…] and task.py (reference 2x, two correctness
/// tests, one performance test). Used by the end-to-end tests of `kf run` that need a task in seconds.
void WritePyScaleTask(const std::filesystem::path& dir, const std::string& config_yaml);

/// Runs a shell command, returns {exit status, stdout+stderr}.
std::pair<int, std::string> RunShell(const std::string& cmd);

}  // namespace kf::testing
