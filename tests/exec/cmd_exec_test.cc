// `kf exec` end to end: JSON and summary output, exit codes (child's code, 128+signal, 124, 127), --print-env.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <utility>

#include "test_util.hpp"

namespace kf {
namespace {

std::string Kf() { return (kf::testing::BinaryDir() / "kf").string(); }

class KfExec : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(Kf())) GTEST_SKIP() << "build the kf target first: " << Kf();
  }
};

TEST_F(KfExec, JsonAndExitCode) {
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec -- sh -c 'echo hi; exit 3'");
  EXPECT_EQ(rc, 3);
  Json j = Json::parse(out);
  EXPECT_EQ(j["result"]["returncode"], 3);
  EXPECT_EQ(j["result"]["stdout"], "hi\n");
  EXPECT_EQ(j["reason"], "exited");
}

TEST_F(KfExec, TimeoutIs124AndSignalIs128PlusN) {
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec --timeout 0.5 -- sleep 100");
  EXPECT_EQ(rc, 124);
  Json j = Json::parse(out);
  EXPECT_EQ(j["reason"], "wall_timeout");
  EXPECT_EQ(j["result"]["message"], "Process timed out after 0.5 seconds");
  auto [rc2, out2] = kf::testing::RunShell(Kf() + " exec --summary -- sh -c 'kill -SEGV $$'");
  EXPECT_EQ(rc2, 128 + 11);
  EXPECT_NE(out2.find("reason:      signaled"), std::string::npos) << out2;
  EXPECT_NE(out2.find("returncode:  -11"), std::string::npos) << out2;
}

TEST_F(KfExec, SpawnFailureIs127) {
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec -- kf-no-such-command-xyz");
  EXPECT_EQ(rc, 127);
  EXPECT_EQ(Json::parse(out)["reason"], "spawn_failed");
}

TEST_F(KfExec, PrintEnvDropsSecrets) {
  auto [rc, out] = kf::testing::RunShell("OPENAI_API_KEY=leak " + Kf() +
                                         " exec --print-env --env FOO=1 --env MY_TOKEN=2");
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("FOO=1\n"), std::string::npos);
  EXPECT_EQ(out.find("MY_TOKEN"), std::string::npos);
  EXPECT_EQ(out.find("OPENAI_API_KEY"), std::string::npos);
}

TEST_F(KfExec, LimitsAndMarkerOptions) {
  auto [rc, out] = kf::testing::RunShell(
      Kf() + " exec --end-marker pytest --grace 0.3 --memory 512M --nofile 64 --force-subreaper -- "
             "sh -c \"echo '=== 2 passed in 0.1s ==='; sleep 30\"");
  EXPECT_EQ(rc, 124);
  Json j = Json::parse(out);
  EXPECT_EQ(j["reason"], "end_marker_grace");
  EXPECT_EQ(j["containment"], "subreaper");
  EXPECT_EQ(j["result"]["message"],
            "All tests passed but the process did not exit cleanly and had to be terminated.");
  EXPECT_EQ(j["limits"]["open_files"], "RLIMIT_NOFILE");
  EXPECT_EQ(j["limits"]["memory"], "RLIMIT_AS (address space, per process)");
}

TEST_F(KfExec, BadOptionValues) {
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec --memory 12Q -- true");
  EXPECT_EQ(rc, 3);
  EXPECT_NE(out.find("--memory"), std::string::npos);
}

