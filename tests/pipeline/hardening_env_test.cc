// Issue 10 regression tests, faults 5 and 6: failures of OUR environment are infrastructure errors naming
// the path, never the candidate's score; the cache does not depend on HOME; the task's build_timeout governs
// every nested compile, a timeout names the limit that fired, and a busy build that prints nothing for
// longer than the inactivity limit is not killed for it (pytest: torch extension with a CXX wrapper; native:
// the task's own build commands).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "hardening_util.hpp"
#include "kernelfoundry/evaluate.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::CopyExample;
using testing::ExamplePath;
using testing::KfRun;
using testing::KfRunResult;
using testing::Q;
using testing::ReplaceInFile;
using testing::TempDir;
using testing::WriteFile;


// ---- fault 5 ----

TEST(HardeningEnvironmentE2E, UnwritableOrUnsetHomeStillEvaluatesWithAPrivatePerUserCache) {
  // The input: HOME=/proc/self/fdinfo kf run bias_relu fast.cpp was build_error, perf_score 1.
  // The per-user cache lives under TMPDIR; a directory in the build tree keeps it across test runs.
  const fs::path tmpdir = testing::BinaryDir() / "test_tmp_home";
  fs::create_directories(tmpdir);
  TempDir tmp;
  const fs::path task = testing::CopyBiasRelu(tmp.path());
  const fs::path cand = ExamplePath("candidates", "bias_relu") / "fast.cpp";
  for (const std::string home : {"HOME=/proc/self/fdinfo", "-u HOME"}) {
    KfRunResult r = KfRun(tmp.path(), task, cand,
                          "-u KF_CACHE_DIR -u XDG_CACHE_HOME " + home + " TMPDIR=" + Q(tmpdir.string()),
                          "--no-store --no-reference");
    ASSERT_TRUE(r.json.is_object()) << home << "\n" << Why(r);
    EXPECT_EQ(r.json["status"], "no_reference") << home << "\n" << Why(r);
    EXPECT_EQ(r.rc, 0) << home << "\n" << r.output;
  }
  const fs::path per_user = tmpdir / ("kernelfoundry-" + std::to_string(::geteuid()));
  struct stat st {};
  ASSERT_EQ(::lstat(per_user.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(fs::exists(per_user / "builds" / "v1"));
  EXPECT_TRUE(testing::LeftoverWorkDirs(tmpdir).empty());
}

TEST(HardeningEnvironmentE2E, UnusableCacheDirIsAnInfrastructureErrorNamingThePath) {
  TempDir tmp;
  const fs::path task = CopyExample("omp_reduction", tmp.path());
  KfRunResult r = KfRun(tmp.path(), task, ExamplePath("candidates", "omp_reduction") / "fast.cpp",
                        "KF_CACHE_DIR=/proc/self/fdinfo/kf-cache");
  ASSERT_TRUE(r.json.is_object()) << Why(r);
  EXPECT_EQ(r.json["status"], "infrastructure_error") << Why(r);
  EXPECT_EQ(r.json["perf_score"], 0);
  EXPECT_EQ(r.json["reference_status"], "error");
  EXPECT_NE(r.json["status_detail"].get<std::string>().find("/proc/self/fdinfo/kf-cache"), std::string::npos)
      << r.json["status_detail"];
  EXPECT_TRUE(r.json["test_result"].is_null());  // nothing of the candidate was run
}

TEST(HardeningEnvironmentE2E, MissingInterpreterAndUnwritableWorkDirAreInfrastructureErrors) {
  TempDir tmp;
  testing::ScopedEnv no_cache("KF_BUILD_CACHE", "off");  // nothing may come from the cache: the build must start
  Task task = testing::LoadTestTask(CopyExample("bias_relu", tmp.path()));
  const BlockUpdate fast{BlockUpdateShort{{"EVOLVE", testing::ReadFile(ExamplePath("candidates", "bias_relu") / "fast.cpp")}}};
  EvaluateOptions o;
  o.work_root = tmp.path() / "work";
  o.test_reference = false;
  {
    testing::ScopedEnv python("KF_PYTHON", "/nonexistent/python3");
    Evaluation ev = Evaluate(task, fast, o);
    EXPECT_EQ(ev.result.status, EvalStatus::kInfrastructureError) << ev.result.status_detail;
    EXPECT_EQ(ev.result.perf_score, 0);
    EXPECT_NE(ev.result.status_detail.find("/nonexistent/python3"), std::string::npos) << ev.result.status_detail;
    EXPECT_NE(ev.result.status_detail.find("the build could not be started"), std::string::npos);
  }
  // The same evaluation with work dirs under a directory nobody can create anything in.
  Task native = testing::LoadTestTask(CopyExample("omp_reduction", tmp.path()));
  o.work_root = "/proc/self/fdinfo/kf-work";
  Evaluation ev = Evaluate(native, std::nullopt, o);
  EXPECT_EQ(ev.result.status, EvalStatus::kInfrastructureError) << ev.result.status_detail;
  EXPECT_NE(ev.result.status_detail.find("/proc/self/fdinfo/kf-work"), std::string::npos) << ev.result.status_detail;
}

// ---- fault 6 ----

TEST(HardeningBuildLimitsE2E, ASleepingCompilerEndsAtTheTasksBuildTimeoutNamingIt) {
  TempDir tmp;
  const fs::path task = CopyExample("bias_relu", tmp.path());
  ReplaceInFile(task / "config.yaml", "build_timeout: 240", "build_timeout: 8");
  const fs::path cxx = tmp.path() / "slow-c++";
  WriteFile(cxx, "#!/bin/sh\nsleep 130\nexec c++ \"$@\"\n");
  fs::permissions(cxx, fs::perms(0755));  // the sandbox user (issue 25) runs it
  KfRunResult r = KfRun(tmp.path(), task, ExamplePath("candidates", "bias_relu") / "fast.cpp",
                        "CXX=" + Q(cxx.string()), "--no-store --no-reference");
  ASSERT_TRUE(r.json.is_object()) << Why(r);
  EXPECT_EQ(r.json["status"], "build_timeout") << Why(r);
  EXPECT_EQ(r.json["perf_score"], 1);
  EXPECT_NE(r.json["status_detail"].get<std::string>().find("the task's build_timeout of 8 s ended the build "
                                                              "(config.yaml build_timeout)"),
            std::string::npos) << r.json["status_detail"];
  EXPECT_TRUE(testing::LeftoverWorkDirs(tmp.path()).empty());
  EXPECT_TRUE(testing::ProcessesUnder(tmp.path()).empty());
}

TEST(HardeningBuildLimitsE2E, ABusyCompilerSilentForLongerThanTheInactivityLimitIsNotKilled) {
  TempDir tmp;
  const fs::path task = CopyExample("bias_relu", tmp.path());
  ReplaceInFile(task / "config.yaml", "build_timeout: 240", "build_timeout: 600\nbuild_output_inactivity_timeout: 10");
  // The compile step works (CPU-bound) for 16 s, 1.6× the inactivity limit, in silence (ninja holds its output
  // until the step ends, so kf hears only compile_torch_extension's CPU heartbeats), then fails with a message of
  // its own: the build ends as that failure, a build_error carrying the message, not as a kill for inactivity.
  // (It does not go on to compile: the ~40 s torch compile without a precompiled header shows nothing more.)
  const fs::path cxx = tmp.path() / "busy-c++";
  WriteFile(cxx, "#!/bin/sh\ncase \" $* \" in *\" -c \"*)\n"
                 "  end=$(( $(date +%s) + 16 )); while [ $(date +%s) -lt $end ]; do echo working; done >/dev/null\n"
                 "  echo 'busy-c++: done working, failing on purpose' >&2; exit 1;;\n"
                 "esac\nexec c++ \"$@\"\n");
  fs::permissions(cxx, fs::perms(0755));  // the sandbox user (issue 25) runs it
  // No precompiled header: another compiler means another PCH, which kf would first build with this wrapper.
  KfRunResult r = KfRun(tmp.path(), task, ExamplePath("candidates", "bias_relu") / "fast.cpp",
                        "KF_TORCH_PCH=off CXX=" + Q(cxx.string()), "--no-store --no-reference");
  ASSERT_TRUE(r.json.is_object()) << Why(r);
  EXPECT_EQ(r.json["status"], "build_error") << Why(r);
  const std::string out = r.json["build_result"]["result"]["stdout"].get<std::string>();
  EXPECT_NE(out.find("kernelfoundry: still compiling"), std::string::npos) << out;
  EXPECT_NE(out.find("busy-c++: done working, failing on purpose"), std::string::npos) << out;
  const std::string detail = r.json["status_detail"].get<std::string>();
  EXPECT_EQ(detail.find("inactiv"), std::string::npos) << detail;
  EXPECT_EQ(detail.find("no output"), std::string::npos) << detail;
}

TEST(HardeningBuildLimitsE2E, NativeBuildCommandsAreGovernedByTheSameLimits) {
  TempDir tmp;
  // A build that sleeps past its build_timeout: build_timeout naming the limit.
  const fs::path slow = CopyExample("omp_reduction", tmp.path(), "slow");
  ReplaceInFile(slow / "config.yaml", "  - mkdir -p build\n", "  - sleep 60\n  - mkdir -p build\n");
  ReplaceInFile(slow / "config.yaml", "build_timeout: 300", "build_timeout: 3");
  const fs::path cand = ExamplePath("candidates", "omp_reduction") / "fast.cpp";
  KfRunResult r = KfRun(tmp.path(), slow, cand);
  ASSERT_TRUE(r.json.is_object()) << Why(r);
  EXPECT_EQ(r.json["status"], "build_timeout") << Why(r);
  EXPECT_NE(r.json["status_detail"].get<std::string>().find("the task's build_timeout of 3 s ended the build"),
            std::string::npos) << r.json["status_detail"];
  // A build that keeps printing for longer than the inactivity limit is not killed: a ticker prints every
  // second for the whole build (g++'s own compiles are silent for longer than the limit) and the build sleeps
  // 12 s more, against a 4 s inactivity limit.
  const fs::path chatty = CopyExample("omp_reduction", tmp.path(), "chatty");
  ReplaceInFile(chatty / "config.yaml", "  - mkdir -p build\n",
                "  - (while sleep 1; do echo tick; done) & echo $! > ticker.pid\n  - sleep 12\n  - mkdir -p build\n");
  ReplaceInFile(chatty / "config.yaml", "test_executable:", "  - kill $(cat ticker.pid)\ntest_executable:");
  ReplaceInFile(chatty / "config.yaml", "build_timeout: 300", "build_timeout: 300\nbuild_output_inactivity_timeout: 4");
  r = KfRun(tmp.path(), chatty, cand, "", "--no-store --no-reference");
  ASSERT_TRUE(r.json.is_object()) << Why(r);
  EXPECT_EQ(r.json["status"], "no_reference") << Why(r);
}

}  // namespace
}  // namespace kf
