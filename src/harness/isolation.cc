// The isolation policy of build and test children (see isolation.hpp).
#include "harness/isolation.hpp"

#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <system_error>

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/resources.hpp"
#include "harness/run_identity.hpp"

namespace kf {
namespace fs = std::filesystem;

namespace {

enum class Mode { kOn, kRequired, kOff };

Mode ModeFromEnv() {
  const char* v = std::getenv("KF_ISOLATION");
  std::string s = v ? v : "";
  if (s.empty() || s == "on" || s == "1") return Mode::kOn;
  if (s == "required") return Mode::kRequired;
  if (s == "off" || s == "0") return Mode::kOff;
  throw Error(ErrorKind::kInvalidArgument, "expected on, required or off, got '" + s + "'", "environment",
              "KF_ISOLATION");
}

constexpr const char* kOff = "off (KF_ISOLATION=off)";
constexpr const char* kDefaultUser = "kf-sandbox";
constexpr const char* kFallbackUser = "nobody";

// The passwd entry of `name` with its groups (getgrouplist: primary + supplementary), or nullopt.
std::optional<SandboxUser> LookUpUser(const std::string& name) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return std::nullopt;
  SandboxUser u;
  u.uid = pw.pw_uid;
  u.gid = pw.pw_gid;
  u.name = name;
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(name.c_str(), pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    if (getgrouplist(name.c_str(), pw.pw_gid, groups.data(), &n) < 0) n = 0;
  }
  for (int i = 0; i < n && u.groups.size() < 32; ++i) u.groups.push_back(groups[static_cast<size_t>(i)]);
  return u;
}

// The directories of the task Python's installation: the prefix of the interpreter as given (a virtualenv)
// and of the file it resolves to (the base installation), e.g. /usr for /usr/bin/python3; for an interpreter
// not in a bin/ directory (a wrapper script), its directory.
std::vector<fs::path> PythonInstallation() {
  static std::mutex mu;
  static std::map<std::string, std::vector<fs::path>> known;
  const std::string python = TaskPythonInterpreter();
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(python);
  if (it != known.end()) return it->second;
  fs::path exe = python;
  if (python.find('/') == std::string::npos) {  // a bare name: where PATH finds it
    exe.clear();
    std::string_view rest = std::getenv("PATH") ? std::getenv("PATH") : "";
    while (exe.empty() && !rest.empty()) {
      const size_t colon = rest.find(':');
      const fs::path candidate = fs::path(std::string(rest.substr(0, colon))) / python;
      if (::access(candidate.c_str(), X_OK) == 0) exe = candidate;
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  std::vector<fs::path> out;
  std::error_code ec;
  for (const fs::path& p : {fs::absolute(exe, ec), fs::canonical(exe, ec)}) {
    if (exe.empty() || p.empty() || !p.has_parent_path()) continue;
    // <prefix>/bin/python3 -> <prefix>; an interpreter (or a wrapper) anywhere else: its own directory.
    const fs::path prefix = p.parent_path().filename() == "bin" ? p.parent_path().parent_path() : p.parent_path();
    if (prefix.empty() || prefix == prefix.root_path()) continue;
    bool seen = false;
    for (const fs::path& q : out) seen = seen || q == prefix;
    if (!seen) out.push_back(prefix);
  }
  known[python] = out;
  return out;
}

// $KF_SANDBOX_READ, ':'-separated absolute paths.
std::vector<fs::path> ExtraReadable() {
  std::vector<fs::path> out;
  const char* v = std::getenv("KF_SANDBOX_READ");
  std::string_view rest = v ? v : "";
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string item(rest.substr(0, colon));
    if (!item.empty()) {
      if (item[0] != '/') {
        throw Error(ErrorKind::kInvalidArgument, "expected absolute paths separated by ':', got '" + item + "'",
                    "environment", "KF_SANDBOX_READ");
      }
      out.emplace_back(item);
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return out;
}

// The directories of compilers named by absolute path in CXX / CC (the child's value, else ours): "the compilers"
// of the allow-list when they live outside the system prefixes (e.g. a wrapper script next to the task).
std::vector<fs::path> CompilerDirs(const ProcessOptions& options) {
  std::vector<fs::path> out;
  for (const char* name : {"CXX", "CC"}) {
    auto it = options.env_add.find(name);
    const char* ours = std::getenv(name);
    std::string value = it != options.env_add.end() ? it->second : ours ? ours : "";
    value = value.substr(0, value.find(' '));
    if (!value.empty() && value[0] == '/') out.push_back(fs::path(value).parent_path());
  }
  return out;
}

bool InGroups(const SandboxUser& u, gid_t gid) {
  if (gid == u.gid) return true;
  for (uint32_t g : u.groups) {
    if (g == gid) return true;
  }
  return false;
}

// Gives a tree to uid/gid without following symlinks (nftw FTW_PHYS; lchown); `strip_write` also removes
// the group's and others' write permission. Returns 0 or errno.
int ChownTree(const fs::path& root, uint32_t uid, uint32_t gid, bool strip_write) {
  static thread_local uint32_t to_uid = 0, to_gid = 0;
  static thread_local bool strip = false;
  static thread_local int failure = 0;
  to_uid = uid;
  to_gid = gid;
  strip = strip_write;
  failure = 0;
  auto visit = [](const char* path, const struct stat* st, int type, FTW*) -> int {
    if (lchown(path, to_uid, to_gid) != 0) failure = errno;
    if (failure == 0 && strip && type != FTW_SL && (st->st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
        ::chmod(path, st->st_mode & 07755) != 0) {
      failure = errno;
    }
    return failure == 0 ? 0 : 1;
  };
  return nftw(root.c_str(), visit, 16, FTW_PHYS) != 0 && failure != 0 ? failure : 0;
}

// Hands a tree to the sandbox user. `sealed` (a run's own uid and gid, run_identity.hpp): the top directory is
// then root's, group = the run's gid, mode 0770 — the run enters and writes it, cannot chmod it open, and no other
// run can enter it (a socket or FIFO it makes there is out of their reach).
void GiveTree(const fs::path& root, const SandboxUser& u, bool sealed) {
  int err = ChownTree(root, u.uid, u.gid, false);
  if (err == 0 && sealed && (::lchown(root.c_str(), 0, u.gid) != 0 || ::chmod(root.c_str(), 0770) != 0)) err = errno;
  if (err != 0) {
    throw Error(ErrorKind::kIO, fmt::format("cannot hand the directory to the sandbox user {}: {}", u.name,
                                            std::strerror(err)), root.string());
  }
}

// Why `user` cannot reach `path` (a directory on the way that it may not search), or nullopt.
std::optional<std::string> CannotReach(const fs::path& path, const SandboxUser& user) {
  fs::path at = path.root_path();
  auto check = [&](const fs::path& dir) -> std::optional<std::string> {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;  // the child's error names it
    const mode_t need = st.st_uid == user.uid ? S_IXUSR : InGroups(user, st.st_gid) ? S_IXGRP : S_IXOTH;
    if ((st.st_mode & need) != 0) return std::nullopt;
    return fmt::format("the sandbox user {} (uid {}) cannot reach {}: {} is mode {:04o}, owned by uid {} (use a "
                       "directory it can reach: TMPDIR, KF_CACHE_DIR; or set KF_SANDBOX_USER)",
                       user.name, user.uid, path.string(), dir.string(), st.st_mode & 07777, st.st_uid);
  };
  if (auto why = check(at)) return why;
  for (const fs::path& part : path.relative_path()) {
    at /= part;
    if (auto why = check(at)) return why;
  }
  return std::nullopt;
}

}  // namespace

bool ChildIsolation::Complete() const {
  return mode != "off" && filesystem.rfind("landlock", 0) == 0 && privileges.rfind("uid ", 0) == 0 &&
         seccomp.rfind("seccomp filter", 0) == 0;
}

std::string ChildIsolation::Summary() const {
  if (mode == "off") return kOff;
  return filesystem + "; " + privileges + "; " + seccomp + "; /dev/shm and IPC " + ipc;
}

Json ChildIsolation::ToJson() const {
  return Json{{"mode", mode}, {"filesystem", filesystem}, {"privileges", privileges}, {"seccomp", seccomp},
              {"ipc", ipc}, {"complete", Complete()}};
}

std::optional<SandboxUser> ChildSandboxUser() {
  if (geteuid() != 0) return std::nullopt;
  const char* v = std::getenv("KF_SANDBOX_USER");
  const std::string wanted = v ? v : "";
  static std::mutex mu;
  static std::map<std::string, SandboxUser> known;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(wanted); it != known.end()) return it->second;
  std::optional<SandboxUser> u;
  if (!wanted.empty()) {
    u = LookUpUser(wanted);
    if (!u) throw Error(ErrorKind::kInvalidArgument, "no such user: '" + wanted + "'", "environment", "KF_SANDBOX_USER");
  } else {
    u = LookUpUser(kDefaultUser);
    if (!u) u = LookUpUser(kFallbackUser);
    if (!u) {
      throw Error(ErrorKind::kInvalidArgument, std::string("neither ") + kDefaultUser + " nor " + kFallbackUser +
                  " exists (scripts/install-deps.sh creates " + kDefaultUser + ")", "environment", "KF_SANDBOX_USER");
    }
  }
  if (u->uid == 0) {
    throw Error(ErrorKind::kInvalidArgument, "the sandbox user must not be root: '" + u->name + "'", "environment",
                "KF_SANDBOX_USER");
  }
  known[wanted] = *u;
  return u;
}

ChildIsolation DescribeChildIsolation() {
  ChildIsolation c;
  const Mode mode = ModeFromEnv();
  c.mode = mode == Mode::kOff ? "off" : mode == Mode::kRequired ? "required" : "on";
  if (mode == Mode::kOff) {
    c.filesystem = c.privileges = c.seccomp = c.ipc = kOff;
    return c;
  }
  c.filesystem = FilesystemIsolationSupport();
  const std::optional<SandboxUser> user = ChildSandboxUser();
  const std::string shared = harness_internal::RunIdentityUnavailable();
  c.privileges = !user ? fmt::format("uid {} (kf's own), no capabilities", geteuid())
                 : shared.empty()
                     ? fmt::format("uid of its own per run ({}'s groups), no capabilities", user->name)
                     : fmt::format("uid {} ({}; shared by all runs: {}), no capabilities", user->uid, user->name, shared);
  c.seccomp = SeccompSupport();
  const std::string ipc = PrivateIpcSupport();
  c.ipc = ipc.rfind("private ", 0) == 0 ? "private" : ipc;
  return c;
}

std::string ChildIsolationStatus() { return DescribeChildIsolation().Summary(); }

bool ChildIsolationApplied() { return DescribeChildIsolation().Complete(); }

std::optional<std::string> ChildCannotReach(const fs::path& path) {
  const std::optional<SandboxUser> user = ChildSandboxUser();
  if (!user) return std::nullopt;
  return CannotReach(path, *user);
}

std::vector<fs::path> TaskSideReadablePaths() {
  std::vector<fs::path> out;
  try {
    out.push_back(TaskPythonDir().path);
  } catch (const Error&) {
  }
  try {
    const TaskSdk sdk = FindTaskSdk();
    out.push_back(sdk.include_dir);
    std::vector<fs::path> files = sdk.sources;
    if (!sdk.object.empty()) files.push_back(sdk.object);  // $KF_SDK_LINK: the compiled SDK
    for (const fs::path& file : files) {
      bool seen = false;
      for (const fs::path& p : out) seen = seen || p == file.parent_path();
      if (!seen) out.push_back(file.parent_path());
    }
  } catch (const Error&) {
  }
  return out;
}

void IsolateChild(ProcessOptions& options, const std::vector<fs::path>& writable, const fs::path& private_tmp,
                  const std::vector<fs::path>& readable) {
  const Mode mode = ModeFromEnv();
  std::error_code ec;
  fs::remove_all(private_tmp, ec);
  fs::create_directories(private_tmp, ec);
  if (ec) throw Error(ErrorKind::kIO, "cannot create the private temp dir: " + ec.message(), private_tmp.string());
  const std::string tmp = private_tmp.string();
  for (const char* name : {"TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME", "POCL_CACHE_DIR", "TORCH_EXTENSIONS_DIR",
                           "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "MPLCONFIGDIR"}) {
    options.env_add[name] = tmp;
  }
  if (mode == Mode::kOff) return;
  options.env_add["HOME"] = tmp;  // nothing of the real home directory: ~/.ssh, shell history, tokens
  std::optional<SandboxUser> user = ChildSandboxUser();
  std::shared_ptr<const void> lease;  // the run's own uid and gid (run_identity.hpp), where the machine allows them
  if (user && harness_internal::RunIdentityUnavailable().empty()) {
    std::string why;
    std::optional<harness_internal::RunIdentity> own = harness_internal::LeaseRunIdentity(*user, &why);
    if (!own) throw Error(ErrorKind::kIO, "cannot give the run an identity of its own: " + why, "/run/kernelfoundry");
    user = own->user;
    lease = own->lease;
  }
  FilesystemIsolation iso;
  iso.writable_paths = writable;
  iso.writable_paths.push_back(private_tmp);
  iso.readable_paths = readable;
  for (const fs::path& p : PythonInstallation()) iso.readable_paths->push_back(p);
  for (const fs::path& p : TaskSideReadablePaths()) iso.readable_paths->push_back(p);
  for (const fs::path& p : CompilerDirs(options)) iso.readable_paths->push_back(p);
  for (const fs::path& p : ExtraReadable()) iso.readable_paths->push_back(p);
  iso.required = mode == Mode::kRequired;
  if (user) {
    options.env_add["USER"] = options.env_add["LOGNAME"] = user->name;
    for (const fs::path& w : iso.writable_paths) {
      if (fs::exists(w, ec)) GiveTree(w, *user, lease != nullptr);
    }
    std::vector<fs::path> must_reach = iso.writable_paths;
    if (!options.cwd.empty()) must_reach.push_back(options.cwd);
    for (const fs::path& p : must_reach) {
      if (auto why = CannotReach(fs::absolute(p, ec), *user)) throw Error(ErrorKind::kIO, *why, p.string());
    }
  }
  options.filesystem_isolation = std::move(iso);
  ProcessSandbox sandbox;
  sandbox.user = user;
  sandbox.user_lease = std::move(lease);
  sandbox.required = mode == Mode::kRequired;
  options.sandbox = std::move(sandbox);
}

void AddWritable(ProcessOptions& options, const fs::path& dir) {
  if (!options.filesystem_isolation) return;
  options.filesystem_isolation->writable_paths.push_back(dir);
  if (options.sandbox && options.sandbox->user) GiveTree(dir, *options.sandbox->user, options.sandbox->user_lease != nullptr);
}

void TakeBackFromChildren(const fs::path& dir) {
  if (!ChildSandboxUser()) return;
  int err = ChownTree(dir, geteuid(), getegid(), true);
  // Published for every later child: a top directory sealed for the run that wrote it (GiveTree) is opened again.
  if (err == 0 && ::chmod(dir.c_str(), 0755) != 0) err = errno;
  if (err != 0) {
    throw Error(ErrorKind::kIO, std::string("cannot take the directory back from the sandbox user: ") +
                std::strerror(err), dir.string());
  }
}

void OpenToChildren(const fs::path& dir) {
  if (ModeFromEnv() == Mode::kOff) return;
  const std::optional<SandboxUser> user = ChildSandboxUser();
  if (!user) return;
  if (::lchown(dir.c_str(), static_cast<uid_t>(-1), user->gid) != 0 || ::chmod(dir.c_str(), 0710) != 0) {
    throw Error(ErrorKind::kIO, std::string("cannot make the work dir traversable for the sandbox user: ") +
                std::strerror(errno), dir.string());
  }
}

void ShareWithChildren(const fs::path& dir) {
  if (ModeFromEnv() == Mode::kOff) return;
  const std::optional<SandboxUser> user = ChildSandboxUser();
  if (!user) return;
  static thread_local gid_t group = 0;
  static thread_local int failure = 0;
  group = user->gid;
  failure = 0;
  auto visit = [](const char* path, const struct stat* st, int type, FTW*) -> int {
    if (type == FTW_SL) return 0;  // a link has no mode of its own; what it names is not ours to open up
    mode_t mode = st->st_mode & 07777 & ~static_cast<mode_t>(S_IWGRP | S_ISUID | S_ISGID);
    if (mode & S_IRUSR) mode |= S_IRGRP;
    if (mode & S_IXUSR) mode |= S_IXGRP;
    if (::lchown(path, static_cast<uid_t>(-1), group) != 0 || ::chmod(path, mode) != 0) failure = errno;
    return failure == 0 ? 0 : 1;
  };
  if (nftw(dir.c_str(), visit, 16, FTW_PHYS) != 0 && failure != 0) {
    throw Error(ErrorKind::kIO, std::string("cannot share the task tree with the sandbox user: ") +
                std::strerror(failure), dir.string());
  }
}

fs::path FreshRunDir(const fs::path& parent, const std::string& prefix) {
  std::string tmpl = (parent / (prefix + "XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw Error(ErrorKind::kIO, std::string("cannot create a run directory: ") + std::strerror(errno), tmpl);
  }
  return tmpl;
}

}  // namespace kf
