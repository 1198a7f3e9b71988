// Containment: after RunProcess returns, no process of the tree is alive — setsid'd, double-forked and
// SIGTERM-ignoring grandchildren included — with cgroups and with the subreaper shepherd alone. Limits that
// stop a fork bomb and an allocation; network isolation.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "exec/cgroup.hpp"
#include "exec_test_util.hpp"

namespace kf {
namespace {

using namespace std::chrono_literals;
using exec_test::PidAlive;
using exec_test::PidsAfter;
using exec_test::Py;
using Clock = std::chrono::steady_clock;

/// A child that forks a grandchild which calls setsid(), ignores SIGTERM, double-forks and sleeps forever.
/// argv[1] = "exit": the child exits at once; "hang": it sleeps too.
constexpr const char* kEscapist = R"(
import os, signal, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.fork() > 0:
        os._exit(0)
    print('grandchild', os.getpid(), flush=True)
    os.write(w, b'x')
    while True:
        time.sleep(1000)
os.read(r, 1)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print('child', os.getpid(), flush=True)
if sys.argv[1] == 'hang':
    while True:
        time.sleep(1000)
)";

class Containment : public ::testing::TestWithParam<bool> {
 protected:
  ProcessOptions Options(const std::string& script) {
    ProcessOptions o = Py(script);
    o.force_subreaper = GetParam();
    o.kill_grace = 300ms;
    return o;
  }
  void ExpectMethod(const ProcessRun& run) {
    if (GetParam() || exec_internal::DetectCgroups().v2_base.empty()) {
      EXPECT_EQ(run.containment, ContainmentMethod::kSubreaper);
    } else {
      EXPECT_EQ(run.containment, ContainmentMethod::kCgroupV2);
    }
  }
};

TEST_P(Containment, EscapistTreeDiesWhenTheChildExits) {
  ProcessOptions o = Options(kEscapist);
  o.argv.push_back("exit");
  auto t0 = Clock::now();
  ProcessRun run = RunProcess(o);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  ExpectMethod(run);
  EXPECT_EQ(run.reason, TerminationReason::kExited);
  EXPECT_EQ(run.result.returncode, 0);
  auto child = PidsAfter(run.result.stdout_text, "child");
  auto grandchild = PidsAfter(run.result.stdout_text, "grandchild");
  ASSERT_EQ(child.size(), 1u) << run.result.stdout_text;
  ASSERT_EQ(grandchild.size(), 1u) << run.result.stdout_text;
  EXPECT_FALSE(PidAlive(child[0]));
  EXPECT_FALSE(PidAlive(grandchild[0]));
}

TEST_P(Containment, EscapistTreeDiesOnTimeout) {
  ProcessOptions o = Options(kEscapist);
  o.argv.push_back("hang");
  o.wall_timeout = 1500ms;
  auto t0 = Clock::now();
  ProcessRun run = RunProcess(o);
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(wall, 1.5 + 0.3 + 1.5);  // timeout + kill grace + slack
  ExpectMethod(run);
  EXPECT_EQ(run.reason, TerminationReason::kWallTimeout);
  EXPECT_EQ(run.result.returncode, -9);  // it ignored SIGTERM
  auto pids = PidsAfter(run.result.stdout_text, "child");
  auto more = PidsAfter(run.result.stdout_text, "grandchild");
  ASSERT_EQ(pids.size(), 1u) << run.result.stdout_text;
  ASSERT_EQ(more.size(), 1u) << run.result.stdout_text;
  EXPECT_FALSE(PidAlive(pids[0]));
  EXPECT_FALSE(PidAlive(more[0]));
}

TEST_P(Containment, LeftoverBackgroundJobDoesNotHoldTheRun) {
  ProcessOptions o = Py("import subprocess; p = subprocess.Popen(['sleep', '1000']); print('bg', p.pid)");
  o.force_subreaper = GetParam();
  auto t0 = Clock::now();
  ProcessRun run = RunProcess(o);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0);  // sleep dies on SIGTERM
  auto bg = PidsAfter(run.result.stdout_text, "bg");
  ASSERT_EQ(bg.size(), 1u);
  EXPECT_FALSE(PidAlive(bg[0]));
}

