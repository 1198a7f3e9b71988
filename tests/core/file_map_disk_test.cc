// MemoryFileMap <-> directories: the fixture packages against the reference goldens, ToDisk/FromDisk round
// trips (mode + mtime), and the refusals (symlinks, specials, "..", limits) that must write nothing.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <set>

#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::Golden;
using testing::ReadFile;
using testing::SharedDir;
using testing::TempDir;
using testing::WriteFile;

using testing::ExpectError;

struct stat Stat(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st;
}
uint32_t DiskMode(const fs::path& p) { return Stat(p).st_mode & 0777; }
double DiskMtime(const fs::path& p) {
  const struct stat st = Stat(p);
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
}
size_t CountEntries(const fs::path& dir) {
  if (!fs::exists(dir)) return 0;
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::recursive_directory_iterator(dir)) ++n;
  return n;
}
std::set<std::string> KeySet(const MemoryFileMap& m) {
  const auto v = m.ListFiles();
  return {v.begin(), v.end()};
}

// ---- fixtures vs goldens ----

struct FixtureCase {
  const char* name;
  std::set<std::string> kept_by_us;  // files the golden lacks: Task.create removed them, or B4 dropped them
};

class FixtureDir : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(FixtureDir, LoadsToGoldenFilesContentsAndModes) {
  const FixtureCase& c = GetParam();
  const fs::path dir = SharedDir() / "fixtures" / "tasks" / c.name;
  const Json golden = Golden(c.name)["encode"]["task_data"];
  const MemoryFileMap m = MemoryFileMap::FromDisk(dir);
  EXPECT_TRUE(MemoryFileMap::FromPath(dir) == m);

  std::set<std::string> want = c.kept_by_us;
  for (auto it = golden.begin(); it != golden.end(); ++it) want.insert(it.key());
  EXPECT_EQ(KeySet(m), want);
  for (const std::string& key : m.ListFiles()) {
    const fs::path p = dir / key;
    EXPECT_EQ(*m.Get(key), ReadFile(p)) << key;
    ASSERT_NE(m.Meta(key), nullptr);
    EXPECT_EQ(*m.Meta(key)->mode, DiskMode(p)) << key;
    EXPECT_DOUBLE_EQ(*m.Meta(key)->mtime, DiskMtime(p)) << key;
    if (!golden.contains(key)) continue;
    EXPECT_EQ(*m.Get(key), Base64Decode(golden[key]["content"].get<std::string>())) << key;
    const uint32_t golden_mode = golden[key]["mode"].get<uint32_t>();
    // The goldens were made from 0644/0755 files; this checkout may be read-only (0444/0555).
    if (DiskMode(p) == 0644 || DiskMode(p) == 0755) {
      EXPECT_EQ(*m.Meta(key)->mode, golden_mode) << key;
    }
    EXPECT_EQ((*m.Meta(key)->mode & 0111) != 0, (golden_mode & 0111) != 0) << key << ": exec bit";
  }
}

