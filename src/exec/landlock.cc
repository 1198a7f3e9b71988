// Landlock filesystem isolation (see landlock.hpp). The ABI constants are the kernel's
// (include/uapi/linux/landlock.h); newer ones are defined here when the build machine's header predates them.
#include "exec/landlock.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace kf::exec_internal {
namespace {

// Rights added after Linux 6.1's header (ABI 3: truncate, ABI 5: ioctl on devices; ABI 6: scopes).
constexpr uint64_t kTruncate = 1ULL << 14;
constexpr uint64_t kIoctlDev = 1ULL << 15;
constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;
constexpr uint64_t kScopeSignal = 1ULL << 1;

// The ruleset attribute in its newest layout; the size passed to the kernel selects what it reads.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct PathBeneath {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

constexpr uint64_t kRead = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
// Rights that make sense on a regular file (a rule on a file may only hold these).
constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | kTruncate | kIoctlDev;

uint64_t AllRights(int abi) {
  uint64_t all = (1ULL << 13) - 1;  // ABI 1: EXECUTE … MAKE_SYM
  if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) all |= kTruncate;
  if (abi >= 5) all |= kIoctlDev;
  return all;
}

}  // namespace

int LandlockAbi() {
  static const int abi = [] {
    long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v >= 1 ? static_cast<int>(v) : -errno;
  }();
  return abi;
}

std::string LandlockDescription(int abi) {
  if (abi >= 1) return "landlock (ABI " + std::to_string(abi) + ")";
  if (abi == -ENOSYS) return "unavailable: the kernel has no Landlock (ENOSYS; Linux >= 5.13 with CONFIG_SECURITY_LANDLOCK)";
  if (abi == -EOPNOTSUPP) return "unavailable: Landlock is disabled at boot (EOPNOTSUPP; add landlock to lsm=)";
  return std::string("unavailable: landlock_create_ruleset: ") + std::strerror(-abi);
}

const SystemPaths& SystemReadablePaths() {
  static const SystemPaths paths = [] {
    SystemPaths p;
    // Programs, libraries, compilers (/usr/local/cuda, /opt/rocm …), configuration (secrets there are
    // protected by their modes: the sandbox user is not root), /proc (other processes' entries are guarded by
    // the kernel's ptrace checks, which Landlock and the uid switch make fail) and the /sys parts that
    // device detection, cgroup-aware thread counts and huge-page settings read.
    p.read = {"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/proc",
              "/sys/devices", "/sys/bus", "/sys/class", "/sys/dev", "/sys/module", "/sys/fs/cgroup",
              "/sys/kernel/mm", "/run/udev"};
    p.devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                 "/dev/dri", "/dev/kfd", "/dev/accel", "/dev/nvidia-caps"};
    if (DIR* d = opendir("/dev")) {
      while (dirent* e = readdir(d)) {
        if (std::strncmp(e->d_name, "nvidia", 6) == 0 && std::strcmp(e->d_name, "nvidia-caps") != 0) {
          p.devices.push_back(std::string("/dev/") + e->d_name);
        }
      }
      closedir(d);
    }
    return p;
  }();
  return paths;
}

bool MakeLandlockPlan(int abi, const std::vector<std::string>& writable, const std::vector<std::string>* readable,
                      LandlockPlan* plan) {
  *plan = LandlockPlan{};
  if (abi < 1) return true;
  plan->abi = abi;
  plan->handled_fs = AllRights(abi);
  // ABI 6 scopes: no signals to, and no connections to abstract unix sockets of, processes outside the domain.
  plan->scoped = abi >= 6 ? kScopeSignal | kScopeAbstractUnixSocket : 0;
  auto add = [&](const char* path, uint64_t access) {
    if (plan->n_rules >= LandlockPlan::kMaxRules) return false;
    plan->rules[plan->n_rules++] = {path, access & plan->handled_fs};
    return true;
  };
  constexpr uint64_t kDevice = kRead | LANDLOCK_ACCESS_FS_WRITE_FILE | kTruncate | kIoctlDev;
  if (readable == nullptr) {
    add("/", kRead);
    add("/dev", kDevice);
  } else {
    const SystemPaths& system = SystemReadablePaths();
    for (const std::string& r : system.read) add(r.c_str(), kRead);
    for (const std::string& d : system.devices) add(d.c_str(), kDevice);
    for (const std::string& r : *readable) {
      if (!add(r.c_str(), kRead)) return false;
    }
  }
  add("/dev/shm", AllRights(abi));
  for (const std::string& w : writable) {
    if (!add(w.c_str(), AllRights(abi))) return false;
  }
  return true;
}

int PrepareLandlock(const LandlockPlan& plan, int* ruleset_fd) {
  *ruleset_fd = -1;
  if (plan.abi < 1) return 0;
  RulesetAttr attr{plan.handled_fs, 0, plan.scoped};
  const size_t size = plan.abi >= 6 ? sizeof(RulesetAttr) : plan.abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
  long ruleset = syscall(SYS_landlock_create_ruleset, &attr, size, 0U);
  if (ruleset < 0) return errno;
  const int rfd = static_cast<int>(ruleset);
  for (int i = 0; i < plan.n_rules; ++i) {
    int fd = open(plan.rules[i].path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR) continue;  // e.g. no /dev/shm on this machine
      int err = errno;
      close(rfd);
      return err;
    }
    struct stat st {};
    uint64_t access = plan.rules[i].access;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) access &= kFileRights;
    PathBeneath rule{access, fd};
    long rc = syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0U);
    int err = errno;
    close(fd);
    if (rc != 0) {
      close(rfd);
      return err;
    }
  }
  *ruleset_fd = rfd;
  return 0;
}

int RestrictLandlock(int ruleset_fd) {
  if (ruleset_fd < 0) return 0;
  int err = 0;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_landlock_restrict_self, ruleset_fd, 0U) != 0) {
    err = errno;
  }
  close(ruleset_fd);
  return err;
}

uint64_t LandlockFileRights() { return kFileRights; }

int ApplyLandlock(const LandlockPlan& plan) {
  int fd = -1;
  if (int err = PrepareLandlock(plan, &fd); err != 0) return err;
  return RestrictLandlock(fd);
}

}  // namespace kf::exec_internal
