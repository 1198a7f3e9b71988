// The unprivileged sandbox of a child (ProcessOptions::sandbox, issue 25) and the read allow-list of Landlock
// (FilesystemIsolation::readable_paths): the child runs as the sandbox user with no capability, no_new_privs and
// the seccomp filter; reads outside the allow-list fail; what the filter refuses is refused the way it says
// (EPERM, EACCES, ENOSYS, SIGSYS); ChildContainmentRequest carries it to warm starts.
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/shm.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "exec_test_util.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using exec_test::kPython;
using testing::TempDir;
using testing::WriteFile;

bool LandlockHere() { return FilesystemIsolationSupport().rfind("landlock", 0) == 0; }
// The probes below use x86_64 system-call numbers.
bool SeccompHere() {
#if defined(__x86_64__)
  return SeccompSupport().rfind("seccomp filter", 0) == 0;
#else
  return false;
#endif
}

// `nobody` as a sandbox user (exists on every Debian system), for the tests that switch users as root.
SandboxUser Nobody() {
  const passwd* pw = getpwnam("nobody");
  if (pw == nullptr) throw std::runtime_error("no user nobody");
  return SandboxUser{pw->pw_uid, pw->pw_gid, {pw->pw_gid}, "nobody"};
}

ProcessOptions SandboxPy(const std::string& code) {
  ProcessOptions o;
  o.argv = {kPython, "-c", code};
  o.cwd = "/";
  o.wall_timeout = std::chrono::seconds(60);
  return o;
}

ProcessSandbox SandboxOf(bool perf = false) {
  ProcessSandbox s;
  if (geteuid() == 0) s.user = Nobody();
  s.allow_perf_events = perf;
  return s;
}

// Prints "<name> ok" or "<name> <errno name>" for each probe; `probes` is Python defining PROBES = {name: fn}.
const char* kProbeMain =
    "import ctypes, errno, os, socket, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.syscall.restype = ctypes.c_long\n"
    "def sc(*args):\n"
    "    r = libc.syscall(*[ctypes.c_long(a) for a in args])\n"
    "    if r < 0:\n"
    "        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))\n"
    "    return r\n"
    "for name, fn in PROBES.items():\n"
    "    try:\n"
    "        fn()\n"
    "        print(name, 'ok', flush=True)\n"
    "    except OSError as e:\n"
    "        print(name, errno.errorcode.get(e.errno, e.errno), flush=True)\n";

std::string SandboxProbes(const std::string& table) { return table + kProbeMain; }

TEST(Sandbox, TheChildRunsUnprivilegedWithTheFilterAndNoNewPrivs) {
  ProcessOptions o = SandboxPy(
      "import os\n"
      "status = dict(l.rstrip('\\n').split(':\\t', 1) for l in open('/proc/self/status') if ':\\t' in l)\n"
      "print('UID', os.getuid(), os.geteuid(), 'GID', os.getgid())\n"
      "for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp'):\n"
      "    print(k, status[k].strip())\n");
  o.sandbox = SandboxOf();
  ProcessRun r = RunProcess(o);
  ASSERT_EQ(r.reason, TerminationReason::kExited) << r.result.stderr_text << r.result.message.value_or("");
  const std::string& out = r.result.stdout_text;
  if (geteuid() == 0) {
    const SandboxUser nobody = Nobody();
    EXPECT_NE(out.find("UID " + std::to_string(nobody.uid) + " " + std::to_string(nobody.uid)), std::string::npos) << out;
    EXPECT_NE(r.sandbox.find("uid " + std::to_string(nobody.uid) + " (nobody), no capabilities"), std::string::npos)
        << r.sandbox;
  }
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapAmb"}) {
    EXPECT_NE(out.find(std::string(set) + " 0000000000000000"), std::string::npos) << set << "\n" << out;
  }
  if (geteuid() == 0) {
    EXPECT_NE(out.find("CapBnd 0000000000000000"), std::string::npos) << out;
  }
  EXPECT_NE(out.find("NoNewPrivs 1"), std::string::npos) << out;
  if (SeccompHere()) {
    EXPECT_NE(out.find("Seccomp 2"), std::string::npos) << out;
    EXPECT_NE(r.sandbox.find("seccomp filter"), std::string::npos) << r.sandbox;
  }
  EXPECT_EQ(r.ToJson()["sandbox"], r.sandbox);
}

