// kf stopped by SIGINT / SIGTERM / SIGHUP (issue 10, item 8): the child trees are killed AND the work dirs
// removed. The signals are blocked in every thread from the start of main; one thread waits for them with
// sigwait (so the cleanup runs as ordinary code, not in a signal handler), then: kills every process tree in
// flight (their threads park and never report a result, so no half-finished verdict is stored), removes the
// live work and discovery dirs, and re-raises the signal with its default action (the shell sees "killed by
// SIGTERM": exit status 128 + n).
#include "cli/termination.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/live_dirs.hpp"
#include "kernelfoundry/process.hpp"

namespace kf::cli {

void InstallTerminationCleanup() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return;
  std::thread([set] {
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    std::fprintf(stderr, "kf: stopping (SIG%s): killing child processes and removing work directories\n",
                 sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    std::fflush(stderr);
    AbortAllRunsForShutdown(std::chrono::seconds(10));
    internal::RemoveLiveDirs();
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    raise(sig);
    _exit(128 + sig);
  }).detach();
}

}  // namespace kf::cli
