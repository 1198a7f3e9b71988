// Containment written once (exec/contain.hpp): ContainSelf names the step that failed, and a process that takes a
// contained run's containment with ContainLikePeer (a warm-start worker, through kernelfoundry._contain) ends up
// contained exactly like the shepherd's own child: the same resource limits, cgroup, session, no_new_privs and
// Landlock refusals, and with a sandbox the same user, capabilities, seccomp filter and read allow-list (issue 25).
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <stop_token>
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

// The privilege drop (issue 25) keeps what a credential change would lose: the parent-death signal is set again and
// the process stays dumpable (its /proc entries its own, as after the exec that follows on the shepherd's path).
TEST(ContainSelf, DroppingPrivilegesKeepsTheParentDeathSignal) {
  EXPECT_EQ(InChild([] {
              prctl(PR_SET_PDEATHSIG, SIGKILL);
              ChildContainment c;
              c.new_session = false;
              c.privileges.active = true;
              if (geteuid() == 0) {
                const passwd* pw = getpwnam("nobody");
                if (pw == nullptr) return 2;
                c.privileges.switch_ids = true;
                c.privileges.uid = pw->pw_uid;
                c.privileges.gid = pw->pw_gid;
              }
              SpawnStage stage = SpawnStage::kFork;
              if (ContainSelf(c, &stage) != 0) return 3;
              int sig = 0;
              prctl(PR_GET_PDEATHSIG, &sig);
              if (sig != SIGKILL) return 4;
              if (prctl(PR_GET_DUMPABLE) != 1) return 5;
              if (geteuid() == 0 || getuid() == 0) return 6;
              return 0;
            }),
            0);
}

// The fallback for a client of another uid (no CAP_SYS_RESOURCE for prlimit): /proc/<pid>/limits gives the same
// limits as getrlimit, an unlimited one as RLIM_INFINITY.
TEST(PeerContainment, LimitsFromProcAreTheProcesssLimits) {
  EXPECT_EQ(InChild([] {
              const rlimit nofile{123, 456};
              if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) return 2;
              const auto limits = exec_internal::ResourceLimitsFromProc(getpid());
              if (limits.size() != RLIM_NLIMITS) return 3;
              for (int r = 0; r < RLIM_NLIMITS; ++r) {
                rlimit rl{};
                getrlimit(static_cast<__rlimit_resource>(r), &rl);
                const auto& got = limits[static_cast<size_t>(r)];
                if (got.resource != r || got.soft != rl.rlim_cur || got.hard != rl.rlim_max) return 10 + r;
              }
              return limits[RLIMIT_NOFILE].soft == 123 && limits[RLIMIT_NOFILE].hard == 456 ? 0 : 4;
            }),
            0);
}

