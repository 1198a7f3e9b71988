// Issue 25, deliverable 4: the red-team suite. Each attempt is evaluated through the pytest path (a pure-Python
// task, one small candidate per attempt: the candidate runs in the pytest process, warm-started where kf can) and
// the native path (omp_reduction: the candidate runs in the task's executor program; the attempts a process
// survives share one candidate, see below). Each candidate makes its
// attempt when it is loaded and reports "kf-probe <name>: refused (<errno>)" or "kf-probe <name>: ESCAPED …";
// an escape also makes its results wrong, so it can never hide behind a correct verdict. Every attempt must be
// refused and named in the verdict (the candidate's own line in the logs, or isolation_violation for a system
// call the filter traps), and nothing of kf's may change: its files keep their checksums and no connection
// reaches the port it listens on. Attempts: read /etc/shadow, ~/.ssh, the database, another task's cache entry,
// another candidate's work dir (and list the work root); open a block device; load a kernel module (a garbage
// image: a syscall probe); ptrace kf or open its memory; raise a capability; write outside the work dir; reach
// the network; reach an abstract unix socket of kf's; signal kf.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

#include <gtest/gtest.h>

#include "hardening_util.hpp"
#include "harness/isolation.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/process.hpp"
#include "pipeline_util.hpp"

namespace kf::red_team_test {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::WriteFile;

// What the attempts aim at, made in the test's temp dir (readable for the sandbox user by its file modes:
// only the sandbox can refuse them).
struct Targets {
  fs::path home, ssh_key, db, cache, cache_entry, work_root, other_work, outside;
  std::string block_device;  // empty: none on this machine
  int port = 0;              // a TCP port kf listens on (127.0.0.1)
  std::string abstract;      // the name (without its leading NUL) of an abstract unix socket kf listens on
};

// The first block device under /dev, or "".
std::string FindBlockDevice() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0 && S_ISBLK(st.st_mode)) return e.path().string();
  }
  return "";
}

struct Attempt {
  std::string name;
  std::string py;    // Python body of _attempt(): returns what it got, raises OSError when refused
  std::string cpp;   // C++ body of kf_attempt(std::string& got): returns 1 on success, 0 (errno set) when refused
  bool trapped = false;  // the filter kills the process (SIGSYS): the verdict is isolation_violation
};

