// MemoryFileMap (in memory, JSON, disk) and Base64 against the reference's probes and the fixture goldens.
#include "kernelfoundry/memory_file_map.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/error.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::Golden;

double Now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

using testing::ExpectError;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ---- Base64 ----

TEST(Base64, Rfc4648Vectors) {
  const std::pair<std::string, std::string> cases[] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                                                       {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                                       {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : cases) {
    EXPECT_EQ(Base64Encode(plain), encoded);
    EXPECT_EQ(Base64Decode(encoded), plain);
  }
  // The reference probe: "héllo\nworld" written through a text handle.
  EXPECT_EQ(Base64Decode("aMOpbGxvCndvcmxk"), "h\xc3\xa9llo\nworld");
}

TEST(Base64, AllBytesRoundTrip) {
  std::string all;
  for (int i = 0; i < 256 * 3 + 1; ++i) all.push_back(static_cast<char>(i & 0xFF));
  for (size_t n = 0; n < all.size(); n += 37) EXPECT_EQ(Base64Decode(Base64Encode(all.substr(0, n))), all.substr(0, n));
  EXPECT_EQ(Base64Encode("\xff\xfe\xfd"), "//79");
}

TEST(Base64, RejectsBadInput) {
  for (const char* bad : {"Zg=", "Zg", "Z!==", "====", "Zg==Zg==", "Zm9v\n", "A===", "Zm 9"}) {
    const Error e = ExpectError(ErrorKind::kParse, [&] { Base64Decode(bad); });
    EXPECT_NE(std::string(e.what()).find("base64"), std::string::npos) << bad;
  }
}

// ---- in-memory API (probes.json "memory_file_map") ----

TEST(MemoryFileMap, SetGetFindAndOrder) {
  const Json probe = Golden("probes")["memory_file_map"];
  MemoryFileMap m;
  EXPECT_FALSE(m.Get("missing.txt").has_value());  // reference __getitem__ -> None
  EXPECT_TRUE(probe["getitem_missing"].is_null());
  m.Set("a.txt", "h\xc3\xa9llo\nworld");
  m.Set("b.bin", std::string("\0\x01", 2));
  EXPECT_EQ(m.ListFiles(), probe["list_files"].get<std::vector<std::string>>());
  EXPECT_EQ(Base64Encode(*m.Get("a.txt")), probe["after_text_write"]["bytes_b64"].get<std::string>());
  EXPECT_EQ(*m.Meta("a.txt")->mode, probe["after_text_write"]["meta_mode"].get<uint32_t>());  // 0644
  EXPECT_NEAR(*m.Meta("a.txt")->mtime, Now(), 5.0);
  EXPECT_TRUE(m.Contains("a.txt"));
  ASSERT_NE(m.Find("b.bin"), nullptr);
  EXPECT_EQ(m.Find("b.bin")->size(), 2u);
  EXPECT_EQ(m.Find("nope"), nullptr);
  EXPECT_EQ(m.TotalBytes(), 14u);

  // __setitem__ keeps a known mode (0755 -> 493) and keeps the insertion position.
  m.SetMeta("a.txt", FileMeta{0755, 1.0});
  m.Set("a.txt", "new");
  EXPECT_EQ(*m.Meta("a.txt")->mode, probe["setitem_keeps_mode"].get<uint32_t>());
  EXPECT_GT(*m.Meta("a.txt")->mtime, 1000.0);
  EXPECT_EQ(m.ListFiles(), (std::vector<std::string>{"a.txt", "b.bin"}));

  EXPECT_TRUE(m.Remove("a.txt"));
  EXPECT_FALSE(m.Remove("a.txt"));
  EXPECT_EQ(m.Meta("a.txt"), nullptr);
  EXPECT_EQ(m.ListFiles(), (std::vector<std::string>{"b.bin"}));
  m.Clear();
  EXPECT_TRUE(m.empty());
}

TEST(MemoryFileMap, CopiesAreDeep) {  // B12: a copy never shares bytes with its source
  MemoryFileMap a;
  a.Set("k.cpp", "old", FileMeta{0644, 5.0});
  MemoryFileMap b = a;
  b.Set("k.cpp", "new");
  EXPECT_EQ(*a.Get("k.cpp"), "old");
  EXPECT_EQ(*a.Meta("k.cpp")->mtime, 5.0);
  EXPECT_FALSE(a == b);
  EXPECT_TRUE(a == MemoryFileMap(a));
}

TEST(MemoryFileMap, DecodeBothFormatsThenEncode) {
  const Json probe = Golden("probes")["memory_file_map"];
  MemoryFileMap m;
  m.Decode(Json::parse(R"({"legacy.txt": "TA==", "new.txt": {"content": "Tg==", "mode": 448, "mtime": 1.5},
                           "nometa.txt": {"content": "WA=="}})"));
  Json enc = m.Encode();
  const Json& want = probe["decode_formats_then_encode"];
  ASSERT_EQ(enc.size(), want.size());
  EXPECT_EQ(enc["new.txt"], want["new.txt"]);
  EXPECT_EQ(enc["nometa.txt"], want["nometa.txt"]);
  EXPECT_EQ(enc["legacy.txt"]["content"], want["legacy.txt"]["content"]);
  EXPECT_EQ(enc["legacy.txt"]["mode"], want["legacy.txt"]["mode"]);  // legacy -> 0644
  EXPECT_NEAR(enc["legacy.txt"]["mtime"].get<double>(), Now(), 5.0);
  EXPECT_EQ(MemoryFileMap::FromJson(probe["encode_entry_without_meta"]).Encode(), probe["encode_entry_without_meta"]);
  // Float mtimes keep their JSON spelling (Python float repr): 1.5 and 1704067200.0.
  MemoryFileMap f;
  f.Set("x", "", FileMeta{0644, 1704067200.0});
  EXPECT_EQ(DumpJson(f.Encode()), R"({"x":{"content":"","mode":420,"mtime":1704067200.0}})");
}

TEST(MemoryFileMap, DecodeMergesAndKeepsOldMeta) {
  MemoryFileMap m;
  m.Set("a", "1", FileMeta{0755, 10.0});
  m.Decode(Json::parse(R"({"a": {"content": "Mg=="}, "b": {"content": "", "mtime": 3}})"));
  EXPECT_EQ(*m.Get("a"), "2");
  EXPECT_EQ(*m.Meta("a"), (FileMeta{0755, 10.0}));  // no mode/mtime given: old meta stays
  EXPECT_EQ(*m.Meta("b"), (FileMeta{std::nullopt, 3.0}));
  EXPECT_EQ(m.ListFiles(), (std::vector<std::string>{"a", "b"}));
}

TEST(MemoryFileMap, LegacyAndNewEncodingsCarryTheSameFiles) {
  const Json inputs = Golden("probes")["hash_id"]["inputs"];
  MemoryFileMap a = MemoryFileMap::FromJson(inputs["new"]);
  MemoryFileMap b = MemoryFileMap::FromJson(inputs["legacy"]);
  ASSERT_EQ(a.ListFiles(), b.ListFiles());
  for (const auto& k : a.ListFiles()) EXPECT_EQ(*a.Get(k), *b.Get(k));
  EXPECT_EQ(*a.Get("task.py"), "print(1)\n");
}

TEST(MemoryFileMap, DecodeErrorsNamePathAndFieldAndChangeNothing) {
  struct Case {
    const char* json;
    const char* file;
    const char* field;
  };
  const Case cases[] = {
      {R"({"ok": "TA==", "bad.txt": {"content": "!!"}})", "bad.txt", "content"},
      {R"({"bad.txt": "abc"})", "bad.txt", "content"},
      {R"({"bad.txt": {"mode": 420}})", "bad.txt", "content"},
      {R"({"bad.txt": {"content": 5}})", "bad.txt", "content"},
      {R"({"bad.txt": {"content": "", "mode": "0644"}})", "bad.txt", "mode"},
      {R"({"bad.txt": {"content": "", "mode": -1}})", "bad.txt", "mode"},
      {R"({"bad.txt": {"content": "", "mtime": "yesterday"}})", "bad.txt", "mtime"},
      {R"({"bad.txt": 12})", "bad.txt", ""},
      {R"([1, 2])", "<file map>", ""},
  };
  for (const Case& c : cases) {
    MemoryFileMap m;
    m.Set("keep", "k", FileMeta{0600, 1.0});
    const Error e = ExpectError(ErrorKind::kParse, [&] { m.Decode(Json::parse(c.json)); });
    EXPECT_EQ(e.file(), c.file) << c.json;
    EXPECT_EQ(e.field(), c.field) << c.json;
    EXPECT_EQ(m.ListFiles(), (std::vector<std::string>{"keep"})) << c.json;
  }
}

// ---- remove_root_dir (probes.json "remove_root_dir", with B1/B2 fixed) ----

TEST(MemoryFileMap, RemoveRootDirMatchesProbesWithBugsFixed) {
  const Json probes = Golden("probes")["remove_root_dir"];
  // Our answers differ from the reference only for the bug cases.
  const std::map<std::string, std::pair<bool, std::vector<std::string>>> fixed = {
      {"B1_positional_parts", {true, {"x/c", "y/c"}}},
      {"B1_same_basename", {false, {"x/y.py", "z/y.py"}}},
      {"B2_single_file", {false, {"only.txt"}}},
      {"B2_single_file_in_dir", {true, {"only.txt"}}},
  };
  for (auto it = probes.begin(); it != probes.end(); ++it) {
    MemoryFileMap m;
    double t = 1.0;
    for (const auto& key : it.value()["input"]) m.Set(key.get<std::string>(), key.get<std::string>(), {0640, t++});
    const bool ok = m.RemoveRootDir();
    bool want_ok;
    std::vector<std::string> want_keys;
    if (auto f = fixed.find(it.key()); f != fixed.end()) {
      want_ok = f->second.first;
      want_keys = f->second.second;
    } else {
      want_ok = it.value()["ok"].get<bool>();
      want_keys = it.value()["keys_after"].get<std::vector<std::string>>();
    }
    EXPECT_EQ(ok, want_ok) << it.key();
    EXPECT_EQ(m.ListFiles(), want_keys) << it.key();
    // Meta is re-keyed with the files; contents move with their keys.
    t = 1.0;
    for (const auto& k : m.ListFiles()) {
      ASSERT_NE(m.Meta(k), nullptr) << it.key() << " " << k;
      EXPECT_EQ(*m.Meta(k)->mtime, t++) << it.key() << " " << k;
      EXPECT_TRUE(EndsWith(*m.Get(k), k)) << it.key();
    }
  }
}

// ---- path rules ----

TEST(MemoryFileMap, IgnoreListMatchesComponentsNotSubstrings) {  // B4
  for (const char* p : {"__pycache__/x.py", "a/__pycache__/b.txt", ".git/config", "a/.git/HEAD", "__MACOSX/._a",
                        ".DS_Store", "d/.DS_Store", "Thumbs.db", "m.pyc", "d/m.pyo", ".k.cpp.swp"}) {
    EXPECT_TRUE(IsIgnoredPath(p)) << p;
  }
  for (const char* p : {".gitignore", ".github/ci.yml", "a.gitx", "my.git/x", "pycache/x", "x.pyc.txt", "swp",
                        "Thumbs.db.txt", "task.py"}) {
    EXPECT_FALSE(IsIgnoredPath(p)) << p;
  }
}

TEST(MemoryFileMap, NormalizeMemberPath) {
  EXPECT_EQ(NormalizeMemberPath("./a/b.py", "x.tgz"), "a/b.py");  // B3
  EXPECT_EQ(NormalizeMemberPath("a//./b", "x.tgz"), "a/b");
  EXPECT_EQ(NormalizeMemberPath("./", "x.tgz"), "");
  EXPECT_EQ(NormalizeMemberPath("dir/", "x.tgz"), "dir");
  for (const char* bad : {"../x", "a/../../x", "a/..", "/abs/evil.py", "//x"}) {
    const Error e = ExpectError(ErrorKind::kUnsafe, [&] { NormalizeMemberPath(bad, "pkg.tar"); });
    EXPECT_EQ(e.file(), "pkg.tar");
    EXPECT_EQ(e.field(), bad);
  }
  // A NUL byte would cut the path in the OS call: "a\0evil" silently overwrote "a" (found by a stranger test).
  const Error nul = ExpectError(ErrorKind::kUnsafe, [] { NormalizeMemberPath(std::string("a\0evil", 6), "m"); });
  EXPECT_EQ(nul.field(), "a?evil");
}

}  // namespace
}  // namespace kf
