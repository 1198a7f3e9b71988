// Test discovery — which tests of a task are correctness tests and which are performance (profile) tests
// (reference spec §1.8). Core-level interface only: the pytest implementation lives in the harness module
// (kernelfoundry/pytest_collect.hpp) and is handed to Task::Create through TaskCreateOptions::collector, so
// core never depends on exec/harness.
//
// Caching: DiscoverTests keys the result by SHA-256 over the collector's cache_salt and the paths + bytes of
// every file that can change the test lists (AffectsTestCollection), and stores it as
// `<cache_dir>/collect/<hex>.json` (written to a temp name, then renamed). On a hit nothing is written to
// disk and no process starts. A corrupt or unreadable cache entry is ignored (re-collected). Cache write
// failures are not errors. Thread-safe: concurrent discoveries may share a cache directory.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/memory_file_map.hpp"

namespace kf {

/// Test ids relative to task.py ("TestX::test_a[512]"), in collection order.
struct TestLists {
  std::vector<std::string> correctness;  ///< every test that is not a performance test
  std::vector<std::string> profile;      ///< the performance tests (@pytest.mark.performance)
  bool operator==(const TestLists&) const = default;
};

/// Collects the tests of a task that has been written to `task_dir`. Throws kf::Error (file "task.py")
/// when collection fails, with the collector's own error text.
using CollectFn = std::function<TestLists(const std::filesystem::path& task_dir)>;

/// A test collector plus the identity used for caching its answers.
struct TestCollector {
  std::string name;        ///< for messages, e.g. "pytest"
  std::string cache_salt;  ///< identifies the implementation + version; empty = never cache
  CollectFn collect;       ///< empty = no collector
  explicit operator bool() const { return static_cast<bool>(collect); }
};

/// The persistent cache directory: ResolveCacheDir().path (kernelfoundry/cache_dir.hpp: $KF_CACHE_DIR, else
/// $XDG_CACHE_HOME/kernelfoundry, $HOME/.cache/kernelfoundry, or a private <tmp>/kernelfoundry-<uid>, the
/// first one usable). Creates it when needed; never throws (an unusable choice is returned as is).
std::filesystem::path DefaultCacheDir();

/// True iff a file at this package path can change the collected test lists: *.py, pytest.ini,
/// pyproject.toml, setup.cfg, tox.ini, and data files tests commonly parametrise from (*.json, *.yaml,
/// *.yml, *.toml, *.ini, *.cfg, *.txt, *.csv).
bool AffectsTestCollection(std::string_view path);

/// The cache key (64 lower-case hex chars) of `files` for a collector with `salt`.
std::string CollectionCacheKey(const MemoryFileMap& files, std::string_view salt);

/// Options of DiscoverTests.
struct DiscoveryOptions {
  std::filesystem::path cache_dir;  ///< empty = DefaultCacheDir()
  bool use_cache = true;
};

/// Finds the tests of the task in `files`: cache lookup, else materialise the files into a fresh temp dir
/// (prefix custom_task_create_, removed afterwards) and run the collector. Which files a task needs is the
/// collector's business (pytest: task.py). Throws kf::Error: kInternal for an empty collector, and
/// whatever the collector throws. Empty lists are returned as they are (see RequirePerformanceTest). `*cache_hit` (optional)
/// tells whether the cache answered.
TestLists DiscoverTests(const MemoryFileMap& files, const TestCollector& collector,
                        const DiscoveryOptions& options = {}, bool* cache_hit = nullptr);

/// Throws kf::Error(kInvalidArgument, file "task.py", field "profile_tests") when `lists` has no
/// performance test — the reference fails task creation then ("Failed to collect profile tests").
void RequirePerformanceTest(const TestLists& lists);

}  // namespace kf
