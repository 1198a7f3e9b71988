// A sandboxed child's own /dev/shm and System V IPC: internal to the exec module.
//
// Landlock leaves /dev/shm writable (POSIX shared memory and semaphores need it), and System V IPC and POSIX
// message queues are not files at all, so without this every sandboxed run of the machine shares them: one
// candidate could leave data there that another run (or its own later timing run) reads, a channel between runs
// and a place to cache outputs across them. A sandboxed child of a root kf therefore gets, before it drops its
// privileges, a mount namespace of its own whose mounts stay slaves of the host's (nothing it mounts propagates
// back), a fresh tmpfs on /dev/shm (mode 1777, nosuid, nodev; its pages are charged to the run's memory cgroup)
// and an IPC namespace of its own (System V shared memory, semaphores and message queues; POSIX message queues,
// which the sandbox refuses anyway). Everything the run's tree puts there goes when its last process exits. Both
// containment paths get it (ContainSelf: the shepherd's child and a warm-start worker). Not covered: two runs that
// overlap in time can still meet through a pathname Unix socket (README, "Not covered").
//
// Needs CAP_SYS_ADMIN, which a root kf has unless a container took it away: PrivateIpcDescription() probes once,
// in a throwaway child, and ChildPolicy plans it only where that worked.
#pragma once

#include <string>

namespace kf::exec_internal {

/// In the child, before the Landlock ruleset is prepared (its /dev/shm rule must name the new tmpfs) and before
/// the privilege drop: unshare(CLONE_NEWNS | CLONE_NEWIPC), every mount made a slave (MS_REC | MS_SLAVE on /),
/// a tmpfs mounted on /dev/shm. Raw syscalls only (async-signal-safe). Returns 0 or the errno of the failed step.
int MakePrivateIpc();

/// "private /dev/shm and IPC namespace" when a child can get them here, else "shared with other runs: <why>"
/// (kf is not root, or the probe's step failed with its errno). Probed once per process, in a forked child;
/// never throws.
std::string PrivateIpcDescription();

/// True when PrivateIpcDescription() says "private …".
bool PrivateIpcAvailable();

}  // namespace kf::exec_internal
