// Warm starts of pytest test runs (issue 15, harness/warm_start.hpp) end to end: a py_scale evaluation whose
// test processes are forked from kf's zygote is contained exactly like a cold one — the run's own cgroup, its
// private temp dir as the only writable place, its environment — and scores the same verdict; KF_WARM_START=off
// starts them cold.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "harness/isolation.hpp"
#include "harness/run_identity.hpp"
#include "harness/warm_start.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/process.hpp"
#include "pipeline_util.hpp"

namespace kf {
namespace {

using testing::TempDir;

// The candidate checks its own containment when imported and returns wrong values (correctness fails, naming
// the check in the log) when one does not hold: it runs in a cgroup of a run (kf-<pid>-…), cannot write the
// task tree, and its parent is kf's zygote exactly when `want_warm`.
std::string CheckingCandidate(bool want_warm) {
  auto py_bool = [](bool b) { return std::string(b ? "True" : "False"); };
  std::string code = "import os as _os\n"
                     "def _problems():\n"
                     "    out = []\n"
                     "    cg = open('/proc/self/cgroup').read()\n";
  code += "    if " + py_bool(CgroupTreeContainment()) + " and '/kf-' not in cg:\n";
  code += "        out.append('not in a run cgroup: ' + cg)\n";
  code += "    if " + py_bool(ChildIsolationApplied()) + ":\n";
  code += "        try:\n"
          "            open('kernel_copy.txt', 'w').write('x')\n"
          "            out.append('wrote the task tree')\n"
          "        except OSError:\n"
          "            pass\n"
          "    parent = open('/proc/%d/cmdline' % _os.getppid(), 'rb').read()\n"
          "    warm = b'kernelfoundry.zygote' in parent\n";
  code += "    if warm != " + py_bool(want_warm) + ":\n";
  code += std::string("        out.append('warm start expected: ") + (want_warm ? "yes" : "no") + "')\n";
  code += "    if 'KERNELFOUNDRY_TEST' not in _os.environ:\n"
          "        out.append('not the run environment')\n"
          "    return out\n"
          "_PROBLEMS = _problems()\n"
          "def scale(xs):\n"
          "    if _PROBLEMS:\n"
          "        raise AssertionError('; '.join(_PROBLEMS))\n"
          "    return [2 * x for x in xs]\n";
  return code;
}

// The candidate describes its process's containment and what of kf's host side it can reach, and fails with that
// description ("FINGERPRINT<json>END" in the log): the warm and the cold path must give the same one (apart from the
// per-run cgroup leaf and temp dir names, normalised here in the candidate).
constexpr const char* kFingerprintCandidate = R"PY(import json as _json, os as _os, re as _re, resource as _res, sys as _sys
def _try(f):
    try:
        f()
        return "ok"
    except BaseException as e:
        return type(e).__name__ + ":" + str(getattr(e, "errno", ""))
def _write(path):
    def go():
        with open(path, "w") as f:
            f.write("x")
        _os.unlink(path)
    return go
def _import(name):
    return lambda: __import__(name)
def _fingerprint():
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
    tmp = _os.environ.get("TMPDIR", "")
    out = {
        "ids": [_os.getuid(), _os.geteuid(), _os.getgid(), _os.getegid(), sorted(_os.getgroups())],
        "status": {k: status[k].strip() for k in ("NoNewPrivs", "Seccomp", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
                   if k in status},
        "rlimits": {n: list(_res.getrlimit(getattr(_res, n))) for n in sorted(dir(_res)) if n.startswith("RLIMIT_")},
        "cgroup": _re.sub(r"kf-[0-9]+-[0-9]+", "kf-RUN", open("/proc/self/cgroup").read()),
        "session_leader": _os.getsid(0) == _os.getpid(), "group_leader": _os.getpgid(0) == _os.getpid(),
        "writes": {"task_dir": _try(_write("fingerprint_probe.txt")), "tmpdir": _try(_write(_os.path.join(tmp, "probe"))),
                   "dev_shm": _try(_write("/dev/shm/kf-fingerprint-%d" % _os.getpid())),
                   "dev_new": _try(_write("/dev/kf-fingerprint-probe")), "slash_tmp": _try(_write("/tmp/kf-fingerprint-%d" % _os.getpid())),
                   "dev_null": _try(lambda: open("/dev/null", "w").write("x"))},
        "host_imports": {n: _try(_import(n)) for n in ("kernelfoundry.zygote", "kernelfoundry._contain", "kernelfoundry.pch_build",
                                                        "kernelfoundry.eval_pipeline._core", "kernelfoundry.eval_pipeline.task")},
        "host_on_path": [p for p in _sys.path if _os.path.exists(_os.path.join(p or ".", "kernelfoundry", "zygote.py"))],
        "host_modules": sorted(n for n, m in list(_sys.modules.items()) if n.startswith("kernelfoundry") and
                               _os.path.exists(_os.path.join(_os.path.dirname(getattr(m, "__file__", None) or "/nonexistent/x"), "zygote.py"))),
        "main": getattr(getattr(_sys.modules.get("__main__"), "__spec__", None), "name", None),
        "env_names": sorted(k for k in _os.environ if k not in ("PYTEST_CURRENT_TEST", "KF_WARM_START")),
        "pythonpath": _os.environ.get("PYTHONPATH"),
        "parent_is_zygote": b"kernelfoundry.zygote" in open("/proc/%d/cmdline" % _os.getppid(), "rb").read(),
        "dev_shm": {"mount": [l.split(" - ")[1].split()[:2] for l in open("/proc/self/mountinfo") if l.split()[4] == "/dev/shm"][-1:],
                    "listing": sorted(_os.listdir("/dev/shm"))},
    }
    return _json.dumps(out, sort_keys=True)
_FP = _fingerprint()
def scale(xs):
    raise AssertionError("FINGERPRINT" + _FP + "END")
)PY";

// The fingerprint in an evaluation's log (see kFingerprintCandidate).
Json FingerprintOf(const Evaluation& ev) {
  const std::string& log = ev.result.eval_log;
  const size_t a = log.find("FINGERPRINT{");
  const size_t b = a == std::string::npos ? a : log.find("}END", a);
  if (b == std::string::npos) return Json();
  Json fp = Json::parse(log.substr(a + 11, b + 1 - (a + 11)));
  // Each run has a uid and gid of its own (harness/run_identity.hpp): two runs' ids differ by design, so the
  // fingerprint keeps what must be equal — every id of one process is the same per-run id, kept apart from the
  // sandbox user's groups, which stay.
  if (fp.is_object() && fp["ids"].is_array() && fp["ids"].size() == 5) {
    auto own = [](const Json& id) {
      return id.is_number_unsigned() && id.get<uint64_t>() >= harness_internal::kRunIdBase &&
             id.get<uint64_t>() < uint64_t{harness_internal::kRunIdBase} + harness_internal::kRunIdSlots;
    };
    Json& ids = fp["ids"];
    const Json first = ids[0];
    for (int i = 0; i < 4; ++i) {
      if (own(ids[i])) ids[i] = ids[i] == first ? Json("run id") : Json("another run id");
    }
    for (Json& g : ids[4]) {
      if (own(g)) g = g == first ? Json("run id") : Json("another run id");
    }
  }
  return fp;
}

class WarmStart : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::UseTestCache();
    dir_ = tmp_.path() / "py_scale";
    Write("");
  }
  // (Re)writes the task with `eval_config_extra` (YAML lines under eval_config) and loads it.
  void Write(const std::string& eval_config_extra) {
    testing::WritePyScaleTask(dir_, "task_name: py_scale\njob_name: warm\ntask_origin: custom\nlanguage: python\n"
                                    "gpu_arch: cpu\nhas_build_step: false\nhas_reference_build_step: false\n"
                                    "test_reference: true\ntest_timeout: 120\n"
                                    "eval_config:\n  timing: {processes: 1, budget_s: 1}\n" +
                                        eval_config_extra);
    task_ = testing::LoadTestTask(dir_);
  }
  Evaluation Run(const std::string& code) {
    EvaluateOptions o;
    o.work_root = tmp_.path() / "work";
    return Evaluate(task_, BlockUpdate{BlockUpdateShort{{"EVOLVE", code}}}, o);
  }

