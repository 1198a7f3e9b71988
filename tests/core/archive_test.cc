// MemoryFileMap archives: the golden zip, tar round trips, `tar czf x.tgz .` packages, and every bad input
// (unsafe members, zip bombs, truncation, non-archives) failing with the right kf::Error kind.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>

#include <array>
#include <cstdlib>
#include <ctime>

#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::Golden;
using testing::ReadFile;
using testing::RunShell;
using testing::SharedDir;
using testing::TempDir;
using testing::WriteFile;

using testing::ExpectError;

// ---- archives written with libarchive's writer (independent of ToArchive) ----

struct Member {
  Member(std::string n, std::string d, unsigned t = AE_IFREG, unsigned p = 0644, std::string l = {}, bool h = false)
      : name(std::move(n)), data(std::move(d)), type(t), perm(p), link(std::move(l)), hardlink(h) {}
  std::string name;
  std::string data;
  unsigned type;
  unsigned perm;
  std::string link;  // symlink target, or hardlink target when hardlink
  bool hardlink;
};

la_ssize_t Append(archive*, void* out, const void* buf, size_t n) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}

/// kind: "tar", "tgz" or "zip".
std::string MakeArchive(const std::vector<Member>& members, const std::string& kind = "tar") {
  archive* a = archive_write_new();
  if (kind == "zip") {
    archive_write_set_format_zip(a);
  } else {
    archive_write_set_format_pax_restricted(a);
    if (kind == "tgz") archive_write_add_filter_gzip(a);
  }
  std::string out;
  EXPECT_EQ(archive_write_open(a, &out, nullptr, Append, nullptr), ARCHIVE_OK);
  for (const Member& m : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_filetype(e, m.type);
    archive_entry_set_perm(e, m.perm);
    archive_entry_set_mtime(e, 1700000000, 0);
    if (m.hardlink) archive_entry_set_hardlink(e, m.link.c_str());
    if (m.type == AE_IFLNK) archive_entry_set_symlink(e, m.link.c_str());
    if (m.type == AE_IFCHR) archive_entry_set_rdev(e, ::makedev(1, 3));
    archive_entry_set_size(e, m.type == AE_IFREG && !m.hardlink ? static_cast<la_int64_t>(m.data.size()) : 0);
    EXPECT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
    if (m.type == AE_IFREG && !m.hardlink) archive_write_data(a, m.data.data(), m.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

// ---- a hand-made zip bomb: one member of N zeros, deflated with fixed Huffman codes ----

/// Writes deflate bits (LSB first; Huffman codes MSB first, RFC 1951 §3.1.1).
struct BitWriter {
  std::string out;
  uint64_t acc = 0;
  int n = 0;
  void Bits(uint32_t value, int count) {
    acc |= uint64_t{value} << n;
    n += count;
    while (n >= 8) {
      out.push_back(static_cast<char>(acc & 0xFF));
      acc >>= 8;
      n -= 8;
    }
  }
  void Code(uint32_t code, int len) {  // reversed into LSB-first order
    uint32_t r = 0;
    for (int i = 0; i < len; ++i) r |= ((code >> i) & 1u) << (len - 1 - i);
    Bits(r, len);
  }
  void Flush() {
    if (n > 0) out.push_back(static_cast<char>(acc & 0xFF));
    acc = 0;
    n = 0;
  }
};

/// Raw deflate stream of `n` zero bytes: a literal 0, then (length 258, distance 1) copies, 13 bits each.
std::string DeflateZeros(uint64_t n) {
  BitWriter w;
  w.Bits(1, 1);  // BFINAL
  w.Bits(1, 2);  // BTYPE = 01, fixed Huffman
  w.Code(0x30 + 0, 8);  // literal 0
  const uint64_t copies = (n - 1) / 258, rest = (n - 1) % 258;
  for (uint64_t i = 0; i < copies; ++i) {
    w.Code(0xC0 + (285 - 280), 8);  // length symbol 285 = 258 bytes, no extra bits
    w.Code(0, 5);                    // distance code 0 = 1
  }
  for (uint64_t i = 0; i < rest; ++i) w.Code(0x30, 8);
  w.Code(0, 7);  // end of block (256)
  w.Flush();
  return w.out;
}

/// CRC-32 (zip) of n zero bytes via GF(2) matrix powers of the one-zero-byte step, O(log n).
uint32_t Crc32OfZeros(uint64_t n) {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  using Mat = std::array<uint32_t, 32>;  // column i = image of bit i
  auto apply = [](const Mat& m, uint32_t v) {
    uint32_t r = 0;
    for (int i = 0; i < 32; ++i) r ^= ((v >> i) & 1u) ? m[i] : 0u;
    return r;
  };
  auto mul = [&](const Mat& a, const Mat& b) {
    Mat r{};
    for (int i = 0; i < 32; ++i) r[i] = apply(a, b[i]);
    return r;
  };
  Mat step{}, result{};
  for (int i = 0; i < 32; ++i) {
    const uint32_t s = 1u << i;
    step[i] = table[s & 0xFF] ^ (s >> 8);
    result[i] = s;  // identity
  }
  for (; n; n >>= 1, step = mul(step, step)) {
    if (n & 1) result = mul(step, result);
  }
  return ~apply(result, 0xFFFFFFFFu);
}

void Le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

/// A zip with one member "bomb.bin" holding `real` zeros while its headers declare `declared` bytes.
std::string ZipBomb(uint64_t real, uint64_t declared) {
  const std::string data = DeflateZeros(real), name = "bomb.bin";
  const uint32_t crc = Crc32OfZeros(real);
  std::string z;
  auto common = [&](std::string& s) {
    Le(s, 20, 2), Le(s, 0, 2), Le(s, 8, 2), Le(s, 0, 2), Le(s, 0x5821, 2);  // version, flags, deflate, time, date
    Le(s, crc, 4), Le(s, data.size(), 4), Le(s, declared, 4), Le(s, name.size(), 2), Le(s, 0, 2);
  };
  Le(z, 0x04034b50, 4);
  common(z);
  z += name + data;
  const size_t cd_offset = z.size();
  Le(z, 0x02014b50, 4);
  Le(z, (3 << 8) | 20, 2);  // made by Unix
  common(z);
  Le(z, 0, 2), Le(z, 0, 2), Le(z, 0, 2), Le(z, uint64_t{0100644} << 16, 4), Le(z, 0, 4);
  z += name;
  const size_t cd_size = z.size() - cd_offset;
  Le(z, 0x06054b50, 4), Le(z, 0, 2), Le(z, 0, 2), Le(z, 1, 2), Le(z, 1, 2), Le(z, cd_size, 4), Le(z, cd_offset, 4);
  Le(z, 0, 2);
  return z;
}

long PeakRssMiB() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;
}

MemoryFileMap TarballProbeMap() {  // probes.json memory_file_map.to_tarball_members
  MemoryFileMap m;
  m.Set("x/a.sh", "#!/bin/sh\n", FileMeta{0755, 1700000000.0});
  m.Set("b.txt", "b", FileMeta{0644, 1700000001.0});
  return m;
}

// ---- the golden zip ----

TEST(Archive, GoldenZipLoadsLikeTheReference) {
  ::setenv("TZ", "UTC", 1);  // zip DOS times are local time; the golden was made in UTC
  ::tzset();
  const fs::path zip = SharedDir() / "fixtures" / "archives" / "relu_cpu.zip";
  for (const Json& variant : Golden("archive_relu_cpu_zip")) {
    MemoryFileMap m = variant["input"] == "path" ? MemoryFileMap::FromPath(zip)
                                                 : MemoryFileMap::FromArchive(ReadFile(zip), "relu_cpu.zip");
    EXPECT_TRUE(m.RemoveRootDir());
    EXPECT_EQ(m.ListFiles(), variant["task_data_files"].get<std::vector<std::string>>());  // member order
    EXPECT_EQ(m.Encode(), variant["encode"]["task_data"]);  // contents, mode 420, mtime 1704067200.0
  }
}

// ---- round trips ----

// Regression: a refused member path made ToArchive flush into its already-destroyed output string (heap
// corruption, "malloc(): unsorted double linked list corrupted" from Python's to_tarball). ASan checks this.
TEST(Archive, ToArchiveRefusesUnsafePathsInEveryFormatWithoutCorruption) {
  for (const std::string& bad : {std::string("../evil.py"), std::string("a\0evil", 6), std::string("/abs")}) {
    MemoryFileMap m;
    m.Set("a.py", std::string(70000, 'x'));  // big enough that the writer holds buffered data when it throws
    m.Set(bad, "bad");
    for (ArchiveFormat f : {ArchiveFormat::kTar, ArchiveFormat::kTarGz, ArchiveFormat::kTarBz2,
                            ArchiveFormat::kTarXz, ArchiveFormat::kZip}) {
      ExpectError(ErrorKind::kUnsafe, [&] { m.ToArchive(f); });
    }
    EXPECT_EQ(m.Get("a.py")->size(), 70000u);  // the map itself is untouched
  }
}

TEST(Archive, ToArchiveRoundTripsModeAndMtimeInEveryFormat) {
  const Json probe = Golden("probes")["memory_file_map"];
  const MemoryFileMap m = TarballProbeMap();
  const std::string tgz = m.ToArchive();
  ASSERT_GE(tgz.size(), 2u);
  EXPECT_EQ(tgz.substr(0, 2), "\x1f\x8b");  // default is gzip, like to_tarball("w:gz")
  EXPECT_TRUE(probe["to_tarball_default_is_gzip"].get<bool>());
  for (ArchiveFormat f : {ArchiveFormat::kTar, ArchiveFormat::kTarGz, ArchiveFormat::kTarBz2, ArchiveFormat::kTarXz,
                          ArchiveFormat::kZip}) {
    const MemoryFileMap back = MemoryFileMap::FromArchive(m.ToArchive(f), "roundtrip");
    EXPECT_TRUE(back == m) << static_cast<int>(f);
    EXPECT_EQ(back.ListFiles(), m.ListFiles());
    for (auto it = probe["tar_bytes_roundtrip"].begin(); it != probe["tar_bytes_roundtrip"].end(); ++it) {
      EXPECT_EQ(*back.Meta(it.key())->mode, it.value()["mode"].get<uint32_t>());
      EXPECT_EQ(*back.Meta(it.key())->mtime, it.value()["mtime"].get<double>());
    }
  }
  // GNU tar reads our tar.gz with the reference's member list.
  TempDir tmp;
  WriteFile(tmp.path() / "x.tgz", tgz);
  const auto [rc, listing] = RunShell("TZ=UTC tar --numeric-owner -tvzf " + (tmp.path() / "x.tgz").string());
  ASSERT_EQ(rc, 0) << listing;
  for (const Json& member : probe["to_tarball_members"]) {
    const std::string mode = member["mode"] == "0o755" ? "-rwxr-xr-x" : "-rw-r--r--";
    EXPECT_NE(listing.find(mode + " 0/0"), std::string::npos) << listing;
    EXPECT_NE(listing.find(member["name"].get<std::string>()), std::string::npos) << listing;
  }
  EXPECT_NE(listing.find("2023-11-14 22:13 x/a.sh"), std::string::npos) << listing;  // 1700000000
}

TEST(Archive, TarMadeWithDotSlashEqualsTheDirectory) {  // B3: `tar czf x.tgz .`
  TempDir tmp;
  const fs::path dir = tmp.path() / "pkg";
  MemoryFileMap src = MemoryFileMap::FromDisk(SharedDir() / "fixtures" / "tasks" / "relu_cpu");
  for (const auto& k : src.ListFiles()) src.SetMeta(k, FileMeta{0644, 1704067200.0});
  src.Set("sub/run.sh", "#!/bin/sh\n", FileMeta{0755, 1704067200.0});
  src.ToDisk(dir);
  const auto [rc, out] = RunShell("cd " + dir.string() + " && tar czf ../x.tgz . && cd .. && zip -qr y.zip pkg");
  ASSERT_EQ(rc, 0) << out;
  const MemoryFileMap on_disk = MemoryFileMap::FromDisk(dir);
  MemoryFileMap tgz = MemoryFileMap::FromPath(tmp.path() / "x.tgz");
  EXPECT_FALSE(tgz.RemoveRootDir());  // no common directory: keys stay
  EXPECT_TRUE(tgz.Contains("task.py"));
  EXPECT_TRUE(tgz == on_disk);
  MemoryFileMap zip = MemoryFileMap::FromPath(tmp.path() / "y.zip");  // Info-ZIP, top-level folder
  EXPECT_TRUE(zip.RemoveRootDir());
  EXPECT_TRUE(zip == on_disk);
}

TEST(Archive, SingleFileArchiveKeepsItsFile) {  // B2
  for (const char* name : {"only.py", "pkg/only.py", "./only.py"}) {
    MemoryFileMap m = MemoryFileMap::FromArchive(MakeArchive({{name, "print(1)\n"}}, "tgz"), "one.tgz");
    m.RemoveRootDir();
    EXPECT_EQ(m.ListFiles(), (std::vector<std::string>{"only.py"})) << name;
    EXPECT_EQ(*m.Get("only.py"), "print(1)\n");
  }
}

TEST(Archive, IgnoredMembersAreDroppedOnComponents) {  // B4
  const MemoryFileMap m = MemoryFileMap::FromArchive(
      MakeArchive({{"p/task.py", "t"}, {"p/.gitignore", "g"}, {"p/.github/ci.yml", "c"}, {"__MACOSX/p/._task.py", "m"},
                   {"p/__pycache__/task.cpython-311.pyc", "x"}, {"p/.git/HEAD", "h"}, {"p/.DS_Store", "d"},
                   {"p/dir/", "", AE_IFDIR, 0755}}, "zip"),
      "pkg.zip");
  EXPECT_EQ(m.ListFiles(), (std::vector<std::string>{"p/task.py", "p/.gitignore", "p/.github/ci.yml"}));
}

TEST(Archive, ZipModeZeroIsNotRecorded) {  // reference from_zip: mode only when (external_attr >> 16) & 0777
  TempDir tmp;
  const std::string script = "import zipfile\n"
                             "with zipfile.ZipFile('" + (tmp.path() / "m.zip").string() + "', 'w') as z:\n"
                             "  for name, system, attr in (('dos.txt', 0, 0x20), ('exec.sh', 3, 0o100755 << 16)):\n"
                             "    zi = zipfile.ZipInfo(name, (2024, 1, 2, 3, 4, 6)); zi.create_system = system\n"
                             "    zi.external_attr = attr; z.writestr(zi, name)\n";
  WriteFile(tmp.path() / "mk.py", script);
  const auto [rc, out] = RunShell("/usr/bin/python3 " + (tmp.path() / "mk.py").string());
  ASSERT_EQ(rc, 0) << out;
  const MemoryFileMap m = MemoryFileMap::FromPath(tmp.path() / "m.zip");
  EXPECT_FALSE(m.Meta("dos.txt")->mode.has_value());  // libarchive alone would say 0664
  EXPECT_TRUE(m.Meta("dos.txt")->mtime.has_value());
  EXPECT_EQ(*m.Meta("exec.sh")->mode, 0755u);
}

// ---- unsafe members ----

TEST(Archive, UnsafeMembersAreErrorsNamingArchiveAndMember) {
  const std::vector<std::pair<std::string, Member>> cases = {
      {"../x", {"../x", "evil"}},
      {"pkg/../../escape.py", {"pkg/../../escape.py", "p"}},
      {"/abs/evil.py", {"/abs/evil.py", "e"}},
      {"pkg/link.py", {"pkg/link.py", "", AE_IFLNK, 0777, "task.py"}},
      {"pkg/up.py", {"pkg/up.py", "", AE_IFLNK, 0777, "../../etc/passwd"}},
      {"pkg/hard.py", {"pkg/hard.py", "", AE_IFREG, 0600, "pkg/task.py", true}},
      {"pkg/null", {"pkg/null", "", AE_IFCHR, 0666}},
      {"pkg/fifo", {"pkg/fifo", "", AE_IFIFO, 0644}},
  };
  for (const auto& [member, m] : cases) {
    for (const char* kind : {"tar", "tgz", "zip"}) {
      if (std::string(kind) == "zip" && (m.type == AE_IFCHR || m.type == AE_IFIFO || m.hardlink)) continue;
      const std::string bytes = MakeArchive({{"pkg/task.py", "target"}, m}, kind);
      const Error e = ExpectError(ErrorKind::kUnsafe, [&] { MemoryFileMap::FromArchive(bytes, "evil.tar"); });
      EXPECT_EQ(e.file(), "evil.tar") << member << " " << kind;
      EXPECT_EQ(e.field(), member) << kind;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      // Through a file on disk as well, and nothing is written anywhere.
      TempDir tmp;
      WriteFile(tmp.path() / "evil.tar", bytes);
      ExpectError(ErrorKind::kUnsafe, [&] { MemoryFileMap::FromPath(tmp.path() / "evil.tar"); });
      EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
    }
  }
}

// ---- limits and bombs ----

TEST(Archive, ZipBombGeneratorIsAValidZip) {  // hand-check of the generator on a small size (CRC verified)
  const uint64_t n = 3u << 20;
  const std::string z = ZipBomb(n, n);
  const MemoryFileMap m = MemoryFileMap::FromArchive(z, "small-bomb.zip");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(*m.Get("bomb.bin"), std::string(n, '\0'));
  EXPECT_GT(n / z.size(), 150u);  // 258 bytes per 13 bits
}

TEST(Archive, TwoGiBZipBombFailsFastWithoutAllocatingIt) {
  const uint64_t two_gib = 2ull << 30;
  const std::string honest = ZipBomb(two_gib, two_gib);
  EXPECT_LT(honest.size(), 16u << 20);
  EXPECT_GT(two_gib / honest.size(), 150u);  // compression ratio
  // Declares its size: refused from the header, before any inflation.
  Error e = ExpectError(ErrorKind::kLimit, [&] { MemoryFileMap::FromArchive(honest, "bomb.zip"); });
  EXPECT_EQ(e.field(), "bomb.bin");
  // Lies about its size: stopped while inflating, as soon as it passes the declared size...
  const std::string liar = ZipBomb(two_gib, 1000);
  e = ExpectError(ErrorKind::kLimit, [&] { MemoryFileMap::FromArchive(liar, "liar.zip"); });
  EXPECT_NE(e.message().find("declared size of 1000"), std::string::npos) << e.what();
  // ...or at the per-file / total limit when it declares more than the limit allows.
  const std::string big_liar = ZipBomb(two_gib, 64u << 20);
  ExpectError(ErrorKind::kLimit, [&] { MemoryFileMap::FromArchive(big_liar, "l.zip", {10, 1ull << 30, 8u << 20}); });
  ExpectError(ErrorKind::kLimit, [&] { MemoryFileMap::FromArchive(big_liar, "l.zip", {10, 8u << 20, 1ull << 30}); });
  // Declares more than it holds: a corrupt zip.
  ExpectError(ErrorKind::kParse, [&] { MemoryFileMap::FromArchive(ZipBomb(1000, 5000), "short.zip"); });
  EXPECT_LT(PeakRssMiB(), 1000) << "the 2 GiB payload must never be held in memory";
}

TEST(Archive, CountAndSizeLimitsWhileReading) {
  std::vector<Member> many;
  for (int i = 0; i < 5; ++i) many.push_back({"f" + std::to_string(i), std::string(1000, 'x')});
  const std::string tgz = MakeArchive(many, "tgz");
  EXPECT_EQ(MemoryFileMap::FromArchive(tgz, "ok.tgz", {5, 5000, 1000}).size(), 5u);
  ExpectError(ErrorKind::kLimit, [&] { MemoryFileMap::FromArchive(tgz, "n.tgz", {4, 1 << 20, 1 << 20}); });
  ExpectError(ErrorKind::kLimit, [&] { MemoryFileMap::FromArchive(tgz, "t.tgz", {10, 4999, 1 << 20}); });
  ExpectError(ErrorKind::kLimit, [&] { MemoryFileMap::FromArchive(tgz, "s.tgz", {10, 1 << 20, 999}); });
  const std::string big = MakeArchive({{"big.bin", std::string(2u << 20, '\0')}}, "tgz");
  ExpectError(ErrorKind::kLimit, [&] { MemoryFileMap::FromArchive(big, "big.tgz", {10, 1 << 30, 1 << 20}); });
}

// ---- broken and non-archive input ----

TEST(Archive, TruncatedArchivesAreParseErrors) {
  std::string noise;
  uint32_t x = 12345;
  for (int i = 0; i < 6000; ++i) noise.push_back(static_cast<char>((x = x * 1103515245 + 12345) >> 24));
  MemoryFileMap m;
  m.Set("a.bin", noise.substr(0, 3000), FileMeta{0644, 1.0});
  m.Set("b.bin", noise.substr(3000), FileMeta{0644, 1.0});
  for (ArchiveFormat f : {ArchiveFormat::kTarGz, ArchiveFormat::kTarXz, ArchiveFormat::kZip}) {
    const std::string full = m.ToArchive(f);
    for (size_t cut = 1; cut < full.size(); cut += 97) {
      const Error e = ExpectError(ErrorKind::kParse, [&] { MemoryFileMap::FromArchive(full.substr(0, cut), "cut"); });
      EXPECT_EQ(e.file(), "cut");
    }
  }
  const std::string tar = m.ToArchive(ArchiveFormat::kTar);  // plain tar: cuts inside headers or data
  for (size_t cut : {100, 600, 2000, 3700, 5000}) {
    ExpectError(ErrorKind::kParse, [&] { MemoryFileMap::FromArchive(tar.substr(0, cut), "cut.tar"); });
  }
}

TEST(Archive, NonArchiveBytesAreParseErrors) {
  std::string gz_text;  // gzip of plain text: a valid filter, but no archive inside
  {
    archive* a = archive_write_new();
    archive_write_set_format_raw(a);
    archive_write_add_filter_gzip(a);
    archive_write_open(a, &gz_text, nullptr, Append, nullptr);
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, "text");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_write_header(a, e);
    const std::string text(5000, 'y');
    archive_write_data(a, text.data(), text.size());
    archive_entry_free(e);
    archive_write_close(a);
    archive_write_free(a);
  }
  std::string noise;
  uint32_t x = 7;
  for (int i = 0; i < 4096; ++i) noise.push_back(static_cast<char>((x = x * 1103515245 + 12345) >> 24));
  for (const std::string& bytes : {std::string("hello world\n"), std::string(), std::string(10, '\0'), noise, gz_text,
                                   std::string("PK\x03\x04garbage", 11)}) {
    const Error e = ExpectError(ErrorKind::kParse, [&] { MemoryFileMap::FromArchive(bytes, "input.bin"); });
    EXPECT_EQ(e.file(), "input.bin");
    EXPECT_TRUE(e.message().find("not a zip or tar archive") != std::string::npos ||
                e.message().find("zip archive") != std::string::npos)
        << e.what();
  }
  TempDir tmp;
  WriteFile(tmp.path() / "notes.tgz", "just text");
  ExpectError(ErrorKind::kParse, [&] { MemoryFileMap::FromPath(tmp.path() / "notes.tgz"); });
}

}  // namespace
}  // namespace kf
