// Dropping privileges in a sandboxed child (issue 25): internal to the exec module. The plan is made in the
// runner before fork; the child applies it between fork and exec with raw syscalls only (async-signal-safe;
// no glibc set*id broadcast, which a vfork/clone3 child must not run).
//
// Order in the child (shepherd.cc, ChildExec): cgroup, limits, stdio and cwd as the runner's user; the
// Landlock ruleset prepared (paths opened while they are still reachable); then DropPrivileges; then
// Landlock restrict_self and the seccomp filter (both need no_new_privs, which the drop sets).
#pragma once

#include <sys/types.h>

#include <string>

namespace kf::exec_internal {

/// What DropPrivileges does. active == false: nothing.
struct PrivilegePlan {
  bool active = false;
  /// We are root: switch to uid/gid/groups (the bounding set is emptied first, while CAP_SETPCAP is held).
  bool switch_ids = false;
  uid_t uid = 0;
  gid_t gid = 0;
  static constexpr int kMaxGroups = 32;
  gid_t groups[kMaxGroups] = {};
  int n_groups = 0;
};

/// In the child: (as root) empties the capability bounding set, sets the supplementary groups, gid and uid
/// (real, effective, saved); then clears the ambient set, empties the permitted/effective/inheritable sets
/// and sets no_new_privs; finally checks that uid/gid are the planned ones and no capability is left.
/// Note: a credential change clears PR_SET_PDEATHSIG; the caller sets it again. Returns 0 or errno.
int DropPrivileges(const PrivilegePlan& plan);

/// "uid 999 (kf-sandbox), no capabilities" for a plan switching ids; "uid 1000 (ours), no capabilities"
/// otherwise. `name` names the user.
std::string PrivilegeDescription(const PrivilegePlan& plan, const std::string& name);

}  // namespace kf::exec_internal