TEST_P(Containment, ForkBombUnderProcessLimit) {
  ProcessOptions o;
  // Every process keeps forking and ignores failures: without a limit this never ends.
  o.argv = {exec_test::kPython, "-c",
            "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
            "        time.sleep(0.01)\n"};
  o.force_subreaper = GetParam();
  o.process_limit = 50;
  o.wall_timeout = 5s;
  o.kill_grace = 300ms;
  if (o.force_subreaper && geteuid() == 0) {
    // Nothing can bound a root fork bomb without a pids cgroup: check that it is reported, do not run it.
    o.argv = {"true"};
    ProcessRun run = RunProcess(o);
    EXPECT_EQ(run.limits["processes"], "unavailable");
    ASSERT_FALSE(run.notes.empty());
    GTEST_SKIP() << run.notes.back();
  }
  auto t0 = Clock::now();
  ProcessRun run = RunProcess(o);
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string how = run.limits["processes"];
  if (how == "unavailable") GTEST_SKIP() << "no pids cgroup here";
  if (how.rfind("cgroup", 0) == 0) {
    // pids.max refuses the forks; the runner sees it in pids.events and kills the tree at once.
    EXPECT_EQ(run.reason, TerminationReason::kProcessLimit) << TerminationReasonName(run.reason);
    EXPECT_EQ(run.result.message.value_or("<none>"), "Process exceeded the process limit of 50");
    EXPECT_LT(wall, 4.5);
  } else {
    // RLIMIT_NPROC (not root): refused forks are invisible from outside; the wall timeout ends it.
    EXPECT_EQ(how, "RLIMIT_NPROC (per user)");
    EXPECT_LT(wall, 5.0 + 0.3 + 2.0);
  }
  // The machine is still usable: we can start processes.
  ProcessRun after = RunProcess(Py("print('alive')"));
  EXPECT_EQ(after.result.stdout_text, "alive\n");
}

TEST_P(Containment, AllocationAboveMemoryLimit) {
  ProcessOptions o = Options("b = b'x' * (400 * 1024 * 1024)\nprint('allocated', len(b))");
  o.memory_limit_bytes = 100 << 20;
  o.wall_timeout = 20s;
  ProcessRun run = RunProcess(o);
  EXPECT_EQ(run.reason, TerminationReason::kMemoryLimit)
      << TerminationReasonName(run.reason) << " rc=" << run.result.returncode << " " << run.result.stderr_text;
  EXPECT_EQ(run.result.stdout_text.find("allocated"), std::string::npos);
  EXPECT_EQ(run.result.message.value_or("<none>"), "Process exceeded the memory limit of 104857600 bytes");
  EXPECT_FALSE(run.limits["memory"].empty());
  if (GetParam()) {
    EXPECT_EQ(run.limits["memory"].rfind("RLIMIT_AS", 0), 0u);
  }
}

TEST_P(Containment, PeakMemoryAndCpuAreReported) {
  ProcessOptions o = Options("b = b'x' * (50 * 1024 * 1024)\nx = sum(range(3000000))");
  ProcessRun run = RunProcess(o);
  ASSERT_EQ(run.result.returncode, 0) << run.result.stderr_text;
  ASSERT_TRUE(run.peak_rss_bytes.has_value());
  EXPECT_GE(*run.peak_rss_bytes, 50u << 20);
  EXPECT_GT(run.cpu_seconds, 0.0);
}

/// Listens on 127.0.0.1 (in our namespace); returns the port.
int ListenOnLoopback(int* fd_out) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 8) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return -1;
  }
  *fd_out = fd;
  return ntohs(addr.sin_port);
}

constexpr const char* kNetProbe = R"(
import socket, sys
port = int(sys.argv[1])
try:
    socket.create_connection(('127.0.0.1', port), timeout=2).close()
    outside = 'connected'
except OSError as e:
    outside = 'failed'
srv = socket.socket()
srv.bind(('127.0.0.1', 0))
srv.listen(1)
c = socket.create_connection(srv.getsockname(), timeout=2)
a, _ = srv.accept()
c.sendall(b'ping')
print('outside', outside, 'inside', a.recv(4).decode())
)";

TEST_P(Containment, NoNetworkIsolatesFromOurLoopback) {
  int listener = -1;
  int port = ListenOnLoopback(&listener);
  ASSERT_GT(port, 0);
  ProcessOptions o = Options(kNetProbe);
  o.argv.push_back(std::to_string(port));
  ProcessRun control = RunProcess(o);
  EXPECT_EQ(control.result.stdout_text, "outside connected inside ping\n") << control.result.stderr_text;
  o.no_network = true;
  ProcessRun run = RunProcess(o);
  close(listener);
  if (!run.network_isolated) GTEST_SKIP() << "network isolation unavailable: " << run.network_note;
  EXPECT_EQ(run.limits["network"], "netns (loopback only)");
  EXPECT_TRUE(run.network_note.empty()) << run.network_note;
  EXPECT_EQ(run.result.stdout_text, "outside failed inside ping\n") << run.result.stderr_text;
}

