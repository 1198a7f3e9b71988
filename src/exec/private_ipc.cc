// A sandboxed child's own /dev/shm and System V IPC (private_ipc.hpp).
#include "exec/private_ipc.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kf::exec_internal {
namespace {

/// The steps of MakePrivateIpc, for the probe's message.
constexpr const char* kSteps[] = {"", "unshare(CLONE_NEWNS | CLONE_NEWIPC)", "making the mounts slaves",
                                  "mounting a tmpfs on /dev/shm"};

/// MakePrivateIpc, also saying which step failed (1..3; 0 on success).
int PrivateIpcSteps(int* step) {
  *step = 1;
  if (unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0) return errno;
  *step = 2;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return errno;
  *step = 3;
  if (mount("kf-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) return errno;
  *step = 0;
  return 0;
}

/// Runs the steps in a throwaway child (the namespaces go with it). "" when they all worked, else why not.
std::string Probe() {
  if (geteuid() != 0) return "kf is not root (a child of another user cannot get a mount namespace of its own)";
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  const pid_t child = fork();
  if (child < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return std::string("fork: ") + std::strerror(err);
  }
  if (child == 0) {
    int report[2] = {0, 0};
    report[1] = PrivateIpcSteps(&report[0]);
    (void)!write(fds[1], report, sizeof report);
    _exit(0);
  }
  close(fds[1]);
  int report[2] = {-1, 0};
  ssize_t got = 0;
  do {
    got = read(fds[0], report, sizeof report);
  } while (got < 0 && errno == EINTR);
  close(fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof report) || report[0] < 0 || report[0] > 3) {
    return "the probe's child reported nothing";
  }
  if (report[0] == 0) return "";
  return std::string(kSteps[report[0]]) + ": " + std::strerror(report[1]);
}

}  // namespace

int MakePrivateIpc() {
  int step = 0;
  return PrivateIpcSteps(&step);
}

std::string PrivateIpcDescription() {
  static const std::string description = [] {
    const std::string why = Probe();
    return why.empty() ? std::string("private /dev/shm and IPC namespace") : "shared with other runs: " + why;
  }();
  return description;
}

bool PrivateIpcAvailable() { return PrivateIpcDescription().rfind("private", 0) == 0; }

}  // namespace kf::exec_internal
