// The sandbox's system-call filter (see seccomp.hpp). Numbers are the build machine's (<sys/syscall.h>); a
// call this architecture does not have is simply not in the program. Program layout: the architecture check,
// then per rule "JEQ nr → action", argument checks for socket/clone/unshare, and ALLOW at the end.
#include "exec/seccomp.hpp"

#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>

namespace kf::exec_internal {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
constexpr const char* kArchName = "x86_64";
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
constexpr const char* kArchName = "aarch64";
#else
constexpr uint32_t kAuditArch = 0;
constexpr const char* kArchName = "unknown";
#endif

#ifndef SECCOMP_FILTER_FLAG_SPEC_ALLOW
#define SECCOMP_FILTER_FLAG_SPEC_ALLOW (1UL << 2)
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr uint32_t kTrap = SECCOMP_RET_TRAP;
constexpr uint32_t kKill = SECCOMP_RET_KILL_PROCESS;
constexpr uint32_t Errno(int e) { return SECCOMP_RET_ERRNO | (static_cast<uint32_t>(e) & SECCOMP_RET_DATA); }

// Namespace flags: clone() shares bit 0x80 with the exit signal, so CLONE_NEWTIME only counts for unshare.
constexpr uint32_t kCloneNamespaces = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                                      CLONE_NEWPID | CLONE_NEWNET;
constexpr uint32_t kUnshareNamespaces = kCloneNamespaces | CLONE_NEWTIME;

constexpr uint32_t kNrOffset = offsetof(seccomp_data, nr);
constexpr uint32_t kArchOffset = offsetof(seccomp_data, arch);
constexpr uint32_t Arg0Low() { return offsetof(seccomp_data, args); }  // little-endian: low half first

// Escape attempts: the process gets SIGSYS (named isolation_violation in the verdict).
constexpr long kTrapped[] = {
#ifdef __NR_init_module
    __NR_init_module,
#endif
#ifdef __NR_finit_module
    __NR_finit_module,
#endif
#ifdef __NR_delete_module
    __NR_delete_module,
#endif
#ifdef __NR_kexec_load
    __NR_kexec_load,
#endif
#ifdef __NR_kexec_file_load
    __NR_kexec_file_load,
#endif
#ifdef __NR_reboot
    __NR_reboot,
#endif
#ifdef __NR_swapon
    __NR_swapon,
#endif
#ifdef __NR_swapoff
    __NR_swapoff,
#endif
#ifdef __NR_mount
    __NR_mount,
#endif
#ifdef __NR_umount2
    __NR_umount2,
#endif
#ifdef __NR_pivot_root
    __NR_pivot_root,
#endif
#ifdef __NR_chroot
    __NR_chroot,
#endif
#ifdef __NR_fsopen
    __NR_fsopen,
#endif
#ifdef __NR_fsconfig
    __NR_fsconfig,
#endif
#ifdef __NR_fsmount
    __NR_fsmount,
#endif
#ifdef __NR_fspick
    __NR_fspick,
#endif
#ifdef __NR_move_mount
    __NR_move_mount,
#endif
#ifdef __NR_open_tree
    __NR_open_tree,
#endif
#ifdef __NR_mount_setattr
    __NR_mount_setattr,
#endif
#ifdef __NR_bpf
    __NR_bpf,
#endif
#ifdef __NR_iopl
    __NR_iopl,
#endif
#ifdef __NR_ioperm
    __NR_ioperm,
#endif
#ifdef __NR_open_by_handle_at
    __NR_open_by_handle_at,
#endif
#ifdef __NR_settimeofday
    __NR_settimeofday,
#endif
#ifdef __NR_clock_settime
    __NR_clock_settime,
#endif
#ifdef __NR_acct
    __NR_acct,
#endif
#ifdef __NR_quotactl
    __NR_quotactl,
#endif
#ifdef __NR_quotactl_fd
    __NR_quotactl_fd,
#endif
};

// Refused quietly: libraries probe some of these and cope with EPERM.
constexpr long kRefused[] = {
#ifdef __NR_ptrace
    __NR_ptrace,
#endif
#ifdef __NR_process_vm_readv
    __NR_process_vm_readv,
#endif
#ifdef __NR_process_vm_writev
    __NR_process_vm_writev,
#endif
#ifdef __NR_keyctl
    __NR_keyctl,
#endif
#ifdef __NR_add_key
    __NR_add_key,
#endif
#ifdef __NR_request_key
    __NR_request_key,
#endif
#ifdef __NR_userfaultfd
    __NR_userfaultfd,
#endif
#ifdef __NR_setns
    __NR_setns,
#endif
#ifdef __NR_kcmp
    __NR_kcmp,
#endif
#ifdef __NR_syslog
    __NR_syslog,
#endif
#ifdef __NR_clock_adjtime
    __NR_clock_adjtime,
#endif
#ifdef __NR_adjtimex
    __NR_adjtimex,
#endif
#ifdef __NR_name_to_handle_at
    __NR_name_to_handle_at,
#endif
#ifdef __NR_lookup_dcookie
    __NR_lookup_dcookie,
#endif
#ifdef __NR_vhangup
    __NR_vhangup,
#endif
};

// "Not implemented": glibc falls back from clone3 to clone; io_uring users fall back to plain system calls.
constexpr long kNotImplemented[] = {
#ifdef __NR_clone3
    __NR_clone3,
#endif
#ifdef __NR_io_uring_setup
    __NR_io_uring_setup,
#endif
#ifdef __NR_io_uring_enter
    __NR_io_uring_enter,
#endif
#ifdef __NR_io_uring_register
    __NR_io_uring_register,
#endif
};

sock_filter Stmt(uint16_t code, uint32_t k) { return sock_filter{code, 0, 0, k}; }
sock_filter Jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { return sock_filter{code, jt, jf, k}; }

// "if nr == `nr` return `action`" (A holds the number).
void AddRule(std::vector<sock_filter>& p, long nr, uint32_t action) {
  p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1));
  p.push_back(Stmt(BPF_RET | BPF_K, action));
}

