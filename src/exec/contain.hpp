// Containment of a child process: the one place that says what a process running task or candidate code
// applies to itself before it runs anything of the task. Internal to the exec module; also used by the warm-start
// zygote's worker through the host-side Python binding kernelfoundry._contain (python/src/contain_module.cc).
//
// Two callers, one function (ContainSelf):
//  * the shepherd's main child, between fork and exec (shepherd.cc ChildExec), with the plan the runner made
//    from ProcessOptions (spawn.cc);
//  * a warm-start worker (python/host/kernelfoundry/zygote.py), forked from kf's zygote for a run whose client
//    the shepherd has started and contained: it takes the client's containment (PeerContainment: the client's
//    cgroups and resource limits, and the run's policy from kf's request — Landlock, the sandbox user, which must
//    be the client's, no capabilities, the seccomp filter) before it runs the task's tests.
// Whatever a later change adds to a child's containment goes into ChildContainment and ContainSelf, so both paths
// get it; the policy parts (Landlock rules, sandbox user and capabilities, the seccomp filter; issue 25) are made by
// one class, ChildPolicy, for both.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exec/landlock.hpp"
#include "exec/privileges.hpp"
#include "kernelfoundry/process.hpp"

namespace kf::exec_internal {

/// Where a spawn failed (reported by the shepherd as kSpawnError, and by ContainSelf).
enum class SpawnStage : int32_t {
  kFork = 1, kCgroup, kRlimit, kStdio, kChdir, kExec, kSession, kIsolation, kPrivileges, kSeccomp, kNetwork, kIpc
};
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
  bool private_ipc = false;                   ///< its own /dev/shm and IPC namespace (MakePrivateIpc)
  LandlockPlan landlock;                      ///< filesystem isolation (abi 0 = none)
  PrivilegePlan privileges;                   ///< the sandbox's identity and capability drop (inactive = none)
  const sock_filter* seccomp = nullptr;       ///< the sandbox's system-call filter, or nullptr
  uint16_t seccomp_len = 0;                   ///< its instructions
};

/// Contains the calling process (and everything it starts later) as `c` says, in this order: new session, cgroup
/// joins (v2 leaf, then v1 hierarchies), resource limits; its own /dev/shm and IPC namespace (private_ipc.hpp);
/// the Landlock ruleset prepared (every rule's path opened while the caller's rights still reach it, /dev/shm's
/// being the new tmpfs); the privilege drop (sandbox user, every capability set and the
/// bounding set emptied, no_new_privs) — a credential change clears the parent-death signal, so one that was set is
/// set again, and the process fails (kPrivileges, ESRCH) when its parent died meanwhile; Landlock restrict_self
/// (after the cgroup writes, which it forbids); the seccomp filter last. Async-signal-safe: raw syscalls and fixed
/// buffers only (it runs between fork and exec in a child of a multi-threaded process); the identity and filter
/// apply to the calling thread, so the caller must be single-threaded. Returns 0, or the errno of the first step
/// that failed, with *failed set to that step's stage.
int ContainSelf(const ChildContainment& c, SpawnStage* failed);

/// The policy parts of a child's containment, made from ProcessOptions::filesystem_isolation and ::sandbox by one
/// rule for both callers (the process runner and PeerContainment): the Landlock plan (MakeLandlockPlan with the
/// writable paths and the read allow-list), the privilege plan (the sandbox user; refused for uid 0), a private
/// /dev/shm and IPC namespace for a sandbox user where the machine allows it (PrivateIpcAvailable) and the seccomp
/// program (BuildSeccompFilter). Parent-side code (allocates); owns the strings and the program a ChildContainment
/// filled by ApplyTo points into, so it is neither copied nor moved.
class ChildPolicy {
 public:
  /// Throws kf::Error(kInvalidArgument, naming the field) for more writable (20) or readable (40) paths or
  /// supplementary groups (32) than a plan holds, or a sandbox user with uid 0.
  ChildPolicy(const std::optional<FilesystemIsolation>& isolation, const std::optional<ProcessSandbox>& sandbox);
  ChildPolicy(const ChildPolicy&) = delete;
  ChildPolicy& operator=(const ChildPolicy&) = delete;

