// Filesystem isolation of a child with Landlock (Linux ≥ 5.13; the kernel's own unprivileged sandboxing
// LSM): internal to the exec module. The plan is made in the runner before fork; the child applies it
// between fork and exec with raw syscalls only (async-signal-safe).
//
// Policy: the listed writable directories (and everything below them) get every filesystem right the kernel's
// ABI knows; /dev/shm too (POSIX shared memory and semaphores). Reads: with an allow-list (issue 25) only the
// system's shared parts (SystemReadablePaths: /usr, /etc, /proc, device nodes …), the listed readable paths
// and the writable ones can be read or executed — the home directory, the database, caches and other work
// dirs cannot; without one (nullptr) everything stays readable and executable, and /dev keeps write + ioctl
// on existing nodes. Everything else is read-only: creating, writing, truncating, renaming, linking or
// removing fails with EACCES. From ABI 6 the child also cannot signal processes outside its sandbox (e.g. kf) nor connect to their abstract unix sockets.
// The child prepares the ruleset while it still has the runner's rights (PrepareLandlock: every rule's path
// is opened then) and restricts itself after dropping privileges (RestrictLandlock).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kf::exec_internal {

/// The running kernel's Landlock ABI version (>= 1), or -errno when Landlock is unavailable (ENOSYS: not
/// built in; EOPNOTSUPP: disabled at boot). Probed once per process.
int LandlockAbi();

/// "landlock (ABI n)" for n >= 1, else "unavailable: <why>".
std::string LandlockDescription(int abi);

/// One path rule: the directory (or file) and the rights granted beneath it.
struct LandlockRule {
  const char* path = nullptr;
  uint64_t access = 0;
};

/// Everything the child needs to restrict itself. abi == 0: nothing to apply.
struct LandlockPlan {
  int abi = 0;
  uint64_t handled_fs = 0;
  uint64_t scoped = 0;
  static constexpr int kMaxRules = 96;
  LandlockRule rules[kMaxRules] = {};
  int n_rules = 0;
};

/// The system's shared parts a sandboxed child may read with an allow-list, and the device nodes it may
/// also write and ioctl (/dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom and the GPU nodes found
/// under /dev: nvidia*, dri, kfd, accel). Computed once per process.
struct SystemPaths {
  std::vector<std::string> read;
  std::vector<std::string> devices;
};
const SystemPaths& SystemReadablePaths();

/// Fills `plan` for the policy above with `writable` directories and, when `readable` is not nullptr, the
/// read allow-list (the strings must outlive the fork). Returns false when there are more paths than the
/// plan holds.
bool MakeLandlockPlan(int abi, const std::vector<std::string>& writable, const std::vector<std::string>* readable,
                      LandlockPlan* plan);

/// In the child, before dropping privileges: creates the ruleset and adds every rule (paths that do not
/// exist are skipped). *ruleset_fd = -1 when the plan is empty. Async-signal-safe. Returns 0 or errno.
int PrepareLandlock(const LandlockPlan& plan, int* ruleset_fd);

/// In the child, after dropping privileges: sets no_new_privs and restricts the calling process (and
/// everything it starts later) to the prepared ruleset, then closes it (-1: nothing to do).
/// Async-signal-safe. Returns 0 or errno.
int RestrictLandlock(int ruleset_fd);

/// The rights a rule on a non-directory may hold (PrepareLandlock masks such rules with them).
uint64_t LandlockFileRights();

/// PrepareLandlock + RestrictLandlock.
int ApplyLandlock(const LandlockPlan& plan);

}  // namespace kf::exec_internal
