// Stage helpers and worker_info: gpu_arch splitting (B6), template variants (B21), tool versions.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/worker_info.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

// B6: the reference split "lnl, bmg" without stripping and targeted "test_custom_task_ bmg".
TEST(GpuArchs, SplitAndStripped) {
  EXPECT_EQ(SplitGpuArchs("lnl, bmg"), (std::vector<std::string>{"lnl", "bmg"}));
  EXPECT_EQ(SplitGpuArchs(" cpu "), (std::vector<std::string>{"cpu"}));
  EXPECT_EQ(SplitGpuArchs("a,,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(SplitGpuArchs(" , ").empty());
}

TEST(GpuArchs, ResolveFromOptionsOrConfig) {
  Task t;
  t.config = {{"gpu_arch", "lnl, bmg"}};
  EXPECT_EQ(ResolveGpuArchs(t, {}), (std::vector<std::string>{"lnl", "bmg"}));
  EvaluateOptions o;
  o.gpu_arch = "cpu";
  EXPECT_EQ(ResolveGpuArchs(t, o), (std::vector<std::string>{"cpu"}));
  t.config = Json::object();
  try {
    ResolveGpuArchs(t, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "gpu_arch");
  }
}

// Spec §4.4.1 typing, with B21 fixed: parameters travel as JSON values, never re-parsed from the key.
TEST(TemplateParameters, TypedAndDeduplicated) {
  std::string code =
      "auto a = forward_templated<16, 32>(x);\n"
      "auto b = forward_templated<1.5, true, fast>(x);\n"
      "auto c = forward_templated<16, 32>(y);\n"
      "auto d = forward_templated<-4>(y);\n";
  std::vector<Json> p = FindTemplateParameters(code);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], Json::parse("[16, 32]"));
  EXPECT_EQ(p[1], Json::parse("[1.5, true, \"fast\"]"));
  EXPECT_EQ(p[2], Json::parse("[-4]"));
  EXPECT_EQ(TemplateVariantKey(p[0]), "custom_16_32");
  EXPECT_EQ(TemplateVariantKey(p[1]), "custom_1.5_True_fast");
  EXPECT_EQ(TemplateVariantKey(p[2]), "custom_-4");
  EXPECT_TRUE(FindTemplateParameters("return torch::relu(x);").empty());
}

TEST(TemplateParameters, VariantsFromTheEvolveBlock) {
  Task t;
  t.blocks["EVOLVE"]["k.cpp"] = {"out = forward_templated<8>(x); out = forward_templated<16>(x);\n"};
  std::vector<TestVariant> v = MakeTestVariants(t, true, true);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].key, "custom_8");
  EXPECT_EQ(*v[0].template_params, Json::parse("[8]"));
  EXPECT_EQ(v[1].key, "custom_16");
  EXPECT_EQ(v[2].key, "reference");
  EXPECT_TRUE(v[2].reference);
  t.blocks["EVOLVE"]["k.cpp"] = {"plain\n"};
  v = MakeTestVariants(t, true, false);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].key, "custom");
  EXPECT_FALSE(v[0].template_params.has_value());
}

TEST(WorkerInfo, ParsesToolVersions) {
  EXPECT_EQ(ParseToolVersion("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, "
                             "V13.0.88\n"),
            "13.0.88");
  EXPECT_EQ(ParseToolVersion("g++ (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright"), "12.2.0");
  EXPECT_EQ(ParseToolVersion("Debian clang version 14.0.6\nTarget: x86_64"), "14.0.6");
  EXPECT_EQ(ParseToolVersion("Python 3.11.2\n"), "3.11.2");
  EXPECT_EQ(ParseToolVersion("Intel(R) oneAPI DPC++/C++ Compiler 2024.0.0 (2024.0.0.20231017)"), "2024.0.0");
  EXPECT_EQ(ParseToolVersion(""), "");
}

