// Shared helpers of the Task tests: fixture copies with the golden modes/mtimes, a process-wide discovery
// cache, JSON comparisons.
//
// Modes: the shared fixture files are read-only on this machine (0444/0555), while the goldens were made
// from files with mode 0644 (edge_text/build.sh 0755) and mtime 1704067200 (fixtures/README.md). Tests
// therefore copy a fixture into a temp dir, chmod it to the golden modes and set the golden mtime before
// loading it, so that Encode() can be compared with the golden byte for byte (mtimes included).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "kernelfoundry/pytest_collect.hpp"
#include "kernelfoundry/task.hpp"
#include "test_util.hpp"

namespace kf::testing {

inline constexpr double kFixtureMtime = 1704067200.0;

/// Copies shared/fixtures/tasks/<name> to <dest>/<name> with the golden modes and mtime; returns the copy.
inline std::filesystem::path CopyFixture(const std::string& name, const std::filesystem::path& dest) {
  namespace fs = std::filesystem;
  const fs::path src = SharedDir() / "fixtures" / "tasks" / name;
  const fs::path out = dest / name;
  fs::create_directories(out);
  fs::copy(src, out, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const auto mtime = fs::file_time_type::clock::from_sys(std::chrono::sys_seconds(std::chrono::seconds(1704067200)));
  for (auto it = fs::recursive_directory_iterator(out); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory()) {
      fs::permissions(it->path(), static_cast<fs::perms>(0755));
    } else {
      const bool exec = it->path().filename() == "build.sh";
      fs::permissions(it->path(), static_cast<fs::perms>(exec ? 0755 : 0644));
      fs::last_write_time(it->path(), mtime);
    }
  }
  return out;
}

/// One discovery cache for the whole test binary (each fixture is collected by Python once).
inline const std::filesystem::path& SharedCacheDir() {
  static TempDir dir;  // removed at exit
  return dir.path();
}

/// Create options with the real pytest collector and the shared cache.
inline TaskCreateOptions TestCreateOptions() {
  TaskCreateOptions o;
  o.collector = PytestCollector();
  o.cache_dir = SharedCacheDir();
  return o;
}

/// task_data as a path-keyed map (directory iteration order differs between machines), optionally without
/// mtimes.
inline std::map<std::string, Json> FilesByPath(const Json& task_data, bool drop_mtime) {
  std::map<std::string, Json> out;
  for (const auto& [path, entry] : task_data.items()) {
    Json e = entry;
    if (drop_mtime && e.is_object()) e.erase("mtime");
    out[path] = e;
  }
  return out;
}

/// Expects an encoded task to equal a golden encode: task_data as a map, everything else exactly (order too).
inline void ExpectEncodeEq(const Json& ours, const Json& golden, bool drop_mtime) {
  EXPECT_EQ(FilesByPath(ours["task_data"], drop_mtime), FilesByPath(golden["task_data"], drop_mtime));
  Json a = ours, b = golden;
  a.erase("task_data");
  b.erase("task_data");
  EXPECT_EQ(a.dump(), b.dump());
}

}  // namespace kf::testing
