// Run-time resource lookup (see include/kernelfoundry/resources.hpp): environment variable -> install prefix
// of the running executable -> build tree -> source tree (the last two only for programs in the build tree).
//
// The build system passes (CMakeLists.txt, on this file only):
//   KF_BUILD_DIR, KF_SOURCE_DIR   absolute build and source trees of this build
//   KF_DATA_FROM_BINDIR           the install data dir relative to the install bin dir ("../share/kernelfoundry")
//   KF_SDK_SOURCES                the SDK sources relative to the SDK's src/, ':'-separated
#include "kernelfoundry/resources.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <system_error>
#include <utility>

#include "kernelfoundry/error.hpp"

#if !defined(KF_BUILD_DIR) || !defined(KF_SOURCE_DIR) || !defined(KF_DATA_FROM_BINDIR) || !defined(KF_SDK_SOURCES)
#error "resources.cc needs KF_BUILD_DIR, KF_SOURCE_DIR, KF_DATA_FROM_BINDIR and KF_SDK_SOURCES (see CMakeLists.txt)"
#endif

namespace kf {
namespace fs = std::filesystem;
namespace {

struct Candidate {
  fs::path dir;
  std::string origin;
};

std::string EnvOrEmpty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

fs::path Absolute(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : a;
}

// True when `path` lies inside `dir` (both resolved).
bool IsInside(const fs::path& path, const fs::path& dir) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(path, ec);
  if (ec) return false;
  const fs::path d = fs::weakly_canonical(dir, ec);
  if (ec) return false;
  auto [dit, pit] = std::mismatch(d.begin(), d.end(), p.begin(), p.end());
  return dit == d.end();
}

// The candidates after the environment variable: install prefix, then (build-tree programs only) the
// development trees, each as `sub` below its root.
// The file of the loaded object that holds this code: the executable, or a shared object such as the Python
// API's compiled module (loaded by /usr/bin/python3, which lies in no build tree). Empty when unknown.
fs::path ThisObject() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ThisObject), &info) == 0 || info.dli_fname == nullptr) return {};
  return fs::path(info.dli_fname);
}

// The data directory (<prefix>/share/kernelfoundry) an installed compiled Python module of ours lies in
// (<data>/python/kernelfoundry/.../_core*.so: the Python API loaded by an interpreter elsewhere), or empty.
fs::path InstalledDataDirOfThisObject() {
  const fs::path object = ThisObject();
  if (object.empty() || IsInside(object, KF_BUILD_DIR)) return {};
  for (fs::path p = object.parent_path(); p.has_relative_path(); p = p.parent_path()) {
    if (p.filename() == "kernelfoundry" && p.parent_path().filename() == "python") return p.parent_path().parent_path();
  }
  return {};
}

std::vector<Candidate> Fallbacks(const fs::path& install_sub, const fs::path& build_sub, const fs::path& source_sub,
                                 bool with_source = true) {
  std::vector<Candidate> out;
  const fs::path exe = RunningExecutable();
  if (!exe.empty()) {
    out.push_back({(exe.parent_path() / KF_DATA_FROM_BINDIR / install_sub).lexically_normal(),
                   "install prefix of " + exe.string()});
    if (const fs::path data = InstalledDataDirOfThisObject(); !data.empty()) {
      out.push_back({data / install_sub, "install prefix of " + ThisObject().string()});
    }
    if (IsInside(exe, KF_BUILD_DIR) || IsInside(ThisObject(), KF_BUILD_DIR)) {
      if (!build_sub.empty()) out.push_back({fs::path(KF_BUILD_DIR) / build_sub, "build tree"});
      if (with_source) out.push_back({fs::path(KF_SOURCE_DIR) / source_sub, "source tree"});
    }
  }
  return out;
}

std::vector<std::string> SdkSourceList() {
  std::vector<std::string> out;
  std::string_view all = KF_SDK_SOURCES;
  while (!all.empty()) {
    size_t colon = all.find(':');
    std::string_view one = all.substr(0, colon);
    if (!one.empty()) out.emplace_back(one);
    all = colon == std::string_view::npos ? std::string_view() : all.substr(colon + 1);
  }
  return out;
}

// The files that make a directory a task SDK, relative to it.
std::vector<fs::path> SdkMarkers() {
  std::vector<fs::path> out = {"include/kernelfoundry/sdk/task_sdk.hpp"};
  for (const std::string& s : SdkSourceList()) out.push_back(fs::path("src") / s);
  return out;
}

// The markers missing from an SDK candidate (empty = usable).
std::vector<fs::path> SdkMissing(const fs::path& dir) {
  std::vector<fs::path> missing;
  for (const fs::path& m : SdkMarkers())
    if (!IsFile(dir / m)) missing.push_back(m);
  return missing;
}

// True when `path` (a file) or a regular file below it (a directory) was modified after `than` was, or either
// cannot be read: a stale object must not be used on a guess.
bool NewerFileUnder(const fs::path& path, const fs::path& than) {
  std::error_code ec;
  const fs::file_time_type limit = fs::last_write_time(than, ec);
  if (ec) return true;
  if (!fs::is_directory(path, ec)) {
    const fs::file_time_type t = fs::last_write_time(path, ec);
    return ec || t > limit;
  }
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const fs::file_time_type t = it->last_write_time(ec);
    if (ec || t > limit) return true;
  }
  return static_cast<bool>(ec);
}

std::string Looked(const std::vector<Candidate>& candidates) {
  std::string out;
  for (const Candidate& c : candidates) out += (out.empty() ? "" : ", ") + c.dir.string() + " (" + c.origin + ")";
  return out.empty() ? std::string("nowhere (/proc/self/exe unreadable)") : out;
}

}  // namespace

