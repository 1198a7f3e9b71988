// The shepherd process (see shepherd.hpp) and the child's setup between fork and exec. Async-signal-safe
// code only: this runs in a process forked from a multi-threaded runner.
#include <errno.h>
#include <linux/sched.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "exec/shepherd.hpp"
#include "kernelfoundry/process.hpp"

namespace kf::exec_internal {
namespace {

// Fixed descriptors inside the shepherd.
constexpr int kSockFd = 3;
constexpr int kOutFd = 4;
constexpr int kErrFd = 5;
constexpr int kResFd = 6;  // the result pipe (ProcessOptions::result_pipe), in the shepherd and the child
static_assert(kResFd == ProcessOptions::kResultFd);

int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

void Send(MsgType type, int32_t a, int32_t b = 0, int32_t c = 0, int64_t x = 0, int64_t y = 0, int64_t z = 0) {
  ShepherdMsg m{type, a, b, c, x, y, z};
  while (send(kSockFd, &m, sizeof m, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

/// Writes a NUL-terminated string to an existing file. Returns 0 or errno.
int WriteFile(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  size_t len = std::strlen(text);
  ssize_t n = write(fd, text, len);
  int err = n == static_cast<ssize_t>(len) ? 0 : (n < 0 ? errno : EIO);
  close(fd);
  return err;
}

/// Formats "<a> <a> 1" (an identity id map line).
void IdMapLine(unsigned id, char* out) {
  char digits[16];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + id % 10);
    id /= 10;
  } while (id > 0);
  int i = 0;
  for (int rep = 0; rep < 2; ++rep) {
    for (int k = n; k > 0; --k) out[i++] = digits[k - 1];
    out[i++] = ' ';
  }
  out[i++] = '1';
  out[i] = '\0';
}

/// Closes every descriptor >= from (close_range, or a loop on old kernels).
void CloseFrom(int from) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, from, ~0U, 0) == 0) return;
#endif
  rlimit rl{};
  long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? static_cast<long>(rl.rlim_cur) : 65536;
  if (max > 65536) max = 65536;
  for (long fd = from; fd < max; ++fd) close(static_cast<int>(fd));
}

/// A fresh network namespace with loopback up. *ns_err: errno of unshare (0 = isolated);
/// *lo_err: errno of bringing up lo (0 = ok).
void IsolateNetwork(int* ns_err, int* lo_err) {
  *ns_err = 0;
  *lo_err = 0;
  if (unshare(CLONE_NEWNET) != 0) {
    int first = errno;
    // Without CAP_SYS_ADMIN: a user namespace (ids mapped to themselves) grants it for the new netns.
    unsigned uid = getuid(), gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) {
      *ns_err = first;
      return;
    }
    char line[48];
    WriteFile("/proc/self/setgroups", "deny");
    IdMapLine(uid, line);
    WriteFile("/proc/self/uid_map", line);
    IdMapLine(gid, line);
    WriteFile("/proc/self/gid_map", line);
  }
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    *lo_err = errno;
    return;
  }
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
    *lo_err = errno;
  } else {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) *lo_err = errno;
  }
  close(s);
}

[[noreturn]] void ChildFail(SpawnStage stage, int err) {
  Send(MsgType::kSpawnError, static_cast<int32_t>(stage), err);
  _exit(127);
}

/// The main child: stdio, cwd, containment (ContainSelf: session, cgroups, limits, Landlock, privileges, seccomp),
/// exec. Never returns. `in_v2_cgroup`: the child was created in the v2 leaf already (clone3 CLONE_INTO_CGROUP), so
/// it does not write its cgroup.procs.
[[noreturn]] void ChildExec(const ShepherdPlan& plan, pid_t shepherd, bool in_v2_cgroup) {
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != shepherd) _exit(127);
  // stdio and the working directory first, with the runner's rights (the sandbox user may not reach the path of
  // its work dir; issue 25); then the containment, whose last steps drop those rights.
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(kOutFd, 1) < 0 || dup2(kErrFd, 2) < 0) {
    ChildFail(SpawnStage::kStdio, errno);
  }
  if (plan.cwd != nullptr && chdir(plan.cwd) != 0) ChildFail(SpawnStage::kChdir, errno);
  ChildContainment contain = plan.contain;  // plain data: a copy is a memcpy
  if (in_v2_cgroup) contain.v2_join_file = nullptr;
  SpawnStage stage = SpawnStage::kSession;
  if (int err = ContainSelf(contain, &stage); err != 0) ChildFail(stage, err);
  if (plan.result_fd >= 0) {  // keep the result pipe at kResFd (dup2 left it inheritable)
    close(kOutFd);
    close(kErrFd);
    CloseFrom(kResFd + 1);
  } else {
    CloseFrom(kSockFd + 1);  // the socket itself is close-on-exec: it reports an exec failure
  }
  execve(plan.path, plan.argv, plan.envp);
  ChildFail(SpawnStage::kExec, errno);
}

