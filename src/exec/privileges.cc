// Dropping privileges in a sandboxed child (see privileges.hpp).
#include "exec/privileges.hpp"

#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kf::exec_internal {
namespace {

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

// The capability sets of the calling thread (two 32-bit words per set, version 3 layout).
int CapGet(__user_cap_data_struct (&data)[2]) {
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  return static_cast<int>(syscall(SYS_capget, &head, data));
}

}  // namespace

int DropPrivileges(const PrivilegePlan& plan) {
  if (!plan.active) return 0;
  if (plan.switch_ids) {
    // The bounding set first: PR_CAPBSET_DROP needs CAP_SETPCAP, which the uid switch takes away.
    for (int cap = 0; cap < 64; ++cap) {
      if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return errno;  // EINVAL: past the last
    }
    if (syscall(SYS_setgroups, plan.n_groups, plan.groups) != 0) return errno;
    if (syscall(SYS_setresgid, plan.gid, plan.gid, plan.gid) != 0) return errno;
    if (syscall(SYS_setresuid, plan.uid, plan.uid, plan.uid) != 0) return errno;
  } else {
    for (int cap = 0; cap < 64; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);  // as far as we may
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);  // EINVAL before Linux 4.3: nothing to clear
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[2] = {};
  if (syscall(SYS_capset, &head, none) != 0) return errno;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  // Check, never trust: the ids are the planned ones and no capability is left in any set.
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (syscall(SYS_getresuid, &ruid, &euid, &suid) != 0 || syscall(SYS_getresgid, &rgid, &egid, &sgid) != 0) return errno;
  if (plan.switch_ids && (ruid != plan.uid || euid != plan.uid || suid != plan.uid || rgid != plan.gid ||
                          egid != plan.gid || sgid != plan.gid)) {
    return EPERM;
  }
  if (euid == 0 || ruid == 0 || suid == 0) return EPERM;  // root without capabilities is still the owner of /
  __user_cap_data_struct left[2] = {};
  if (CapGet(left) != 0) return errno;
  for (const auto& d : left) {
    if (d.effective != 0 || d.permitted != 0 || d.inheritable != 0) return EPERM;
  }
  return 0;
}

std::string PrivilegeDescription(const PrivilegePlan& plan, const std::string& name) {
  const uid_t uid = plan.switch_ids ? plan.uid : geteuid();
  return "uid " + std::to_string(uid) + " (" + name + "), no capabilities";
}

}  // namespace kf::exec_internal
