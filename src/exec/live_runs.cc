// Registry of runs in flight and the shutdown that kills them (see live_runs.hpp, process.hpp).
#include "exec/live_runs.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "exec/shepherd.hpp"
#include "kernelfoundry/process.hpp"

namespace kf {
namespace exec_internal {
namespace {

struct LiveRuns {
  std::mutex mu;
  std::condition_variable cv;
  std::map<const void*, int> sockets;  ///< runner -> duplicate of its shepherd socket (owned here)
  bool shutting_down = false;
};

LiveRuns& Live() {
  static LiveRuns* live = new LiveRuns;  // never destroyed: used from the termination handler
  return *live;
}

[[noreturn]] void Park() {
  while (true) std::this_thread::sleep_for(std::chrono::hours(1));
}

// Erases the entry of `runner` (lock held). Returns whether it existed.
bool Erase(LiveRuns& l, const void* runner) {
  auto it = l.sockets.find(runner);
  if (it == l.sockets.end()) return false;
  close(it->second);
  l.sockets.erase(it);
  l.cv.notify_all();
  return true;
}

}  // namespace

void ParkIfShuttingDown() {
  LiveRuns& l = Live();
  std::unique_lock<std::mutex> lock(l.mu);
  if (l.shutting_down) {
    lock.unlock();
    Park();
  }
}

void RegisterRun(const void* runner, int sock) {
  LiveRuns& l = Live();
  int dup = fcntl(sock, F_DUPFD_CLOEXEC, 3);
  if (dup < 0) return;
  std::lock_guard<std::mutex> lock(l.mu);
  if (l.shutting_down) {
    send(dup, &kCmdKill, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(dup);
    return;  // the runner sees its tree die and parks when it unregisters
  }
  l.sockets[runner] = dup;
}

void UnregisterRun(const void* runner) {
  LiveRuns& l = Live();
  std::unique_lock<std::mutex> lock(l.mu);
  Erase(l, runner);
  if (l.shutting_down) {
    lock.unlock();
    Park();
  }
}

void ForgetRun(const void* runner) {
  LiveRuns& l = Live();
  std::lock_guard<std::mutex> lock(l.mu);
  Erase(l, runner);
}

}  // namespace exec_internal

int AbortAllRunsForShutdown(std::chrono::milliseconds wait) {
  exec_internal::LiveRuns& l = exec_internal::Live();
  std::unique_lock<std::mutex> lock(l.mu);
  l.shutting_down = true;
  const int n = static_cast<int>(l.sockets.size());
  for (const auto& [runner, sock] : l.sockets) send(sock, &exec_internal::kCmdKill, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  l.cv.wait_for(lock, wait, [&] { return l.sockets.empty(); });
  return n;
}

}  // namespace kf
