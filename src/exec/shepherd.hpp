// The per-run shepherd: a small process forked by RunProcess that makes itself a child subreaper, starts
// the command, and kills and reaps the command's whole process tree. Everything it runs is
// async-signal-safe (it is forked from a multi-threaded process): raw syscalls, fixed buffers, no malloc.
//
// Protocol over one AF_UNIX SOCK_SEQPACKET socket (one message = one ShepherdMsg):
//   shepherd -> runner: kNetwork (when no_network), kStarted, kSpawnError (also sent by the child itself
//                       when exec fails), kChildExit (wait status of the main child, when leftovers of
//                       its tree are still being killed), kDone (tree gone, the main child's status,
//                       rusage of the whole tree); then the shepherd exits.
//   runner -> shepherd: one byte, kCmdTerminate or kCmdKill; EOF (the runner died) = kill the tree.
// When the main child exits, leftovers of its tree get SIGTERM and kill_grace later SIGKILL.
#pragma once

#include <cstdint>

#include "exec/contain.hpp"

namespace kf::exec_internal {

enum class MsgType : int32_t { kStarted = 1, kNetwork = 2, kSpawnError = 3, kChildExit = 4, kDone = 5 };

struct ShepherdMsg {
  MsgType type;
  int32_t a;        ///< kStarted: pid; kNetwork: 1 isolated / 0 not; kSpawnError: SpawnStage;
                    ///< kChildExit, kDone: wait status of the main child
  int32_t b;        ///< errno (kNetwork: of the failed step, 0 = ok; kSpawnError); kDone: 1 = a holds the
                    ///< main child's wait status (kChildExit is only sent when leftovers must be killed)
  int32_t c;        ///< kNetwork: errno of bringing up lo (0 = ok)
  int64_t x, y, z;  ///< kDone: user µs, system µs, max rss KiB of the tree
};

/// Everything the shepherd needs, prepared before fork (pointers into the runner's memory, which the fork
/// copies).
struct ShepherdPlan {
  const char* path = nullptr;                 ///< resolved executable
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;                  ///< nullptr = inherit
  int stdout_fd = -1, stderr_fd = -1;         ///< write ends of the output pipes
  int socket_fd = -1;                         ///< the shepherd's end of the socket
  int result_fd = -1;                         ///< write end of the result pipe, or -1 (none)
  ChildContainment contain;                   ///< what the child applies to itself before exec (ContainSelf);
                                              ///< contain.v2_join_file: cgroup.procs of the run's v2 leaf
  const char* v2_dir = nullptr;               ///< that leaf's directory (clone3 CLONE_INTO_CGROUP), or nullptr
  const char* cgroup_kill = nullptr;          ///< v2 cgroup.kill, or nullptr
  const char* cgroup_procs = nullptr;         ///< v2 cgroup.procs (to signal members), or nullptr
  bool no_network = false;
  bool require_network_namespace = false;     ///< no namespace of its own = a spawn failure (inet sockets allowed)
  int kill_grace_ms = 2000;
};

inline constexpr char kCmdTerminate = 'T';  ///< SIGTERM the tree, kill_grace later SIGKILL
inline constexpr char kCmdKill = 'K';       ///< SIGKILL the tree now

/// Sends `sig` to every descendant of the calling process, found by a /proc scan (ppid chains); with
/// SIGTERM also SIGCONT, so stopped processes see it. Async-signal-safe. Returns how many were signalled.
int SignalDescendants(int sig);
/// Sends `sig` to every pid listed in a cgroup.procs file. Async-signal-safe. Returns how many.
int SignalCgroupMembers(const char* procs_file, int sig);

/// The shepherd's body; called in the fresh child of fork(). Never returns.
[[noreturn]] void RunShepherd(const ShepherdPlan& plan);

}  // namespace kf::exec_internal
