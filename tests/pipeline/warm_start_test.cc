// Warm starts of pytest test runs (issue 15, harness/warm_start.hpp) end to end: a py_scale evaluation whose
// test processes are forked from kf's zygote is contained exactly like a cold one — the run's own cgroup, its
// private temp dir as the only writable place, its environment — and scores the same verdict; KF_WARM_START=off
// starts them cold.
#include <gtest/gtest.h>

#include <cstdlib>

#include "harness/isolation.hpp"
#include "harness/warm_start.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/process.hpp"
#include "pipeline_util.hpp"

namespace kf {
namespace {

using testing::TempDir;

// The candidate checks its own containment when imported and returns wrong values (correctness fails, naming
// the check in the log) when one does not hold: it runs in a cgroup of a run (kf-<pid>-…), cannot write the
// task tree, and its parent is kf's zygote exactly when `want_warm`.
std::string CheckingCandidate(bool want_warm) {
  auto py_bool = [](bool b) { return std::string(b ? "True" : "False"); };
  std::string code = "import os as _os\n"
                     "def _problems():\n"
                     "    out = []\n"
                     "    cg = open('/proc/self/cgroup').read()\n";
  code += "    if " + py_bool(CgroupTreeContainment()) + " and '/kf-' not in cg:\n";
  code += "        out.append('not in a run cgroup: ' + cg)\n";
  code += "    if " + py_bool(ChildIsolationApplied()) + ":\n";
  code += "        try:\n"
          "            open('kernel_copy.txt', 'w').write('x')\n"
          "            out.append('wrote the task tree')\n"
          "        except OSError:\n"
          "            pass\n"
          "    parent = open('/proc/%d/cmdline' % _os.getppid(), 'rb').read()\n"
          "    warm = b'kernelfoundry.zygote' in parent\n";
  code += "    if warm != " + py_bool(want_warm) + ":\n";
  code += std::string("        out.append('warm start expected: ") + (want_warm ? "yes" : "no") + "')\n";
  code += "    if 'KERNELFOUNDRY_TEST' not in _os.environ:\n"
          "        out.append('not the run environment')\n"
          "    return out\n"
          "_PROBLEMS = _problems()\n"
          "def scale(xs):\n"
          "    if _PROBLEMS:\n"
          "        raise AssertionError('; '.join(_PROBLEMS))\n"
          "    return [2 * x for x in xs]\n";
  return code;
}

class WarmStart : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::UseTestCache();
    dir_ = tmp_.path() / "py_scale";
    testing::WritePyScaleTask(dir_, "task_name: py_scale\njob_name: warm\ntask_origin: custom\nlanguage: python\n"
                                    "gpu_arch: cpu\nhas_build_step: false\nhas_reference_build_step: false\n"
                                    "test_reference: true\ntest_timeout: 120\n"
                                    "eval_config:\n  timing: {processes: 1, budget_s: 1}\n");
    task_ = testing::LoadTestTask(dir_);
  }
  Evaluation Run(const std::string& code) {
    EvaluateOptions o;
    o.work_root = tmp_.path() / "work";
    return Evaluate(task_, BlockUpdate{BlockUpdateShort{{"EVOLVE", code}}}, o);
  }

  TempDir tmp_;
  std::filesystem::path dir_;
  Task task_;
};

TEST_F(WarmStart, TestProcessesForkedFromTheZygoteAreContainedLikeColdOnes) {
  if (!CgroupTreeContainment()) GTEST_SKIP() << "warm starts need a cgroup v2 per run";
  Evaluation ev = Run(CheckingCandidate(true));
  EXPECT_TRUE(IsCorrectFamily(ev.result.status)) << ev.result.status_detail << "\n" << ev.result.eval_log;
  ASSERT_TRUE(ev.result.timing.is_object()) << ev.result.eval_log;
  EXPECT_EQ(ev.result.timing["conditions"]["start"], "warm") << ev.result.timing.dump();
  EXPECT_TRUE(testing::ProcessesUnder(tmp_.path() / "work").empty());
}

TEST_F(WarmStart, OffStartsEveryTestProcessCold) {
  testing::ScopedEnv off("KF_WARM_START", "off");
  Evaluation ev = Run(CheckingCandidate(false));
  EXPECT_TRUE(IsCorrectFamily(ev.result.status)) << ev.result.status_detail << "\n" << ev.result.eval_log;
  ASSERT_TRUE(ev.result.timing.is_object()) << ev.result.eval_log;
  EXPECT_EQ(ev.result.timing["conditions"]["start"], "cold") << ev.result.timing.dump();
}

// A failing check is seen (the candidate above is not vacuous): expecting a cold start in a warm run fails.
TEST_F(WarmStart, TheContainmentCheckOfTheCandidateCanFail) {
  if (!CgroupTreeContainment()) GTEST_SKIP() << "warm starts need a cgroup v2 per run";
  Evaluation ev = Run(CheckingCandidate(false));
  EXPECT_FALSE(IsCorrectFamily(ev.result.status)) << ev.result.status_detail;
  EXPECT_NE(ev.result.eval_log.find("warm start expected: no"), std::string::npos) << ev.result.eval_log;
}

TEST(WarmStartSetting, AcceptsOnAndOffAndNamesTheVariableOtherwise) {
  testing::ScopedEnv restore("KF_WARM_START", nullptr);
  ::setenv("KF_WARM_START", "off", 1);
  EXPECT_EQ(harness_internal::WarmStartSetting(), "off");
  ::setenv("KF_WARM_START", "1", 1);
  EXPECT_EQ(harness_internal::WarmStartSetting(), "on");
  ::setenv("KF_WARM_START", "yes please", 1);
  try {
    harness_internal::WarmStartSetting();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KF_WARM_START"), std::string::npos) << e.what();
  }
  ::unsetenv("KF_WARM_START");
  EXPECT_EQ(harness_internal::WarmStartSetting(), "on");
}

}  // namespace
}  // namespace kf
