// Issue 25, "Must show", end to end through `kf run` the way the README runs it: a candidate for
// examples/tasks/bias_relu whose static initialiser probes where it runs (uid, CapEff, NoNewPrivs, Seccomp) and
// tries /etc/shadow, the database, the cache and the home directory. It reports each finding on stderr and
// makes bias_relu() throw when one does not hold, so a correct verdict means every test process (warm-started:
// the evaluation's conditions say so) found them all; the build's import check prints the same lines into the
// build log. Also: `kf run --require-isolation` turns KF_ISOLATION=off into "required" and refuses to run where
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

// The probing candidate; `root` = kf runs as root (then the uid must not be 0).
std::string ProbeCandidate(bool root, const fs::path& db, const fs::path& cache, const fs::path& home) {
  return std::string(
      "#include <dirent.h>\n#include <fcntl.h>\n#include <unistd.h>\n#include <cerrno>\n#include <cstdio>\n"
      "#include <cstdlib>\n#include <cstring>\n#include <fstream>\n#include <string>\n"
      "static void kf_note(std::string& bad, const std::string& what, bool ok, const std::string& detail) {\n"
      "  std::fprintf(stderr, \"kf-probe %s: %s %s\\n\", what.c_str(), ok ? \"ok\" : \"FAILED\", detail.c_str());\n"
      "  if (!ok) bad += what + \" (\" + detail + \"); \";\n}\n"
      "static bool kf_refused(const std::string& path, std::string& detail) {\n"
      "  const int fd = open(path.c_str(), O_RDONLY);\n"
      "  if (fd >= 0) { close(fd); detail = \"opened \" + path; return false; }\n"
      "  detail = path + \": \" + std::strerror(errno);\n  return errno == EACCES || errno == EPERM;\n}\n"
      "static const std::string kf_bad = [] {\n"
      "  std::string bad, d;\n"
      "  const bool root = ") + (root ? "true" : "false") + ";\n"
      "  kf_note(bad, \"uid\", !root || (getuid() != 0 && geteuid() != 0), std::to_string(geteuid()));\n"
      "  std::ifstream st(\"/proc/self/status\");\n"
      "  std::string cap = \"?\", nnp = \"?\", sec = \"?\";\n"
      "  for (std::string l; std::getline(st, l);) {\n"
      "    if (l.rfind(\"CapEff:\", 0) == 0) cap = l.substr(l.find_first_not_of(\"\\t \", 7));\n"
      "    if (l.rfind(\"NoNewPrivs:\", 0) == 0) nnp = l.substr(l.find_first_not_of(\"\\t \", 11));\n"
      "    if (l.rfind(\"Seccomp:\", 0) == 0) sec = l.substr(l.find_first_not_of(\"\\t \", 8));\n"
      "  }\n"
      "  kf_note(bad, \"CapEff\", cap == \"0000000000000000\", cap);\n"
      "  kf_note(bad, \"NoNewPrivs\", nnp == \"1\", nnp);\n"
      "  kf_note(bad, \"Seccomp\", sec == \"2\", sec);\n"
      "  bool r = kf_refused(\"/etc/shadow\", d);\n  kf_note(bad, \"shadow\", r, d);\n"
      "  r = kf_refused(\"" + db.string() + "\", d);\n  kf_note(bad, \"database\", r, d);\n"
      "  r = kf_refused(\"" + cache.string() + "\", d);\n  kf_note(bad, \"cache\", r, d);\n"
      "  r = kf_refused(\"" + home.string() + "/.ssh/id_ed25519\", d);\n  kf_note(bad, \"home\", r, d);\n"
      "  const char* h = std::getenv(\"HOME\");\n"
      "  kf_note(bad, \"HOME\", h && std::string(h) != \"" + home.string() + "\", h ? h : \"(unset)\");\n"
      "  return bad;\n}();\n"
      "torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {\n"
      "  TORCH_CHECK(kf_bad.empty(), \"kf-probe FAILED: \", kf_bad);\n"
      "  return torch::relu(x + bias) * scale;\n}\n";
}

TEST(SandboxMustShow, AProbingCandidateRunsUnprivilegedAndIsRefusedTheSecretsWarmAndCold) {
  if (!ChildIsolationApplied()) GTEST_SKIP() << "not fully isolated here: " << ChildIsolationStatus();
  TempDir tmp;
  const fs::path task = testing::CopyBiasRelu(tmp.path());
  const fs::path home = tmp.path() / "home";
  WriteFile(home / ".ssh" / "id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY----- not a real key\n");
  fs::permissions(home, fs::perms(0755));
  fs::permissions(home / ".ssh", fs::perms(0755));
  fs::permissions(home / ".ssh" / "id_ed25519", fs::perms(0644));  // only the sandbox can refuse it
  const fs::path db = tmp.path() / "runs" / "kernels.sqlite3";
  const fs::path cache = std::getenv("KF_CACHE_DIR") ? fs::path(std::getenv("KF_CACHE_DIR")) : fs::path();
  const fs::path cand = tmp.path() / "probe.cpp";
  WriteFile(cand, ProbeCandidate(::geteuid() == 0, db, cache, home));
  for (const char* warm : {"on", "off"}) {
    SCOPED_TRACE(std::string("KF_WARM_START=") + warm);
    KfRunResult r = KfRun(tmp.path(), task, cand, "HOME=" + Q(home.string()) + " KF_WARM_START=" + warm,
                          "--db " + Q(db.string()));
    ASSERT_TRUE(r.json.is_object()) << r.output;
    EXPECT_TRUE(IsCorrectFamily(*EvalStatusFromName(r.json["status"].get<std::string>()))) << testing::Why(r);
    const Json& iso = r.json["result"]["isolation"];
    EXPECT_TRUE(iso["complete"].get<bool>()) << iso.dump();
    const std::string build_log = r.json["build_result"]["result"]["stdout"].get<std::string>() +
                                  r.json["build_result"]["result"]["stderr"].get<std::string>();
    for (const char* check : {"uid", "CapEff", "NoNewPrivs", "Seccomp", "shadow", "database", "cache", "home", "HOME"}) {
      EXPECT_NE(build_log.find(std::string("kf-probe ") + check + ": ok"), std::string::npos) << check << "\n"
                                                                                                 << build_log;
    }
    EXPECT_EQ(build_log.find("FAILED"), std::string::npos) << build_log;
    if (std::string(warm) == "on" && CgroupTreeContainment()) {
      EXPECT_EQ(r.json["result"]["timing"]["conditions"]["start"], "warm") << r.json["result"]["timing"].dump();
    }
    struct stat st {};
    ASSERT_EQ(::stat(db.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
}

TEST(SandboxMustShow, RequireIsolationRefusesToRunWithoutIt) {
  TempDir tmp;
  const fs::path task = testing::CopyExample("omp_reduction", tmp.path());
  const fs::path cand = tmp.path() / "same.cpp";
  WriteFile(cand, "double kf_sum_squares(const float* x, std::size_t n) {\n  double s = 0.0;\n"
                  "  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];\n  return s;\n}\n");
  // KF_ISOLATION=off stands in for a machine without Landlock or seccomp; --require-isolation overrides it
  // with "required" and checks what this machine can do.
  KfRunResult r = KfRun(tmp.path(), task, cand, "KF_ISOLATION=off", "--no-store --no-reference --require-isolation");
  if (ChildIsolationApplied()) {
    EXPECT_EQ(r.rc, 0) << r.output;  // "required" replaced "off": the run is isolated and correct
    ASSERT_TRUE(r.json.is_object()) << r.output;
    EXPECT_EQ(r.json["result"]["isolation"]["mode"], "required");
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