TEST_P(FixtureDir, GoldenModesSurviveToDiskAndBack) {
  const FixtureCase& c = GetParam();
  const Json golden = Golden(c.name)["encode"]["task_data"];
  MemoryFileMap m = MemoryFileMap::FromDisk(SharedDir() / "fixtures" / "tasks" / c.name);
  for (const std::string& key : m.ListFiles()) {  // the modes the reference saw (0644/0755)
    const uint32_t mode = golden.contains(key) ? golden[key]["mode"].get<uint32_t>() : 0644u;
    m.SetMeta(key, FileMeta{mode, 1704067200.0});
  }
  TempDir tmp;
  m.ToDisk(tmp.path() / "pkg");
  const MemoryFileMap back = MemoryFileMap::FromDisk(tmp.path() / "pkg");
  EXPECT_TRUE(back == m);
  for (auto it = golden.begin(); it != golden.end(); ++it) {
    EXPECT_EQ(*back.Meta(it.key())->mode, it.value()["mode"].get<uint32_t>()) << it.key();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, FixtureDir,
    ::testing::Values(FixtureCase{"relu_cpu", {}}, FixtureCase{"multi_block", {"overrides.yml"}},
                      FixtureCase{"edge_text", {".gitignore", ".github/ci.yml"}},  // B4: kept, __pycache__ dropped
                      FixtureCase{"slow_or_hang", {}}, FixtureCase{"bad_blocks_unclosed", {}}),
    [](const ::testing::TestParamInfo<FixtureCase>& p) { return std::string(p.param.name); });

// ---- ToDisk ----

MemoryFileMap ProbeMap() {  // probes.json memory_file_map.to_disk_then_from_disk
  MemoryFileMap m;
  m.Set("x/a.sh", "#!/bin/sh\n", FileMeta{0755, 1700000000.75});
  m.Set("b.txt", "b", FileMeta{0644, 1700000001.25});
  return m;
}

TEST(MemoryFileMapDisk, ToDiskThenFromDiskKeepsModeAndMtime) {
  const Json probe = Golden("probes")["memory_file_map"]["to_disk_then_from_disk"];
  TempDir tmp;
  const fs::path out = tmp.path() / "a" / "b";  // parents are created
  ProbeMap().ToDisk(out);
  for (auto it = probe["stat"].begin(); it != probe["stat"].end(); ++it) {
    const std::string mode_text = it.value()[0].get<std::string>();  // "0o755"
    EXPECT_EQ(DiskMode(out / it.key()), std::stoul(mode_text.substr(2), nullptr, 8)) << it.key();
    EXPECT_NEAR(DiskMtime(out / it.key()), it.value()[1].get<double>(), 1e-6) << it.key();
  }
  const MemoryFileMap back = MemoryFileMap::FromDisk(out);
  for (auto it = probe["meta"].begin(); it != probe["meta"].end(); ++it) {
    EXPECT_EQ(*back.Meta(it.key())->mode, it.value()["mode"].get<uint32_t>());
    EXPECT_NEAR(*back.Meta(it.key())->mtime, it.value()["mtime"].get<double>(), 1e-6);
  }
  EXPECT_EQ(back.ListFiles(), (std::vector<std::string>{"b.txt", "x/a.sh"}));  // sorted walk
  EXPECT_EQ(CountEntries(out), 3u);  // no temp files left behind
}

TEST(MemoryFileMapDisk, ToDiskOverlaysExistingTree) {
  TempDir tmp;
  const fs::path out = tmp.path() / "out";
  WriteFile(out / "b.txt", "old content that is longer");
  fs::permissions(out / "b.txt", fs::perms::owner_read);  // read-only existing file is replaced too
  WriteFile(out / "keep" / "me.txt", "kept");
  MemoryFileMap m = ProbeMap();
  m.Set("plain.txt", "p", FileMeta{});  // no meta: 0644, mtime left as now
  m.ToDisk(out);
  EXPECT_EQ(ReadFile(out / "b.txt"), "b");
  EXPECT_EQ(DiskMode(out / "b.txt"), 0644u);
  EXPECT_EQ(ReadFile(out / "keep" / "me.txt"), "kept");
  EXPECT_EQ(DiskMode(out / "plain.txt"), 0644u);
  EXPECT_EQ(DiskMode(out / "x" / "a.sh"), 0755u);
}

TEST(MemoryFileMapDisk, ToDiskRefusesUnsafeKeysWritingNothing) {
  for (const char* bad : {"../x", "a/../../x", "/abs/evil.py", ""}) {
    TempDir tmp;
    MemoryFileMap m = ProbeMap();
    m.Set(bad, "evil", FileMeta{0644, 1.0});
    const Error e = ExpectError(ErrorKind::kUnsafe, [&] { m.ToDisk(tmp.path() / "out"); });
    EXPECT_EQ(e.field(), bad);
    EXPECT_EQ(CountEntries(tmp.path()), 0u) << bad;
  }
}

TEST(MemoryFileMapDisk, ToDiskRefusesPlantedSymlinksWritingNothing) {
  TempDir tmp;
  const fs::path out = tmp.path() / "out", outside = tmp.path() / "outside";
  fs::create_directories(out);
  fs::create_directories(outside);
  fs::create_directory_symlink(outside, out / "x");  // directory on the way
  ExpectError(ErrorKind::kUnsafe, [&] { ProbeMap().ToDisk(out); });
  EXPECT_FALSE(fs::exists(out / "b.txt"));  // nothing written, not even the safe file
  EXPECT_EQ(CountEntries(outside), 0u);

  fs::remove(out / "x");
  WriteFile(outside / "target", "secret");
  fs::create_symlink(outside / "target", out / "b.txt");  // the file itself
  ExpectError(ErrorKind::kUnsafe, [&] { ProbeMap().ToDisk(out); });
  EXPECT_EQ(ReadFile(outside / "target"), "secret");
  EXPECT_FALSE(fs::exists(out / "x"));
}

TEST(MemoryFileMapDisk, ToDiskEnforcesLimitsBeforeWriting) {
  const MemoryFileMap m = ProbeMap();  // 2 files, 10 + 1 bytes
  const FileMapLimits few_files{1, 1 << 20, 1 << 20}, small_files{10, 1 << 20, 5}, small_total{10, 10, 1 << 20};
  for (const FileMapLimits& limits : {few_files, small_files, small_total}) {
    TempDir tmp;
    ExpectError(ErrorKind::kLimit, [&] { m.ToDisk(tmp.path() / "out", limits); });
    EXPECT_EQ(CountEntries(tmp.path()), 0u);
  }
  TempDir tmp;
  MemoryFileMap clash;
  clash.Set("a", "file");
  clash.Set("a/b", "under a file");
  ExpectError(ErrorKind::kInvalidArgument, [&] { clash.ToDisk(tmp.path() / "out"); });
  EXPECT_EQ(CountEntries(tmp.path()), 0u);
}

// A failing write into a new directory (here: RLIMIT_FSIZE below the third file's size, in a child process)
// leaves neither the output directory nor the staging directory behind; the error names the first file that
// failed in map order.
TEST(MemoryFileMapDisk, ToDiskIntoANewDirectoryIsAllOrNothing) {
  TempDir tmp;
  const fs::path out = tmp.path() / "out";
  MemoryFileMap m;
  for (int i = 0; i < 300; ++i) m.Set("d" + std::to_string(i % 7) + "/f" + std::to_string(i), std::string(100, 'x'));
  m.Set("big/late.bin", std::string(64 * 1024, 'y'));  // over the child's file-size limit
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG instead of killing us
    const struct rlimit lim {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      m.ToDisk(out);
    } catch (const Error& e) {
      _exit(e.kind() == ErrorKind::kIO && e.file() == (out / "big/late.bin").string() ? 42 : 43);
    }
    _exit(44);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 42);
  EXPECT_EQ(CountEntries(tmp.path()), 0u);  // no half-written tree, no staging directory
  m.ToDisk(out);  // without the limit it is written whole
  EXPECT_EQ(CountEntries(out), 301u + 8u);
  EXPECT_EQ(ReadFile(out / "d3" / "f10"), std::string(100, 'x'));
  EXPECT_EQ(CountEntries(tmp.path()), 301u + 8u + 1u);  // only `out`: the staging name is gone
}

