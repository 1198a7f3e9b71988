// The sandbox's system-call filter (seccomp BPF, Linux >= 3.5): internal to the exec module. The program is
// built in the runner before fork; the child installs it last, just before exec, with raw syscalls only
// (async-signal-safe). The same program is handed to warm-started workers (warm_start.cc) as bytes.
//
// Policy (issue 25): what no kernel evaluation needs is refused.
//  * an escape attempt kills the process with SIGSYS (SECCOMP_RET_TRAP; the verdict names it
//    isolation_violation): loading or removing kernel modules, kexec, reboot, swapon/swapoff, mount and the
//    new mount API, pivot_root, chroot, bpf, iopl/ioperm, open_by_handle_at, setting the clock, acct, quotactl;
//  * quietly refused with EPERM (libraries probe these): ptrace, process_vm_readv/writev, keyctl/add_key/
//    request_key, perf_event_open (except in profiler passes), userfaultfd, setns, kcmp, syslog,
//    clock_adjtime/adjtimex, name_to_handle_at, and unshare/clone asking for a namespace;
//  * ENOSYS, so that libraries fall back to what the filter can inspect or to plain I/O: clone3 (glibc then
//    uses clone), io_uring_setup/enter/register (io_uring could open sockets past the socket rule);
//  * network: socket() only for AF_UNIX and AF_NETLINK (EACCES otherwise: no TCP/UDP, raw, vsock …);
//  * another architecture's system calls (32-bit compat) kill the process; x32 numbers get ENOSYS.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kf::exec_internal {

/// True when this build knows the system-call numbers of the machine it runs on (x86_64, aarch64).
bool SeccompArchSupported();

/// "seccomp filter (x86_64)" when the kernel supports filters and the actions the policy uses; else
/// "unavailable: <why>". Probed once per process.
std::string SeccompDescription();

/// True when SeccompDescription() is not "unavailable: …".
bool SeccompAvailable();

/// The policy above as a BPF program; `allow_perf_events` lets perf_event_open through, `allow_inet_sockets`
/// AF_INET/AF_INET6 sockets (profiler passes: ProcessSandbox). Empty when !SeccompArchSupported().
std::vector<sock_filter> BuildSeccompFilter(bool allow_perf_events, bool allow_inet_sockets = false);

/// In the child, before exec: sets no_new_privs and installs `n` instructions (n == 0: nothing to do).
/// Async-signal-safe. Returns 0 or errno.
int InstallSeccomp(const sock_filter* program, uint16_t n);

}  // namespace kf::exec_internal
