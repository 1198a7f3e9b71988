// kf's build cache (src/pipeline/build_cache.hpp; issue 10 fault 2, issue 15 item 2): the key covers
// everything the compile can read — every file of the task tree (a header in another folder included), its
// mode, the target, the archs, the buildtime hyperparameters, the config and the toolchain (CXX) — entries
// are published atomically and read back exactly, a corrupt entry is a miss, one key builds once at a time
// and a build killed while holding the lock does not block the next.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "pipeline/build_cache.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using build_cache::BuildKey;
using build_cache::Cache;
using testing::TempDir;

Task OffsetTask(const std::string& offset) {
  Task t;
  t.task_data.Set("bias_relu_kernel.cpp", "#include \"inc/params.h\"\nfloat f() { return KF_OFFSET; }\n", FileMeta{0644, 1.0});
  t.task_data.Set("inc/params.h", "#define KF_OFFSET " + offset + "\n", FileMeta{0644, 2.0});
  t.config = Json{{"task_name", "t"}, {"build_timeout", 240}};
  return t;
}

BuildResult Ok(const std::string& so) {
  BuildResult r;
  ProcessResult p;
  p.returncode = 0;
  p.stdout_text = "built";
  p.message = "Build completed successfully";
  r.result = p;
  MemoryFileMap a;
  a.Set("kernel.so", so, FileMeta{0755, 3.0});
  r.artifacts = a;
  return r;
}

TEST(BuildCacheKey, EverythingTheCompileCanReadIsInTheKey) {
  const std::string tc = "{\"toolchain\":1}";
  const Task a = OffsetTask("0.0f");
  const std::string k = BuildKey(a, BuildTarget::kCandidate, "cpu", "pytest", tc);
  EXPECT_EQ(k.size(), 64u);
  Task copy = OffsetTask("0.0f");
  copy.task_data.SetMeta("inc/params.h", FileMeta{0644, 99.0});  // mtime only: same build
  EXPECT_EQ(BuildKey(copy, BuildTarget::kCandidate, "cpu", "pytest", tc), k);
  // The input: a header in another folder than the source.
  EXPECT_NE(BuildKey(OffsetTask("100.0f"), BuildTarget::kCandidate, "cpu", "pytest", tc), k);
  Task mode = OffsetTask("0.0f");
  mode.task_data.SetMeta("inc/params.h", FileMeta{0755, 2.0});
  EXPECT_NE(BuildKey(mode, BuildTarget::kCandidate, "cpu", "pytest", tc), k);
  Task extra = OffsetTask("0.0f");
  extra.task_data.Set("inc/other.h", "", FileMeta{0644, 1.0});
  EXPECT_NE(BuildKey(extra, BuildTarget::kCandidate, "cpu", "pytest", tc), k);
  EXPECT_NE(BuildKey(a, BuildTarget::kReference, "cpu", "pytest", tc), k);
  EXPECT_NE(BuildKey(a, BuildTarget::kCandidate, "cpu,lnl", "pytest", tc), k);
  EXPECT_NE(BuildKey(a, BuildTarget::kCandidate, "cpu", "native", tc), k);
  EXPECT_NE(BuildKey(a, BuildTarget::kCandidate, "cpu", "pytest", "{\"toolchain\":2}"), k);
  Task hyper = OffsetTask("0.0f");
  hyper.hyperparameters = Json{{"buildtime", {{"BLOCK", 16}}}, {"runtime", nullptr}};
  EXPECT_NE(BuildKey(hyper, BuildTarget::kCandidate, "cpu", "pytest", tc), k);
  Task config = OffsetTask("0.0f");
  config.config["build"] = Json::array({"make"});
  EXPECT_NE(BuildKey(config, BuildTarget::kCandidate, "cpu", "pytest", tc), k);
}

