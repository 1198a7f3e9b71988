// Per-child uids and gids, leased through lock files (see run_identity.hpp).
#include "harness/run_identity.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <vector>

#include <fmt/format.h>

namespace kf::harness_internal {
namespace {

constexpr const char* kLockDir = "/run/kernelfoundry/run-ids";

// Whether [kRunIdBase, kRunIdBase + kRunIdSlots) lies in one extent of a /proc/self/{uid,gid}_map.
bool RangeMapped(const char* map_file) {
  std::ifstream in(map_file);
  if (!in) return false;
  uint64_t inside = 0, outside = 0, count = 0;
  while (in >> inside >> outside >> count) {
    if (inside <= kRunIdBase && uint64_t{kRunIdBase} + kRunIdSlots <= inside + count) return true;
  }
  return false;
}

// Makes the lock directory (and /run/kernelfoundry) as root's, 0700; "" or why not.
std::string MakeLockDir() {
  for (const char* dir : {"/run/kernelfoundry", kLockDir}) {
    if (::mkdir(dir, 0700) != 0 && errno != EEXIST) return fmt::format("cannot make {}: {}", dir, std::strerror(errno));
    struct stat st {};
    if (::lstat(dir, &st) != 0) return fmt::format("cannot stat {}: {}", dir, std::strerror(errno));
    // Made by someone else (or a link): its locks would prove nothing.
    if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0) {
      return fmt::format("{} is not a directory of root's that only root may write", dir);
    }
  }
  return "";
}

struct SlotLock {
  int fd = -1;
  explicit SlotLock(int f) : fd(f) {}
  SlotLock(const SlotLock&) = delete;
  SlotLock& operator=(const SlotLock&) = delete;
  ~SlotLock() { ::close(fd); }
};

}  // namespace

std::string RunIdentityUnavailable() {
  static const std::string why = [] {
    if (::geteuid() != 0) return std::string("kf is not root");
    if (!RangeMapped("/proc/self/uid_map") || !RangeMapped("/proc/self/gid_map")) {
      return fmt::format("ids {}..{} are not mapped in this user namespace", kRunIdBase, kRunIdBase + kRunIdSlots - 1);
    }
    return MakeLockDir();
  }();
  return why;
}

std::optional<RunIdentity> LeaseRunIdentity(const SandboxUser& base, std::string* why) {
  if (std::string no = RunIdentityUnavailable(); !no.empty()) {
    *why = no;
    return std::nullopt;
  }
  // Start at a different slot each time (time and a counter), so leases spread instead of all probing slot 0.
  static std::atomic<uint32_t> counter{0};
  const uint32_t start = static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count() ^
                                               (static_cast<uint64_t>(::getpid()) << 16)) +
                         counter.fetch_add(7919);
  for (uint32_t i = 0; i < kRunIdSlots; ++i) {
    const uint32_t slot = (start + i) % kRunIdSlots;
    const std::string path = fmt::format("{}/{}", kLockDir, slot);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      *why = fmt::format("cannot open {}: {}", path, std::strerror(errno));
      return std::nullopt;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // another live child holds it (EWOULDBLOCK)
      ::close(fd);
      continue;
    }
    RunIdentity id;
    id.user = base;
    id.user.uid = id.user.gid = kRunIdBase + slot;
    // The sandbox user's groups stay (its primary group shares the work dirs; e.g. `video` opens GPUs), after
    // the run's own; at most 32 in all (the exec module's limit).
    std::vector<uint32_t> groups{id.user.gid};
    for (uint32_t g : base.groups) {
      if (groups.size() < 32 && std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
    }
    if (groups.size() < 32 && std::find(groups.begin(), groups.end(), base.gid) == groups.end()) {
      groups.push_back(base.gid);
    }
    id.user.groups = std::move(groups);
    id.lease = std::make_shared<const SlotLock>(fd);
    return id;
  }
  *why = fmt::format("all {} per-run ids are in use", kRunIdSlots);
  return std::nullopt;
}

}  // namespace kf::harness_internal