std::vector<Attempt> Attempts(const Targets& t) {
  const std::string pid = std::to_string(::getpid());
  const std::string port = std::to_string(t.port);
  auto read_py = [](const fs::path& p) { return "    return open('" + p.string() + "', 'rb').read(16)\n"; };
  auto read_cpp = [](const fs::path& p) {
    return "  const int fd = open(\"" + p.string() + "\", O_RDONLY);\n  if (fd < 0) return 0;\n"
           "  got = \"opened\";\n  return 1;\n";
  };
  std::vector<Attempt> out = {
      {"shadow", read_py("/etc/shadow"), read_cpp("/etc/shadow")},
      {"ssh_key", read_py(t.ssh_key), read_cpp(t.ssh_key)},
      {"database", read_py(t.db), read_cpp(t.db)},
      {"cache_entry", read_py(t.cache_entry), read_cpp(t.cache_entry)},
      {"other_work_dir", read_py(t.other_work), read_cpp(t.other_work)},
      {"list_work_root", "    return os.listdir('" + t.work_root.string() + "')\n",
       "  DIR* d = opendir(\"" + t.work_root.string() + "\");\n  if (!d) return 0;\n  closedir(d);\n"
       "  got = \"listed\";\n  return 1;\n"},
      {"module", "    return sc(SYS_INIT_MODULE, 0, 16, 0)\n",
       "  if (syscall(SYS_init_module, nullptr, 16UL, \"\") != 0) return 0;\n  got = \"loaded\";\n  return 1;\n",
       /*trapped=*/true},
      {"ptrace_kf",
       "    try:\n        return sc(SYS_PTRACE, 0x4206, " + pid + ", 0, 0)\n    except OSError:\n        pass\n"
       "    return open('/proc/" + pid + "/mem', 'rb')\n",
       "  if (syscall(SYS_ptrace, 0x4206L, " + pid + "L, 0L, 0L) == 0) { got = \"seized\"; return 1; }\n"
       "  const int fd = open(\"/proc/" + pid + "/mem\", O_RDONLY);\n  if (fd < 0) return 0;\n"
       "  got = \"mem\";\n  return 1;\n"},
      {"capability",
       "    hdr = ctypes.create_string_buffer(struct.pack('=Ii', 0x20080522, 0), 8)\n"
       "    data = ctypes.create_string_buffer(b'\\xff' * 24, 24)\n"
       "    try:\n        return sc(SYS_CAPSET, ctypes.addressof(hdr), ctypes.addressof(data))\n"
       "    except OSError:\n        pass\n"
       "    os.setuid(0)\n    return 'uid %d' % os.geteuid()\n",
       "  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};\n  __user_cap_data_struct d[2];\n"
       "  std::memset(d, 0xff, sizeof d);\n  if (syscall(SYS_capset, &h, d) == 0) { got = \"capset\"; return 1; }\n"
       "  if (setuid(0) == 0 && geteuid() == 0) { got = \"uid 0\"; return 1; }\n  return 0;\n"},
      {"write_outside",
       "    with open('" + t.outside.string() + "', 'w') as f:\n        f.write('x')\n    return 'wrote'\n",
       "  const int fd = open(\"" + t.outside.string() + "\", O_WRONLY | O_CREAT, 0644);\n  if (fd < 0) return 0;\n"
       "  got = \"wrote\";\n  return 1;\n"},
      {"network",
       "    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n    s.settimeout(5)\n"
       "    s.connect(('127.0.0.1', " + port + "))\n    return 'connected'\n",
       "  const int s = socket(AF_INET, SOCK_STREAM, 0);\n  if (s < 0) return 0;\n  sockaddr_in a{};\n"
       "  a.sin_family = AF_INET;\n  a.sin_port = htons(" + port + ");\n  a.sin_addr.s_addr = htonl(0x7f000001);\n"
       "  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 0;\n  got = \"connected\";\n"
       "  return 1;\n"},
      // Abstract unix sockets have no file for Landlock's path rules: they are out of reach through the network
      // namespace (the name is not visible there: ECONNREFUSED, reported as a refusal) and Landlock's scope
      // (ABI 6, EPERM) where the namespace is missing.
      {"abstract_socket",
       "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    try:\n"
       "        s.connect('\\0" + t.abstract + "')\n"
       "    except ConnectionRefusedError:\n        raise PermissionError(errno.EACCES, 'not visible here')\n"
       "    return 'connected'\n",
       "  const int s = socket(AF_UNIX, SOCK_STREAM, 0);\n  if (s < 0) return 0;\n  sockaddr_un a{};\n"
       "  a.sun_family = AF_UNIX;\n  const char name[] = \"" + t.abstract + "\";\n"
       "  std::memcpy(a.sun_path + 1, name, sizeof name - 1);\n"
       "  if (connect(s, reinterpret_cast<sockaddr*>(&a), offsetof(sockaddr_un, sun_path) + sizeof name) != 0) {\n"
       "    if (errno == ECONNREFUSED) errno = EACCES;  // not visible from here\n    return 0;\n  }\n"
       "  got = \"connected\";\n  return 1;\n"},
      {"signal_kf", "    os.kill(" + pid + ", 0)\n    return 'may signal kf'\n",
       "  if (kill(" + pid + ", 0) != 0) return 0;\n  got = \"may signal kf\";\n  return 1;\n"},
  };
  if (!t.block_device.empty()) {
    out.push_back({"block_device", "    return os.open('" + t.block_device + "', os.O_RDONLY)\n",
                   read_cpp(t.block_device)});
  }
  return out;
}

// kernel.py's EVOLVE block for the pytest path.
std::string PythonCandidate(const Attempt& a) {
  return "import ctypes, errno, os, socket, struct, sys\n"
         "SYS_INIT_MODULE, SYS_PTRACE, SYS_CAPSET = 175, 101, 126  # x86_64\n"
         "_libc = ctypes.CDLL(None, use_errno=True)\n_libc.syscall.restype = ctypes.c_long\n"
         "def sc(*args):\n"
         "    r = _libc.syscall(*[ctypes.c_long(x) for x in args])\n"
         "    if r < 0:\n        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))\n"
         "    return r\n"
         "def _attempt():\n" + a.py +
         "try:\n"
         "    _GOT, _WHY = 'ESCAPED ' + repr(_attempt())[:60], None\n"
         "except OSError as e:\n"
         "    _WHY = errno.errorcode.get(e.errno, str(e.errno))\n"
         "    _GOT = None if _WHY in ('EACCES', 'EPERM') else 'neither refused nor done: ' + _WHY\n"
         "print('kf-probe " + a.name + ": ' + (_GOT or 'refused (%s)' % _WHY), file=sys.stderr, flush=True)\n"
         // pytest keeps a passing test's output to itself: the verdict is the evidence. Only a refusal (EACCES or
         // EPERM) computes the right values; anything else fails the test, named in its message.
         "def scale(xs):\n"
         "    if _GOT is not None:\n"
         "        raise AssertionError('kf-probe " + a.name + ": ' + _GOT)\n"
         "    return [2 * x for x in xs]\n";
}