TEST(PeerContainment, AGoneProcessIsNotFound) {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  try {
    exec_internal::PeerContainment p(pid, std::nullopt, std::nullopt);
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
  o.filesystem_isolation = FilesystemIsolation{{work}, false, std::nullopt};
  o.wall_timeout = std::chrono::seconds(60);
  return o;
}

// What the worker (ContainLikePeer with `o`'s request, the zygote worker's call) and the shepherd's child print.
struct BothPaths {
  std::string direct, worker;
};

// The warm-start worker's path against the shepherd's: a process outside the run takes the running client's
// containment (ContainLikePeer, the zygote worker's call) and runs `probe`; the probe run directly by RunProcess
// (the shepherd's child, ContainSelf before exec) must print the same lines. `o` gives the containment (its argv
// is replaced); `work` must be writable under it.
BothPaths RunBothPaths(const ProcessOptions& o, const std::string& probe, const std::filesystem::path& work) {
  auto with = [&](const std::string& script) {
    ProcessOptions r = o;
    r.argv = {"/bin/sh", "-c", script};
    return r;
  };
  BothPaths out;
  const ProcessRun direct = RunProcess(with(probe));
  EXPECT_EQ(direct.reason, TerminationReason::kExited) << direct.result.stderr_text;
  out.direct = direct.result.stdout_text;

  // The "client": a contained run that waits; the "worker" takes its containment and runs the probe.
  const auto pid_file = work / "client.pid";
  ProcessRun client_run;
  std::stop_source stop_client;  // the client waits until the worker is done (then it is killed)
  std::thread client([&] {
    ProcessOptions c = with("echo $$ > " + pid_file.string() + "; exec sleep 60");
    c.stop = stop_client.get_token();
    client_run = RunProcess(c);
  });
  auto read_pid = [&] {
    std::ifstream in(pid_file);
    int pid = 0;
    in >> pid;
    return pid;
  };
  pid_t peer = 0;
  for (int i = 0; i < 1000 && (peer = read_pid()) <= 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (peer <= 0) {
    client.join();
    ADD_FAILURE() << "the client did not start: " << client_run.result.stderr_text;
    return out;
  }
  std::filesystem::remove(work / "w.txt");
  int pipe_fds[2];
  EXPECT_EQ(pipe(pipe_fds), 0);
  const Json request = ChildContainmentRequest(o);
  const pid_t worker = fork();
  if (worker == 0) {
    dup2(pipe_fds[1], 1);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    try {
      ProcessOptions parsed;
      ParseChildContainmentRequest(request, &parsed);
      exec_internal::ContainLikePeer(peer, parsed.filesystem_isolation, parsed.sandbox);
    } catch (const Error& e) {
      dprintf(1, "contain failed: %s\n", e.what());
      _exit(3);
    }
    execl("/bin/sh", "sh", "-c", probe.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  char buf[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof buf)) > 0;) out.worker.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(worker, &status, 0);
  stop_client.request_stop();
  client.join();
  EXPECT_TRUE(WIFEXITED(status)) << status;
  return out;
}

TEST(PeerContainment, AProcessContainedLikeARunsChildSeesWhatTheShepherdsChildSees) {
  TempDir tmp;
  const auto work = tmp.path() / "work";
  const auto outside = tmp.path() / "outside";
  std::filesystem::create_directories(work);
  std::filesystem::create_directories(outside);
  const std::string probe = ProbeScript(work, outside);
  const BothPaths both = RunBothPaths(Contained(probe, work), probe, work);
  const std::string& worker_out = both.worker;
  EXPECT_EQ(worker_out, both.direct);
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

// The sandbox (issue 25) on both paths: the sandbox user (nobody, as root), no capabilities, the seccomp filter and
// the read allow-list — the worker gets them from the request through ChildPolicy, as the runner does.
TEST(PeerContainment, ASandboxedRunsWorkerTakesItsUserCapabilitiesFilterAndReadAllowList) {
  TempDir tmp;
  const auto work = tmp.path() / "work";
  const auto outside = tmp.path() / "outside";
  std::filesystem::create_directories(work);
  std::filesystem::create_directories(outside);
  std::filesystem::permissions(tmp.path(), std::filesystem::perms::all);  // nobody reaches them
  std::filesystem::permissions(work, std::filesystem::perms::all);
  std::filesystem::permissions(outside, std::filesystem::perms::all);
  testing::WriteFile(outside / "secret", "s3cret\n");
  std::filesystem::permissions(outside / "secret", std::filesystem::perms::owner_read |
                                                       std::filesystem::perms::group_read |
                                                       std::filesystem::perms::others_read);
  const std::string probe = "id -u\n"
                            "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status\n"
                            "cat " + (outside / "secret").string() + " 2>/dev/null || echo secret-refused\n"
                            "echo x > " + (work / "w.txt").string() + " && echo work-write-ok\n";
  ProcessOptions o = Contained(probe, work);
  o.filesystem_isolation->readable_paths = std::vector<std::filesystem::path>{};
  ProcessSandbox sandbox;
  if (geteuid() == 0) {
    const passwd* pw = getpwnam("nobody");
    ASSERT_NE(pw, nullptr);
    sandbox.user = SandboxUser{pw->pw_uid, pw->pw_gid, {pw->pw_gid}, "nobody"};
  }
  o.sandbox = sandbox;
  const BothPaths both = RunBothPaths(o, probe, work);
  EXPECT_EQ(both.worker, both.direct);
  const std::string& out = both.worker;
  if (geteuid() == 0) {
    EXPECT_EQ(out.rfind(std::to_string(getpwnam("nobody")->pw_uid) + "\n", 0), 0u) << out;
  }
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_NE(out.find(std::string(set) + ":\t0000000000000000"), std::string::npos) << set << "\n" << out;
  }
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos) << out;
  if (SeccompSupport().rfind("seccomp filter", 0) == 0) {
    EXPECT_NE(out.find("Seccomp:\t2"), std::string::npos) << out;
  }
  if (FilesystemIsolationSupport().rfind("landlock", 0) == 0) {
    EXPECT_NE(out.find("secret-refused"), std::string::npos) << out;
  }
  EXPECT_NE(out.find("work-write-ok"), std::string::npos) << out;
}

// The worker must be the plan's sandbox user already (the client's uid): a root client is refused.
TEST(PeerContainment, APeerThatIsNotTheSandboxUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  const passwd* pw = getpwnam("nobody");
  ASSERT_NE(pw, nullptr);
  ProcessSandbox sandbox;
  sandbox.user = SandboxUser{pw->pw_uid, pw->pw_gid, {}, "nobody"};
  try {
    exec_internal::PeerContainment p(getpid(), std::nullopt, sandbox);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("the client runs as uid 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kf