TEST(Sandbox, TheFilterRefusesWhatNoEvaluationNeeds) {
  if (!SeccompHere()) GTEST_SKIP() << SeccompSupport();
  ProcessOptions o = SandboxPy(SandboxProbes(
      "import ctypes, os, socket\n"
      "PROBES = {\n"
      "  'ptrace': lambda: sc(101, 16, os.getppid(), 0, 0),\n"                    // PTRACE_ATTACH
      "  'process_vm_readv': lambda: sc(310, os.getppid(), 0, 0, 0, 0, 0),\n"
      "  'keyctl': lambda: sc(250, 0, 0, 0, 0, 0),\n"
      "  'perf_event_open': lambda: sc(298, 0, 0, -1, -1, 0),\n"
      "  'unshare_user': lambda: sc(272, 0x10000000),\n"
      "  'unshare_files': lambda: sc(272, 0x400),\n"                            // CLONE_FILES: allowed
      "  'clone3': lambda: sc(435, 0, 0),\n"
      "  'io_uring_setup': lambda: sc(425, 1, 0),\n"
      "  'inet': lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close(),\n"
      "  'inet6': lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close(),\n"
      "  'unix': lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close(),\n"
      "  'fork': lambda: (lambda pid: pid == 0 and os._exit(0) or os.waitpid(pid, 0))(os.fork()),\n"
      "}\n"));
  o.sandbox = SandboxOf();
  ProcessRun r = RunProcess(o);
  ASSERT_EQ(r.reason, TerminationReason::kExited) << r.result.stderr_text << r.result.message.value_or("");
  const std::string& out = r.result.stdout_text;
  for (const char* line : {"ptrace EPERM", "process_vm_readv EPERM", "keyctl EPERM", "perf_event_open EPERM",
                           "unshare_user EPERM", "unshare_files ok", "clone3 ENOSYS", "io_uring_setup ENOSYS",
                           "inet EACCES", "inet6 EACCES", "unix ok", "fork ok"}) {
    EXPECT_NE(out.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << out << r.result.stderr_text;
  }
}

TEST(Sandbox, ProfilerPassesMayOpenPerfEvents) {
  if (!SeccompHere()) GTEST_SKIP() << SeccompSupport();
  // Without the filter the call fails with something else than EPERM (EFAULT for a null attr); with it, EPERM.
  const std::string code = SandboxProbes("PROBES = {'perf_event_open': lambda: sc(298, 0, 0, -1, -1, 0)}\n");
  ProcessOptions o = SandboxPy(code);
  o.sandbox = SandboxOf(/*perf=*/true);
  ProcessRun r = RunProcess(o);
  EXPECT_NE(r.result.stdout_text.find("perf_event_open EFAULT"), std::string::npos) << r.result.stdout_text;
  EXPECT_NE(r.sandbox.find("perf events allowed"), std::string::npos) << r.sandbox;
}

// ncu's front end and the library it injects talk over TCP: a profiler pass may open inet sockets, inside a network
// namespace of the run's own (loopback only, implied by allow_loopback_sockets). Regression (review before the
// first GPU run, 2026-12-07): the filter refused AF_INET in profiler passes too.
TEST(Sandbox, ProfilerPassesMayUseLoopbackInANetworkNamespaceOfTheirOwn) {
  if (!SeccompHere()) GTEST_SKIP() << SeccompSupport();
  const std::string code = SandboxProbes(
      "import socket\n"
      "def echo():\n"
      "    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
      "    srv.bind(('127.0.0.1', 0)); srv.listen(1)\n"
      "    cli = socket.create_connection(srv.getsockname(), timeout=5)\n"
      "    conn, _ = srv.accept(); cli.sendall(b'x'); assert conn.recv(1) == b'x'\n"
      "def outside():\n"
      "    socket.create_connection(('192.0.2.1', 9), timeout=2)\n"  // TEST-NET-1: no route in a fresh netns
      "PROBES = {'loopback': echo, 'outside': outside,\n"
      "          'inet6': lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()}\n");
  ProcessOptions o = SandboxPy(code);
  o.sandbox = SandboxOf(/*perf=*/true);
  o.sandbox->allow_loopback_sockets = true;
  ProcessRun r = RunProcess(o);
  ASSERT_EQ(r.reason, TerminationReason::kExited) << r.result.stderr_text << r.result.message.value_or("");
  const std::string& out = r.result.stdout_text;
  EXPECT_NE(out.find("loopback ok\n"), std::string::npos) << out << r.result.stderr_text;
  EXPECT_NE(out.find("inet6 ok\n"), std::string::npos) << out;
  EXPECT_NE(out.find("outside ENETUNREACH\n"), std::string::npos) << out;  // no host network
  EXPECT_TRUE(r.network_isolated) << r.network_note;
  EXPECT_NE(r.sandbox.find("inet sockets in the run's own network namespace"), std::string::npos) << r.sandbox;
  // And carried to warm starts like the other sandbox fields.
  ProcessOptions back;
  ParseChildContainmentRequest(ChildContainmentRequest(o), &back);
  ASSERT_TRUE(back.sandbox.has_value());
  EXPECT_TRUE(back.sandbox->allow_loopback_sockets);
}

// /dev/shm and System V IPC are each sandboxed run's own (exec/private_ipc.hpp): what one run leaves there (a file
// in /dev/shm, a System V shared-memory segment) is gone for the next run and never reached kf's namespaces, and no
// mount of the run's propagated back.
TEST(Sandbox, EachRunHasItsOwnDevShmAndSystemVIpc) {
  if (geteuid() != 0 || PrivateIpcSupport().rfind("private", 0) != 0) GTEST_SKIP() << PrivateIpcSupport();
  const std::string tag = "kf-ipc-probe-" + std::to_string(getpid());
  const int key = 0x4b460000 + (getpid() & 0xffff);
  auto mounts = [] {
    std::ifstream in("/proc/self/mountinfo");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string mounts_before = mounts();
  const std::string code =
      "import ctypes, os\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "tag, key = '" + tag + "', " + std::to_string(key) + "\n"
      "print('LISTING', sorted(os.listdir('/dev/shm')))\n"
      "print('FOUND', libc.shmget(key, 0, 0) >= 0)\n"
      "open('/dev/shm/' + tag, 'w').write('left by the first run')\n"
      "print('MADE', libc.shmget(key, 4096, 0o1666) >= 0)\n"
      "mine = [l.split() for l in open('/proc/self/mountinfo') if l.split()[4] == '/dev/shm'][-1]\n"
      "print('MOUNT', mine[mine.index('-') + 1], mine[mine.index('-') + 2])\n";
  ProcessOptions o = SandboxPy(code);
  o.sandbox = SandboxOf();
  for (int run = 0; run < 2; ++run) {
    ProcessRun r = RunProcess(o);
    ASSERT_EQ(r.reason, TerminationReason::kExited) << r.result.stderr_text << r.result.message.value_or("");
    const std::string& out = r.result.stdout_text;
    EXPECT_NE(out.find("LISTING []"), std::string::npos) << "run " << run << ": " << out;
    EXPECT_NE(out.find("FOUND False"), std::string::npos) << "run " << run << ": " << out;
    EXPECT_NE(out.find("MADE True"), std::string::npos) << out;
    EXPECT_NE(out.find("MOUNT tmpfs kf-shm"), std::string::npos) << out;
    EXPECT_NE(r.sandbox.find("private /dev/shm and IPC namespace"), std::string::npos) << r.sandbox;
  }
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + tag));
  errno = 0;
  EXPECT_LT(shmget(key, 0, 0), 0);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(mounts(), mounts_before);
}

