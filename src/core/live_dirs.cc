// Registry of live temporary directories (see live_dirs.hpp).
#include "core/live_dirs.hpp"

#include <chrono>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

namespace kf::internal {
namespace fs = std::filesystem;

namespace {

struct Registry {
  std::mutex mu;
  std::set<fs::path> dirs;
  bool closed = false;
};

Registry& Get() {
  static Registry* r = new Registry;  // never destroyed: usable from a termination handler at any time
  return *r;
}

[[noreturn]] void Park() {
  while (true) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace

void RegisterLiveDir(const fs::path& dir) {
  Registry& r = Get();
  std::unique_lock<std::mutex> lock(r.mu);
  if (r.closed) {
    lock.unlock();
    RemoveTree(dir);
    Park();
  }
  r.dirs.insert(dir);
}

void UnregisterLiveDir(const fs::path& dir) {
  Registry& r = Get();
  std::lock_guard<std::mutex> lock(r.mu);
  r.dirs.erase(dir);
}

int RemoveLiveDirs() {
  Registry& r = Get();
  std::set<fs::path> dirs;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.closed = true;
    dirs.swap(r.dirs);
  }
  for (const fs::path& d : dirs) RemoveTree(d);
  return static_cast<int>(dirs.size());
}

void RemoveTree(const fs::path& dir) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory() && !it->is_symlink()) {
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
      ec.clear();
    }
  }
  fs::remove_all(dir, ec);
}

}  // namespace kf::internal
