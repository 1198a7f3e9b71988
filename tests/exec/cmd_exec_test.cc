// `kf exec` end to end: JSON and summary output, exit codes (child's code, 128+signal, 124, 127), --print-env.
#include <gtest/gtest.h>

#include <filesystem>

#include "test_util.hpp"

namespace kf {
namespace {

std::string Kf() { return (kf::testing::BinaryDir() / "kf").string(); }

class KfExec : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(Kf())) GTEST_SKIP() << "build the kf target first: " << Kf();
  }
};

TEST_F(KfExec, JsonAndExitCode) {
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec -- sh -c 'echo hi; exit 3'");
  EXPECT_EQ(rc, 3);
  Json j = Json::parse(out);
  EXPECT_EQ(j["result"]["returncode"], 3);
  EXPECT_EQ(j["result"]["stdout"], "hi\n");
  EXPECT_EQ(j["reason"], "exited");
}

TEST_F(KfExec, TimeoutIs124AndSignalIs128PlusN) {
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec --timeout 0.5 -- sleep 100");
  EXPECT_EQ(rc, 124);
  Json j = Json::parse(out);
  EXPECT_EQ(j["reason"], "wall_timeout");
  EXPECT_EQ(j["result"]["message"], "Process timed out after 0.5 seconds");
  auto [rc2, out2] = kf::testing::RunShell(Kf() + " exec --summary -- sh -c 'kill -SEGV $$'");
  EXPECT_EQ(rc2, 128 + 11);
  EXPECT_NE(out2.find("reason:      signaled"), std::string::npos) << out2;
  EXPECT_NE(out2.find("returncode:  -11"), std::string::npos) << out2;
}

TEST_F(KfExec, SpawnFailureIs127) {
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec -- kf-no-such-command-xyz");
  EXPECT_EQ(rc, 127);
  EXPECT_EQ(Json::parse(out)["reason"], "spawn_failed");
}

TEST_F(KfExec, PrintEnvDropsSecrets) {
  auto [rc, out] = kf::testing::RunShell("OPENAI_API_KEY=leak " + Kf() +
                                         " exec --print-env --env FOO=1 --env MY_TOKEN=2");
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("FOO=1\n"), std::string::npos);
  EXPECT_EQ(out.find("MY_TOKEN"), std::string::npos);
  EXPECT_EQ(out.find("OPENAI_API_KEY"), std::string::npos);
}

TEST_F(KfExec, LimitsAndMarkerOptions) {
  auto [rc, out] = kf::testing::RunShell(
      Kf() + " exec --end-marker pytest --grace 0.3 --memory 512M --nofile 64 --force-subreaper -- "
             "sh -c \"echo '=== 2 passed in 0.1s ==='; sleep 30\"");
  EXPECT_EQ(rc, 124);
  Json j = Json::parse(out);
  EXPECT_EQ(j["reason"], "end_marker_grace");
  EXPECT_EQ(j["containment"], "subreaper");
  EXPECT_EQ(j["result"]["message"],
            "All tests passed but the process did not exit cleanly and had to be terminated.");
  EXPECT_EQ(j["limits"]["open_files"], "RLIMIT_NOFILE");
  EXPECT_EQ(j["limits"]["memory"], "RLIMIT_AS (address space, per process)");
}

TEST_F(KfExec, BadOptionValues) {
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec --memory 12Q -- true");
  EXPECT_EQ(rc, 3);
  EXPECT_NE(out.find("--memory"), std::string::npos);
}

}  // namespace
}  // namespace kf