// reduce_kernel.cpp's EVOLVE block for the native path: each attempt in a function of its own, run in order when
// the executor loads; each reports its own line, and each escape (or an error other than EACCES/EPERM) adds 1 to
// the sum, so the verdict cannot be correct unless every one was refused.
std::string CppCandidate(const std::vector<Attempt>& attempts) {
  std::string code =
      "#include <arpa/inet.h>\n#include <dirent.h>\n#include <fcntl.h>\n#include <linux/capability.h>\n"
      "#include <netinet/in.h>\n#include <signal.h>\n#include <sys/socket.h>\n#include <sys/syscall.h>\n"
      "#include <sys/un.h>\n#include <unistd.h>\n#include <cerrno>\n#include <cstddef>\n#include <cstdio>\n#include <cstring>\n#include <string>\n"
      "static int kf_report(const char* name, int (*attempt)(std::string&)) {\n"
      "  std::string got;\n  errno = 0;\n"
      "  if (attempt(got)) {\n"
      "    std::fprintf(stderr, \"kf-probe %s: ESCAPED %s\\n\", name, got.c_str());\n    return 1;\n  }\n"
      "  const int e = errno;\n"
      "  std::fprintf(stderr, \"kf-probe %s: %s (%s)\\n\", name,\n"
      "               e == EACCES || e == EPERM ? \"refused\" : \"neither refused nor done\", strerrorname_np(e));\n"
      "  return e == EACCES || e == EPERM ? 0 : 1;\n}\n";
  std::string calls;
  for (size_t i = 0; i < attempts.size(); ++i) {
    const std::string fn = "kf_attempt_" + std::to_string(i);
    code += "static int " + fn + "(std::string& got) {\n" + attempts[i].cpp + "}\n";
    calls += "  bad += kf_report(\"" + attempts[i].name + "\", " + fn + ");\n";
  }
  return code + "static const int kf_escaped = [] {\n  int bad = 0;\n" + calls + "  return bad;\n}();\n" +
         "double kf_sum_squares(const float* x, std::size_t n) {\n"
         "  double s = 0.0;\n"
         "  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);\n"
         "  return s + kf_escaped;\n}\n";
}

// Every output line of an evaluation: its log and each build/test process's output.
std::string AllOutput(const Evaluation& ev) {
  std::string all = ev.result.eval_log + "\n" + ev.result.status_detail + "\n";
  for (const ProcessLog& log : ev.logs) all += log.result.stdout_text + "\n" + log.result.stderr_text + "\n";
  return all;
}

