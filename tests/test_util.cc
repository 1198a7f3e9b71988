#include "test_util.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "core/files.hpp"

namespace kf::testing {

std::filesystem::path SharedDir() {
  if (const char* env = std::getenv("KF_SHARED_DIR")) return env;
  return std::filesystem::weakly_canonical(KF_SHARED_DIR);
}
std::filesystem::path SourceDir() { return KF_SOURCE_DIR; }
std::filesystem::path BinaryDir() { return KF_BINARY_DIR; }

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string ReadFile(const std::filesystem::path& p) {
  std::optional<std::string> bytes = ReadFileBytes(p);
  if (!bytes) throw std::runtime_error("cannot read " + p.string());
  return std::move(*bytes);
}

void WriteFile(const std::filesystem::path& p, const std::string& bytes) {
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + p.string());
  out << bytes;
}

const Json& Golden(const std::string& name) {
  // Cached for the life of the test binary: callers may chain Golden(n)["a"].items() in a range-for, which
  // would dangle if a temporary were returned (ASan caught exactly that).
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<const Json>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[name];
  if (!slot) slot = std::make_unique<const Json>(
      Json::parse(ReadFile(SharedDir() / "fixtures" / "golden" / (name + ".json"))));
  return *slot;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "kf_test_XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
  // Traversable, not listable: kf's sandboxed children (another uid when the tests run as root, issue 25) reach
  // the work dirs kf makes in here, as they do in /tmp.
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all | std::filesystem::perms::group_exec |
                                          std::filesystem::perms::others_exec);
}

TempDir::~TempDir() {
  std::error_code ec;
  // Make everything writable first so read-only fixture copies can be removed.
  for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
  }
  std::filesystem::remove_all(path_, ec);
}

const char* const kPyScaleTaskPy = R"PY(import pytest

from kernelfoundry import TestBase

import kernel


def reference_scale(xs, factor=2):
    # [REFERENCE_START]
    return [factor * x for x in xs]
    # [REFERENCE_END]


@pytest.fixture(scope="session")
def impl(use_reference, template_args_wrapper):
    if use_reference:
        return reference_scale
    return template_args_wrapper(kernel.scale)


class TestScale(TestBase):
    def test_output_shapes_match(self, impl):
        assert len(impl([1, 2, 3])) == 3

    def test_values(self, impl):
        assert impl([1, 2, 3]) == [2, 4, 6]

    @pytest.mark.performance
    def test_benchmark(self, impl, measure_runtime):
        measure_runtime(impl, lambda: None, args=([1.0] * 64,), auto_replicate_inputs_size=0)
)PY";

void WritePyScaleTask(const std::filesystem::path& dir, const std::string& config_yaml) {
  WriteFile(dir / "config.yaml", config_yaml);
  WriteFile(dir / "conftest.py", "from kernelfoundry.conftest import *\n");
  WriteFile(dir / "kernel.py", "# [EVOLVE_START]\ndef scale(xs):\n    return [2 * x for x in xs]\n# [EVOLVE_END]\n");
  WriteFile(dir / "task.py", kPyScaleTaskPy);
}

std::pair<int, std::string> RunShell(const std::string& cmd) {
  std::string full = cmd + " 2>&1";
  FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {rc, out};
}

ScopedEnv::ScopedEnv(const char* name, const char* value)
    : ScopedEnv(std::map<std::string, std::optional<std::string>>{
          {name, value ? std::optional<std::string>(value) : std::nullopt}}) {}

ScopedEnv::ScopedEnv(const std::map<std::string, std::optional<std::string>>& vars) {
  for (const auto& [k, v] : vars) {
    const char* old = std::getenv(k.c_str());
    saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
    if (v) ::setenv(k.c_str(), v->c_str(), 1);
    else ::unsetenv(k.c_str());
  }
}

ScopedEnv::~ScopedEnv() {
  for (const auto& [k, v] : saved_) {
    if (v) ::setenv(k.c_str(), v->c_str(), 1);
    else ::unsetenv(k.c_str());
  }
}

bool CorrectAndTimed(const Json& status) {
  return status.is_string() && (status == "correct" || status == "noisy");
}

bool HasCorrectVerdictLine(const std::string& out) {
  const std::string compatible = "(reference-compatible status: correct)";
  for (const char* head : {"status: correct   ", "status: noisy - "}) {
    size_t at = out.find(head);
    if (at == std::string::npos) continue;
    size_t eol = out.find('\n', at);
    if (out.substr(at, eol == std::string::npos ? std::string::npos : eol - at).find(compatible) != std::string::npos)
      return true;
  }
  return false;
}

}  // namespace kf::testing