TEST(BuildCacheKey, TheToolchainFingerprintFollowsCxxAndFlags) {
  const char* old = std::getenv("CXX");
  std::string saved = old ? old : "";
  ::setenv("CXX", "/usr/bin/g++", 1);
  const std::string a = build_cache::ToolchainFingerprint("pytest");
  ::setenv("CXX", "/bin/true", 1);  // another "compiler"
  const std::string b = build_cache::ToolchainFingerprint("pytest");
  ::setenv("CXXFLAGS", "-O0", 1);
  const std::string c = build_cache::ToolchainFingerprint("pytest");
  ::unsetenv("CXXFLAGS");
  if (old) ::setenv("CXX", saved.c_str(), 1);
  else ::unsetenv("CXX");
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  Json j = Json::parse(a);
  EXPECT_NE(j["cxx"]["version"].get<std::string>().find("g++"), std::string::npos) << a;
  EXPECT_FALSE(j["kf_version"].get<std::string>().empty());
  EXPECT_EQ(j["kf_content"].get<std::string>().size(), 64u);
}

TEST(BuildCacheStore, RoundTripCorruptEntriesAndFailedBuilds) {
  TempDir tmp;
  Cache cache(tmp.path() / "builds" / "v1");
  const std::string key(64, 'a');
  EXPECT_FALSE(cache.Lookup(key).has_value());
  EXPECT_EQ(cache.Store(key, Ok("ELF-bytes")), "");
  std::optional<BuildResult> hit = cache.Lookup(key);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit->artifacts->Find("kernel.so"), "ELF-bytes");
  EXPECT_EQ(hit->artifacts->Meta("kernel.so")->mode, 0755u);
  EXPECT_EQ(hit->result->stdout_text, "built");
  EXPECT_NE(cache.StoredAt(key), "");
  // Only the entry itself (and no temp file) is left in the directory.
  int files = 0;
  for (auto& e : fs::directory_iterator(cache.root())) files += e.path().filename().string()[0] == '.' ? 100 : 1;
  EXPECT_EQ(files, 1);
  // A torn or foreign entry is a miss and is removed.
  testing::WriteFile(cache.root() / (key + ".json"), "{\"format\": 1, \"key\": \"");
  EXPECT_FALSE(cache.Lookup(key).has_value());
  EXPECT_FALSE(fs::exists(cache.root() / (key + ".json")));
  const std::string other(64, 'b');
  ASSERT_EQ(cache.Store(other, Ok("x")), "");
  fs::copy_file(cache.root() / (other + ".json"), cache.root() / (key + ".json"));
  EXPECT_FALSE(cache.Lookup(key).has_value());  // key mismatch inside
  // A failed build read back is never served.
  BuildResult failed = Ok("x");
  failed.result->returncode = 1;
  ASSERT_EQ(cache.Store(key, failed), "");
  EXPECT_FALSE(cache.Lookup(key).has_value());
}

TEST(BuildCacheLock, OneBuildPerKeyAndAKilledHolderDoesNotBlock) {
  TempDir tmp;
  Cache cache(tmp.path() / "c");
  const std::string key(64, 'c');
  std::atomic<int> compiles{0};
  // Two builders of one key: the second waits for the first's entry instead of compiling again.
  auto builder = [&] {
    Cache::Lock lock = cache.Acquire(key, std::chrono::seconds(10));
    EXPECT_TRUE(lock.held());
    if (cache.Lookup(key)) return;
    ++compiles;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(cache.Store(key, Ok("once")), "");
  };
  std::thread t1(builder), t2(builder);
  t1.join();
  t2.join();
  EXPECT_EQ(compiles.load(), 1);

  // A build process killed while it holds the lock (e.g. at its timeout): the lock dies with it.
  const std::string k2(64, 'd');
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    Cache::Lock held = cache.Acquire(k2, std::chrono::seconds(5));
    (void)!::write(ready[1], held.held() ? "1" : "0", 1);
    ::pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, '1');
  EXPECT_FALSE(cache.Acquire(k2, std::chrono::milliseconds(300)).held());  // really held by the child
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(cache.Acquire(k2, std::chrono::seconds(5)).held());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace kf