// "if nr == `nr`: return EPERM when the low half of the first argument has any of `mask`, else ALLOW".
void AddFlagsRule(std::vector<sock_filter>& p, long nr, uint32_t mask) {
  p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 4));
  p.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, Arg0Low()));
  p.push_back(Jump(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1));
  p.push_back(Stmt(BPF_RET | BPF_K, Errno(EPERM)));
  p.push_back(Stmt(BPF_RET | BPF_K, kAllow));
}

// socket(domain, …): AF_UNIX and AF_NETLINK pass, every other family gets EACCES.
void AddSocketRule(std::vector<sock_filter>& p, bool allow_inet) {
#ifdef __NR_socket
  // socket(): AF_UNIX and AF_NETLINK (and with allow_inet AF_INET/AF_INET6) go on to ALLOW, others get EACCES.
  const uint8_t n_allowed = allow_inet ? 4 : 2;
  p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, static_cast<uint8_t>(n_allowed + 3)));
  p.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, Arg0Low()));
  uint8_t left = n_allowed;
  for (uint32_t family : {AF_UNIX, AF_NETLINK, AF_INET, AF_INET6}) {
    if (left == 0) break;
    p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, family, left, 0));  // to the ALLOW below
    --left;
  }
  p.push_back(Stmt(BPF_RET | BPF_K, Errno(EACCES)));
  p.push_back(Stmt(BPF_RET | BPF_K, kAllow));
#else
  (void)p;
  (void)allow_inet;
#endif
}

bool ActionAvailable(uint32_t action) {
  return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

}  // namespace

bool SeccompArchSupported() { return kAuditArch != 0; }

std::string SeccompDescription() {
  static const std::string description = [] {
    if (!SeccompArchSupported()) return std::string("unavailable: no system-call table for this architecture");
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
      return std::string("unavailable: the kernel has no seccomp (prctl PR_GET_SECCOMP: ") + std::strerror(errno) + ")";
    }
    for (uint32_t action : {kKill, kTrap, static_cast<uint32_t>(SECCOMP_RET_ERRNO)}) {
      if (!ActionAvailable(action)) {
        return std::string("unavailable: seccomp lacks an action the filter uses (Linux >= 4.14 needed): ") +
               std::strerror(errno);
      }
    }
    return std::string("seccomp filter (") + kArchName + ")";
  }();
  return description;
}

bool SeccompAvailable() { return SeccompDescription().rfind("unavailable", 0) != 0; }

std::vector<sock_filter> BuildSeccompFilter(bool allow_perf_events, bool allow_inet_sockets) {
  std::vector<sock_filter> p;
  if (!SeccompArchSupported()) return p;
  p.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, kArchOffset));
  p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0));
  p.push_back(Stmt(BPF_RET | BPF_K, kKill));
  p.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, kNrOffset));
#if defined(__x86_64__)
  // x32 numbers (and nonsense ones): never executed, "not implemented".
  p.push_back(Jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U /* __X32_SYSCALL_BIT */, 0, 1));
  p.push_back(Stmt(BPF_RET | BPF_K, Errno(ENOSYS)));
#endif
  for (long nr : kTrapped) AddRule(p, nr, kTrap);
  for (long nr : kRefused) AddRule(p, nr, Errno(EPERM));
  for (long nr : kNotImplemented) AddRule(p, nr, Errno(ENOSYS));
#ifdef __NR_perf_event_open
  if (!allow_perf_events) AddRule(p, __NR_perf_event_open, Errno(EPERM));
#endif
  AddSocketRule(p, allow_inet_sockets);
#ifdef __NR_clone
  AddFlagsRule(p, __NR_clone, kCloneNamespaces);
#endif
#ifdef __NR_unshare
  AddFlagsRule(p, __NR_unshare, kUnshareNamespaces);
#endif
  p.push_back(Stmt(BPF_RET | BPF_K, kAllow));
  return p;
}

int InstallSeccomp(const sock_filter* program, uint16_t n) {
  if (n == 0) return 0;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  sock_fprog prog{n, const_cast<sock_filter*>(program)};
  // SPEC_ALLOW: no speculation mitigations forced on the process (they would slow the timed code down).
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW, &prog) == 0) return 0;
  if (errno == EINVAL && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0) return 0;  // before 4.17
  return errno;
}

}  // namespace kf::exec_internal
