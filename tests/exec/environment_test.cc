// Child environment: allow-list, secret filtering (B22 fixed: *_API_KEY never passes), PYTHONPATH prefixing
// — against the reference's safe_copy_env probe, and through a real child running `env`.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernelfoundry/process.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

TEST(ChildEnvironment, SafeCopyEnvProbeWithSecretsFixed) {
  Json probe = kf::testing::Golden("probes")["safe_copy_env"];
  ProcessOptions o;
  o.inherit_allowed_env = false;
  for (const auto& [k, v] : probe["src"].items()) o.env_add[k] = v.get<std::string>();
  o.env_add["KERNELFOUNDRY_TEST"] = "1";
  o.pythonpath_prepend = {"/a", "/b"};
  auto env = BuildChildEnvironment(o);
  // The reference's result, minus what it leaked: OPENAI_API_KEY (B22) and TOKEN_FILE.
  std::map<std::string, std::string> expected;
  for (const auto& [k, v] : probe["result"].items()) expected[k] = v.get<std::string>();
  expected.erase("OPENAI_API_KEY");
  expected.erase("TOKEN_FILE");
  EXPECT_EQ(env, expected);
  // Reference: "/only:" (an empty entry = the working directory on sys.path); ours has no empty entry.
  ProcessOptions only;
  only.inherit_allowed_env = false;
  only.env_add = {{"X", "1"}};
  only.pythonpath_prepend = {"/only"};
  EXPECT_EQ(probe["no_pythonpath"]["PYTHONPATH"], "/only:");
  EXPECT_EQ(BuildChildEnvironment(only)["PYTHONPATH"], "/only");
}

TEST(ChildEnvironment, SecretNamesAndAllowList) {
  ProcessOptions o;
  for (const char* name : {"OPENAI_API_KEY", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID",
                           "GH_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "SSH_PRIVATE", "HTTP_AUTH",
                           "RABBITMQ_USERNAME", "PYTHON_API_KEY"}) {
    EXPECT_TRUE(IsSecretEnvName(name, o)) << name;
  }
  for (const char* name : {"PATH", "HOME", "USERNAME", "CUDA_VISIBLE_DEVICES"}) {
    EXPECT_FALSE(IsSecretEnvName(name, o)) << name;
  }
  o.allow_secret_names = {"HF_TOKEN"};
  EXPECT_FALSE(IsSecretEnvName("HF_TOKEN", o));
  o.env_add = {{"HF_TOKEN", "x"}, {"MY_API_KEY", "y"}, {"PLAIN", "z"}};
  auto env = BuildChildEnvironment(o);
  EXPECT_EQ(env.count("HF_TOKEN"), 1u);
  EXPECT_EQ(env.count("MY_API_KEY"), 0u);
  EXPECT_EQ(env["PLAIN"], "z");
  EXPECT_FALSE(env["PATH"].empty());
}

TEST(ChildEnvironment, ChildSeesNoSecretsFromOurEnvironment) {
  setenv("OPENAI_API_KEY", "sk-leak", 1);
  setenv("DB_PASSWORD", "hunter2", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "aws-leak", 1);
  setenv("KF_TEST_ALLOWED_XYZ", "x", 1);  // KF_* is allow-listed
  setenv("RANDOM_UNLISTED_VAR", "x", 1);
  setenv("OMP_NUM_THREADS", "3", 1);
  ProcessOptions o;
  o.argv = {"env"};
  o.wall_timeout = std::chrono::seconds(10);
  ProcessRun run = RunProcess(o);
  unsetenv("OPENAI_API_KEY");
  unsetenv("DB_PASSWORD");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  unsetenv("KF_TEST_ALLOWED_XYZ");
  unsetenv("RANDOM_UNLISTED_VAR");
  ASSERT_EQ(run.result.returncode, 0) << run.result.stderr_text;
  const std::string& out = run.result.stdout_text;
  EXPECT_EQ(out.find("OPENAI_API_KEY"), std::string::npos);
  EXPECT_EQ(out.find("sk-leak"), std::string::npos);
  EXPECT_EQ(out.find("DB_PASSWORD"), std::string::npos);
  EXPECT_EQ(out.find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
  EXPECT_EQ(out.find("RANDOM_UNLISTED_VAR"), std::string::npos);
  EXPECT_NE(out.find("OMP_NUM_THREADS=3\n"), std::string::npos);
  EXPECT_NE(out.find("KF_TEST_ALLOWED_XYZ=x"), std::string::npos);
  EXPECT_NE(out.find("PATH="), std::string::npos);
}

}  // namespace
}  // namespace kf