  TempDir tmp_;
  std::filesystem::path dir_;
  Task task_;
};

TEST_F(WarmStart, TestProcessesForkedFromTheZygoteAreContainedLikeColdOnes) {
  if (!CgroupTreeContainment()) GTEST_SKIP() << "warm starts need a cgroup v2 per run";
  Evaluation ev = Run(CheckingCandidate(true));
  EXPECT_TRUE(IsCorrectFamily(ev.result.status)) << ev.result.status_detail << "\n" << ev.result.eval_log;
  ASSERT_TRUE(ev.result.timing.is_object()) << ev.result.eval_log;
  EXPECT_EQ(ev.result.timing["conditions"]["start"], "warm") << ev.result.timing.dump();
  EXPECT_TRUE(testing::ProcessesUnder(tmp_.path() / "work").empty());
}

TEST_F(WarmStart, OffStartsEveryTestProcessCold) {
  testing::ScopedEnv off("KF_WARM_START", "off");
  Evaluation ev = Run(CheckingCandidate(false));
  EXPECT_TRUE(IsCorrectFamily(ev.result.status)) << ev.result.status_detail << "\n" << ev.result.eval_log;
  ASSERT_TRUE(ev.result.timing.is_object()) << ev.result.eval_log;
  EXPECT_EQ(ev.result.timing["conditions"]["start"], "cold") << ev.result.timing.dump();
}

