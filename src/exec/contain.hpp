// Containment of a child process: the one place that says what a process running task or candidate code
// applies to itself before it runs anything of the task. Internal to the exec module; also used by the warm-start
// zygote's worker through the host-side Python binding kernelfoundry._contain (python/src/contain_module.cc).
//
// Two callers, one function (ContainSelf):
//  * the shepherd's main child, between fork and exec (shepherd.cc ChildExec), with the plan the runner made
//    from ProcessOptions (spawn.cc);
//  * a warm-start worker (python/host/kernelfoundry/zygote.py), forked from kf's zygote for a run whose client
//    the shepherd has started and contained: it takes the client's containment (PeerContainment: the client's
//    cgroups and resource limits, the run's Landlock policy) before it runs the task's tests.
// Whatever a later change adds to a child's containment (dropping privileges, a seccomp filter) goes into
// ChildContainment and ContainSelf, so both paths get it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exec/landlock.hpp"

namespace kf::exec_internal {

/// Where a spawn failed (reported by the shepherd as kSpawnError, and by ContainSelf).
enum class SpawnStage : int32_t { kFork = 1, kCgroup, kRlimit, kStdio, kChdir, kExec, kSession, kIsolation };
/// A short English name of the stage ("joining the cgroup", "setsid", ...).
const char* SpawnStageName(SpawnStage stage);

/// One resource limit to set (setrlimit(resource, {soft, hard})).
struct RlimitSetting {
  int resource;
  uint64_t soft, hard;
};

/// What a child applies to itself to become contained (prepared before fork; the pointers point into memory the
/// fork copies, which must outlive the call). Plain data: copying it is async-signal-safe.
struct ChildContainment {
  static constexpr int kMaxRlimits = 16;
  static constexpr int kMaxJoinFiles = 4;
  bool new_session = true;                    ///< setsid(): its own session and process group
  const char* v2_join_file = nullptr;         ///< cgroup.procs of the run's v2 leaf to join, or nullptr
  const char* join_files[kMaxJoinFiles] = {};  ///< cgroup v1 cgroup.procs files to join ("0" is written)
  int n_join_files = 0;
  RlimitSetting rlimits[kMaxRlimits] = {};
  int n_rlimits = 0;
  LandlockPlan landlock;                      ///< filesystem isolation (abi 0 = none)
};

/// Contains the calling process (and everything it starts later) as `c` says, in this order: new session, cgroup
/// joins (v2 leaf, then v1 hierarchies), resource limits, Landlock (which also sets no_new_privs; last, because
/// it forbids the cgroup writes). Async-signal-safe: raw syscalls and fixed buffers only (it runs between fork and
/// exec in a child of a multi-threaded process). Returns 0, or the errno of the first step that failed, with
/// *failed set to that step's stage.
int ContainSelf(const ChildContainment& c, SpawnStage* failed);

/// The containment a running, contained process `pid` has, for a process that is to be contained like it (a
/// warm-start worker taking its client's): a new session, every cgroup of `pid` that differs from the caller's
/// (its v2 leaf, its v1 hierarchies), all of `pid`'s resource limits (prlimit), and — when `isolate` — the run's
/// Landlock policy for `writable` (MakeLandlockPlan, the same rules the process runner applies). Parent-side
/// code (allocates; never call it between fork and exec). The plan points into this object.
class PeerContainment {
 public:
  /// Reads /proc/<pid>/cgroup, /proc/self/mountinfo and `pid`'s limits. Throws kf::Error (kNotFound when `pid`
  /// is gone, kIO when its cgroups or limits cannot be read or a hierarchy has no mount here, kInvalidArgument
  /// when `required` and Landlock is unavailable, or there are more writable paths than a plan holds).
  PeerContainment(pid_t pid, bool isolate, const std::vector<std::string>& writable, bool required);
  PeerContainment(const PeerContainment&) = delete;
  PeerContainment& operator=(const PeerContainment&) = delete;

  const ChildContainment& Plan() const { return plan_; }
  /// "landlock (ABI n)", "unavailable: <why>" (isolate, no Landlock) or "" (not isolate).
  const std::string& Isolation() const { return isolation_; }

 private:
  std::string v2_join_file_;
  std::vector<std::string> join_files_;
  std::vector<std::string> writable_;
  std::string isolation_;
  ChildContainment plan_;
};

/// Contains the calling process like the running process `pid` (PeerContainment, then ContainSelf) and checks that
/// it is then in every cgroup `pid` is in. Returns PeerContainment::Isolation(). Throws what PeerContainment
/// throws, and kf::Error(kIO) naming the step and errno when a step fails or a cgroup still differs. For a
/// single-threaded process (a warm-start worker right after its fork); parent-side code otherwise.
std::string ContainLikePeer(pid_t pid, bool isolate, const std::vector<std::string>& writable, bool required);

/// cgroup.procs files (absolute, under this process's mounts) of every cgroup `pid` is in that differs from the
/// caller's: `v2` gets the unified hierarchy's (or stays empty), `v1` the others'. Throws kf::Error(kIO) when
/// /proc/<pid>/cgroup cannot be read or a hierarchy has no mount here. Parent-side code (containment_cgroup.cc).
void CgroupJoinFilesOf(pid_t pid, std::string* v2, std::vector<std::string>* v1);

}  // namespace kf::exec_internal