// Tool versions are remembered across processes by the executable's real path, size and mtime: a second
// lookup does not run the tool, a touched tool is probed again, a failing one is never remembered.
TEST(WorkerInfo, ToolVersionsAreRememberedPerExecutableStamp) {
  testing::TempDir temp;
  const std::filesystem::path dir = temp.path();
  std::filesystem::create_directories(dir / "bin");
  const std::filesystem::path tool = dir / "bin" / "fakecc", calls = dir / "calls";
  auto write_tool = [&](const std::string& body) {
    std::ofstream(tool) << "#!/bin/sh\necho probed >> '" << calls.string() << "'\n" << body;
    std::filesystem::permissions(tool, std::filesystem::perms::owner_all);
  };
  auto probes = [&] {
    std::ifstream in(calls);
    return static_cast<int>(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
  };
  write_tool("echo 'fakecc (Debian 12.2.0-14) 12.2.0'\n");
  testing::ScopedEnv env({{"KF_CACHE_DIR", (dir / "cache").string()}, {"PATH", (dir / "bin").string() + ":/usr/bin:/bin"}});
  EXPECT_EQ(CachedToolVersion("fakecc"), "12.2.0");
  EXPECT_EQ(probes(), 1);
  EXPECT_EQ(CachedToolVersion("fakecc"), "12.2.0");
  EXPECT_EQ(CachedToolVersion(tool.string()), "12.2.0");
  EXPECT_EQ(probes(), 1);
  // Replaced (new size and mtime): probed again.
  write_tool("echo 'fakecc (Debian 13.1.0-1) 13.1.0'\n");
  std::filesystem::last_write_time(tool, std::filesystem::last_write_time(tool) + std::chrono::seconds(5));
  EXPECT_EQ(CachedToolVersion("fakecc"), "13.1.0");
  EXPECT_EQ(probes(), 2);
  // Failing: "" every time, each a probe.
  write_tool("exit 3\n");
  std::filesystem::last_write_time(tool, std::filesystem::last_write_time(tool) + std::chrono::seconds(10));
  EXPECT_EQ(CachedToolVersion("fakecc"), "");
  EXPECT_EQ(CachedToolVersion("fakecc"), "");
  EXPECT_EQ(probes(), 4);
  EXPECT_EQ(CachedToolVersion("no-such-tool-here"), "");
  // The file holds the two good answers, nothing else (no temp files left).
  const Json known = ParseJson(testing::ReadFile(dir / "cache" / "tool_versions.json"), "tool_versions.json");
  EXPECT_EQ(known.size(), 2u) << known.dump();
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "cache")) entries += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(entries, 1u);
}

// The reference's 13 keys in its order (golden e2e_relu_cpu), then ours; cached once per process.
TEST(WorkerInfo, HasReferenceKeysAndIsCached) {
  const Json& info = GetWorkerInfo();
  Json golden = testing::Golden("e2e_relu_cpu")["candidate_reference_equivalent"]["build_result"]["worker_info"];
  std::vector<std::string> keys, expected;
  for (const auto& [k, v] : info.items()) keys.push_back(k);
  for (const auto& [k, v] : golden.items()) expected.push_back(k);
  ASSERT_GE(keys.size(), expected.size());
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + static_cast<long>(expected.size())), expected);
  for (const char* k : {"gxx_version", "clang_version", "python_version", "kf_version"}) {
    EXPECT_TRUE(info.contains(k)) << k;
  }
  EXPECT_FALSE(info["hostname"].get<std::string>().empty());
  EXPECT_GT(info["total_system_memory_kb"].get<int64_t>(), 0);
  EXPECT_EQ(&GetWorkerInfo(), &info);
  // This machine has g++ and /usr/bin/python3 (with torch): the probes find them.
  EXPECT_FALSE(info["gxx_version"].get<std::string>().empty());
  EXPECT_FALSE(info["python_version"].get<std::string>().empty());
  EXPECT_FALSE(info["torch_version"].get<std::string>().empty());
}

// A native evaluation's worker_info: the same keys in the same order, the machine facts of the pytest one,
// "" for the Python facts (no Python process is started for them; tests/cli/native_no_python_test.cc checks
// a whole `kf run`). Cached per kind.
TEST(WorkerInfo, NativeKindHasNoPythonFactsAndTheSameKeys) {
  EXPECT_FALSE(WorkerInfoNeedsPython("native"));
  EXPECT_TRUE(WorkerInfoNeedsPython("pytest"));
  const Json& native = GetWorkerInfo("native");
  const Json& pytest = GetWorkerInfo("pytest");
  EXPECT_EQ(&GetWorkerInfo("native"), &native);
  EXPECT_EQ(&GetWorkerInfo(), &pytest);
  std::vector<std::string> native_keys, pytest_keys;
  for (const auto& [k, v] : native.items()) native_keys.push_back(k);
  for (const auto& [k, v] : pytest.items()) pytest_keys.push_back(k);
  EXPECT_EQ(native_keys, pytest_keys);
  EXPECT_EQ(native["python_version"], "");
  EXPECT_EQ(native["torch_version"], "");
  for (const char* k : {"gxx_version", "clang_version", "cpu_info", "hostname", "total_system_memory_kb", "kf_version"})
    EXPECT_EQ(native[k], pytest[k]) << k;
}

}  // namespace
}  // namespace kf