// Many files over several directories (the decode of a big package runs on several threads): every byte, mode
// and mtime lands, into a new directory ("out/" with a trailing slash) and again as an overlay.
TEST(MemoryFileMapDisk, ToDiskWritesManyFilesExactly) {
  TempDir tmp;
  MemoryFileMap m;
  for (int i = 0; i < 1000; ++i) {
    m.Set("d" + std::to_string(i % 13) + "/s" + std::to_string(i % 3) + "/f" + std::to_string(i),
          std::string(static_cast<size_t>(i), static_cast<char>('a' + i % 26)),
          FileMeta{i % 2 ? 0755u : 0600u, 1700000000.0 + i});
  }
  for (int pass = 0; pass < 2; ++pass) {
    m.ToDisk(tmp.path().string() + "/out/");
    const MemoryFileMap back = MemoryFileMap::FromDisk(tmp.path() / "out");
    ASSERT_EQ(back.size(), m.size()) << pass;
    for (const std::string& key : m.ListFiles()) {
      ASSERT_EQ(*back.Find(key), *m.Find(key)) << key;
      EXPECT_EQ(*back.Meta(key)->mode, *m.Meta(key)->mode) << key;
      EXPECT_NEAR(*back.Meta(key)->mtime, *m.Meta(key)->mtime, 1e-6) << key;
    }
  }
  EXPECT_EQ(CountEntries(tmp.path()), 1u + 13u + 39u + 1000u);  // no temp or staging entries left
}

