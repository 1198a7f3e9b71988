// The persistent cache directory never depends on HOME being writable (issue 10, fault 5): KF_CACHE_DIR,
// XDG_CACHE_HOME, HOME, then a private per-uid directory under the temp dir that is refused when another
// user could control it; an explicit KF_CACHE_DIR that cannot be used is reported with its path.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>

#include <gtest/gtest.h>

#include "kernelfoundry/cache_dir.hpp"
#include "kernelfoundry/test_discovery.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::ScopedEnv;
using testing::TempDir;

std::string PerUserName() { return "kernelfoundry-" + std::to_string(::geteuid()); }

TEST(CacheDir, UnwritableHomeFallsBackToAPrivatePerUserDirectory) {
  TempDir tmp;
  ScopedEnv env({{"KF_CACHE_DIR", std::nullopt}, {"XDG_CACHE_HOME", std::nullopt},
                 {"HOME", "/proc/self/fdinfo"}, {"TMPDIR", tmp.path().string()}});
  CacheDirChoice c = ResolveCacheDir();
  ASSERT_TRUE(c.usable()) << c.problem;
  EXPECT_EQ(c.path, tmp.path() / PerUserName());
  EXPECT_EQ(c.source, "per-user temp dir");
  struct stat st {};
  ASSERT_EQ(::lstat(c.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(DefaultCacheDir(), c.path);
}

TEST(CacheDir, UnsetHomeUsesThePerUserDirectoryNotOneSharedByEveryUser) {
  TempDir tmp;
  ScopedEnv env({{"KF_CACHE_DIR", std::nullopt}, {"XDG_CACHE_HOME", std::nullopt}, {"HOME", std::nullopt},
                 {"TMPDIR", tmp.path().string()}});
  CacheDirChoice c = ResolveCacheDir();
  ASSERT_TRUE(c.usable()) << c.problem;
  EXPECT_EQ(c.path, tmp.path() / PerUserName());
  EXPECT_NE(c.path.filename(), "kernelfoundry-cache");  // the old shared name
}

TEST(CacheDir, XdgThenHomeAreUsedWhenWritable) {
  TempDir tmp;
  {
    ScopedEnv env({{"KF_CACHE_DIR", std::nullopt}, {"XDG_CACHE_HOME", (tmp.path() / "xdg").string()},
                   {"HOME", (tmp.path() / "home").string()}});
    CacheDirChoice c = ResolveCacheDir();
    EXPECT_EQ(c.path, tmp.path() / "xdg" / "kernelfoundry");
    EXPECT_TRUE(fs::is_directory(c.path));
  }
  ScopedEnv env({{"KF_CACHE_DIR", std::nullopt}, {"XDG_CACHE_HOME", "relative/ignored"},
                 {"HOME", (tmp.path() / "home").string()}});
  EXPECT_EQ(ResolveCacheDir().path, tmp.path() / "home" / ".cache" / "kernelfoundry");
}

TEST(CacheDir, APlantedPerUserDirectoryIsRefusedNotShared) {
  TempDir tmp;
  ScopedEnv env({{"KF_CACHE_DIR", std::nullopt}, {"XDG_CACHE_HOME", std::nullopt}, {"HOME", std::nullopt},
                 {"TMPDIR", tmp.path().string()}});
  const fs::path dir = tmp.path() / PerUserName();
  fs::create_directory(dir);
  ::chmod(dir.c_str(), 0777);  // what another user would leave for us
  CacheDirChoice c = ResolveCacheDir();
  EXPECT_FALSE(c.usable());
  EXPECT_NE(c.problem.find("writable by others"), std::string::npos) << c.problem;
  fs::remove(dir);
  fs::create_directory_symlink(tmp.path(), dir);  // a symlink pointing elsewhere
  c = ResolveCacheDir();
  EXPECT_FALSE(c.usable());
  EXPECT_NE(c.problem.find("not a directory"), std::string::npos) << c.problem;
}

TEST(CacheDir, AnUnusableExplicitCacheDirIsReportedWithItsPath) {
  ScopedEnv env({{"KF_CACHE_DIR", std::string("/proc/self/fdinfo/kf-cache")}, {"HOME", std::nullopt}});
  CacheDirChoice c = ResolveCacheDir();
  EXPECT_FALSE(c.usable());
  EXPECT_EQ(c.source, "KF_CACHE_DIR");
  EXPECT_EQ(c.path, "/proc/self/fdinfo/kf-cache");
  EXPECT_NE(c.problem.find("/proc/self/fdinfo/kf-cache"), std::string::npos) << c.problem;
}

}  // namespace
}  // namespace kf
