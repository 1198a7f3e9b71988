// Build stage with real build hooks: B15 (golden edge_text_build.json: a relative artifact path failed the
// reference's build; ours keys it in the task tree), B14 (a timed-out build keeps its termination message
// and output), missing / out-of-tree artifacts are errors, candidate and reference artifacts both reach the
// test tree.
#include <gtest/gtest.h>

#include "kernelfoundry/evaluate.hpp"
#include "pipeline_util.hpp"

namespace kf {
namespace {

using testing::TempDir;
using testing::WriteFile;

const char* kBuildTaskPy = R"PY(import time
from pathlib import Path

import pytest

from kernelfoundry import TestBase

import mode

TASK_DIR = Path(__file__).parent


class TestBuildModes(TestBase):
    def build(self, gpu_arch, **buildtime):
        m = mode.MODE
        print(f"building {m} for {gpu_arch} with {buildtime}", flush=True)
        if m == "hang":
            time.sleep(3600)
        if m == "missing":
            return ["not_there.so"]
        if m == "outside":
            return ["../../outside.txt"]
        if m == "fail":
            raise SystemExit(3)
        (TASK_DIR / "out").mkdir(exist_ok=True)
        (TASK_DIR / "out" / "cand.txt").write_text(f"{gpu_arch} {buildtime['level']}")
        return ["out/cand.txt"]

    def build_reference(self, gpu_arch, **buildtime):
        (TASK_DIR / "ref.txt").write_text("ref " + gpu_arch)
        return [str(TASK_DIR / "ref.txt")]

    def test_artifacts_overlaid(self):
        assert (TASK_DIR / "out" / "cand.txt").read_text() == "cpu 7"
        assert (TASK_DIR / "ref.txt").read_text() == "ref cpu"

    @pytest.mark.performance
    def test_bench(self, measure_runtime):
        measure_runtime(sum, lambda: None, args=([1.0] * 8,), auto_replicate_inputs_size=0)
)PY";

class BuildModes : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::UseTestCache();
    dir_ = tmp_.path() / "build_modes";
    WriteFile(dir_ / "config.yaml",
              "task_name: build_modes\njob_name: build_modes_test\ntask_origin: custom\nlanguage: python\n"
              "gpu_arch: cpu\nhas_build_step: true\nhas_reference_build_step: true\nbuild_timeout: 8\n"
              "hyperparameters:\n  buildtime:\n    level: 7\n"
              "eval_config:\n  warmup_min_time: 0.05\n  perf_trials_min_time: 0.1\n");
    WriteFile(dir_ / "conftest.py", "from kernelfoundry.conftest import *\n");
    WriteFile(dir_ / "mode.py", "# [EVOLVE_START]\nMODE = \"ok\"\n# [EVOLVE_END]\n");
    WriteFile(dir_ / "task.py", kBuildTaskPy);
  }
  Task Load(const std::string& mode, bool discover = false) {
    Task task;
    if (discover) {
      task = testing::LoadTestTask(dir_);
    } else {
      TaskCreateOptions o;
      o.discover_tests = false;
      task = Task::Create(dir_, o).first;
    }
    return task.WithBlocks(BlockUpdateShort{{"EVOLVE", "MODE = \"" + mode + "\"\n"}});
  }
  BuildStageResult BuildCandidate(Task& task) {
    EvaluateOptions o;
    o.work_root = tmp_.path() / "work";
    return RunBuildStage(*MakeHarness(task), task, BuildPlan{true, false, "cpu"}, o);
  }

  TempDir tmp_;
  std::filesystem::path dir_;
};

TEST_F(BuildModes, CandidateAndReferenceBuildAndBothReachTheTests) {
  Task task = Load("ok", /*discover=*/true);
  EvaluateOptions o;
  o.work_root = tmp_.path() / "work";
  std::vector<std::string> phases;
  o.progress = [&](const PhaseEvent& e) {
    if (e.finished) phases.push_back(std::string(PhaseName(e.phase)) + (e.ok ? " ok" : " failed"));
  };
  Evaluation ev = Evaluate(task, std::nullopt, o);
  ASSERT_TRUE(ev.task.build_result && ev.task.build_result_reference);
  EXPECT_EQ(*ev.task.build_result->artifacts->Get("out/cand.txt"), "cpu 7");  // hyperparameters.buildtime
  EXPECT_EQ(*ev.task.build_result_reference->artifacts->Get("ref.txt"), "ref cpu");
  // (A later run of this test takes the build from kf's build cache: the message then names the hit.)
  EXPECT_EQ(ev.task.build_result->result->message->rfind("Build completed successfully", 0), 0u);
  const std::string& build_out = ev.task.build_result->result->stdout_text;
  EXPECT_NE(build_out.find("building ok for cpu with {'level': 7}"), std::string::npos);
  EXPECT_EQ(ev.result.perf_score, 5) << ev.result.eval_log;
  EXPECT_EQ(ev.result.status, EvalStatus::kCorrect);
  EXPECT_NE(std::find(phases.begin(), phases.end(), "build candidate ok"), phases.end());
  EXPECT_NE(std::find(phases.begin(), phases.end(), "build reference ok"), phases.end());
}

