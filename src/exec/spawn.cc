// RunProcess: prepares the spawn (environment, executable, cgroups, limits), forks the shepherd, drains
// stdout/stderr with poll, enforces the timeouts and markers, and builds the ProcessRun.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <stop_token>

#include "exec/capture.hpp"
#include "exec/cgroup.hpp"
#include "exec/internal.hpp"
#include "exec/landlock.hpp"
#include "exec/private_ipc.hpp"
#include "exec/live_runs.hpp"
#include "exec/run_state.hpp"
#include "exec/seccomp.hpp"
#include "exec/shepherd.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/process.hpp"

namespace kf {
namespace exec_internal {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }
  void Reset() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

/// One output stream: capped storage, optional line splitting.
struct Stream {
  Fd fd;
  bool is_stderr = false;
  CappedStream capped;
  std::unique_ptr<LineSplitter> lines;
  explicit Stream(size_t cap) : capped(cap) {}
};

/// The runner side of one run.
class Runner {
 public:
  Runner(const ProcessOptions& o, ProcessRun* run) : o_(o), run_(run), out_(o.output_cap_bytes),
                                                     err_(o.output_cap_bytes), res_(o.output_cap_bytes) {}
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  void Run();

 private:
  bool Prepare();
  void Spawn();
  void Loop();
  void OnLine(bool is_stderr, std::string_view raw);
  void ReadStream(Stream& s);
  void ReadMessages();
  void RequestKill(TerminationReason reason, char cmd);
  void Finish();