TEST_P(Containment, ConcurrentEscapists) {
  std::vector<ProcessRun> runs(6);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < runs.size(); ++i) {
    threads.emplace_back([&, i] {
      ProcessOptions o = Options(kEscapist);
      o.argv.push_back(i % 2 ? "exit" : "hang");
      o.wall_timeout = 1s;
      runs[i] = RunProcess(o);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& run : runs) {
    auto pids = PidsAfter(run.result.stdout_text, "child");
    auto more = PidsAfter(run.result.stdout_text, "grandchild");
    ASSERT_EQ(pids.size(), 1u) << run.result.stdout_text << run.result.stderr_text;
    ASSERT_EQ(more.size(), 1u);
    EXPECT_FALSE(PidAlive(pids[0]));
    EXPECT_FALSE(PidAlive(more[0]));
  }
}

TEST_P(Containment, RunnerDeathKillsTheTree) {
  // A runner process that dies (SIGKILL) while its command runs: the shepherd sees the socket close and
  // kills the tree. The runner is a forked copy of this (still single-threaded) test process.
  int lines[2];
  ASSERT_EQ(pipe(lines), 0);
  pid_t runner = fork();
  if (runner == 0) {
    close(lines[0]);
    ProcessOptions o = exec_test::Sh("echo pid $$; exec sleep 1000");
    o.force_subreaper = GetParam();
    o.on_line = [&](bool, const std::string& line) {
      std::string text = line + "\n";
      (void)!write(lines[1], text.data(), text.size());
    };
    RunProcess(o);
    _exit(0);
  }
  close(lines[1]);
  char buf[64] = {};
  ssize_t n = read(lines[0], buf, sizeof buf - 1);
  close(lines[0]);
  ASSERT_GT(n, 0);
  auto pids = PidsAfter(buf, "pid");
  ASSERT_EQ(pids.size(), 1u) << buf;
  EXPECT_TRUE(PidAlive(pids[0]));
  kill(runner, SIGKILL);
  waitpid(runner, nullptr, 0);
  auto deadline = Clock::now() + 3s;
  while (PidAlive(pids[0]) && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(PidAlive(pids[0]));
}

TEST_P(Containment, ChildStartsInItsOwnCgroup) {
  ProcessRun run = RunProcess(Options("print(open('/proc/self/cgroup').read())"));
  ExpectMethod(run);
  const bool in_leaf = run.result.stdout_text.find("/kf-" + std::to_string(getpid()) + "-") != std::string::npos;
  EXPECT_EQ(in_leaf, run.containment == ContainmentMethod::kCgroupV2) << run.result.stdout_text;
}

// Warm starts (issue 15): a process forked elsewhere (kf's zygote) joins the run's cgroup. It is the run's
// leftover like a grandchild: SIGTERM when the main child exits, SIGKILL after kill_grace, waited for before
// RunProcess returns, and its CPU time counted (cpu.stat, not the shepherd's rusage, which cannot see it).
TEST(CgroupTreeContainment, AProcessThatJoinsTheRunsCgroupFromOutsideIsKilledWaitedForAndCounted) {
  if (!CgroupTreeContainment()) GTEST_SKIP() << "no cgroup v2 per run here";
  // The outsider: our own child (not the shepherd's), burning CPU for 0.3 s and then ignoring SIGTERM forever.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t outsider = fork();
  ASSERT_GE(outsider, 0);
  if (outsider == 0) {
    close(ready[0]);
    signal(SIGTERM, SIG_IGN);
    (void)!write(ready[1], "x", 1);
    const auto until = Clock::now() + 300ms;
    while (Clock::now() < until) {
    }
    while (true) pause();
  }
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  // The run's main child moves the outsider into its own cgroup (the v2 leaf) and exits at once.
  ProcessOptions o = exec_test::Sh("leaf=$(sed -n 's/^0:://p' /proc/self/cgroup); "
                        "mnt=$(awk '/ - cgroup2 / {print $5; exit}' /proc/self/mountinfo); "
                        "echo " + std::to_string(outsider) + " > \"$mnt$leaf/cgroup.procs\" && echo joined");
  o.kill_grace = 300ms;
  const auto t0 = Clock::now();
  ProcessRun run = RunProcess(o);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(run.result.stdout_text, "joined\n") << run.result.stderr_text;
  EXPECT_EQ(run.containment, ContainmentMethod::kCgroupV2);
  // Gone when RunProcess returns (killed: it ignores SIGTERM), after about kill_grace, not the 20 s timeout.
  int status = 0;
  ASSERT_EQ(waitpid(outsider, &status, WNOHANG), outsider) << "the outsider outlived the run";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_LT(seconds, 5.0);
  // Its CPU after joining counts: the shell alone uses a few ms.
  EXPECT_GT(run.cpu_seconds, 0.05) << run.cpu_seconds;
}

INSTANTIATE_TEST_SUITE_P(Methods, Containment, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "Subreaper" : "Cgroup";
                         });

}  // namespace
}  // namespace kf
