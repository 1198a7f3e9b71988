// Persistent cache directory selection (include/kernelfoundry/cache_dir.hpp): KF_CACHE_DIR, XDG_CACHE_HOME,
// HOME, then a private per-uid directory under the temp dir — never a directory shared by every user.
#include "kernelfoundry/cache_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

#include "kernelfoundry/test_discovery.hpp"

namespace kf {
namespace fs = std::filesystem;

namespace {

// "" when `dir` exists (or was created) as a writable directory; else why not.
std::string Usable(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fmt::format("cannot create {}: {}", dir.string(), ec.message());
  if (!fs::is_directory(dir, ec)) return fmt::format("{} is not a directory", dir.string());
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return fmt::format("{} is not writable: {}", dir.string(), std::strerror(errno));
  }
  return "";
}

fs::path TempRoot() {
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  return ec || tmp.empty() ? fs::path("/tmp") : tmp;
}

// The per-user directory under the temp dir: created 0700; must be ours and private.
std::string PerUserUsable(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return fmt::format("cannot create {}: {}", dir.string(), std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return fmt::format("cannot stat {}: {}", dir.string(), std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory (a symlink or file is in the way)", dir.string());
  if (st.st_uid != ::geteuid()) {
    return fmt::format("{} belongs to uid {}, not to us (uid {}): refusing a cache another user controls",
                       dir.string(), st.st_uid, ::geteuid());
  }
  if ((st.st_mode & 022) != 0) {
    return fmt::format("{} has mode {:o}: writable by others, refusing it as a cache", dir.string(),
                       st.st_mode & 07777);
  }
  return Usable(dir);
}

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

CacheDirChoice ResolveCacheDir() {
  CacheDirChoice c;
  if (const char* env = Env("KF_CACHE_DIR")) {
    c.path = fs::absolute(env);
    c.source = "KF_CACHE_DIR";
    c.problem = Usable(c.path);
    return c;
  }
  std::string tried;
  auto attempt = [&](const fs::path& dir, const char* source) {
    c.path = dir;
    c.source = source;
    c.problem = Usable(dir);
    if (!c.problem.empty()) tried += (tried.empty() ? "" : "; ") + std::string(source) + ": " + c.problem;
    return c.problem.empty();
  };
  if (const char* xdg = Env("XDG_CACHE_HOME"); xdg && fs::path(xdg).is_absolute()) {
    if (attempt(fs::path(xdg) / "kernelfoundry", "XDG_CACHE_HOME")) return c;
  }
  if (const char* home = Env("HOME"); home && fs::path(home).is_absolute()) {
    if (attempt(fs::path(home) / ".cache" / "kernelfoundry", "HOME")) return c;
  }
  c.path = TempRoot() / fmt::format("kernelfoundry-{}", ::geteuid());
  c.source = "per-user temp dir";
  c.problem = PerUserUsable(c.path);
  if (!c.problem.empty() && !tried.empty()) c.problem += " (also tried " + tried + ")";
  return c;
}

fs::path DefaultCacheDir() { return ResolveCacheDir().path; }

}  // namespace kf