// --sandbox: the command is isolated as a candidate's test process is (Landlock, the sandbox user when kf is root,
// seccomp), works in a private directory and may write only there. README: "run a command exactly as candidates
// are run" was true of limits and the environment only (review, 2026-12-07).
TEST_F(KfExec, SandboxIsolatesTheCommandLikeACandidate) {
  kf::testing::TempDir outside;
  auto [rc, out] = kf::testing::RunShell(
      Kf() + " exec --sandbox -- sh -c 'echo ok > here.txt && cat here.txt; cat /etc/shadow; echo x > " +
      (outside.path() / "escape.txt").string() + "; pwd'");
  Json j = Json::parse(out);
  const std::string o = j["result"]["stdout"].get<std::string>();
  EXPECT_EQ(o.rfind("ok\n", 0), 0u) << out;  // its own directory is writable
  EXPECT_NE(o.find("kf-exec-"), std::string::npos) << out;  // pwd: the private directory
  EXPECT_FALSE(std::filesystem::exists(outside.path() / "escape.txt")) << out;
  EXPECT_NE(j["result"]["stderr"].get<std::string>().find("/etc/shadow"), std::string::npos) << out;
  EXPECT_EQ(rc, 0) << out;  // pwd's status
  // Options that contradict --sandbox are usage errors (exit 2, as the README's exit-code table says; they were 3).
  auto [rc2, out2] = kf::testing::RunShell(Kf() + " exec --sandbox --cwd / -- true");
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("--cwd"), std::string::npos) << out2;
  auto [rc3, out3] = kf::testing::RunShell(Kf() + " exec --read /tmp -- true");
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_NE(out3.find("--sandbox"), std::string::npos) << out3;
  // A repeatable option before `--` must not swallow it (stranger test: `--read D -- ls -la` failed on -la).
  auto [rc4, out4] = kf::testing::RunShell(Kf() + " exec --sandbox --read /usr/share --env A=1 -- sh -c 'echo $A; "
                                           "ls -d /usr/share'");
  EXPECT_EQ(rc4, 0) << out4;
  EXPECT_EQ(Json::parse(out4)["result"]["stdout"], "1\n/usr/share\n") << out4;
  auto [rc5, out5] = kf::testing::RunShell(Kf() + " exec --sandbox --read relative/dir -- true");
  EXPECT_EQ(rc5, 3) << out5;
  EXPECT_NE(out5.find("--read: expected an absolute path that exists"), std::string::npos) << out5;
  // The whole file system is not a directory it may read (stranger test, 2026-12-07: `--read /` was allowed).
  for (const std::string root : {"/", "//", "/usr/.."}) {
    auto [rc6, out6] = kf::testing::RunShell(Kf() + " exec --sandbox --read " + root + " -- true");
    EXPECT_EQ(rc6, 3) << root << "\n" << out6;
    EXPECT_NE(out6.find("is the whole file system"), std::string::npos) << out6;
  }
}

TEST_F(KfExec, AProcessLimitOfZeroIsAUsageError) {  // stranger test, 2026-12-07: --nproc 0 was accepted
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec --nproc 0 -- true");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--nproc"), std::string::npos) << out;
}

}  // namespace
}  // namespace kf

namespace kf {
namespace {

// Stranger test, 2026-12-07: `kf exec --sandbox -- python3 …` was 127 "Permission denied": PATH was searched as
// root, which found /root/.pyenv/shims/python3 first, a program the sandbox user may not run. The search now
// skips what the sandbox user cannot execute (here: a program in a directory only root may search).
TEST_F(KfExec, SandboxSearchesPathForWhatTheSandboxUserMayRun) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (the sandbox user is taken only by root)";
  kf::testing::TempDir tmp;
  const std::filesystem::path hidden = tmp.path() / "root-only", shared = tmp.path() / "shared";
  for (const auto& [dir, word] : {std::pair{hidden, "hidden"}, std::pair{shared, "shared"}}) {
    std::filesystem::create_directories(dir);
    kf::testing::WriteFile(dir / "kf-tool", std::string("#!/bin/sh\necho ") + word + "\n");
    std::filesystem::permissions(dir / "kf-tool", std::filesystem::perms(0755));
  }
  std::filesystem::permissions(tmp.path(), std::filesystem::perms(0755));
  std::filesystem::permissions(hidden, std::filesystem::perms(0700));
  const std::string path = hidden.string() + ":" + shared.string() + ":/usr/bin:/bin";
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec --sandbox --read " + shared.string() + " --env PATH=" + path +
                                         " -- kf-tool");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(Json::parse(out)["result"]["stdout"], "shared\n") << out;
  // Without the sandbox kf's own uid runs it: the first on PATH.
  auto [rc2, out2] = kf::testing::RunShell(Kf() + " exec --env PATH=" + path + " -- kf-tool");
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_EQ(Json::parse(out2)["result"]["stdout"], "hidden\n") << out2;
  // Only where the sandbox user may not run it at all: "not found" says so.
  auto [rc3, out3] = kf::testing::RunShell(Kf() + " exec --sandbox --env PATH=" + hidden.string() + " -- kf-tool");
  EXPECT_EQ(rc3, 127) << out3;
  EXPECT_NE(out3.find("among the programs the sandbox user"), std::string::npos) << out3;
}

// Stranger test, 2026-12-07: --timeout inf (or 1e300) overflowed into a limit that killed the child at once.
TEST_F(KfExec, TimesBeyondAYearAreRefusedNamingTheOption) {
  for (const std::string opt : {"--timeout inf", "--inactivity 1e300", "--kill-grace 4e7"}) {
    auto [rc, out] = kf::testing::RunShell(Kf() + " exec " + opt + " -- true");
    EXPECT_EQ(rc, 3) << opt << "\n" << out;
    EXPECT_NE(out.find(opt.substr(0, opt.find(' ')) + ": expected seconds from 0 to"), std::string::npos) << out;
  }
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec --nproc 4194305 -- true");  // above the kernel's pid_max
  EXPECT_EQ(rc, 2) << out;
}

