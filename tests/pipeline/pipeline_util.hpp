// Helpers of the pipeline tests: fixture copies, task loading with the real pytest collector, a shared
// persistent cache (so compiled torch extensions are reused across test runs), leftover-process checks.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/pytest_collect.hpp"
#include "kernelfoundry/task.hpp"
#include "test_util.hpp"

namespace kf::testing {

/// Points KF_CACHE_DIR at <build>/test_cache unless the caller set it (scripts/test.sh does).
inline void UseTestCache() {
  const char* env = std::getenv("KF_CACHE_DIR");
  if (env == nullptr || *env == '\0') {
    std::filesystem::path dir = BinaryDir() / "test_cache";
    std::filesystem::create_directories(dir);
    ::setenv("KF_CACHE_DIR", dir.c_str(), 1);
  }
}

/// A phase run that passed: exit code 0, `stdout_text`, verdict correct (for fake harnesses).
inline PhaseRun Passed(const std::string& stdout_text = "") {
  PhaseRun r;
  r.result = ProcessResult{0, stdout_text, "", std::nullopt, std::nullopt};
  r.verdict = {EvalStatus::kCorrect, ""};
  return r;
}

/// Copies a directory tree (fixtures are read-only: the copies are made writable).
/// A shell command running this build's kf with `args` (already shell-quoted) and the shared test cache.
inline std::string KfCommand(const std::string& args) {
  UseTestCache();
  return "KF_CACHE_DIR=" + ShellQuote(std::getenv("KF_CACHE_DIR")) + " " + ShellQuote((BinaryDir() / "kf").string()) +
         " " + args;
}

inline void CopyTree(const std::filesystem::path& from, const std::filesystem::path& to) {
  namespace fs = std::filesystem;
  fs::create_directories(to);
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  for (auto& e : fs::recursive_directory_iterator(to)) {
    fs::permissions(e.path(), fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
    if (e.is_directory()) fs::permissions(e.path(), fs::perms::owner_exec, fs::perm_options::add);
  }
  fs::permissions(to, fs::perms::owner_all, fs::perm_options::add);
}

/// Copies shared/fixtures/tasks/<name> into `dest`/<name> and returns that path.
inline std::filesystem::path CopyFixture(const std::string& name, const std::filesystem::path& dest) {
  std::filesystem::path to = dest / name;
  CopyTree(SharedDir() / "fixtures" / "tasks" / name, to);
  return to;
}

/// Task::Create with the real pytest collector (cached in the test cache).
inline Task LoadTestTask(const std::filesystem::path& dir) {
  UseTestCache();
  TaskCreateOptions o;
  o.kinds = HarnessTaskKinds();
  o.collector = PytestCollector();
  return Task::Create(dir, o).first;
}

/// Pids of live processes whose cwd lies under `root` (leftovers of a run there).
inline std::vector<int> ProcessesUnder(const std::filesystem::path& root) {
  std::vector<int> pids;
  std::string prefix = std::filesystem::weakly_canonical(root).string();
  DIR* d = ::opendir("/proc");
  if (!d) return pids;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    char buf[4096];
    std::string link = std::string("/proc/") + e->d_name + "/cwd";
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    if (n <= 0) continue;
    std::string cwd(buf, static_cast<size_t>(n));
    if (cwd.rfind(prefix, 0) == 0) pids.push_back(static_cast<int>(pid));
  }
  ::closedir(d);
  return pids;
}

}  // namespace kf::testing
