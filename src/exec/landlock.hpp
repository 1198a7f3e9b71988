// Filesystem isolation of a child with Landlock (Linux ≥ 5.13; the kernel's own unprivileged sandboxing
// LSM): internal to the exec module. The plan is made in the runner before fork; the child applies it
// between fork and exec with raw syscalls only (async-signal-safe).
//
// Policy: everything stays readable and executable; the listed writable directories (and everything below
// them) get every filesystem right the kernel's ABI knows; /dev keeps write + ioctl on existing device nodes
// (/dev/null, GPU nodes) but nothing can be created there except in /dev/shm (POSIX shared memory and
// semaphores); everything else is read-only: creating, writing, truncating, renaming, linking or removing
// fails with EACCES. From ABI 6 the child also cannot signal processes outside its sandbox (e.g. kf).
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
  static constexpr int kMaxRules = 24;
  LandlockRule rules[kMaxRules] = {};
  int n_rules = 0;
};

/// Fills `plan` for the policy above with `writable` directories (the strings must outlive the fork).
/// Returns false when there are more writable paths than the plan holds.
bool MakeLandlockPlan(int abi, const std::vector<std::string>& writable, LandlockPlan* plan);

/// In the child, before exec: sets no_new_privs and restricts the calling process (and everything it
/// starts later) to the plan. Paths that do not exist are skipped. Async-signal-safe. Returns 0 or errno.
int ApplyLandlock(const LandlockPlan& plan);

}  // namespace kf::exec_internal
