// Issue 25, "Must show", end to end through `kf run` the way the README runs it: a candidate whose module, when the
// test process imports it, probes where it runs (uid, CapEff, NoNewPrivs, Seccomp) and tries /etc/shadow, the
// database, the cache and the home directory. A plain-Python task (the pytest path, warm-started where kf can; no
// compile, so the test stays cheap): when a finding does not hold, scale() raises with every finding, so a correct
// verdict means every test process found them all (with KF_WARM_START=on the evaluation's conditions say the
// test processes were warm). The native path's probe runs in the farm test (tests/worker/farm_e2e_test.cc) and the
// red-team suite. Also: `kf run --require-isolation` turns KF_ISOLATION=off into "required" and refuses to run where
// a part is missing (a sandbox user that does not exist stands in for such a machine), and a new database is
// private (0600).
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "hardening_util.hpp"
#include "harness/isolation.hpp"

namespace kf::sandbox_e2e_test {
namespace {

namespace fs = std::filesystem;
using testing::KfRun;
using testing::KfRunResult;
using testing::Q;
using testing::TempDir;
using testing::WriteFile;

// The probing candidate (kernel.py's EVOLVE block); `root` = kf runs as root (then the uid must not be 0);
// `private_shm` = its /dev/shm must be its own: without the file the test planted in kf's, and what it leaves there
// (kf-left-by-a-candidate) must not reach kf's.
std::string ProbeCandidate(bool root, bool private_shm, const fs::path& db, const fs::path& cache,
                           const fs::path& home) {
  return std::string("import errno, os\n"
                     "_ROOT = ") + (root ? "True" : "False") + "\n"
         "_PRIVATE_SHM = " + (private_shm ? "True" : "False") + "\n"
         "_BAD = []\n"
         "def _note(what, ok, detail):\n"
         "    if not ok:\n"
         "        _BAD.append(f'{what} ({detail})')\n"
         "def _refused(path):\n"
         "    try:\n"
         "        os.close(os.open(path, os.O_RDONLY))\n"
         "        return False, 'opened ' + path\n"
         "    except OSError as e:\n"
         "        return e.errno in (errno.EACCES, errno.EPERM), f'{path}: {e.strerror}'\n"
         "_note('uid', not _ROOT or 0 not in os.getresuid(), os.getresuid())\n"
         "_STATUS = dict(l.rstrip('\\n').split(':\\t', 1) for l in open('/proc/self/status') if ':\\t' in l)\n"
         "_note('CapEff', _STATUS['CapEff'].strip() == '0000000000000000', _STATUS['CapEff'])\n"
         "_note('NoNewPrivs', _STATUS['NoNewPrivs'].strip() == '1', _STATUS['NoNewPrivs'])\n"
         "_note('Seccomp', _STATUS['Seccomp'].strip() == '2', _STATUS['Seccomp'])\n"
         "for _what, _path in (('shadow', '/etc/shadow'), ('database', '" + db.string() + "'),\n"
         "                     ('cache', '" + cache.string() + "'), ('home', '" + home.string() + "/.ssh/id_ed25519')):\n"
         "    _note(_what, *_refused(_path))\n"
         "_note('HOME', os.environ.get('HOME') != '" + home.string() + "', os.environ.get('HOME'))\n"
         "if _PRIVATE_SHM:\n"
         "    _note('/dev/shm', not [n for n in os.listdir('/dev/shm') if n.startswith('kf-planted-by-')],\n"
         "          os.listdir('/dev/shm'))\n"
         "    open('/dev/shm/kf-left-by-a-candidate', 'w').write('x')\n"
         "def scale(xs):\n"
         "    assert not _BAD, 'kf-probe FAILED: ' + '; '.join(_BAD)\n"
         "    return [2 * x for x in xs]\n";
}

TEST(SandboxMustShowE2E, AProbingCandidateRunsUnprivilegedAndIsRefusedTheSecretsWarmAndCold) {
  if (!ChildIsolationApplied()) GTEST_SKIP() << "not fully isolated here: " << ChildIsolationStatus();
  TempDir tmp;
  const fs::path task = tmp.path() / "py_scale";
  testing::WritePyScaleTask(task, "task_name: py_scale\njob_name: must_show\ntask_origin: custom\nlanguage: python\n"
                                  "gpu_arch: cpu\nhas_build_step: false\nhas_reference_build_step: false\n"
                                  "test_timeout: 120\neval_config:\n  timing: {processes: 1, budget_s: 1}\n");
  const fs::path home = tmp.path() / "home";
  WriteFile(home / ".ssh" / "id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY----- not a real key\n");
  fs::permissions(home, fs::perms(0755));
  fs::permissions(home / ".ssh", fs::perms(0755));
  fs::permissions(home / ".ssh" / "id_ed25519", fs::perms(0644));  // only the sandbox can refuse it
  const fs::path db = tmp.path() / "runs" / "kernels.sqlite3";
  const fs::path cache = std::getenv("KF_CACHE_DIR") ? fs::path(std::getenv("KF_CACHE_DIR")) : fs::path();
  const fs::path cand = tmp.path() / "probe.py";
  const bool private_shm = DescribeChildIsolation().ipc == "private";
  const fs::path planted = "/dev/shm/kf-planted-by-" + std::to_string(::getpid());
  WriteFile(planted, "a candidate must not see this\n");
  WriteFile(cand, ProbeCandidate(::geteuid() == 0, private_shm, db, cache, home));
  for (const char* warm : {"on", "off"}) {
    SCOPED_TRACE(std::string("KF_WARM_START=") + warm);
    KfRunResult r = KfRun(tmp.path(), task, cand, "HOME=" + Q(home.string()) + " KF_WARM_START=" + warm,
                          "--db " + Q(db.string()));
    ASSERT_TRUE(r.json.is_object()) << r.output;
    EXPECT_TRUE(IsCorrectFamily(*EvalStatusFromName(r.json["status"].get<std::string>()))) << testing::Why(r);
    EXPECT_EQ(r.output.find("kf-probe FAILED"), std::string::npos) << testing::Why(r);
    const Json& iso = r.json["result"]["isolation"];
    EXPECT_TRUE(iso["complete"].get<bool>()) << iso.dump();
    EXPECT_EQ(iso["ipc"], DescribeChildIsolation().ipc) << iso.dump();
    if (::geteuid() == 0 && PrivateIpcSupport().rfind("private", 0) == 0) {
      EXPECT_EQ(iso["ipc"], "private");
    }
    EXPECT_FALSE(fs::exists("/dev/shm/kf-left-by-a-candidate"));
    if (std::string(warm) == "on" && CgroupTreeContainment()) {
      EXPECT_EQ(r.json["result"]["timing"]["conditions"]["start"], "warm") << r.json["result"]["timing"].dump();
    }
    struct stat st {};
    ASSERT_EQ(::stat(db.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  fs::remove(planted);
}

TEST(SandboxMustShowE2E, RequireIsolationRefusesToRunWithoutIt) {
  TempDir tmp;
  const fs::path task = tmp.path() / "py_scale";  // plain Python: nothing to compile
  testing::WritePyScaleTask(task, "task_name: py_scale\njob_name: require\ntask_origin: custom\nlanguage: python\n"
                                  "gpu_arch: cpu\nhas_build_step: false\nhas_reference_build_step: false\n"
                                  "test_timeout: 120\neval_config:\n  timing: {processes: 1, budget_s: 1}\n");
  const fs::path cand = tmp.path() / "same.py";
  WriteFile(cand, "def scale(xs):\n    return [2 * x for x in xs]\n");
  // KF_ISOLATION=off stands in for a machine without Landlock or seccomp; --require-isolation overrides it
  // with "required" and checks what this machine can do.
  KfRunResult r = KfRun(tmp.path(), task, cand, "KF_ISOLATION=off", "--no-store --no-reference --require-isolation");
  if (ChildIsolationApplied()) {
    EXPECT_EQ(r.rc, 0) << r.output;  // "required" replaced "off": the run is isolated and correct
    ASSERT_TRUE(r.json.is_object()) << r.output;
    EXPECT_EQ(r.json["result"]["isolation"]["mode"], "required");
    EXPECT_TRUE(r.json["result"]["isolation"]["complete"].get<bool>()) << r.json["result"]["isolation"].dump();
  } else {
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.output.find("--require-isolation"), std::string::npos) << r.output;
    EXPECT_FALSE(r.json.is_object());
  }
  // As root, a sandbox user that does not exist leaves no way to isolate: refused before anything runs.
  if (::geteuid() == 0) {
    r = KfRun(tmp.path(), task, cand, "KF_SANDBOX_USER=kf-no-such-user", "--no-store --no-reference --require-isolation");
    EXPECT_NE(r.rc, 0) << r.output;
    EXPECT_NE(r.output.find("KF_SANDBOX_USER"), std::string::npos) << r.output;
    EXPECT_FALSE(r.json.is_object()) << r.output;
  }
}

}  // namespace
}  // namespace kf::sandbox_e2e_test
