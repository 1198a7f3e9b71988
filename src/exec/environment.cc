// Child environment: allow-list of our variables + caller additions, secrets dropped (spec §4.11, B22 fixed:
// *_API_KEY and other credential names never reach candidate code).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "exec/internal.hpp"
#include "kernelfoundry/process.hpp"

extern char** environ;

namespace kf {
namespace {

constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

std::string Upper(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool MatchesAllowed(const std::string& name, const std::vector<std::string>& allowed) {
  for (const auto& pattern : allowed) {
    if (!pattern.empty() && pattern.back() == '*') {
      if (name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0) return true;
    } else if (name == pattern) {
      return true;
    }
  }
  return false;
}

}  // namespace

const std::vector<std::string>& DefaultAllowedEnv() {
  // Locale and terminal basics; toolchains (compilers, CUDA, ROCm, oneAPI/SYCL, OpenCL/PoCL, MKL/TBB,
  // OpenMP, OpenBLAS, ccache); torch/triton knobs; our own KERNELFOUNDRY_* / KF_* variables. Anything not
  // listed (credentials, cloud and CI tokens, proxies) stays out of candidate code (B22).
  static const std::vector<std::string> kAllowed = {
      "PATH", "HOME", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "TMPDIR", "TMP", "TEMP", "USER", "LOGNAME",
      "SHELL", "HOSTNAME", "PYTHON*", "VIRTUAL_ENV", "CONDA_PREFIX", "CUDA*", "NVIDIA*", "CUDNN*", "NCCL*",
      "ROCM*", "HIP*", "HSA*", "OCL*", "POCL*", "ONEAPI*", "SYCL*", "ZE_*", "INTEL*", "CMPLR_ROOT", "MKL*",
      "TBB*", "OMP_*", "KMP_*", "GOMP_*", "OPENBLAS*", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH",
      "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "PKG_CONFIG_PATH", "CC", "CXX", "CFLAGS", "CXXFLAGS",
      "LDFLAGS", "CCACHE_*", "TORCH_*", "TRITON_*", "KERNELFOUNDRY_*", "KF_*"};
  return kAllowed;
}

bool IsSecretEnvName(const std::string& name, const ProcessOptions& options) {
  if (std::find(options.allow_secret_names.begin(), options.allow_secret_names.end(), name) !=
      options.allow_secret_names.end()) {
    return false;
  }
  const std::string upper = Upper(name);
  for (const auto& pattern : options.secret_patterns) {
    if (!pattern.empty() && upper.find(Upper(pattern)) != std::string::npos) return true;
  }
  return false;
}

std::map<std::string, std::string> BuildChildEnvironment(const ProcessOptions& options) {
  std::map<std::string, std::string> env;
  if (options.inherit_allowed_env && environ != nullptr) {
    for (char** p = environ; *p != nullptr; ++p) {
      std::string entry = *p;
      size_t eq = entry.find('=');
      if (eq == std::string::npos || eq == 0) continue;
      std::string name = entry.substr(0, eq);
      if (!MatchesAllowed(name, options.allowed_env) || IsSecretEnvName(name, options)) continue;
      env[name] = entry.substr(eq + 1);
    }
  }
  for (const auto& [name, value] : options.env_add) {
    if (name.empty() || name.find('=') != std::string::npos) continue;
    if (IsSecretEnvName(name, options)) continue;
    env[name] = value;
  }
  if (!options.pythonpath_prepend.empty()) {
    std::string joined;
    for (const auto& entry : options.pythonpath_prepend) {
      if (!joined.empty()) joined += ':';
      joined += entry;
    }
    auto it = env.find("PYTHONPATH");
    if (it != env.end() && !it->second.empty()) joined += ":" + it->second;
    env["PYTHONPATH"] = joined;
  }
  if (env.find("PATH") == env.end()) env["PATH"] = kDefaultPath;
  return env;
}

namespace exec_internal {

namespace {

// True when the mode bits of `st` grant `other_bit` (given as the "other" class's bit, e.g. S_IXOTH) to `as`.
bool Grants(const struct stat& st, const SandboxUser& as, mode_t other_bit) {
  if (st.st_uid == as.uid) return (st.st_mode & (other_bit << 6)) != 0;
  const bool in_group = st.st_gid == as.gid ||
                        std::find(as.groups.begin(), as.groups.end(), st.st_gid) != as.groups.end();
  if (in_group) return (st.st_mode & (other_bit << 3)) != 0;
  return (st.st_mode & other_bit) != 0;
}

// True when `as` may search every directory from `dir` up to the root.
bool SearchableBy(std::filesystem::path dir, const SandboxUser& as) {
  struct stat st {};
  for (;; dir = dir.parent_path()) {
    if (::stat(dir.c_str(), &st) != 0 || !Grants(st, as, S_IXOTH)) return false;
    if (dir == dir.root_path()) return true;
  }
}

// True when `as` may execute the regular file `file`: search on the directories of the path as given (a link
// is followed from there) and of the file it names, x on that file.
bool ExecutableBy(const std::filesystem::path& file, const SandboxUser& as) {
  std::error_code given_ec, real_ec;
  const std::filesystem::path given = std::filesystem::absolute(file, given_ec);
  const std::filesystem::path real = std::filesystem::canonical(file, real_ec);
  if (given_ec || real_ec) return false;
  struct stat st {};
  return ::stat(real.c_str(), &st) == 0 && S_ISREG(st.st_mode) && Grants(st, as, S_IXOTH) &&
         SearchableBy(given.parent_path(), as) && SearchableBy(real.parent_path(), as);
}

}  // namespace

std::optional<std::string> ResolveExecutable(const std::string& name, const std::string& path_var,
                                             const std::filesystem::path& cwd, const SandboxUser* as) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) return name;  // relative names resolve against the child's cwd
  size_t start = 0;
  while (start <= path_var.size()) {
    size_t end = path_var.find(':', start);
    if (end == std::string::npos) end = path_var.size();
    std::filesystem::path dir = path_var.substr(start, end - start);
    if (dir.empty()) dir = ".";
    if (dir.is_relative() && !cwd.empty()) dir = cwd / dir;
    const std::string candidate = (dir / name).string();
    if (access(candidate.c_str(), X_OK) == 0) {
      std::error_code ec;
      if (std::filesystem::is_regular_file(candidate, ec) && (as == nullptr || ExecutableBy(candidate, *as))) {
        return candidate;
      }
    }
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace exec_internal
}  // namespace kf
