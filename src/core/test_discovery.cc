// Test discovery driver: cache lookup, materialisation into a temp dir, collector call, cache write.
#include "kernelfoundry/test_discovery.hpp"

#include "core/temp_dir.hpp"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "core/files.hpp"
#include "core/sha256.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"

namespace kf {
namespace {

constexpr int kCacheFormat = 1;

std::optional<TestLists> ReadCache(const std::filesystem::path& file) {
  const std::optional<std::string> text = ReadFileBytes(file);
  if (!text) return std::nullopt;
  try {
    Json j = Json::parse(*text);
    if (j.value("format", 0) != kCacheFormat) return std::nullopt;
    TestLists lists;
    lists.correctness = j.at("correctness_tests").get<std::vector<std::string>>();
    lists.profile = j.at("profile_tests").get<std::vector<std::string>>();
    return lists;
  } catch (const std::exception&) {
    return std::nullopt;  // corrupt entry: collect again and overwrite it
  }
}

void WriteCache(const std::filesystem::path& file, const TestLists& lists) {
  static std::atomic<unsigned> counter{0};
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  if (ec) return;
  Json j = Json::object();
  j["format"] = kCacheFormat;
  j["correctness_tests"] = lists.correctness;
  j["profile_tests"] = lists.profile;
  std::filesystem::path tmp =
      file.string() + fmt::format(".tmp.{}.{}", static_cast<long>(getpid()), counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out << j.dump();
    if (!out) {
      out.close();
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace

bool AffectsTestCollection(std::string_view path) {
  std::string_view name = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  for (const char* exact : {"pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini", "conftest.py"})
    if (name == exact) return true;
  for (const char* ext : {".py", ".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".txt", ".csv"})
    if (name.ends_with(ext)) return true;
  return false;
}

std::string CollectionCacheKey(const MemoryFileMap& files, std::string_view salt) {
  std::vector<std::string> keys = files.ListFiles();
  std::sort(keys.begin(), keys.end());
  internal::Sha256 h;
  h.Update(fmt::format("kf-collect-v{}\n", kCacheFormat));
  h.Update(salt);
  h.Update(std::string_view("\n", 1));
  for (const std::string& key : keys) {
    if (!AffectsTestCollection(key)) continue;
    const std::string* bytes = files.Find(key);
    // Length-prefixed so that no two different file sets can produce the same byte stream.
    h.Update(fmt::format("{}:{}\n{}:", key.size(), key, bytes->size()));
    h.Update(*bytes);
  }
  return h.HexDigest();
}

TestLists DiscoverTests(const MemoryFileMap& files, const TestCollector& collector,
                        const DiscoveryOptions& options, bool* cache_hit) {
  if (cache_hit != nullptr) *cache_hit = false;
  if (!collector)
    throw Error(ErrorKind::kInternal,
                "test discovery requested without a collector (pass kf::PytestCollector() from "
                "kernelfoundry/pytest_collect.hpp, or set discover_tests = false)");

  std::optional<TestLists> lists;
  std::filesystem::path cache_file;
  const bool caching = options.use_cache && !collector.cache_salt.empty();
  if (caching) {
    std::filesystem::path dir = options.cache_dir.empty() ? DefaultCacheDir() : options.cache_dir;
    cache_file = dir / "collect" / (CollectionCacheKey(files, collector.cache_salt) + ".json");
    lists = ReadCache(cache_file);
    if (lists && cache_hit != nullptr) *cache_hit = true;
  }
  if (!lists) {
    TempDir tmp({}, "custom_task_create_");
    files.ToDisk(tmp.path());
    lists = collector.collect(tmp.path());
    if (caching) WriteCache(cache_file, *lists);
  }
  return *lists;
}

void RequirePerformanceTest(const TestLists& lists) {
  if (lists.profile.empty())
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("no performance test: mark at least one test with @pytest.mark.performance "
                            "({} other test(s) collected)",
                            lists.correctness.size()),
                "task.py", "profile_tests");
}

}  // namespace kf
