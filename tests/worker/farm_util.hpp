// Helpers of the farm end-to-end tests: background processes (kf worker, Python Celery), a native task
// package with its own queue names, candidates.
#pragma once

#include <atomic>
#include <filesystem>
#include <thread>
#include <map>
#include <string>
#include <vector>

namespace kf::testing {

/// A background process in its own session (killed with its group), output appended to a log file.
class Proc {
 public:
  Proc() = default;
  Proc(std::vector<std::string> argv, std::filesystem::path log, std::map<std::string, std::string> env = {});
  ~Proc();
  Proc(Proc&& other) noexcept;
  Proc& operator=(Proc&& other) noexcept;
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;

  int pid() const { return pid_; }
  /// True while it runs (not exited, not a zombie).
  bool Running();
  /// Sends a signal to the process (group = false) or its whole group.
  void Signal(int sig, bool group = false);
  /// Waits up to `seconds` for the exit; returns the wait status, or -1 on timeout.
  int Wait(double seconds);
  /// The log so far.
  std::string Log() const;
  /// Waits until the log contains `text` (true) or `seconds` pass / the process exits (false).
  bool WaitForLog(const std::string& text, double seconds);

 private:
  int pid_ = -1;
  int status_ = -1;
  std::filesystem::path log_;
};

/// A TCP proxy on 127.0.0.1 (a free port) to 127.0.0.1:`upstream_port`, whose connections can be cut at once
/// (a network failure between a worker and the broker). New connections keep working after a cut.
class TcpProxy {
 public:
  explicit TcpProxy(int upstream_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;
  int port() const { return port_; }
  /// Closes every open connection (both sides).
  void CutAll();

 private:
  void Loop();
  int upstream_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<bool> cut_{false};
  std::thread thread_;
};

/// True when /proc/<pid> is a live (non-zombie) process.
bool PidAlive(int pid);
/// Pids whose parent is `pid`.
std::vector<int> ChildPids(int pid);
/// Pids of live processes whose working directory is under `dir`.
std::vector<int> PidsWorkingUnder(const std::filesystem::path& dir);

/// The kf binary of this build.
std::filesystem::path KfBin();
/// True when /usr/bin/python3 can import celery and msgpack.
bool PythonCeleryAvailable();

/// A copy of examples/tasks/omp_reduction in `dir` whose config has language and gpu_arch = `tag` (so its
/// queues build_custom_task_<tag> / test_custom_task_<tag> are private to the test) and the given
/// test_timeout (seconds).
std::filesystem::path MakeOmpTask(const std::filesystem::path& dir, const std::string& tag, int test_timeout = 20);

/// Candidate sources for the omp_reduction task: "fast", "wrong" (from examples/candidates), "crash"
/// (traps), "hang" (loops forever), "slow" (sleeps `slow_ms` once per process, then correct).
std::string OmpCandidate(const std::string& kind, int slow_ms = 3000);

/// A short random tag usable in queue names ("kf" + 8 hex digits).
std::string FarmTag();

/// Starts `kf worker` on `queues` with node name `node` (log in dir/<node>.log); extra flags appended.
Proc StartKfWorker(const std::string& broker, const std::vector<std::string>& queues, const std::string& node,
                   const std::filesystem::path& dir, const std::vector<std::string>& extra = {});

}  // namespace kf::testing
