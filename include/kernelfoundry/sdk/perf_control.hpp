// PerfControl — switches `perf stat`'s counters on for the timed phase of a benchmark, from inside the test
// program (task side; header-only, used by the native task SDK; the Python twin is
// kernelfoundry.profilers.PerfControl).
//
// Contract:
//  * A perf profiler pass (kernelfoundry/profile.hpp) starts the test program under
//    `perf stat -D -1 --control fifo:CTL,ACK`: every counter starts disabled. The pass puts the FIFO paths
//    in KF_PERF_CTL_FIFO / KF_PERF_ACK_FIFO. Enable() writes "enable\n" to CTL and waits for perf's "ack\n"
//    on ACK; Disable() does the same with "disable\n". perf opens both FIFOs read-write and non-blocking, so
//    our opens never block; the wait for the acknowledgement is bounded (timeout_ms).
//  * Hooks() returns MeasureHooks calling Enable/Disable around the timing loop's timed trials, so only the
//    timed kernel calls are counted. Without the environment variables (no perf pass) every call does
//    nothing and Hooks() is empty.
//  * Never throws and never fails a benchmark: a control that cannot be reached (perf gone, a timeout) is
//    reported once on stderr and switched off.
//  * Not thread-safe: one control per process, used from the thread that runs the timing loop.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernelfoundry/measure.hpp"

namespace kf {

class PerfControl {
 public:
  /// A control over the FIFOs at `ctl` and `ack`; empty paths give an inactive control.
  PerfControl(std::string ctl, std::string ack, int timeout_ms = 5000)
      : ctl_path_(std::move(ctl)), ack_path_(std::move(ack)), timeout_ms_(timeout_ms) {
    active_ = !ctl_path_.empty() && !ack_path_.empty();
  }
  /// From KF_PERF_CTL_FIFO / KF_PERF_ACK_FIFO (inactive when either is unset or empty).
  static PerfControl FromEnvironment() {
    const char* ctl = std::getenv("KF_PERF_CTL_FIFO");
    const char* ack = std::getenv("KF_PERF_ACK_FIFO");
    return PerfControl(ctl ? ctl : "", ack ? ack : "");
  }
  PerfControl(const PerfControl&) = delete;
  PerfControl& operator=(const PerfControl&) = delete;
  PerfControl(PerfControl&& o) noexcept { *this = std::move(o); }
  PerfControl& operator=(PerfControl&& o) noexcept {
    if (this != &o) {
      Close();
      ctl_path_ = std::move(o.ctl_path_);
      ack_path_ = std::move(o.ack_path_);
      timeout_ms_ = o.timeout_ms_;
      active_ = o.active_;
      ctl_fd_ = o.ctl_fd_;
      ack_fd_ = o.ack_fd_;
      o.ctl_fd_ = o.ack_fd_ = -1;
      o.active_ = false;
    }
    return *this;
  }
  ~PerfControl() { Close(); }

  /// True while the control is usable (the environment named FIFOs and nothing has failed).
  bool active() const { return active_; }
  /// Switches perf's counters on; true when perf acknowledged.
  bool Enable() { return Command("enable"); }
  /// Switches perf's counters off; true when perf acknowledged.
  bool Disable() { return Command("disable"); }
  /// Timing-loop hooks calling Enable/Disable; empty hooks when inactive. The control must outlive them.
  MeasureHooks Hooks() {
    MeasureHooks h;
    if (!active_) return h;
    h.timed_begin = [this] { Enable(); };
    h.timed_end = [this] { Disable(); };
    return h;
  }

 private:
  void Fail(const char* what) {
    std::fprintf(stderr, "kf perf control: %s (%s); counting switched off\n", what, std::strerror(errno));
    active_ = false;
    Close();
  }
  void Close() {
    if (ctl_fd_ >= 0) ::close(ctl_fd_);
    if (ack_fd_ >= 0) ::close(ack_fd_);
    ctl_fd_ = ack_fd_ = -1;
  }
  bool Command(const char* cmd) {
    if (!active_) return false;
    if (ctl_fd_ < 0) {
      ctl_fd_ = ::open(ctl_path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (ctl_fd_ < 0) return Fail("cannot open the control FIFO"), false;
      ack_fd_ = ::open(ack_path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (ack_fd_ < 0) return Fail("cannot open the acknowledgement FIFO"), false;
    }
    const std::string line = std::string(cmd) + "\n";
    if (::write(ctl_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return Fail("cannot write to the control FIFO"), false;
    }
    // perf answers "ack\n" followed by a NUL byte; NULs are skipped, the line is what counts.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        errno = ETIMEDOUT;
        return Fail("perf did not acknowledge"), false;
      }
      pollfd p{ack_fd_, POLLIN, 0};
      const int n = ::poll(&p, 1, static_cast<int>(left.count()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) continue;
      char buf[64];
      const ssize_t got = ::read(ack_fd_, buf, sizeof buf);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (got <= 0) {
        if (got == 0) errno = EPIPE;
        return Fail("cannot read the acknowledgement FIFO"), false;
      }
      for (ssize_t i = 0; i < got; ++i) {
        if (buf[i] != '\0') pending_ += buf[i];
      }
      if (const size_t pos = pending_.find("ack\n"); pos != std::string::npos) {
        pending_.erase(0, pos + 4);
        return true;
      }
    }
  }

  std::string ctl_path_, ack_path_;
  int timeout_ms_ = 5000;
  bool active_ = false;
  int ctl_fd_ = -1, ack_fd_ = -1;
  std::string pending_;
};

}  // namespace kf
