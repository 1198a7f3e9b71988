// Precompiled torch headers, the trusted half (torch_pch.hpp).
#include "pipeline/torch_pch.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "core/files.hpp"
#include "core/strings.hpp"
#include "harness/isolation.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/process.hpp"
#include "kernelfoundry/resources.hpp"
#include "pipeline/build_cache.hpp"

namespace kf::torch_pch {
namespace fs = std::filesystem;

namespace {

bool IsKey(const std::string& s) { return std::regex_match(s, std::regex("[0-9a-f]{64}")); }

// The key the helper wrote (64 hex characters and maybe a newline; anything longer is not a key).
std::string ReadKeyFile(const fs::path& p) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec || size > 100) return "";
  return std::string(Trim(ReadChildFile(p).value_or("")));
}

// The last line of a helper's output that says something (for a failure's note).
std::string LastLine(const ProcessResult& r) {
  const std::string text = r.stderr_text.empty() ? r.stdout_text : r.stderr_text;
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last.substr(0, 300);
}

// One request: lock, build into a temp dir in the sandbox, publish under the key the helper computed.
std::string BuildOne(const fs::path& root, const fs::path& request, const std::string& requested_key,
                     std::chrono::milliseconds timeout, std::stop_token stop) {
  const std::string short_key = requested_key.substr(0, 16);
  if (fs::exists(root / requested_key)) return "precompiled torch header " + short_key + " is there already";
  build_cache::Cache locks(root);
  build_cache::Cache::Lock lock = locks.Acquire(requested_key, timeout);
  if (!lock.held()) return "precompiled torch header " + short_key + ": another build holds it; not built";
  if (fs::exists(root / requested_key)) return "precompiled torch header " + short_key + " was built meanwhile";

  const fs::path out = root / fmt::format(".tmp-{}-{}", short_key, ::getpid());
  const fs::path tmp = root / fmt::format(".tmp-{}-{}-tmpdir", short_key, ::getpid());
  std::error_code ec;
  fs::remove_all(out, ec);
  fs::create_directories(out, ec);
  if (ec) return "precompiled torch header: cannot create " + out.string() + ": " + ec.message();
  ProcessOptions o;
  // The builder is host side (kernelfoundry.pch_build; it imports the task side's key and allow-list). It reads a
  // copy of the request in its own temp dir: the build that wrote the request had an identity of its own, and
  // its work dir is sealed against every other run (harness/run_identity.hpp).
  const fs::path request_copy = tmp / "request.json";
  o.argv = {TaskPythonInterpreter(), "-m", "kernelfoundry.pch_build", request_copy.string(), out.string()};
  o.pythonpath_prepend = {TaskPythonDir().path.string(), HostPythonDir().path.string()};
  o.env_add["PYTHONDONTWRITEBYTECODE"] = "1";
  o.wall_timeout = timeout;
  o.stop = stop;
  o.no_network = true;
  std::string note;
  try {
    // It reads the request and kf's own host-side builder (trusted code; the host side is never on a candidate's
    // path, but this child runs none).
    IsolateChild(o, {out}, tmp, {HostPythonDir().path});
    fs::copy_file(request, request_copy, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::permissions(request_copy, fs::perms(0644), ec);  // kf's file; the builder may read it
    if (ec) throw Error(ErrorKind::kIO, "cannot copy the request: " + ec.message(), request.string());
    const ProcessRun run = RunProcess(o);
    const std::string key = ReadKeyFile(out / "key");
    if (run.reason != TerminationReason::kExited || run.result.returncode != 0 || !IsKey(key)) {
      note = fmt::format("precompiled torch header {}: not built (exit {}{}): {}", short_key, run.result.returncode,
                         run.reason == TerminationReason::kExited ? "" : ", " + run.result.message.value_or(""),
                         LastLine(run.result));
    } else {
      TakeBackFromChildren(out);  // published for every later build: no child may change it (issue 25)
      fs::rename(out, root / key, ec);  // fails when the entry exists (built by another kf meanwhile): fine
      note = ec ? fmt::format("precompiled torch header {} exists already", key.substr(0, 16))
                : fmt::format("precompiled torch header {} built in {:.1f} s for later builds", key.substr(0, 16),
                              run.wall_seconds);
    }
  } catch (const Error& e) {
    note = std::string("precompiled torch header: not built: ") + e.what();
  }
  fs::remove_all(out, ec);
  fs::remove_all(tmp, ec);
  return note;
}

}  // namespace

bool Enabled() {
  const char* v = std::getenv("KF_TORCH_PCH");
  return !(v && (std::string(v) == "off" || std::string(v) == "0"));
}

fs::path Root(const fs::path& cache_dir) {
  const char* shared = std::getenv("KF_TORCH_PCH_DIR");
  if (shared != nullptr && *shared != '\0') return fs::absolute(shared);
  return cache_dir / "pch" / "v1";
}

std::optional<fs::path> RootForChildren(const fs::path& cache_dir, std::string* why) {
  const fs::path in_cache = Root(cache_dir);
  std::error_code ec;
  if (!ChildCannotReach(in_cache)) {
    fs::create_directories(in_cache, ec);
    ::chmod((cache_dir / "pch").c_str(), 0755);  // the entries are kf's; reading them is the point
    ::chmod(in_cache.c_str(), 0755);
    return in_cache;
  }
  const fs::path shared = fs::temp_directory_path(ec) / fmt::format("kernelfoundry-pch-{}", ::geteuid());
  if (ec) {
    *why = "no temp directory: " + ec.message();
    return std::nullopt;
  }
  if (::mkdir(shared.c_str(), 0755) != 0 && errno != EEXIST) {
    *why = fmt::format("cannot create {}: {}", shared.string(), std::strerror(errno));
    return std::nullopt;
  }
  struct stat st {};
  if (::lstat(shared.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    *why = shared.string() + " is not a directory of ours that only we can write";
    return std::nullopt;
  }
  ::chmod(shared.c_str(), 0755);
  fs::create_directories(shared / "v1", ec);
  ::chmod((shared / "v1").c_str(), 0755);
  if (auto unreachable = ChildCannotReach(shared / "v1")) {
    *why = *unreachable;
    return std::nullopt;
  }
  return shared / "v1";
}

void AddBuildEnv(std::map<std::string, std::string>& env, const fs::path& root, const fs::path& requests) {
  env["KF_TORCH_PCH_DIR"] = root.string();
  env["KF_TORCH_PCH_REQUESTS"] = requests.string();
}

std::vector<std::string> BuildRequested(const fs::path& root, const fs::path& requests,
                                        std::chrono::milliseconds timeout, std::stop_token stop) {
  std::vector<std::string> notes;
  std::error_code ec;
  if (!fs::is_directory(requests, ec)) return notes;
  fs::create_directories(root, ec);
  if (ec) return {"precompiled torch header: cannot create " + root.string() + ": " + ec.message()};
  int seen = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(requests, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() != 69 || name.substr(64) != ".json" || !IsKey(name.substr(0, 64))) continue;
    if (!e.is_regular_file(ec) || e.is_symlink(ec)) continue;
    if (++seen > 4 || stop.stop_requested()) break;
    notes.push_back(BuildOne(root, e.path(), name.substr(0, 64), timeout, stop));
  }
  return notes;
}

}  // namespace kf::torch_pch