class RedTeamE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::UseTestCache();
    t_.home = tmp_.path() / "home";
    t_.ssh_key = t_.home / ".ssh" / "id_ed25519";
    WriteFile(t_.ssh_key, "-----BEGIN OPENSSH PRIVATE KEY----- not a real key\n");
    WriteFile(t_.home / ".bashrc", "export PS1='$ '\n");
    t_.db = tmp_.path() / "runs" / "kernels.sqlite3";
    WriteFile(t_.db, std::string("SQLite format 3\0", 16) + "every stored candidate's code and prompts");
    t_.cache = tmp_.path() / "cache";
    t_.cache_entry = t_.cache / "builds" / "v1" / std::string(64, 'a') / "entry.json";
    WriteFile(t_.cache_entry, "{\"another task's build\": true}\n");
    t_.work_root = tmp_.path() / "work";
    t_.other_work = t_.work_root / "kf_test_other1" / "task_data" / "kernel.py";
    WriteFile(t_.other_work, "def scale(xs):  # another candidate's code\n    return xs\n");
    t_.outside = tmp_.path() / "outside.txt";
    t_.block_device = FindBlockDevice();
    // Everything readable and traversable by mode (0755/0644): a refusal comes from the sandbox, not from DAC.
    for (const auto& e : fs::recursive_directory_iterator(tmp_.path())) {
      fs::permissions(e.path(), e.is_directory() ? fs::perms(0755) : fs::perms(0644));
    }
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(listener_, 8), 0);
    ASSERT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    t_.port = ntohs(addr.sin_port);
    t_.abstract = "kf-red-team-" + std::to_string(::getpid());
    abstract_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path + 1, t_.abstract.data(), t_.abstract.size());
    ASSERT_EQ(::bind(abstract_, reinterpret_cast<sockaddr*>(&un),
                     static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + t_.abstract.size())),
              0);
    ASSERT_EQ(::listen(abstract_, 8), 0);
    before_ = Snapshot();
  }
  void TearDown() override {
    if (listener_ >= 0) ::close(listener_);
    if (abstract_ >= 0) ::close(abstract_);
  }

  std::map<std::string, std::string> Snapshot() const {
    std::map<std::string, std::string> s;
    for (const auto& [k, v] : testing::TreeShas(t_.home)) s["home/" + k] = v;
    s["cache_entry"] = testing::FileSha(t_.cache_entry);  // kf's own new entries beside it are no loss
    for (const auto& [k, v] : testing::TreeShas(t_.work_root / "kf_test_other1")) s["other/" + k] = v;
    s["db"] = testing::FileSha(t_.db);
    return s;
  }

  // Evaluates one candidate of `task` with HOME and the cache pointed at the targets.
  Evaluation Run(const Task& task, const std::string& code) {
    testing::ScopedEnv env({{"HOME", t_.home.string()}, {"KF_CACHE_DIR", t_.cache.string()}});
    EvaluateOptions o;
    o.work_root = t_.work_root;
    o.test_reference = false;
    o.correctness_only = true;  // every attempt runs when the candidate loads; no phase needs timing
    return Evaluate(task, BlockUpdate{BlockUpdateShort{{"EVOLVE", code}}}, o);
  }

  // The attempt was refused and named; nothing of kf's changed.
  void Check(const Attempt& a, const Evaluation& ev, const std::string& path) {
    const std::string out = AllOutput(ev);
    SCOPED_TRACE(path + " / " + a.name + ": " + std::string(EvalStatusName(ev.result.status)) + " — " +
                 ev.result.status_detail);
    EXPECT_EQ(out.find("kf-probe " + a.name + ": ESCAPED"), std::string::npos) << out;
    if (a.trapped) {
      EXPECT_EQ(ev.result.status, EvalStatus::kIsolationViolation) << out;
      EXPECT_NE(ev.result.status_detail.find("SIGSYS"), std::string::npos);
    } else {
      // Correct values only after a refusal (EACCES/EPERM); pytest shows a candidate's lines only on failure.
      EXPECT_TRUE(IsCorrectFamily(ev.result.status)) << out;
      if (path == "native") {
        EXPECT_NE(out.find("kf-probe " + a.name + ": refused ("), std::string::npos) << out;
      }
    }
    EXPECT_EQ(Snapshot(), before_);
    EXPECT_FALSE(fs::exists(t_.outside));
    EXPECT_LT(::accept(listener_, nullptr, nullptr), 0) << "a candidate reached kf's port";
    EXPECT_LT(::accept(abstract_, nullptr, nullptr), 0) << "a candidate reached kf's abstract unix socket";
    EXPECT_TRUE(ev.result.isolation.is_object() && ev.result.isolation["complete"].get<bool>())
        << ev.result.isolation.dump();
  }

  TempDir tmp_;
  Targets t_;
  int listener_ = -1;
  int abstract_ = -1;
  std::map<std::string, std::string> before_;
};

bool FullyIsolated(std::string* why) {
  const ChildIsolation iso = DescribeChildIsolation();
  *why = iso.Summary();
#if !defined(__x86_64__)
  *why = "the Python probes use x86_64 system-call numbers";
  return false;
#endif
  return iso.Complete();
}

TEST_F(RedTeamE2E, PytestPathEveryAttemptIsRefusedAndNamed) {
  std::string why;
  if (!FullyIsolated(&why)) GTEST_SKIP() << "not fully isolated here: " << why;
  const fs::path dir = tmp_.path() / "py_scale";
  testing::WritePyScaleTask(dir, "task_name: py_scale\njob_name: red_team\ntask_origin: custom\nlanguage: python\n"
                                 "gpu_arch: cpu\nhas_build_step: false\nhas_reference_build_step: false\n"
                                 "test_reference: false\ntest_timeout: 120\n"
                                 "eval_config:\n  timing: {processes: 1, budget_s: 1}\n");
  const Task task = testing::LoadTestTask(dir);
  for (const Attempt& a : Attempts(t_)) Check(a, Run(task, PythonCandidate(a)), "pytest");
}

// A native evaluation builds a test program and an executor (~40 s of CPU on the 2-core CI machine; one per attempt
// took 14 minutes there), so the attempts the process survives share one candidate — each still named on its own
// line and each able to make the sum wrong — and each attempt the filter traps (the process dies) gets its own.
TEST_F(RedTeamE2E, NativePathEveryAttemptIsRefusedAndNamed) {
  std::string why;
  if (!FullyIsolated(&why)) GTEST_SKIP() << "not fully isolated here: " << why;
  const Task task = testing::LoadTestTask(testing::CopyExample("omp_reduction", tmp_.path()));
  std::vector<Attempt> survived, trapped;
  for (const Attempt& a : Attempts(t_)) (a.trapped ? trapped : survived).push_back(a);
  const Evaluation ev = Run(task, CppCandidate(survived));
  for (const Attempt& a : survived) Check(a, ev, "native");
  for (const Attempt& a : trapped) Check(a, Run(task, CppCandidate({a})), "native");
}

}  // namespace
}  // namespace kf::red_team_test