  /// Sets c->landlock, c->privileges, c->private_ipc and c->seccomp (pointing into this object).
  void ApplyTo(ChildContainment* c) const;
  /// Why the child must not start ("filesystem isolation is required but unavailable: …", "the sandbox needs a
  /// user to switch to when running as root", "the sandbox is required but seccomp is unavailable: …"), or "".
  const std::string& Refusal() const { return refusal_; }
  /// ProcessRun::isolation: "" (not requested), "landlock (ABI n)" or "unavailable: <why>".
  const std::string& Isolation() const { return isolation_; }
  /// ProcessRun::sandbox: "" (not requested) or e.g. "uid 999 (kf-sandbox), no capabilities, private /dev/shm and
  /// IPC namespace, seccomp filter (x86_64)".
  const std::string& Sandbox() const { return sandbox_; }

 private:
  void MakeIsolation(const FilesystemIsolation& isolation);
  void MakeSandbox(const ProcessSandbox& sandbox);

  std::vector<std::string> writable_, readable_;
  LandlockPlan landlock_;
  PrivilegePlan privileges_;
  bool private_ipc_ = false;
  std::vector<sock_filter> seccomp_;
  std::string refusal_, isolation_, sandbox_;
};

/// The containment a running, contained process `pid` has, for a process that is to be contained like it (a
/// warm-start worker taking its client's): a new session, every cgroup of `pid` that differs from the caller's
/// (its v2 leaf, its v1 hierarchies), all of `pid`'s resource limits (prlimit), and the run's policy for
/// `isolation` and `sandbox` (ChildPolicy, the same rules the process runner applies; the run's request comes from
/// kf: ChildContainmentRequest). A sandbox user must be `pid`'s: all of its uids (/proc/<pid>/status) are the
/// user's. Parent-side code (allocates; never call it between fork and exec). The plan points into this object.
class PeerContainment {
 public:
  /// Reads /proc/<pid>/cgroup, /proc/<pid>/status, /proc/self/mountinfo and `pid`'s limits. Throws kf::Error
  /// (kNotFound when `pid` is gone, kIO when its cgroups, uids or limits cannot be read or a hierarchy has no mount
  /// here, kInvalidArgument when ChildPolicy throws or refuses, or `pid` is not the sandbox user).
  PeerContainment(pid_t pid, const std::optional<FilesystemIsolation>& isolation,
                  const std::optional<ProcessSandbox>& sandbox);
  PeerContainment(const PeerContainment&) = delete;
  PeerContainment& operator=(const PeerContainment&) = delete;

  const ChildContainment& Plan() const { return plan_; }
  /// "landlock (ABI n)", "unavailable: <why>" (isolation asked for, no Landlock) or "" (not asked for).
  const std::string& Isolation() const { return policy_.Isolation(); }
  /// The sandbox's description (ChildPolicy::Sandbox), "" when none was asked for.
  const std::string& Sandbox() const { return policy_.Sandbox(); }

 private:
  std::string v2_join_file_;
  std::vector<std::string> join_files_;
  ChildPolicy policy_;
  ChildContainment plan_;
};

/// Every resource limit of process `pid`, indexed by resource (RLIMIT_*), from /proc/<pid>/limits, which everyone may
/// read (prlimit on a process of another uid needs CAP_SYS_RESOURCE; PeerContainment falls back to this). Throws
/// kf::Error(kIO) when the file cannot be read or lacks a resource. Parent-side code.
std::vector<RlimitSetting> ResourceLimitsFromProc(pid_t pid);

/// Contains the calling process like the running process `pid` (PeerContainment, then ContainSelf) and checks that
/// it is then in every cgroup `pid` is in. Returns PeerContainment::Isolation(). Throws what PeerContainment
/// throws, kf::Error(kInternal) when the caller has more than one thread (the identity, the capabilities and the
/// filter would apply to the calling thread only), and kf::Error(kIO) naming the step and errno when a step fails
/// or a cgroup still differs. For a single-threaded process (a warm-start worker right after its fork).
std::string ContainLikePeer(pid_t pid, const std::optional<FilesystemIsolation>& isolation,
                            const std::optional<ProcessSandbox>& sandbox);

/// cgroup.procs files (absolute, under this process's mounts) of every cgroup `pid` is in that differs from the
/// caller's: `v2` gets the unified hierarchy's (or stays empty), `v1` the others'. Throws kf::Error(kIO) when
/// /proc/<pid>/cgroup cannot be read or a hierarchy has no mount here. Parent-side code (containment_cgroup.cc).
void CgroupJoinFilesOf(pid_t pid, std::string* v2, std::vector<std::string>* v1);

}  // namespace kf::exec_internal