TEST(Sandbox, LoadingAKernelModuleKillsTheProcessWithSigsys) {
  if (!SeccompHere()) GTEST_SKIP() << SeccompSupport();
  // init_module with a garbage image: the filter traps it before the kernel looks at it.
  ProcessOptions o = SandboxPy(SandboxProbes("PROBES = {'init_module': lambda: sc(175, 0, 16, 0)}\n"));
  o.sandbox = SandboxOf();
  ProcessRun r = RunProcess(o);
  EXPECT_EQ(r.reason, TerminationReason::kSignaled) << r.result.stdout_text << r.result.stderr_text;
  EXPECT_EQ(r.result.returncode, -SIGSYS);
  EXPECT_EQ(r.result.stdout_text.find("init_module"), std::string::npos) << r.result.stdout_text;
}

TEST(Sandbox, ReadsAreAllowListed) {
  if (!LandlockHere()) GTEST_SKIP() << FilesystemIsolationSupport();
  TempDir tmp;
  const auto allowed = tmp.path() / "allowed";
  const auto secret = tmp.path() / "secret";
  std::filesystem::create_directories(allowed);
  std::filesystem::create_directories(secret);
  WriteFile(allowed / "a.txt", "A");
  WriteFile(secret / "s.txt", "S");
  std::filesystem::permissions(tmp.path(), std::filesystem::perms::all);  // DAC allows: only Landlock refuses
  ProcessOptions o = SandboxPy(SandboxProbes(
      "PROBES = {\n"
      "  'allowed': lambda: open('" + (allowed / "a.txt").string() + "').read(),\n"
      "  'secret': lambda: open('" + (secret / "s.txt").string() + "').read(),\n"
      "  'list_parent': lambda: os.listdir('" + tmp.path().string() + "'),\n"
      "  'etc_passwd': lambda: open('/etc/passwd').read(),\n"
      "  'proc_self': lambda: open('/proc/self/status').read(),\n"
      "  'dev_null': lambda: open('/dev/null', 'w').write('x'),\n"
      "  'root_dir': lambda: os.listdir('/'),\n"
      "  'tmp_dir': lambda: os.listdir('/tmp'),\n"
      "}\n"));
  FilesystemIsolation iso;
  iso.readable_paths = std::vector<std::filesystem::path>{allowed};
  o.filesystem_isolation = iso;
  ProcessRun r = RunProcess(o);
  ASSERT_EQ(r.reason, TerminationReason::kExited) << r.result.stderr_text << r.result.message.value_or("");
  const std::string& out = r.result.stdout_text;
  for (const char* line : {"allowed ok", "secret EACCES", "list_parent EACCES", "etc_passwd ok", "proc_self ok",
                           "dev_null ok", "root_dir EACCES", "tmp_dir EACCES"}) {
    EXPECT_NE(out.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << out << r.result.stderr_text;
  }
}

TEST(Sandbox, ARootSandboxUserIsRefusedAndRootNeedsAUser) {
  ProcessOptions o = SandboxPy("print('ran')");
  o.sandbox = ProcessSandbox{};
  o.sandbox->user = SandboxUser{0, 0, {}, "root"};
  EXPECT_THROW(RunProcess(o), Error);
  if (geteuid() == 0) {
    o.sandbox->user.reset();
    ProcessRun r = RunProcess(o);
    EXPECT_EQ(r.reason, TerminationReason::kSpawnFailed);
    EXPECT_NE(r.result.message.value_or("").find("needs a user"), std::string::npos) << r.result.message.value_or("");
    EXPECT_EQ(r.result.stdout_text, "");
  }
}

// Warm starts register what the run asks for (ChildContainmentRequest) and the worker makes its plan from it with the
// runner's code (contain_test.cc runs both paths): the request carries every field back unchanged, and a malformed
// one is refused naming the field.
TEST(Sandbox, TheWarmStartRequestCarriesTheRunsContainment) {
  TempDir tmp;
  ProcessOptions o = SandboxPy("pass");
  FilesystemIsolation iso;
  iso.writable_paths = {tmp.path()};
  iso.readable_paths = std::vector<std::filesystem::path>{"/srv/task"};
  iso.required = true;
  o.filesystem_isolation = iso;
  ProcessSandbox sb;
  sb.user = SandboxUser{4242, 4343, {44, 45}, "someone"};
  sb.allow_perf_events = true;
  o.sandbox = sb;
  ProcessOptions back;
  ParseChildContainmentRequest(ParseJson(DumpJson(ChildContainmentRequest(o)), "request"), &back);
  ASSERT_TRUE(back.filesystem_isolation && back.sandbox && back.sandbox->user);
  EXPECT_EQ(back.filesystem_isolation->writable_paths, iso.writable_paths);
  EXPECT_EQ(back.filesystem_isolation->readable_paths, iso.readable_paths);
  EXPECT_TRUE(back.filesystem_isolation->required);
  EXPECT_EQ(back.sandbox->user->uid, 4242u);
  EXPECT_EQ(back.sandbox->user->gid, 4343u);
  EXPECT_EQ(back.sandbox->user->groups, (std::vector<uint32_t>{44, 45}));
  EXPECT_EQ(back.sandbox->user->name, "someone");
  EXPECT_TRUE(back.sandbox->allow_perf_events);
  EXPECT_FALSE(back.sandbox->required);

  o.filesystem_isolation->readable_paths.reset();
  o.sandbox.reset();
  ParseChildContainmentRequest(ChildContainmentRequest(o), &back);
  EXPECT_TRUE(back.filesystem_isolation && !back.filesystem_isolation->readable_paths);
  EXPECT_FALSE(back.sandbox);
  o.filesystem_isolation.reset();
  ParseChildContainmentRequest(ChildContainmentRequest(o), &back);
  EXPECT_FALSE(back.filesystem_isolation || back.sandbox);

  Json bad = ChildContainmentRequest(SandboxPy("pass"));
  bad["sandbox"] = {{"user", {{"uid", -1}, {"gid", 0}, {"groups", Json::array()}}},
                    {"allow_perf_events", false}, {"required", false}};
  try {
    ParseChildContainmentRequest(bad, &back);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.field(), "sandbox.user.uid") << e.what();
  }
}

}  // namespace
}  // namespace kf
