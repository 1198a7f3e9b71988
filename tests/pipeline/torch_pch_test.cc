// Precompiled torch header end to end (pipeline/torch_pch.hpp, kernelfoundry.pch), on examples/tasks/bias_relu
// with a fresh cache: the first candidate build compiles without a PCH and requests one, kf builds it in a
// sandboxed child and publishes it; the build of a changed candidate then compiles with it (GCC accepts it:
// no -Winvalid-pch warning) and the extension builds and loads (the build imports it). Slow (~1.5 min on 2
// cores: one PCH and two extension builds); prints both build times.
#include <gtest/gtest.h>

#include <cstdio>

#include "kernelfoundry/evaluate.hpp"
#include "pipeline/torch_pch.hpp"
#include "pipeline_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(TorchPch, PublishedHeadersLiveInTheCacheUnlessASharedDirectoryIsNamed) {
  {
    testing::ScopedEnv unset("KF_TORCH_PCH_DIR", nullptr);
    EXPECT_EQ(torch_pch::Root("/c"), fs::path("/c/pch/v1"));
  }
  testing::ScopedEnv shared("KF_TORCH_PCH_DIR", "/shared/pch");
  EXPECT_EQ(torch_pch::Root("/c"), fs::path("/shared/pch"));
}

TEST(TorchPchE2E, TheFirstBuildRequestsItAndTheNextBuildUsesIt) {
  TempDir tmp;
  const std::string cache_dir = (tmp.path() / "cache").string();
  testing::ScopedEnv cache("KF_CACHE_DIR", cache_dir.c_str());
  testing::ScopedEnv pch_on("KF_TORCH_PCH", "on");
  testing::ScopedEnv own_root("KF_TORCH_PCH_DIR", nullptr);  // this cache's own pch/v1, not a shared one
  const fs::path examples = testing::SourceDir() / "examples";
  Task task = testing::LoadTestTask(examples / "tasks" / "bias_relu");
  auto build = [&](const std::string& candidate_file) {
    Task t = task.WithBlocks(BlockUpdateShort{
        {"EVOLVE", testing::ReadFile(examples / "candidates" / "bias_relu" / candidate_file)}});
    EvaluateOptions o;
    o.work_root = tmp.path() / "work";
    BuildStageResult r = RunBuildStage(*MakeHarness(t), t, BuildPlan{true, false, "cpu"}, o);
    EXPECT_TRUE(r.candidate && r.candidate->result.Ok());
    return r.candidate ? *r.candidate : BuildRun{};
  };

  const BuildRun first = build("identical.cpp");
  ASSERT_TRUE(first.result.result);
  const std::string& out1 = first.result.result->stdout_text;
  EXPECT_NE(out1.find("kernelfoundry: no precompiled header yet: requested "), std::string::npos) << out1;
  EXPECT_NE(out1.find("kf: precompiled torch header "), std::string::npos) << out1;
  EXPECT_NE(out1.find(" for later builds"), std::string::npos) << out1;
  // One published entry: the header and its .gch, no temp directory left.
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(tmp.path() / "cache" / "pch" / "v1")) {
    if (e.is_directory()) entries.push_back(e.path());
  }
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].filename().string().size(), 64u);
  EXPECT_TRUE(fs::is_regular_file(entries[0] / "kf_torch_extension.h.gch"));
  EXPECT_GT(fs::file_size(entries[0] / "kf_torch_extension.h.gch"), 1u << 20);

  const BuildRun second = build("three_temporaries.cpp");
  ASSERT_TRUE(second.result.result);
  const std::string& out2 = second.result.result->stdout_text;
  EXPECT_NE(out2.find("kernelfoundry: precompiled header " + entries[0].filename().string().substr(0, 16)),
            std::string::npos) << out2;
  EXPECT_EQ(out2.find("[-Winvalid-pch]"), std::string::npos) << out2;  // GCC used it (no warning line)
  EXPECT_EQ(out2.find("not used because"), std::string::npos) << out2;
  EXPECT_EQ(out2.find("kf: precompiled torch header"), std::string::npos) << out2;  // nothing more to build
  std::printf("[ torch pch ] first build (no PCH, then the PCH): %.1f s; changed candidate with the PCH: %.1f s\n",
              first.wall_s, second.wall_s);
}

}  // namespace
}  // namespace kf