/// Starts the main child. With a cgroup v2 leaf: clone3(CLONE_INTO_CGROUP), so the child is born in the
/// leaf. Moving a running process there instead (a cgroup.procs write) takes the kernel's cgroup threadgroup
/// lock for writing, which waits for an RCU grace period: 6-30 ms per process while the machine is busy
/// (measured 2026-12-01 in a native `kf run`, 10 test processes: 122 ms of such writes; on an idle machine
/// about 1 ms, where vfork + the write was ~2 ms faster than this fork-like clone3 in exec_bench). The raw
/// clone3 child has a copy of the shepherd (a single thread) and runs only syscalls until execve/_exit.
/// Without a v2 leaf, or where clone3 refuses (kernels before 5.7, seccomp policies): vfork, no atfork
/// handlers (they may take locks another thread of the runner held) and no copy of the address space, then
/// the child writes cgroup.procs itself.
pid_t StartChild(const ShepherdPlan& plan, pid_t self) {
  if (plan.v2_dir != nullptr) {
    const int cgroup_fd = open(plan.v2_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cgroup_fd >= 0) {
      clone_args args{};
      args.flags = CLONE_INTO_CGROUP;
      args.exit_signal = SIGCHLD;
      args.cgroup = static_cast<uint64_t>(cgroup_fd);
      const long child = syscall(SYS_clone3, &args, sizeof args);
      if (child == 0) ChildExec(plan, self, /*in_v2_cgroup=*/true);
      close(cgroup_fd);
      if (child > 0) return static_cast<pid_t>(child);
    }
  }
  pid_t child = vfork();
  if (child == 0) ChildExec(plan, self, /*in_v2_cgroup=*/false);
  return child;
}

/// Reaps every exited child; the main child's wait status goes to *main_status. Returns true when no
/// child is left.
bool ReapAll(pid_t main_pid, bool* main_done, int* main_status) {
  while (true) {
    int status = 0;
    pid_t p = waitpid(-1, &status, WNOHANG | __WALL);
    if (p > 0) {
      if (p == main_pid) {
        *main_done = true;
        *main_status = status;
      }
      continue;
    }
    if (p == 0) return false;
    if (errno == EINTR) continue;
    return true;  // ECHILD
  }
}

void SignalTree(const ShepherdPlan& plan, int sig) {
  if (sig == SIGKILL && plan.cgroup_kill != nullptr) {
    WriteFile(plan.cgroup_kill, "1");
  } else {
    SignalCgroupMembers(plan.cgroup_procs, sig);
  }
  SignalDescendants(sig);
}

}  // namespace

