// Memory and processes of build and test runs (HarnessLimits::memory_limit_bytes, process_limit): a candidate that
// allocates or forks without end is killed inside its own evaluation (resource_limit, "memory limit exceeded" /
// "process limit exceeded") before the host runs out (the kernel's OOM killer picking kf, its database or a broker;
// no pid left for anyone). The limits come from config.yaml (memory_limit, process_limit), else $KF_MEMORY_LIMIT /
// $KF_PROCESS_LIMIT, else three quarters of physical memory / 4096 tasks; only cgroups enforce them (without one
// the run says so and goes on).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "kernelfoundry/config.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/process.hpp"
#include "pipeline_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

Json Config(const std::string& yaml) { return LoadConfigText(yaml, "config.yaml"); }

TEST(MemoryLimitConfig, SizesAreReadAsWrittenAndBadOnesNameTheKey) {
  testing::ScopedEnv env("KF_MEMORY_LIMIT", nullptr);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: 512M\n")).memory_limit_bytes, uint64_t{512} << 20);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: 1.5GiB\n")).memory_limit_bytes, uint64_t{3} << 29);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: 33554432\n")).memory_limit_bytes, uint64_t{32} << 20);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: 'off'\n")).memory_limit_bytes, std::nullopt);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: null\n")).memory_limit_bytes, std::nullopt);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: 0\n")).memory_limit_bytes, std::nullopt);
  // Stranger test: `memory_limit: off` unquoted is YAML's false, and was refused as "got false".
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: off\n")).memory_limit_bytes, std::nullopt);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("process_limit: off\n")).process_limit, std::nullopt);
  // Stranger test: 1, 4096 or 1K were taken, and every run (the reference's too) failed.
  for (const char* tiny : {"memory_limit: 1\n", "memory_limit: 1K\n", "memory_limit: 15M\n"}) {
    try {
      HarnessLimits::FromConfig(Config(tiny));
      ADD_FAILURE() << "accepted " << tiny;
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), "memory_limit");
      EXPECT_NE(std::string(e.what()).find("at least 16M"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: 16M\n")).memory_limit_bytes, uint64_t{16} << 20);
  for (const char* bad : {"memory_limit: lots\n", "memory_limit: -1\n", "memory_limit: 8Q\n", "memory_limit: [1]\n"}) {
    try {
      HarnessLimits::FromConfig(Config(bad));
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), "memory_limit") << bad;
      EXPECT_NE(std::string(e.what()).find("a size in bytes"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(ParseByteSize("2k"), 2048u);
  EXPECT_EQ(ParseByteSize("3 G"), std::nullopt);
  EXPECT_EQ(ParseByteSize(""), std::nullopt);
}

TEST(ProcessLimitConfig, CountsAreReadAsWrittenAndTheDefaultIs4096OrTheEnvironments) {
  testing::ScopedEnv env("KF_PROCESS_LIMIT", nullptr);
  EXPECT_EQ(HarnessLimits{}.process_limit, 4096u);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("process_limit: 64\n")).process_limit, 64u);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("process_limit: 'off'\n")).process_limit, std::nullopt);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("process_limit: null\n")).process_limit, std::nullopt);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("process_limit: 0\n")).process_limit, std::nullopt);
  for (const char* bad : {"process_limit: -3\n", "process_limit: 2.5\n", "process_limit: many\n"}) {
    try {
      HarnessLimits::FromConfig(Config(bad));
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), "process_limit") << bad;
      EXPECT_NE(std::string(e.what()).find("a whole number"), std::string::npos) << e.what();
    }
  }
  {
    testing::ScopedEnv set("KF_PROCESS_LIMIT", "100");
    EXPECT_EQ(HarnessLimits{}.process_limit, 100u);
  }
  {
    testing::ScopedEnv set("KF_PROCESS_LIMIT", "off");
    EXPECT_EQ(HarnessLimits{}.process_limit, std::nullopt);
  }
  // Above the kernel's PID_MAX_LIMIT the pids cgroup refuses the value: the run had no limit while the verdict
  // named one (stranger test, 2026-12-04).
  EXPECT_EQ(HarnessLimits::FromConfig(Config("process_limit: 4194304\n")).process_limit, 4194304u);
  try {
    HarnessLimits::FromConfig(Config("process_limit: 4294967296\n"));
    ADD_FAILURE() << "accepted process_limit: 4294967296";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "process_limit");
    EXPECT_NE(std::string(e.what()).find("at most 4194304"), std::string::npos) << e.what();
  }
  for (const char* bad : {"-5", "12x", "lots", "99999999999"}) {
    testing::ScopedEnv set("KF_PROCESS_LIMIT", bad);
    try {
      HarnessLimits limits;
      ADD_FAILURE() << "accepted KF_PROCESS_LIMIT=" << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), "KF_PROCESS_LIMIT");
    }
  }
}

