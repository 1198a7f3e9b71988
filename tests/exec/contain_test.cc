// Containment written once (exec/contain.hpp): ContainSelf names the step that failed, and a process that takes a
// contained run's containment with ContainLikePeer (a warm-start worker, through kernelfoundry._contain) ends up
// contained exactly like the shepherd's own child: the same resource limits, cgroup, session, no_new_privs and
// Landlock refusals.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "exec/contain.hpp"
#include "exec_test_util.hpp"
#include "kernelfoundry/error.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using exec_internal::ChildContainment;
using exec_internal::ContainSelf;
using exec_internal::SpawnStage;
using testing::TempDir;

// Runs `body` in a forked child; returns its exit status (the parent stays uncontained).
int InChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ContainSelf, NamesTheFirstStepThatFailed) {
  // A cgroup that does not exist: the cgroup step, ENOENT; nothing after it ran.
  EXPECT_EQ(InChild([] {
              ChildContainment c;
              c.new_session = false;
              c.v2_join_file = "/nonexistent-kf-cgroup/cgroup.procs";
              rlimit before{};
              getrlimit(RLIMIT_NOFILE, &before);
              c.rlimits[c.n_rlimits++] = {RLIMIT_NOFILE, 33, before.rlim_max};
              SpawnStage stage = SpawnStage::kFork;
              const int err = ContainSelf(c, &stage);
              rlimit rl{};
              getrlimit(RLIMIT_NOFILE, &rl);
              return err == ENOENT && stage == SpawnStage::kCgroup && rl.rlim_cur == before.rlim_cur ? 0 : 1;
            }),
            0);
  // A resource limit above the hard limit of an unprivileged process, or an unknown resource: the limit step.
  EXPECT_EQ(InChild([] {
              ChildContainment c;
              c.new_session = false;
              c.rlimits[c.n_rlimits++] = {4242, 1, 1};
              SpawnStage stage = SpawnStage::kFork;
              return ContainSelf(c, &stage) == EINVAL && stage == SpawnStage::kRlimit ? 0 : 1;
            }),
            0);
  // setsid of a process group leader fails: the session step.
  EXPECT_EQ(InChild([] {
              setpgid(0, 0);
              ChildContainment c;
              SpawnStage stage = SpawnStage::kFork;
              return ContainSelf(c, &stage) == EPERM && stage == SpawnStage::kSession ? 0 : 1;
            }),
            0);
}

TEST(PeerContainment, AGoneProcessIsNotFound) {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  try {
    exec_internal::PeerContainment p(pid, false, {}, false);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound) << e.what();
  }
}

// What a shell sees of its containment: limits, no_new_privs, session, its cgroup (the run's leaf named "RUN"), and
// which writes Landlock refuses.
std::string ProbeScript(const std::filesystem::path& work, const std::filesystem::path& outside) {
  return "echo nofile $(ulimit -n) fsize $(ulimit -f) core $(ulimit -c) stack $(ulimit -s)\n"
         "grep NoNewPrivs /proc/self/status\n"
         "[ \"$(cut -d' ' -f6 /proc/$$/stat)\" = \"$$\" ] && echo session-leader\n"
         "sed 's/kf-[0-9]*-[0-9]*/RUN/' /proc/self/cgroup\n"
         "echo x > " + (work / "w.txt").string() + " && echo work-write-ok\n"
         "{ echo x > " + (outside / "o.txt").string() + "; } 2>/dev/null && echo outside-write-ok\n"
         "echo x > /dev/null && echo dev-null-ok\n";
}

ProcessOptions Contained(const std::string& script, const std::filesystem::path& work) {
  ProcessOptions o = exec_test::Sh(script);
  o.open_files_limit = 77;
  o.file_size_limit_bytes = 3 << 20;
  o.filesystem_isolation = FilesystemIsolation{{work}, false};
  o.wall_timeout = std::chrono::seconds(60);
  return o;
}

// The warm-start worker's path against the shepherd's: a process outside the run takes the running client's
// containment (ContainLikePeer, the zygote worker's call) and runs the probe; the probe run directly by RunProcess
// (the shepherd's child, ContainSelf before exec) must print the same lines.
TEST(PeerContainment, AProcessContainedLikeARunsChildSeesWhatTheShepherdsChildSees) {
  TempDir tmp;
  const auto work = tmp.path() / "work";
  const auto outside = tmp.path() / "outside";
  std::filesystem::create_directories(work);
  std::filesystem::create_directories(outside);
  const std::string probe = ProbeScript(work, outside);

  const ProcessRun direct = RunProcess(Contained(probe, work));
  ASSERT_EQ(direct.reason, TerminationReason::kExited) << direct.result.stderr_text;

  // The "client": a contained run that waits; the "worker" takes its containment and runs the probe.
  const auto pid_file = work / "client.pid";
  ProcessRun client_run;
  std::thread client([&] {
    client_run = RunProcess(Contained("echo $$ > " + pid_file.string() + "; exec sleep 3", work));
  });
  auto read_pid = [&] {
    std::ifstream in(pid_file);
    int pid = 0;
    in >> pid;
    return pid;
  };
  pid_t peer = 0;
  for (int i = 0; i < 1000 && (peer = read_pid()) <= 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (peer <= 0) client.join();
  ASSERT_GT(peer, 0);
  std::filesystem::remove(work / "w.txt");
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t worker = fork();
  if (worker == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    try {
      exec_internal::ContainLikePeer(peer, true, {work.string()}, false);
    } catch (const Error& e) {
      dprintf(1, "contain failed: %s\n", e.what());
      _exit(3);
    }
    execl("/bin/sh", "sh", "-c", probe.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string worker_out;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) worker_out.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(worker, &status, 0);
  client.join();
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(worker_out, direct.result.stdout_text);
  EXPECT_NE(worker_out.find("nofile 77 fsize 6144"), std::string::npos) << worker_out;  // 512-byte blocks
  EXPECT_NE(worker_out.find("session-leader"), std::string::npos) << worker_out;
  EXPECT_NE(worker_out.find("work-write-ok"), std::string::npos) << worker_out;
  if (FilesystemIsolationSupport().rfind("landlock", 0) == 0) {
    EXPECT_EQ(worker_out.find("outside-write-ok"), std::string::npos) << worker_out;
    EXPECT_NE(worker_out.find("NoNewPrivs:\t1"), std::string::npos) << worker_out;
  }
  if (CgroupTreeContainment()) {
    EXPECT_NE(worker_out.find("RUN"), std::string::npos) << worker_out;
  }
}

}  // namespace
}  // namespace kf