fs::path RunningExecutable() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

std::string TaskPythonInterpreter() {
  std::string env = EnvOrEmpty("KF_PYTHON");
  return env.empty() ? std::string("/usr/bin/python3") : env;
}

ResourceDir TaskPythonDir() {
  constexpr const char* kMarker = "kernelfoundry/__init__.py";
  constexpr const char* kHostMarker = "kernelfoundry/zygote.py";  // a host-side module: never on a task's path
  auto is_task_side = [&](const fs::path& dir) { return IsFile(dir / kMarker) && !IsFile(dir / kHostMarker); };
  if (std::string env = EnvOrEmpty("KF_PYTHON_DIR"); !env.empty()) {
    if (is_task_side(env)) return {Absolute(env), "KF_PYTHON_DIR"};
    const std::string why = IsFile(fs::path(env) / kHostMarker)
                                ? " is the host side of the Python package (it holds " + (fs::path(env) / kHostMarker).string() +
                                      "); point KF_PYTHON_DIR at the task side (python-task)"
                                : " does not hold the task-side Python package (no " + (fs::path(env) / kMarker).string() + ")";
    throw Error(ErrorKind::kNotFound, "KF_PYTHON_DIR=" + env + why, "", "KF_PYTHON_DIR");
  }
  const std::vector<Candidate> candidates = Fallbacks("python-task", "python-task", "python/task");
  for (const Candidate& c : candidates)
    if (is_task_side(c.dir)) return {Absolute(c.dir), c.origin};
  throw Error(ErrorKind::kNotFound,
              std::string("cannot find the task-side Python package (a directory holding ") + kMarker +
                  "): KF_PYTHON_DIR is not set; looked in " + Looked(candidates) +
                  ". Install kf with `cmake --install` or set KF_PYTHON_DIR",
              "", "KF_PYTHON_DIR");
}

ResourceDir HostPythonDir() {
  constexpr const char* kMarker = "kernelfoundry/zygote.py";
  if (std::string env = EnvOrEmpty("KF_PYTHON_HOST_DIR"); !env.empty()) {
    if (IsFile(fs::path(env) / kMarker)) return {Absolute(env), "KF_PYTHON_HOST_DIR"};
    throw Error(ErrorKind::kNotFound,
                "KF_PYTHON_HOST_DIR=" + env + " does not hold the host side of the Python package (no " +
                    (fs::path(env) / kMarker).string() + ")",
                "", "KF_PYTHON_HOST_DIR");
  }
  // No source-tree fallback: the host side needs its compiled modules and its task-side sibling.
  const std::vector<Candidate> candidates = Fallbacks("python", "python", "", /*with_source=*/false);
  for (const Candidate& c : candidates)
    if (IsFile(c.dir / kMarker)) return {Absolute(c.dir), c.origin};
  throw Error(ErrorKind::kNotFound,
              std::string("cannot find the host-side Python package (a directory holding ") + kMarker +
                  "): KF_PYTHON_HOST_DIR is not set; looked in " + Looked(candidates) +
                  ". Install kf with `cmake --install` or set KF_PYTHON_HOST_DIR",
              "", "KF_PYTHON_HOST_DIR");
}

std::string TaskSdk::SourceFiles() const {
  std::string out;
  for (const fs::path& f : sources) out += (out.empty() ? "" : " ") + f.string();
  return out;
}

std::string TaskSdk::LinkInputs() const { return object.empty() ? SourceFiles() : object.string(); }

TaskSdk FindTaskSdk() {
  auto make = [](const fs::path& dir, std::string origin) {
    TaskSdk sdk;
    const fs::path root = Absolute(dir);
    sdk.include_dir = root / "include";
    for (const std::string& s : SdkSourceList()) sdk.sources.push_back(root / "src" / s);
    sdk.origin = std::move(origin);
    fs::path object = root / "lib" / "kf_task_sdk.o";
    if (!IsFile(object) && root == Absolute(KF_SOURCE_DIR)) object = fs::path(KF_BUILD_DIR) / "sdk/lib/kf_task_sdk.o";
    bool fresh = IsFile(object) && !NewerFileUnder(sdk.include_dir / "kernelfoundry", object);
    for (const fs::path& source : sdk.sources) fresh = fresh && !NewerFileUnder(source, object);
    if (fresh) sdk.object = object;
    return sdk;
  };
  auto names = [](const std::vector<fs::path>& missing) {
    std::string out;
    for (const fs::path& m : missing) out += (out.empty() ? "" : ", ") + m.string();
    return out;
  };
  if (std::string env = EnvOrEmpty("KF_SDK_DIR"); !env.empty()) {
    std::vector<fs::path> missing = SdkMissing(env);
    if (missing.empty()) return make(env, "KF_SDK_DIR");
    throw Error(ErrorKind::kNotFound, "KF_SDK_DIR=" + env + " is not a task SDK directory (missing " + names(missing) + ")",
                "", "KF_SDK_DIR");
  }
  const std::vector<Candidate> candidates = Fallbacks("sdk", "", "");
  for (const Candidate& c : candidates)
    if (SdkMissing(c.dir).empty()) return make(c.dir, c.origin);
  throw Error(ErrorKind::kNotFound,
              "cannot find the task SDK (a directory with " + names(SdkMarkers()) +
                  "): KF_SDK_DIR is not set; looked in " + Looked(candidates) +
                  ". Install kf with `cmake --install` or set KF_SDK_DIR",
              "", "KF_SDK_DIR");
}

}  // namespace kf
