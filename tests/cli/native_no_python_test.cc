// A native evaluation starts no Python process (issue 15 item 9): `kf run` of examples/tasks/omp_reduction
// is traced with `strace -f -e trace=execve` (every program any process of the run executes) and, in the
// same run, KF_PYTHON points at a shim that records each start of the task interpreter. The trace must
// show the compiler and the test program and no python; the shim must never run. For contrast, the
// worker_info of a pytest evaluation does ask Python (tests/pipeline/stage_helpers_test.cc).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "kernelfoundry/json.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::BinaryDir;
using testing::ReadFile;
using testing::RunShell;
using testing::SourceDir;
using testing::TempDir;
using testing::WriteFile;

// Programs executed according to an `strace -f -e trace=execve` log: the path of every successful execve.
std::set<std::string> ExecutedPrograms(const std::string& log) {
  std::set<std::string> out;
  static const std::regex kExec(R"re(execve\("([^"]+)", .*\) = 0)re");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), kExec); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1].str());
  return out;
}

TEST(NativeNoPythonE2E, KfRunOfANativeTaskExecutesNoPython) {
  if (RunShell("strace -V").first != 0) GTEST_SKIP() << "strace is not installed (scripts/install-deps.sh)";
  TempDir tmp;
  const fs::path task = tmp.path() / "omp_reduction";
  fs::copy(SourceDir() / "examples/tasks/omp_reduction", task, fs::copy_options::recursive);
  const fs::path shim_log = tmp.path() / "python_starts.log";
  const fs::path shim = tmp.path() / "python_shim.sh";
  WriteFile(shim, "#!/bin/sh\necho \"$@\" >> '" + shim_log.string() + "'\nexec /usr/bin/python3 \"$@\"\n");
  fs::permissions(shim, fs::perms::owner_all);
  fs::create_directories(tmp.path() / "tmp");
  const fs::path trace = tmp.path() / "execve.log";
  const fs::path out = tmp.path() / "out.json";
  // LeakSanitizer cannot run under ptrace (it aborts kf at exit in the sanitizer build): leaks are checked by
  // every other test of that build, this one checks what is executed.
  const std::string cmd = "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" TMPDIR='" +
                          (tmp.path() / "tmp").string() + "' KF_CACHE_DIR='" +
                          (tmp.path() / "cache").string() + "' KF_PYTHON='" + shim.string() +
                          "' strace -f -qq -e trace=execve -o '" + trace.string() + "' '" +
                          (BinaryDir() / "kf").string() + "' run '" + task.string() + "' --candidate '" +
                          (SourceDir() / "examples/candidates/omp_reduction/fast.cpp").string() +
                          "' --no-store --json '" + out.string() + "'";
  auto [rc, text] = RunShell(cmd);
  if (rc != 0 && text.find("Operation not permitted") != std::string::npos)
    GTEST_SKIP() << "ptrace is not permitted here: " << text;
  ASSERT_EQ(rc, 0) << text;
  const Json verdict = ParseJson(ReadFile(out), out.string());
  EXPECT_TRUE(testing::CorrectAndTimed(verdict["status"])) << text;  // "noisy" on a loaded machine

  const std::set<std::string> programs = ExecutedPrograms(ReadFile(trace));
  bool compiler = false, test_program = false;
  for (const std::string& p : programs) {
    const std::string name = fs::path(p).filename().string();
    EXPECT_EQ(name.find("python"), std::string::npos) << "a native evaluation executed " << p;
    EXPECT_NE(p, shim.string());
    compiler = compiler || name.find("g++") != std::string::npos || name == "cc1plus";
    test_program = test_program || name == "test_kernel";
  }
  EXPECT_TRUE(compiler) << "the trace shows no compiler: is the trace complete?";
  EXPECT_TRUE(test_program) << "the trace shows no test program: is the trace complete?";
  EXPECT_FALSE(fs::exists(shim_log)) << ReadFile(shim_log);
}

}  // namespace
}  // namespace kf