TEST(MemoryLimitConfig, TheDefaultIsThreeQuartersOfPhysicalMemoryOrTheEnvironments) {
  {
    testing::ScopedEnv env("KF_MEMORY_LIMIT", nullptr);
    const uint64_t phys = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const std::optional<uint64_t> def = HarnessLimits{}.memory_limit_bytes;
    ASSERT_TRUE(def.has_value());
    EXPECT_NEAR(static_cast<double>(*def), 0.75 * static_cast<double>(phys), 1e6);
    EXPECT_EQ(HarnessLimits::FromConfig(Config("task_name: t\n")).memory_limit_bytes, def);
  }
  {
    testing::ScopedEnv env("KF_MEMORY_LIMIT", "16G");
    EXPECT_EQ(HarnessLimits{}.memory_limit_bytes, uint64_t{16} << 30);
    EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: 1G\n")).memory_limit_bytes, uint64_t{1} << 30);
  }
  {
    testing::ScopedEnv env("KF_MEMORY_LIMIT", "off");
    EXPECT_EQ(HarnessLimits{}.memory_limit_bytes, std::nullopt);
  }
  for (const char* bad : {"plenty", "1M"}) {  // 1M: under the 16M floor that config.yaml's memory_limit has too
    testing::ScopedEnv env("KF_MEMORY_LIMIT", bad);
    try {
      HarnessLimits limits;
      ADD_FAILURE() << "accepted KF_MEMORY_LIMIT=" << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), "KF_MEMORY_LIMIT");
    }
  }
}

// Cgroups are what enforce the limits: the tests below need a memory and a pids cgroup.
bool LimitCgroupsHere(std::string* why) {
  ProcessOptions o;
  o.argv = {"/bin/true"};
  o.memory_limit_bytes = uint64_t{1} << 30;
  o.process_limit = 100;
  o.cgroup_limits_only = true;
  const ProcessRun r = RunProcess(o);
  for (const char* limit : {"memory", "processes"}) {
    const auto it = r.limits.find(limit);
    *why = it == r.limits.end() ? std::string("no ") + limit + " entry in the run's limits" : it->second;
    if (it == r.limits.end() || it->second.rfind("cgroup", 0) != 0) return false;
  }
  return true;
}

TEST(RunLimitsProcess, WithoutCgroupsTheLimitsAreNotAppliedAsRlimits) {
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c", "ulimit -v; ulimit -u"};
  o.memory_limit_bytes = uint64_t{64} << 20;
  o.process_limit = 5000;
  o.cgroup_limits_only = true;
  o.force_subreaper = true;  // no cgroups at all
  ProcessOptions plain;
  plain.argv = {"/bin/sh", "-c", "ulimit -u"};
  const std::string before = RunProcess(plain).result.stdout_text;
  const ProcessRun r = RunProcess(o);
  EXPECT_EQ(r.result.stdout_text, "unlimited\n" + before);
  EXPECT_EQ(r.limits.at("memory"), "not applied: no writable memory cgroup");
  EXPECT_EQ(r.limits.at("processes"), "not applied: no writable pids cgroup");
  EXPECT_TRUE(r.notes.empty());
  o.cgroup_limits_only = false;  // an explicit memory limit falls back to RLIMIT_AS
  EXPECT_EQ(RunProcess(o).result.stdout_text.substr(0, 6), "65536\n");
}

class RunLimitsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::UseTestCache();
    std::string why;
    if (!LimitCgroupsHere(&why)) GTEST_SKIP() << "no memory and pids cgroups here: " << why;
  }

  // The plain-Python task with `extra` config lines. Its candidate runs `hog` (default: writes 600 MiB) when the
  // test imports it — if it was started the way `warm` says (its parent is kf's zygote exactly when warm);
  // otherwise it passes, so a path that was not taken cannot pass for the one under test.
  Evaluation Run(const std::string& extra, bool warm, const std::string& hog = "    _HOG = b'x' * (600 << 20)\n") {
    const fs::path dir = tmp_.path() / ("py_scale_" + std::to_string(++runs_));
    testing::WritePyScaleTask(dir, "task_name: py_scale\njob_name: memory\ntask_origin: custom\nlanguage: python\n"
                                   "gpu_arch: cpu\nhas_build_step: false\nhas_reference_build_step: false\n"
                                   "test_reference: false\ntest_timeout: 120\n" + extra);
    const Task task = testing::LoadTestTask(dir);
    EvaluateOptions o;
    o.work_root = tmp_.path() / "work";
    o.correctness_only = true;
    testing::ScopedEnv start("KF_WARM_START", warm ? "on" : "off");
    const std::string code = std::string("import os as _os\n") +
                             "_PARENT = open('/proc/%d/cmdline' % _os.getppid(), 'rb').read()\n"
                             "if (b'kernelfoundry.zygote' in _PARENT) == " + (warm ? "True" : "False") + ":\n" +
                             hog +
                             "def scale(xs):\n"
                             "    return [2 * x for x in xs]\n";
    return Evaluate(task, BlockUpdate{BlockUpdateShort{{"EVOLVE", code}}}, o);
  }

  // Warm starts need a cgroup v2 leaf per run; cold starts run everywhere.
  static std::vector<bool> Starts() {
    return CgroupTreeContainment() ? std::vector<bool>{false, true} : std::vector<bool>{false};
  }

  TempDir tmp_;
  int runs_ = 0;
};

TEST_F(RunLimitsE2E, ACandidateBeyondTheTasksLimitIsAResourceLimitAndBelowItPassesWarmAndCold) {
  testing::ScopedEnv env("KF_MEMORY_LIMIT", nullptr);
  testing::ScopedEnv processes("KF_PROCESS_LIMIT", nullptr);
  for (const bool warm : Starts()) {
    SCOPED_TRACE(warm ? "warm start" : "cold start");
    const Evaluation over = Run("memory_limit: 256M\n", warm);
    EXPECT_EQ(over.result.status, EvalStatus::kResourceLimit) << over.result.status_detail;
    EXPECT_NE(over.result.status_detail.find("memory limit exceeded"), std::string::npos)
        << over.result.status_detail;
    EXPECT_TRUE(testing::ProcessesUnder(tmp_.path() / "work").empty());
  }
  const Evaluation under = Run("memory_limit: 2G\n", false);
  EXPECT_TRUE(IsCorrectFamily(under.result.status)) << under.result.status_detail;
  // The verdict records the limits it ran under (issue 25: "the verdict does not record which limits applied").
  const std::string how = CgroupLimitMechanism(TreeLimit::kMemory);
  EXPECT_EQ(under.result.isolation["limits"]["memory"], "2.0 GiB (" + how + ")");
  EXPECT_EQ(under.result.ToJson()["isolation"]["limits"]["processes"],
            "4096 tasks (" + CgroupLimitMechanism(TreeLimit::kProcesses) + ")");
}

TEST_F(RunLimitsE2E, TheMachinesDefaultAppliesToATaskThatSetsNone) {
  testing::ScopedEnv env("KF_MEMORY_LIMIT", "256M");
  const Evaluation over = Run("", false);
  EXPECT_EQ(over.result.status, EvalStatus::kResourceLimit) << over.result.status_detail;
  EXPECT_EQ(over.result.isolation["limits"]["memory"], "256 MiB (" + CgroupLimitMechanism(TreeLimit::kMemory) + ")");
  const Evaluation off = Run("memory_limit: 'off'\n", false);
  EXPECT_TRUE(IsCorrectFamily(off.result.status)) << off.result.status_detail;
  EXPECT_EQ(off.result.isolation["limits"]["memory"], "none");
}

// A fork bomb (every process forks again and ignores refusals) under process_limit 64: the pids cgroup refuses the
// 65th task, kf sees it and kills the tree at once; nothing is left.
TEST_F(RunLimitsE2E, AForkBombIsAResourceLimitAndNothingIsLeftWarmAndCold) {
  testing::ScopedEnv env("KF_PROCESS_LIMIT", nullptr);
  const std::string bomb = "    import time as _time\n"
                           "    while True:\n"
                           "        try:\n"
                           "            _os.fork()\n"
                           "        except OSError:\n"
                           "            _time.sleep(0.01)\n";
  for (const bool warm : Starts()) {
    SCOPED_TRACE(warm ? "warm start" : "cold start");
    const auto t0 = std::chrono::steady_clock::now();
    const Evaluation ev = Run("process_limit: 64\n", warm, bomb);
    EXPECT_EQ(ev.result.status, EvalStatus::kResourceLimit) << ev.result.status_detail;
    EXPECT_NE(ev.result.status_detail.find("process limit exceeded"), std::string::npos) << ev.result.status_detail;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);  // not the timeout
    EXPECT_TRUE(testing::ProcessesUnder(tmp_.path() / "work").empty());
  }
}

}  // namespace
}  // namespace kf
