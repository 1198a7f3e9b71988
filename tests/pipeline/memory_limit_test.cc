// Memory of build and test runs (HarnessLimits::memory_limit_bytes): a candidate that allocates without end is
// killed inside its own evaluation (resource_limit, "memory limit exceeded") before the kernel's OOM killer picks
// a process of the host. The limit comes from config.yaml's memory_limit, else $KF_MEMORY_LIMIT, else three
// quarters of physical memory; only a memory cgroup enforces it (without one the run says so and goes on).
#include <gtest/gtest.h>
#include <unistd.h>

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
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: 1048576\n")).memory_limit_bytes, uint64_t{1} << 20);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: 'off'\n")).memory_limit_bytes, std::nullopt);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: null\n")).memory_limit_bytes, std::nullopt);
  EXPECT_EQ(HarnessLimits::FromConfig(Config("memory_limit: 0\n")).memory_limit_bytes, std::nullopt);
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
  testing::ScopedEnv env("KF_MEMORY_LIMIT", "plenty");
  try {
    HarnessLimits limits;
    ADD_FAILURE() << "accepted KF_MEMORY_LIMIT=plenty";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "KF_MEMORY_LIMIT");
  }
}

// A memory cgroup is what enforces the limit: the tests below need one.
bool MemoryCgroupHere(std::string* why) {
  ProcessOptions o;
  o.argv = {"/bin/true"};
  o.memory_limit_bytes = uint64_t{1} << 30;
  o.memory_limit_cgroup_only = true;
  const ProcessRun r = RunProcess(o);
  const auto it = r.limits.find("memory");
  *why = it == r.limits.end() ? "no memory entry in the run's limits" : it->second;
  return it != r.limits.end() && it->second.find("memory") != std::string::npos &&
         it->second.find("not applied") == std::string::npos;
}

TEST(MemoryLimitProcess, WithoutACgroupTheLimitIsNotAppliedAsAnAddressSpaceLimit) {
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c", "ulimit -v"};
  o.memory_limit_bytes = uint64_t{64} << 20;
  o.memory_limit_cgroup_only = true;
  o.force_subreaper = true;  // no cgroups at all
  const ProcessRun r = RunProcess(o);
  EXPECT_EQ(r.result.stdout_text, "unlimited\n");
  EXPECT_EQ(r.limits.at("memory"), "not applied: no writable memory cgroup");
  o.memory_limit_cgroup_only = false;  // an explicit limit falls back to RLIMIT_AS
  EXPECT_EQ(RunProcess(o).result.stdout_text, "65536\n");
}

class MemoryLimitE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::UseTestCache();
    std::string why;
    if (!MemoryCgroupHere(&why)) GTEST_SKIP() << "no memory cgroup here: " << why;
  }

  // The plain-Python task with `extra` config lines. Its candidate writes 600 MiB when the test imports it — if
  // it was started the way `warm` says (its parent is kf's zygote exactly when warm); otherwise it passes, so a
  // path that was not taken cannot pass for the one under test.
  Evaluation Run(const std::string& extra, bool warm) {
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
                             "if (b'kernelfoundry.zygote' in _PARENT) == " + (warm ? "True" : "False") + ":\n"
                             "    _HOG = b'x' * (600 << 20)\n"
                             "def scale(xs):\n"
                             "    return [2 * x for x in xs]\n";
    return Evaluate(task, BlockUpdate{BlockUpdateShort{{"EVOLVE", code}}}, o);
  }

  // Warm starts need a cgroup v2 leaf per run; cold starts run everywhere.
  static std::vector<bool> Starts() { return CgroupTreeContainment() ? std::vector<bool>{false, true} : std::vector<bool>{false}; }

  TempDir tmp_;
  int runs_ = 0;
};

TEST_F(MemoryLimitE2E, ACandidateBeyondTheTasksLimitIsAResourceLimitAndBelowItPassesWarmAndCold) {
  testing::ScopedEnv env("KF_MEMORY_LIMIT", nullptr);
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
}

TEST_F(MemoryLimitE2E, TheMachinesDefaultAppliesToATaskThatSetsNone) {
  testing::ScopedEnv env("KF_MEMORY_LIMIT", "256M");
  const Evaluation over = Run("", false);
  EXPECT_EQ(over.result.status, EvalStatus::kResourceLimit) << over.result.status_detail;
  const Evaluation off = Run("memory_limit: 'off'\n", false);
  EXPECT_TRUE(IsCorrectFamily(off.result.status)) << off.result.status_detail;
}

}  // namespace
}  // namespace kf