// ---- FromDisk ----

TEST(MemoryFileMapDisk, FromDiskAppliesIgnoreListOnComponents) {  // B4
  TempDir tmp;
  const fs::path d = tmp.path();
  for (const char* p : {"task.py", ".gitignore", ".github/ci.yml", "a.gitx", "__pycache__/m.pyc", "__pycache__/x.txt",
                        ".git/HEAD", "sub/.git/config", "__MACOSX/._x", ".DS_Store", "sub/Thumbs.db", "k.pyc",
                        "k.pyo", ".k.swp", "sub/keep.txt"}) {
    WriteFile(d / p, p);
  }
  fs::create_symlink("/etc/passwd", d / ".git" / "link");  // inside an ignored dir: never looked at
  const MemoryFileMap m = MemoryFileMap::FromDisk(d);
  EXPECT_EQ(m.ListFiles(),
            (std::vector<std::string>{".github/ci.yml", ".gitignore", "a.gitx", "sub/keep.txt", "task.py"}));
}

TEST(MemoryFileMapDisk, FromDiskRejectsSymlinksAndSpecialFiles) {
  {
    TempDir tmp;
    WriteFile(tmp.path() / "task.py", "x");
    fs::create_symlink("task.py", tmp.path() / "alias.py");
    const Error e = ExpectError(ErrorKind::kUnsafe, [&] { MemoryFileMap::FromDisk(tmp.path()); });
    EXPECT_NE(e.file().find("alias.py"), std::string::npos) << e.what();
  }
  {
    TempDir tmp;
    fs::create_directories(tmp.path() / "d");
    fs::create_directory_symlink("/", tmp.path() / "d" / "root");
    ExpectError(ErrorKind::kUnsafe, [&] { MemoryFileMap::FromDisk(tmp.path()); });
  }
  {
    TempDir tmp;
    ASSERT_EQ(::mkfifo((tmp.path() / "pipe").c_str(), 0644), 0);
    const Error e = ExpectError(ErrorKind::kUnsafe, [&] { MemoryFileMap::FromDisk(tmp.path()); });
    EXPECT_NE(e.file().find("pipe"), std::string::npos) << e.what();
  }
}

TEST(MemoryFileMapDisk, FromDiskLimitsAndMissingInputs) {
  TempDir tmp;
  WriteFile(tmp.path() / "a", std::string(100, 'a'));
  WriteFile(tmp.path() / "b", std::string(100, 'b'));
  ExpectError(ErrorKind::kLimit, [&] { MemoryFileMap::FromDisk(tmp.path(), {1, 1 << 20, 1 << 20}); });
  ExpectError(ErrorKind::kLimit, [&] { MemoryFileMap::FromDisk(tmp.path(), {10, 1 << 20, 99}); });
  ExpectError(ErrorKind::kLimit, [&] { MemoryFileMap::FromDisk(tmp.path(), {10, 150, 1 << 20}); });
  EXPECT_EQ(MemoryFileMap::FromDisk(tmp.path(), {2, 200, 100}).size(), 2u);
  ExpectError(ErrorKind::kNotFound, [&] { MemoryFileMap::FromDisk(tmp.path() / "nope"); });
  ExpectError(ErrorKind::kNotFound, [&] { MemoryFileMap::FromPath(tmp.path() / "nope"); });
  ExpectError(ErrorKind::kInvalidArgument, [&] { MemoryFileMap::FromDisk(tmp.path() / "a"); });
}

}  // namespace
}  // namespace kf