// The zygote's worker takes its containment through the exec module's own function (src/exec/contain.hpp,
// ContainSelf, via kernelfoundry._contain) and drops the host side: what a warm test process sees of its
// containment — ids, capabilities, no_new_privs, every resource limit, its cgroup, session, Landlock's refusals —
// and of kf's host-side Python equals what a cold one sees, and neither can import a host module.
// (The candidate is kept in the test process here, eval_config.candidate_process: test_process, so that the
// fingerprint is the test process's; the next test fingerprints the executor that holds it by default.)
TEST_F(WarmStart, AWarmTestProcessIsContainedExactlyLikeAColdOneAndSeesNoHostModule) {
  if (!CgroupTreeContainment()) GTEST_SKIP() << "warm starts need a cgroup v2 per run";
  Write("  candidate_process: test_process\n");
  Evaluation warm = Run(kFingerprintCandidate);
  Json w = FingerprintOf(warm);
  ASSERT_TRUE(w.is_object()) << warm.result.eval_log;
  Evaluation cold;
  {
    testing::ScopedEnv off("KF_WARM_START", "off");
    cold = Run(kFingerprintCandidate);
  }
  Json c = FingerprintOf(cold);
  ASSERT_TRUE(c.is_object()) << cold.result.eval_log;
  // The warm one really was forked by the zygote and the cold one was not.
  EXPECT_EQ(w["parent_is_zygote"], true) << warm.result.eval_log;
  EXPECT_EQ(c["parent_is_zygote"], false) << cold.result.eval_log;
  for (const auto& [key, value] : c.items()) {
    if (key == "parent_is_zygote") continue;
    EXPECT_EQ(w[key], value) << "differs: " << key;
  }
  EXPECT_EQ(w.size(), c.size());
  if (::geteuid() == 0 && harness_internal::RunIdentityUnavailable().empty()) {  // warm and cold: an id of its own
    EXPECT_EQ(w["ids"][0], "run id") << w["ids"].dump();
    EXPECT_EQ(c["ids"][0], "run id") << c["ids"].dump();
  }
  for (const Json* fp : {&w, &c}) {
    for (const auto& [name, outcome] : (*fp)["host_imports"].items()) {
      EXPECT_EQ(outcome, "ModuleNotFoundError:") << name << " is importable in a task run";
    }
    EXPECT_TRUE((*fp)["host_on_path"].empty()) << fp->dump();
    EXPECT_TRUE((*fp)["host_modules"].empty()) << fp->dump();
    EXPECT_EQ((*fp)["main"], "pytest.__main__") << fp->dump();
    EXPECT_EQ((*fp)["session_leader"], true);
    EXPECT_EQ((*fp)["writes"]["tmpdir"], "ok");
    if (ChildIsolationApplied()) {
      EXPECT_EQ((*fp)["writes"]["task_dir"], "PermissionError:13");
      EXPECT_EQ((*fp)["writes"]["dev_new"], "PermissionError:13");
      EXPECT_EQ((*fp)["status"]["NoNewPrivs"], "1");
    }
    if (DescribeChildIsolation().ipc == "private") {  // a fresh tmpfs of its own on both paths
      EXPECT_EQ((*fp)["dev_shm"], Json::parse(R"({"listing": [], "mount": [["tmpfs", "kf-shm"]]})")) << fp->dump();
    }
  }
}