// Golden edge_text_build.json: the reference's build failed ("'generated/out.txt' is not in the subpath").
TEST_F(BuildModes, EdgeTextRelativeArtifactIsKeyedInTheTree) {
  std::filesystem::path edge = testing::CopyFixture("edge_text", tmp_.path());
  TaskCreateOptions co;
  co.discover_tests = false;
  Task task = Task::Create(edge, co).first;
  BuildStageResult b = BuildCandidate(task);
  ASSERT_TRUE(b.candidate.has_value());
  ASSERT_TRUE(task.build_result->Ok()) << task.build_result->result->message.value_or("");
  EXPECT_EQ(task.build_result->result->message->rfind("Build completed successfully", 0), 0u);
  ASSERT_TRUE(task.build_result->artifacts.has_value());
  EXPECT_EQ(task.build_result->artifacts->ListFiles(), std::vector<std::string>{"generated/out.txt"});
  EXPECT_EQ(*task.build_result->artifacts->Get("generated/out.txt"), "generated by build.sh\n");
  Json golden = testing::Golden("edge_text_build");
  for (const Json& key : golden["build_result"]["worker_info_keys"]) {
    EXPECT_TRUE(task.build_result->worker_info->contains(key.get<std::string>())) << key;
  }
  EXPECT_FALSE(task.build_result_reference.has_value());  // has_reference_build_step: false
}

// B14: the reference replaced "Process timed out…" by "Build failed with non-zero return code".
TEST_F(BuildModes, TimedOutBuildKeepsTerminationMessageAndOutput) {
  Task task = Load("hang");
  EvaluateOptions o;
  o.work_root = tmp_.path() / "work";
  o.test_reference = false;
  Evaluation ev = Evaluate(task, std::nullopt, o);
  const ProcessResult& r = *ev.task.build_result->result;
  // Issue 10: the limit that fired is named first; B14's termination message is kept below it.
  EXPECT_EQ(r.message, "Build timed out: the task's build_timeout of 8 s ended the build (config.yaml build_timeout)\n"
                       "Process timed out after 8 seconds\nBuild failed with non-zero return code");
  EXPECT_NE(r.stdout_text.find("building hang for cpu"), std::string::npos);
  EXPECT_EQ(ev.result.status, EvalStatus::kBuildTimeout);
  EXPECT_EQ(ev.result.perf_score, 1);
  EXPECT_TRUE(testing::ProcessesUnder(tmp_.path() / "work").empty());
}

TEST_F(BuildModes, FailingHookIsBuildErrorWithItsOutput) {
  Task task = Load("fail");
  BuildStageResult b = BuildCandidate(task);
  const ProcessResult& r = *task.build_result->result;
  EXPECT_EQ(r.returncode, 3);
  EXPECT_EQ(r.message, "Build failed with non-zero return code");
  EXPECT_NE(r.stdout_text.find("building fail"), std::string::npos);
  EXPECT_EQ(b.candidate->reason, TerminationReason::kExited);
}

// B15: the reference skipped missing artifacts silently.
TEST_F(BuildModes, MissingArtifactIsABuildError) {
  Task task = Load("missing");
  BuildCandidate(task);
  const ProcessResult& r = *task.build_result->result;
  EXPECT_FALSE(task.build_result->Ok());
  EXPECT_EQ(r.returncode, -1);
  EXPECT_NE(r.message->find("Build failed with error: "), std::string::npos);
  EXPECT_NE(r.message->find("not_there.so"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("building missing"), std::string::npos);  // output kept
}

TEST_F(BuildModes, ArtifactOutsideTheTreeIsABuildError) {
  Task task = Load("outside");
  WriteFile(tmp_.path() / "work" / "outside.txt", "x");  // exists, but outside task_data
  BuildCandidate(task);
  EXPECT_FALSE(task.build_result->Ok());
  EXPECT_NE(task.build_result->result->message->find("outside the task tree"), std::string::npos);
}

}  // namespace
}  // namespace kf