// Stranger test, 2026-12-07: --print-env --sandbox printed kf's HOME, not the one the sandboxed child gets.
TEST_F(KfExec, PrintEnvShowsTheSandboxedChildsEnvironment) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (the sandbox user is taken only by root)";
  auto [rc, out] = kf::testing::RunShell(Kf() + " exec --sandbox --print-env");
  EXPECT_EQ(rc, 0) << out;
  const std::string text = "\n" + out;
  const size_t home = text.find("\nHOME=");
  ASSERT_NE(home, std::string::npos) << out;
  const std::string line = text.substr(home + 1, text.find('\n', home + 1) - home - 1);
  EXPECT_NE(line.find("/kf-exec-"), std::string::npos) << line;  // its private directory, not kf's HOME
  EXPECT_NE(text.find("\nUSER=kf-sandbox\n"), std::string::npos) << out;
}

// Stranger test, 2026-12-07: two candidates running at the same time met through a pathname Unix socket — one
// published its socket's path (here on its live output), the other connected (Landlock does not govern connect()),
// and they could pass descriptors. Each sandboxed run now has a uid and gid of its own and its private directory is
// sealed (root's, group = its gid, 0770; harness/run_identity.hpp): the second run cannot even reach the socket,
// and the first cannot open its directory up.
TEST_F(KfExec, TwoSandboxedRunsAtTheSameTimeCannotMeetThroughAPathnameSocket) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (the sandbox user is taken only by root)";
  kf::testing::TempDir tmp;
  std::filesystem::permissions(tmp.path(), std::filesystem::perms(0755));
  const std::string server =
      "import os, socket\n"
      "d = os.environ['TMPDIR']; p = os.path.join(d, 's')\n"
      "s = socket.socket(socket.AF_UNIX); s.bind(p); os.chmod(p, 0o777); s.listen(1)\n"
      "try:\n    os.chmod(d, 0o777); print('OPENED', flush=True)\nexcept OSError as e:\n"
      "    print('CHMOD', type(e).__name__, flush=True)\n"
      "print('SOCK', p, os.getuid(), flush=True)\n"
      "s.settimeout(12)\n"
      "try:\n    s.accept(); print('ACCEPTED', flush=True)\nexcept socket.timeout:\n    print('NOBODY', flush=True)\n";
  const std::string client =
      "import os, socket, sys\n"
      "print('UID', os.getuid())\n"
      "c = socket.socket(socket.AF_UNIX)\n"
      "try:\n    c.connect(sys.argv[1]); print('CONNECTED')\nexcept OSError as e:\n    print('REFUSED', type(e).__name__)\n";
  kf::testing::WriteFile(tmp.path() / "server.py", server);
  kf::testing::WriteFile(tmp.path() / "client.py", client);
  const std::string t = kf::testing::ShellQuote(tmp.path().string());
  const std::string script =
      "cd " + t + " && " + Kf() + " exec --sandbox --live --timeout 30 --read " + t + " -- /usr/bin/python3 " + t +
      "/server.py >a.json 2>a.err & "
      "for i in $(seq 200); do grep -q '^\\[out\\] SOCK ' " + t + "/a.err 2>/dev/null && break; sleep 0.1; done; "
      "p=$(sed -n 's/^\\[out\\] SOCK \\([^ ]*\\) .*/\\1/p' " + t + "/a.err); " + Kf() + " exec --sandbox --timeout 20 --read " +
      t + " -- /usr/bin/python3 " + t + "/client.py \"$p\" > " + t + "/b.json; wait; cat " + t + "/a.err";
  auto [rc, out] = kf::testing::RunShell(script);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("CHMOD PermissionError"), std::string::npos) << out;  // its directory stays sealed
  EXPECT_NE(out.find("NOBODY"), std::string::npos) << out;
  Json b = Json::parse(kf::testing::ReadFile(tmp.path() / "b.json"));
  const std::string b_out = b["result"]["stdout"].get<std::string>();
  EXPECT_NE(b_out.find("REFUSED PermissionError"), std::string::npos) << b_out << "\n" << out;
  // Different uids, neither of them the shared sandbox user's.
  const size_t a_at = out.find("SOCK ");
  ASSERT_NE(a_at, std::string::npos) << out;
  const std::string a_line = out.substr(a_at, out.find('\n', a_at) - a_at);
  const std::string a_id = a_line.substr(a_line.rfind(' ') + 1);
  const std::string b_id = b_out.substr(4, b_out.find('\n') - 4);
  EXPECT_NE(a_id, b_id) << a_line << " / " << b_out;
}

}  // namespace
}  // namespace kf