// By default the candidate's module is imported in an executor (kernelfoundry.isolation), not in the test process:
// its fingerprint is that of a process started by the test process (KF_EXECUTOR set), with the same ids,
// capabilities, no_new_privs, seccomp, limits, cgroup and refusals, and no more of kf's host side.
TEST_F(WarmStart, TheCandidatesExecutorIsContainedLikeTheTestProcess) {
  if (!CgroupTreeContainment()) GTEST_SKIP() << "warm starts need a cgroup v2 per run";
  Evaluation isolated = Run(kFingerprintCandidate);
  Json e = FingerprintOf(isolated);
  ASSERT_TRUE(e.is_object()) << isolated.result.eval_log;
  Write("  candidate_process: test_process\n");
  Evaluation in_test = Run(kFingerprintCandidate);
  Json t = FingerprintOf(in_test);
  ASSERT_TRUE(t.is_object()) << in_test.result.eval_log;
  // The executor's environment: the test process's (or less) and KF_EXECUTOR, which marks it.
  const auto names = [](const Json& fp) { return fp["env_names"].get<std::set<std::string>>(); };
  std::set<std::string> executor_env = names(e), test_env = names(t);
  EXPECT_EQ(executor_env.erase("KF_EXECUTOR"), 1u) << "the candidate ran in the test process: " << e.dump();
  EXPECT_EQ(test_env.count("KF_EXECUTOR"), 0u) << t.dump();
  EXPECT_TRUE(std::includes(test_env.begin(), test_env.end(), executor_env.begin(), executor_env.end())) << e.dump();
  for (const char* key : {"ids", "status", "rlimits", "cgroup", "writes", "host_imports", "host_on_path",
                          "host_modules", "pythonpath"}) {
    EXPECT_EQ(e[key], t[key]) << "differs: " << key;
  }
}

// A failing check is seen (the candidate above is not vacuous): expecting a cold start in a warm run fails.
TEST_F(WarmStart, TheContainmentCheckOfTheCandidateCanFail) {
  if (!CgroupTreeContainment()) GTEST_SKIP() << "warm starts need a cgroup v2 per run";
  Evaluation ev = Run(CheckingCandidate(false));
  EXPECT_FALSE(IsCorrectFamily(ev.result.status)) << ev.result.status_detail;
  EXPECT_NE(ev.result.eval_log.find("warm start expected: no"), std::string::npos) << ev.result.eval_log;
}

TEST(WarmStartSetting, AcceptsOnAndOffAndNamesTheVariableOtherwise) {
  testing::ScopedEnv restore("KF_WARM_START", nullptr);
  ::setenv("KF_WARM_START", "off", 1);
  EXPECT_EQ(harness_internal::WarmStartSetting(), "off");
  ::setenv("KF_WARM_START", "1", 1);
  EXPECT_EQ(harness_internal::WarmStartSetting(), "on");
  ::setenv("KF_WARM_START", "yes please", 1);
  try {
    harness_internal::WarmStartSetting();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KF_WARM_START"), std::string::npos) << e.what();
  }
  ::unsetenv("KF_WARM_START");
  EXPECT_EQ(harness_internal::WarmStartSetting(), "on");
}

}  // namespace
}  // namespace kf