void RunShepherd(const ShepherdPlan& plan) {
  // Descriptors: socket, stdout, stderr at 3, 4, 5; everything else closed (other runs' pipes included).
  // All are first copied above 10, so no dup2 below can clobber a source that sits at 3..6.
  int s = fcntl(plan.socket_fd, F_DUPFD_CLOEXEC, 10);
  int o = fcntl(plan.stdout_fd, F_DUPFD, 10);
  int e = fcntl(plan.stderr_fd, F_DUPFD, 10);
  int res = plan.result_fd >= 0 ? fcntl(plan.result_fd, F_DUPFD, 10) : -1;
  if (s < 0 || o < 0 || e < 0 || (plan.result_fd >= 0 && res < 0) || dup3(s, kSockFd, O_CLOEXEC) < 0 ||
      dup2(o, kOutFd) < 0 || dup2(e, kErrFd) < 0 || (res >= 0 && dup2(res, kResFd) < 0)) {
    _exit(120);
  }
  CloseFrom(res >= 0 ? kResFd + 1 : kErrFd + 1);

  // Signals: defaults everywhere; SIGCHLD and the termination signals arrive through a signalfd.
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&handled, sig);
  sigprocmask(SIG_SETMASK, &handled, nullptr);
  int sfd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  if (plan.no_network) {
    int ns_err = 0, lo_err = 0;
    IsolateNetwork(&ns_err, &lo_err);
    Send(MsgType::kNetwork, ns_err == 0 ? 1 : 0, ns_err, lo_err);
    if (ns_err != 0 && plan.require_network_namespace) {  // its inet sockets would reach the host's network
      Send(MsgType::kSpawnError, static_cast<int32_t>(SpawnStage::kNetwork), ns_err);
      Send(MsgType::kDone, 0);
      _exit(0);
    }
  }

  const pid_t self = getpid();
  pid_t child = StartChild(plan, self);
  close(kOutFd);
  close(kErrFd);
  if (plan.result_fd >= 0) close(kResFd);
  if (child < 0) {
    Send(MsgType::kSpawnError, static_cast<int32_t>(SpawnStage::kFork), errno);
    Send(MsgType::kDone, 0);
    _exit(0);
  }
  Send(MsgType::kStarted, child);

  bool main_done = false;
  int64_t term_deadline = -1;   // SIGKILL follows at this time
  bool hard = false;            // SIGKILL rounds until the tree is gone
  int64_t next_round = 0;
  bool runner_gone = false;
  auto start_terminate = [&] {
    if (term_deadline >= 0 || hard) return;
    SignalTree(plan, SIGTERM);
    term_deadline = NowMs() + plan.kill_grace_ms;
  };
  auto start_kill = [&] {
    hard = true;
    SignalTree(plan, SIGKILL);
    next_round = NowMs() + 20;
  };

  int main_status = 0;
  bool exit_sent = false;
  while (true) {
    bool none_left = ReapAll(child, &main_done, &main_status);
    // Members of the run's cgroup that are not our descendants (a warm-started test process, forked by kf's
    // zygote, joins the cgroup of the run's main child) are leftovers too; no SIGCHLD tells us when they end.
    const bool outside_left = main_done && none_left && SignalCgroupMembers(plan.cgroup_procs, 0) > 0;
    none_left = none_left && !outside_left;
    if (main_done && none_left) break;  // the common case: kDone carries the status (one wakeup less)
    if (main_done && !exit_sent) {
      Send(MsgType::kChildExit, main_status);
      exit_sent = true;
    }
    if (main_done) start_terminate();  // leftovers of the tree
    int64_t now = NowMs();
    if (!hard && term_deadline >= 0 && now >= term_deadline) start_kill();
    if (hard && now >= next_round) {
      SignalTree(plan, SIGKILL);  // again: forks that raced the previous round
      next_round = now + 20;
    }
    int64_t wait_ms = -1;  // -1 = until something happens
    if (hard) {
      wait_ms = next_round - now;
    } else if (term_deadline >= 0) {
      wait_ms = term_deadline - now;
    }
    if (outside_left) wait_ms = wait_ms < 0 ? 10 : std::min<int64_t>(wait_ms, 10);  // poll their exit
    int timeout = wait_ms < 0 && (hard || term_deadline >= 0) ? 0 : static_cast<int>(wait_ms);
    pollfd fds[2] = {{sfd, POLLIN, 0}, {kSockFd, POLLIN, 0}};
    int nfds = runner_gone ? 1 : 2;
    if (poll(fds, static_cast<nfds_t>(nfds), timeout) < 0 && errno != EINTR) {
      // Cannot wait: fall back to a short sleep so the loop still makes progress.
      timespec ts{0, 10'000'000};
      nanosleep(&ts, nullptr);
    }
    signalfd_siginfo info[8];
    ssize_t n;
    while ((n = read(sfd, info, sizeof info)) > 0) {
      for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(signalfd_siginfo); ++i) {
        if (info[i].ssi_signo != SIGCHLD) start_kill();  // somebody is shutting us down
      }
    }
    if (!runner_gone && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      char cmd[16];
      ssize_t r = recv(kSockFd, cmd, sizeof cmd, MSG_DONTWAIT);
      if (r > 0) {
        for (ssize_t i = 0; i < r; ++i) {
          if (cmd[i] == kCmdTerminate) start_terminate();
          if (cmd[i] == kCmdKill) start_kill();
        }
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        runner_gone = true;  // the runner died: nobody will collect the output
        start_kill();
      }
    }
  }
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  Send(MsgType::kDone, main_status, 1, 0, static_cast<int64_t>(ru.ru_utime.tv_sec) * 1'000'000 + ru.ru_utime.tv_usec,
       static_cast<int64_t>(ru.ru_stime.tv_sec) * 1'000'000 + ru.ru_stime.tv_usec, ru.ru_maxrss);
  _exit(0);
}

}  // namespace kf::exec_internal