  const ProcessOptions& o_;
  ProcessRun* run_;
  RunState st_;
  Stream out_, err_, res_;
  Fd sock_;
  pid_t shepherd_ = -1;
  Clock::time_point start_, last_activity_;
  std::optional<Clock::time_point> marker_deadline_, watchdog_, drain_deadline_;
  std::unique_ptr<RunCgroups> cgroups_;
  // Spawn plan storage (kept alive until the fork).
  std::vector<std::string> args_, env_, join_files_;
  std::string path_, cwd_, kill_file_, procs_file_, v2_join_file_, v2_dir_;
  std::vector<RlimitSetting> rlimits_;
  std::optional<ChildPolicy> policy_;  ///< Landlock, privileges, seccomp (ChildContainment points into it)
};

void Runner::Run() {
  start_ = Clock::now();
  if (Prepare()) {
    Spawn();
    Loop();
  }
  Finish();
  BuildProcessRun(o_, st_, run_);
}

Runner::~Runner() {
  if (shepherd_ > 0) {  // left by an exception: EOF on the socket makes the shepherd kill the tree
    sock_.Reset();
    ForgetRun(this);
    int status = 0;
    while (waitpid(shepherd_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

bool Runner::Prepare() {
  auto env = BuildChildEnvironment(o_);
  for (const auto& [k, v] : env) env_.push_back(k + "=" + v);
  if (o_.use_shell) {
    args_ = {"/bin/sh", "-c", o_.argv[0], "sh"};
    args_.insert(args_.end(), o_.argv.begin() + 1, o_.argv.end());
    path_ = "/bin/sh";
  } else {
    args_ = o_.argv;
    const SandboxUser* as = o_.sandbox && o_.sandbox->user ? &*o_.sandbox->user : nullptr;
    auto resolved = ResolveExecutable(o_.argv[0], env["PATH"], o_.cwd, as);
    if (!resolved) {
      st_.spawn_error = std::string("Failed to start ") + o_.argv[0] + ": not found in PATH" +
                        (as ? " among the programs the sandbox user " + as->name + " may execute" : "");
      return false;
    }
    path_ = *resolved;
  }
  if (!o_.cwd.empty()) cwd_ = o_.cwd.string();

  if (!o_.force_subreaper) {
    cgroups_ = std::make_unique<RunCgroups>(o_, &run_->limits, &run_->notes);
    join_files_ = cgroups_->V1JoinFiles();
    if (cgroups_->containment_v2()) {
      v2_dir_ = cgroups_->V2Dir();
      v2_join_file_ = v2_dir_ + "/cgroup.procs";
    }
    kill_file_ = cgroups_->KillFile();
    procs_file_ = cgroups_->ProcsFile();
    if (cgroups_->containment_v2()) run_->containment = ContainmentMethod::kCgroupV2;
  }
  auto add_rlimit = [&](int resource, uint64_t soft, uint64_t hard) {
    // Without privilege a hard limit cannot be raised: clamp to ours (stricter than asked, never looser).
    rlimit current{};
    if (geteuid() != 0 && getrlimit(resource, &current) == 0 && current.rlim_max != RLIM_INFINITY) {
      soft = std::min<uint64_t>(soft, current.rlim_max);
      hard = std::min<uint64_t>(hard, current.rlim_max);
    }
    rlimits_.push_back({resource, soft, hard});
  };
  if (o_.memory_limit_bytes && !(cgroups_ && cgroups_->memory_enforced())) {
    if (o_.cgroup_limits_only) {
      run_->limits["memory"] = "not applied: no writable memory cgroup";
    } else {
      add_rlimit(RLIMIT_AS, *o_.memory_limit_bytes, *o_.memory_limit_bytes);
      run_->limits["memory"] = "RLIMIT_AS (address space, per process)";
    }
  }
  if (o_.process_limit && !(cgroups_ && cgroups_->pids_enforced())) {
    if (o_.cgroup_limits_only) {
      run_->limits["processes"] = "not applied: no writable pids cgroup";
    } else if (geteuid() != 0) {
      add_rlimit(RLIMIT_NPROC, *o_.process_limit, *o_.process_limit);
      run_->limits["processes"] = "RLIMIT_NPROC (per user)";
    } else {
      run_->limits["processes"] = "unavailable";
      run_->notes.push_back("process limit not enforced: no pids cgroup is writable and RLIMIT_NPROC does "
                            "not apply to root");
    }
  }
  if (o_.cpu_limit_seconds) {
    add_rlimit(RLIMIT_CPU, *o_.cpu_limit_seconds, *o_.cpu_limit_seconds + 1);  // SIGXCPU, then SIGKILL
    run_->limits["cpu"] = "RLIMIT_CPU (per process)";
  }
  if (o_.file_size_limit_bytes) {
    add_rlimit(RLIMIT_FSIZE, *o_.file_size_limit_bytes, *o_.file_size_limit_bytes);
    run_->limits["file_size"] = "RLIMIT_FSIZE";
  }
  if (o_.open_files_limit) {
    add_rlimit(RLIMIT_NOFILE, *o_.open_files_limit, *o_.open_files_limit);
    run_->limits["open_files"] = "RLIMIT_NOFILE";
  }
  if (rlimits_.size() > ChildContainment::kMaxRlimits || join_files_.size() > ChildContainment::kMaxJoinFiles) {
    throw Error(ErrorKind::kInternal, "too many limits");
  }
  policy_.emplace(o_.filesystem_isolation, o_.sandbox);
  run_->isolation = policy_->Isolation();
  run_->sandbox = policy_->Sandbox();
  if (!policy_->Refusal().empty()) {
    st_.spawn_error = std::string("Failed to start ") + o_.argv[0] + ": " + policy_->Refusal();
    return false;
  }
  return true;
}

void Runner::Spawn() {
  int out_pipe[2], err_pipe[2], sv[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw Error(ErrorKind::kIO, std::string("pipe: ") + std::strerror(errno));
  out_.fd.fd = out_pipe[0];
  Fd out_w(out_pipe[1]);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) throw Error(ErrorKind::kIO, std::string("pipe: ") + std::strerror(errno));
  err_.fd.fd = err_pipe[0];
  err_.is_stderr = true;
  Fd err_w(err_pipe[1]);
  Fd res_w;
  if (o_.result_pipe) {
    int res_pipe[2];
    if (pipe2(res_pipe, O_CLOEXEC) != 0) throw Error(ErrorKind::kIO, std::string("pipe: ") + std::strerror(errno));
    res_.fd.fd = res_pipe[0];
    res_w.fd = res_pipe[1];
  }
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    throw Error(ErrorKind::kIO, std::string("socketpair: ") + std::strerror(errno));
  }
  sock_.fd = sv[0];
  Fd sock_w(sv[1]);

  std::vector<char*> argv, envp;
  for (auto& a : args_) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_) envp.push_back(e.data());
  envp.push_back(nullptr);
  ShepherdPlan plan;
  plan.path = path_.c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.cwd = cwd_.empty() ? nullptr : cwd_.c_str();
  plan.stdout_fd = out_w.fd;
  plan.stderr_fd = err_w.fd;
  plan.socket_fd = sock_w.fd;
  plan.result_fd = res_w.fd;
  ChildContainment& contain = plan.contain;
  contain.new_session = true;
  contain.v2_join_file = v2_join_file_.empty() ? nullptr : v2_join_file_.c_str();
  for (const auto& f : join_files_) contain.join_files[contain.n_join_files++] = f.c_str();
  for (const auto& r : rlimits_) contain.rlimits[contain.n_rlimits++] = r;
  policy_->ApplyTo(&contain);
  plan.v2_dir = v2_dir_.empty() ? nullptr : v2_dir_.c_str();
  plan.cgroup_kill = kill_file_.empty() ? nullptr : kill_file_.c_str();
  plan.cgroup_procs = procs_file_.empty() ? nullptr : procs_file_.c_str();
  plan.require_network_namespace = o_.sandbox && o_.sandbox->allow_loopback_sockets;
  plan.no_network = o_.no_network || plan.require_network_namespace;
  plan.kill_grace_ms = static_cast<int>(std::max<int64_t>(0, o_.kill_grace.count()));

  start_ = Clock::now();
  shepherd_ = fork();
  if (shepherd_ == 0) RunShepherd(plan);
  if (shepherd_ < 0) throw Error(ErrorKind::kIO, std::string("fork: ") + std::strerror(errno));
  // Our copies of the write ends go now, so EOF means "every writer of the tree is gone".
  out_w.Reset();
  err_w.Reset();
  sock_w.Reset();
  res_w.Reset();
  RegisterRun(this, sock_.fd);
  if (res_.fd.fd >= 0) SetNonBlocking(res_.fd.fd);
  SetNonBlocking(out_.fd.fd);
  SetNonBlocking(err_.fd.fd);
  SetNonBlocking(sock_.fd);
  last_activity_ = start_;
  if (o_.on_line || o_.end_marker) {
    out_.lines = std::make_unique<LineSplitter>([this](std::string_view l) { OnLine(false, l); });
    err_.lines = std::make_unique<LineSplitter>([this](std::string_view l) { OnLine(true, l); });
  }
}

void Runner::OnLine(bool is_stderr, std::string_view raw) {
  std::string text = StripTerminalEscapes(DecodeUtf8Replace(MakeNulVisible(raw)));
  if (o_.end_marker && o_.end_marker->match && !run_->end_marker_line) {
    if (std::optional<std::string> message = o_.end_marker->match(text)) {
      run_->end_marker_line = text;
      st_.marker_message = std::move(*message);
      marker_deadline_ = Clock::now() + o_.end_marker->grace;
    }
  }
  if (o_.on_line) o_.on_line(is_stderr, text);
}

void Runner::ReadStream(Stream& s) {
  char buf[64 * 1024];
  for (int round = 0; round < 16; ++round) {  // bounded, so the other stream gets its turn
    ssize_t n = read(s.fd.fd, buf, sizeof buf);
    if (n > 0) {
      std::string_view chunk(buf, static_cast<size_t>(n));
      s.capped.Append(chunk);
      if (s.lines) s.lines->Append(chunk);
      last_activity_ = Clock::now();
      if (o_.output_kill_bytes && s.capped.total() > *o_.output_kill_bytes && !st_.kill_reason) {
        RequestKill(TerminationReason::kOutputLimit, kCmdKill);
      }
      continue;
    }
    if (n < 0 && (errno == EINTR)) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (s.lines) s.lines->Flush();  // EOF (or a read error: treated alike)
    s.fd.Reset();
    return;
  }
}

void Runner::ReadMessages() {
  while (sock_.fd >= 0) {
    ShepherdMsg m{};
    ssize_t n = recv(sock_.fd, &m, sizeof m, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {  // EOF: the shepherd has exited
      sock_.Reset();
      st_.done = true;
      return;
    }
    if (static_cast<size_t>(n) != sizeof m) continue;
    switch (m.type) {
      case MsgType::kStarted: run_->pid = m.a; break;
      case MsgType::kNetwork:
        run_->network_isolated = m.a == 1;
        if (m.a != 1) {
          run_->network_note = std::string("network isolation unavailable: unshare(CLONE_NEWNET): ") +
                               std::strerror(m.b);
        } else if (m.c != 0) {
          run_->network_note = std::string("isolated, but loopback could not be brought up: ") +
                               std::strerror(m.c);
        }
        break;
      case MsgType::kSpawnError:
        st_.spawn_error = std::string("Failed to start ") + o_.argv[0] + ": " +
                          SpawnStageName(static_cast<SpawnStage>(m.a)) + ": " + std::strerror(m.b);
        break;
      case MsgType::kChildExit:  // leftovers of the tree are being killed now: bound that too
        st_.main_status = m.a;
        if (!watchdog_) watchdog_ = Clock::now() + o_.kill_grace + milliseconds(3000);
        break;
      case MsgType::kDone:
        if (m.b == 1 && !st_.main_status) st_.main_status = m.a;
        st_.cpu_us = m.x + m.y;
        st_.maxrss_kib = m.z;
        st_.done = true;
        break;
    }
  }
}

void Runner::RequestKill(TerminationReason reason, char cmd) {
  if (st_.kill_reason || st_.main_status) return;  // the main child already ended on its own
  st_.kill_reason = reason;
  if (sock_.fd >= 0) send(sock_.fd, &cmd, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  milliseconds grace = cmd == kCmdKill ? milliseconds(0) : o_.kill_grace;
  watchdog_ = Clock::now() + grace + milliseconds(3000);
}

void Runner::Loop() {
  const bool poll_limits = cgroups_ && (cgroups_->pids_enforced() || cgroups_->memory_enforced());
  // Cancellation wakes the poll below through an eventfd written by the stop callback.
  Fd wake;
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
  if (o_.stop.stop_possible()) {
    wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake.fd < 0) throw Error(ErrorKind::kIO, std::string("eventfd: ") + std::strerror(errno));
    const int wake_fd = wake.fd;
    on_stop.emplace(o_.stop, std::function<void()>([wake_fd] {
                      const uint64_t one = 1;
                      (void)!write(wake_fd, &one, sizeof one);
                    }));
  }
  Clock::time_point next_limit_poll = start_ + milliseconds(50);
  while (true) {
    ReadMessages();
    if (st_.done && out_.fd.fd < 0 && err_.fd.fd < 0 && res_.fd.fd < 0) break;
    auto now = Clock::now();
    if (st_.done && !drain_deadline_) drain_deadline_ = now + milliseconds(1000);
    if (drain_deadline_ && now >= *drain_deadline_) break;  // a writer escaped the tree: stop waiting
    if (!st_.kill_reason && !st_.main_status && !st_.done) {
      if (o_.stop.stop_requested()) {
        RequestKill(TerminationReason::kCanceled, kCmdKill);
      } else if (o_.wall_timeout && now - start_ >= *o_.wall_timeout) {
        RequestKill(TerminationReason::kWallTimeout, kCmdTerminate);
      } else if (o_.inactivity_timeout && now - last_activity_ >= *o_.inactivity_timeout) {
        RequestKill(TerminationReason::kInactivity, kCmdTerminate);
      } else if (marker_deadline_ && now >= *marker_deadline_) {
        RequestKill(TerminationReason::kEndMarkerGrace, kCmdTerminate);
      } else if (poll_limits && now >= next_limit_poll) {
        next_limit_poll = now + milliseconds(50);
        if (cgroups_->PidsMaxHits() > 0) {
          RequestKill(TerminationReason::kProcessLimit, kCmdKill);  // a fork bomb does not clean up
        } else if (cgroups_->OomKills() > 0) {
          RequestKill(TerminationReason::kMemoryLimit, kCmdKill);  // cgroup v1 kills one task only
        }
      }
    }
    if (watchdog_ && !st_.done && now >= *watchdog_) {
      // The shepherd did not finish in time (should not happen): kill it and what we can reach.
      if (!kill_file_.empty()) {
        int fd = open(kill_file_.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
          (void)!write(fd, "1", 1);
          close(fd);
        }
      }
      kill(shepherd_, SIGKILL);
      run_->notes.push_back("the shepherd did not finish in time and was killed");
      watchdog_.reset();
    }

    std::optional<Clock::time_point> next;
    auto consider = [&](std::optional<Clock::time_point> t) {
      if (t && (!next || *t < *next)) next = t;
    };
    if (!st_.kill_reason && !st_.main_status && !st_.done) {
      if (o_.wall_timeout) consider(start_ + *o_.wall_timeout);
      if (o_.inactivity_timeout) consider(last_activity_ + *o_.inactivity_timeout);
      consider(marker_deadline_);
      if (poll_limits) consider(next_limit_poll);
    }
    if (!st_.done) consider(watchdog_);
    consider(drain_deadline_);
    int timeout = -1;
    if (next) {
      auto ms = std::chrono::duration_cast<milliseconds>(*next - now).count() + 1;
      timeout = static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
    }
    pollfd fds[5];
    Stream* streams[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
    nfds_t n = 0;
    for (Stream* s : {&out_, &err_, &res_}) {
      if (s->fd.fd >= 0) {
        streams[n] = s;
        fds[n++] = {s->fd.fd, POLLIN, 0};
      }
    }
    if (sock_.fd >= 0) fds[n++] = {sock_.fd, POLLIN, 0};
    const bool wake_polled = wake.fd >= 0 && !st_.kill_reason;
    if (wake_polled) fds[n++] = {wake.fd, POLLIN, 0};
    if (n == (wake_polled ? 1u : 0u)) {  // nothing to wait on but the drain deadline
      if (st_.done) break;
      continue;
    }
    if (poll(fds, n, timeout) < 0 && errno != EINTR) {
      throw Error(ErrorKind::kIO, std::string("poll: ") + std::strerror(errno));
    }
    for (nfds_t i = 0; i < n; ++i) {
      if (streams[i] && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) ReadStream(*streams[i]);
    }
    if (wake_polled && (fds[n - 1].revents & POLLIN)) {  // drained; stop_requested() is checked above
      uint64_t count = 0;
      (void)!read(wake.fd, &count, sizeof count);
    }
  }
  if (out_.lines && out_.fd.fd >= 0) out_.lines->Flush();
  if (err_.lines && err_.fd.fd >= 0) err_.lines->Flush();
  int status = 0;
  while (waitpid(shepherd_, &status, 0) < 0 && errno == EINTR) {
  }
  shepherd_ = -1;
  UnregisterRun(this);
}

void Runner::Finish() {
  st_.wall_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  st_.stdout_raw = out_.capped.Finish();
  st_.stderr_raw = err_.capped.Finish();
  run_->stdout_bytes = out_.capped.total();
  run_->stderr_bytes = err_.capped.total();
  if (o_.result_pipe && !st_.spawn_error) run_->result_data = res_.capped.Finish();
  if (cgroups_) {
    st_.oom_kills = cgroups_->OomKills();
    st_.pids_hits = cgroups_->PidsMaxHits();
    st_.cgroup_peak = cgroups_->PeakMemory();
    if (auto cpu = cgroups_->CpuMicros(); cpu && *cpu > st_.cpu_us) st_.cpu_us = *cpu;
    cgroups_.reset();  // removes the leaves
  }
}

}  // namespace
}  // namespace exec_internal

std::string FilesystemIsolationSupport() { return exec_internal::LandlockDescription(exec_internal::LandlockAbi()); }

std::string SeccompSupport() { return exec_internal::SeccompDescription(); }

std::string PrivateIpcSupport() { return exec_internal::PrivateIpcDescription(); }

std::vector<std::string> SandboxSystemPaths() {
  const exec_internal::SystemPaths& system = exec_internal::SystemReadablePaths();
  std::vector<std::string> out = system.read;
  out.insert(out.end(), system.devices.begin(), system.devices.end());
  return out;
}

ProcessRun RunProcess(const ProcessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    throw Error(ErrorKind::kInvalidArgument, "RunProcess needs a command (argv is empty)", "", "argv");
  }
  exec_internal::ParkIfShuttingDown();
  ProcessRun run;
  exec_internal::Runner runner(options, &run);
  runner.Run();
  return run;
}

}  // namespace kf
