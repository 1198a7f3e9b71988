// kf's build cache (see build_cache.hpp).
#include "pipeline/build_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "core/files.hpp"
#include "core/sha256.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/process.hpp"
#include "kernelfoundry/resources.hpp"
#include "kernelfoundry/worker_info.hpp"

namespace kf::build_cache {
namespace fs = std::filesystem;

namespace {

constexpr int kFormat = 1;

// Length-prefixed field, so that no two different inputs give the same byte stream.
void Add(internal::Sha256& h, std::string_view tag, std::string_view bytes) {
  h.Update(fmt::format("{}:{}\n{}:", tag.size(), tag, bytes.size()));
  h.Update(bytes);
}

std::string ReadAll(const fs::path& p) { return ReadFileBytes(p).value_or(""); }

// Files at least this big enter TreeDigest by their size and modification time, not their bytes: they are
// the compiled modules of kf's own Python package (_core: 105 MB with debug info), which kf's build
// rewrites (new mtime) whenever they change. Reading and hashing them cost every kf process ~0.35 s.
constexpr uintmax_t kStampedFileBytes = uintmax_t{1} << 20;

// SHA-256 over the regular files below `dir` (relative path + bytes, or + size and mtime for files of
// kStampedFileBytes or more), in path order; "" when absent.
std::string TreeDigest(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->path().filename() == "__pycache__") {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  internal::Sha256 h;
  for (const auto& f : files) {
    const std::string name = f.lexically_relative(dir).generic_string();
    std::error_code size_ec;
    if (fs::file_size(f, size_ec) >= kStampedFileBytes && !size_ec) {
      Add(h, "stamp:" + name, FileStamp(f));
    } else {
      Add(h, name, ReadAll(f));
    }
  }
  return h.HexDigest();
}

// What kf hands to builds of a harness kind: the SDK headers and sources, and for kinds that run Python
// (WorkerInfoNeedsPython) the kernelfoundry Python package. Once per process and kind.
const std::string& KfContentDigest(std::string_view harness) {
  auto digest = [](bool python) {
    internal::Sha256 h;
    const TaskSdk sdk = FindTaskSdk();
    Add(h, "include", TreeDigest(sdk.include_dir / "kernelfoundry"));
    for (const fs::path& f : sdk.sources) Add(h, f.filename().string(), ReadAll(f));
    if (python) Add(h, "python", TreeDigest(TaskPythonPath() / "kernelfoundry"));
    return h.HexDigest();
  };
  if (WorkerInfoNeedsPython(harness)) {
    static const std::string with_python = digest(true);
    return with_python;
  }
  static const std::string native = digest(false);
  return native;
}

// "realpath size mtime_ns" of an executable found in PATH (or given with a '/'); "" when not found.
std::string ToolStat(const std::string& name) {
  std::string path;
  if (name.find('/') != std::string::npos) {
    path = name;
  } else {
    const char* env = std::getenv("PATH");
    std::string dirs = env ? env : "/usr/bin:/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
      size_t colon = dirs.find(':', start);
      std::string d = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      fs::path cand = fs::path(d.empty() ? "." : d) / name;
      if (::access(cand.c_str(), X_OK) == 0) {
        path = cand.string();
        break;
      }
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  if (path.empty()) return "";
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  if (ec) return path;
  const std::string stamp = FileStamp(real);
  return stamp.empty() ? real.string() : real.string() + " " + stamp;
}

// `$CXX --version` (first word of CXX as the program), memoised per CXX value.
std::string CxxVersion(const std::string& cxx) {
  static std::mutex mu;
  static std::map<std::string, std::string> memo;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo.find(cxx); it != memo.end()) return it->second;
  }
  std::string out;
  try {
    ProcessOptions o;
    o.argv = {"/bin/sh", "-c", "exec $0 --version", cxx};
    o.wall_timeout = std::chrono::seconds(10);
    ProcessRun r = RunProcess(o);
    out = r.result.stdout_text + r.result.stderr_text;
  } catch (const Error&) {
    out = "";
  }
  std::lock_guard<std::mutex> lock(mu);
  memo[cxx] = out;
  return out;
}

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int FsyncPath(const fs::path& p, int flags) {
  int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return errno;
  int rc = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return rc;
}

}  // namespace

bool Enabled() {
  std::string v = EnvOr("KF_BUILD_CACHE");
  return !(v == "off" || v == "0" || v == "false");
}

std::string ToolchainFingerprint(std::string_view harness) {
  Json j = Json::object();
  j["kf_version"] = KF_VERSION;
  j["kf_content"] = KfContentDigest(harness);
  const Json& info = GetWorkerInfo(harness);  // a native build never starts Python for it
  for (const char* k : {"nvcc_version", "icpx_version", "ocl_driver_version", "torch_version", "python_version",
                        "gxx_version", "clang_version", "cpu_info"}) {
    j["worker"][k] = info.is_object() && info.contains(k) ? info[k] : Json(nullptr);
  }
  for (const char* tool : {"c++", "g++", "gcc", "cc", "clang++", "nvcc", "icpx", "cmake", "ninja"}) {
    j["tools"][tool] = ToolStat(tool);
  }
  if (harness == "pytest") j["tools"]["python"] = ToolStat(TaskPython());
  const std::string cxx = EnvOr("CXX");
  if (!cxx.empty()) {
    j["cxx"] = {{"value", cxx}, {"stat", ToolStat(cxx.substr(0, cxx.find(' ')))}, {"version", CxxVersion(cxx)}};
  }
  for (const char* k : {"CXX", "CC", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "PATH", "CPATH", "C_INCLUDE_PATH",
                        "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "CUDA_HOME",
                        "CUDA_PATH", "KF_NVCC", "TORCH_CUDA_ARCH_LIST", "TORCH_XPU_ARCH_LIST", "PYTHONPATH",
                        "KF_PYTHON", "KF_PYTHON_DIR"}) {
    j["env"][k] = EnvOr(k);
  }
  return j.dump();  // nlohmann objects are key-ordered: canonical
}

std::string BuildKey(const Task& task, BuildTarget target, const std::string& arch_list, std::string_view harness,
                     const std::string& toolchain) {
  internal::Sha256 h;
  Add(h, "format", std::to_string(kFormat));
  Add(h, "harness", harness);
  Add(h, "target", BuildTargetName(target));
  Add(h, "gpu_arch", arch_list);
  Json buildtime = task.hyperparameters.is_object() && task.hyperparameters.contains("buildtime")
                       ? task.hyperparameters["buildtime"]
                       : Json(nullptr);
  Add(h, "buildtime", buildtime.dump());
  Add(h, "config", task.config.dump());
  Add(h, "toolchain", toolchain);
  std::vector<std::string> keys = task.task_data.ListFiles();
  std::sort(keys.begin(), keys.end());
  for (const std::string& k : keys) {
    const FileMeta* meta = task.task_data.Meta(k);
    Add(h, "file", k);
    Add(h, "mode", meta && meta->mode ? std::to_string(*meta->mode) : "-");
    Add(h, "bytes", *task.task_data.Find(k));
  }
  return h.HexDigest();
}

Cache::Lock& Cache::Lock::operator=(Lock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Cache::Lock::~Lock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::optional<BuildResult> Cache::Lookup(const std::string& key) const {
  const fs::path entry = Entry(key);
  std::error_code ec;
  if (!fs::is_regular_file(entry, ec)) return std::nullopt;
  try {
    Json j = ParseJson(ReadAll(entry), entry.string());
    if (!j.is_object() || j.value("format", 0) != kFormat || j.value("key", "") != key) {
      throw Error(ErrorKind::kParse, "not a build cache entry of this key", entry.string());
    }
    std::optional<BuildResult> r = BuildResult::Decode(j.at("build_result"));
    if (!r || !r->Ok()) throw Error(ErrorKind::kParse, "entry holds no successful build", entry.string());
    return r;
  } catch (const std::exception&) {
    fs::remove(entry, ec);  // corrupt: a fresh build replaces it
    return std::nullopt;
  }
}

std::string Cache::StoredAt(const std::string& key) const {
  try {
    Json j = ParseJson(ReadAll(Entry(key)), Entry(key).string());
    return j.value("stored_at", "");
  } catch (const std::exception&) {
    return "";
  }
}

Cache::Lock Cache::Acquire(const std::string& key, std::chrono::milliseconds wait) const {
  std::error_code ec;
  fs::create_directories(root_, ec);
  const fs::path lock_path = root_ / (key + ".lock");
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Lock();
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if ((errno != EWOULDBLOCK && errno != EINTR) || std::chrono::steady_clock::now() >= deadline) {
      ::close(fd);
      return Lock();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Lock(fd);
}

std::string Cache::Store(const std::string& key, const BuildResult& result) const {
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec) return "cannot create " + root_.string() + ": " + ec.message();
  // kf's alone (issue 25): no sandboxed child reads another task's builds.
  ::chmod(root_.parent_path().c_str(), 0700);
  ::chmod(root_.c_str(), 0700);
  Json j = Json::object();
  j["format"] = kFormat;
  j["key"] = key;
  j["stored_at"] = NowIso();
  j["kf_version"] = KF_VERSION;
  BuildResult stored = result;
  stored.worker_info.reset();  // the stage fills in the current worker's
  j["build_result"] = stored.Encode();
  const std::string text = j.dump();
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const fs::path tmp = root_ / fmt::format(".{}.{}.{:016x}.tmp", key, ::getpid(), rng());
  {
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return "cannot write " + tmp.string() + ": " + std::strerror(errno);
    size_t off = 0;
    int err = 0;
    while (off < text.size()) {
      ssize_t n = ::write(fd, text.data() + off, text.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        err = n < 0 ? errno : EIO;
        break;
      }
      off += static_cast<size_t>(n);
    }
    if (err == 0 && ::fsync(fd) != 0) err = errno;
    ::close(fd);
    if (err != 0) {
      fs::remove(tmp, ec);
      return "cannot write " + tmp.string() + ": " + std::strerror(err);
    }
  }
  fs::rename(tmp, Entry(key), ec);
  if (ec) {
    fs::remove(tmp, ec);
    return "cannot publish " + Entry(key).string() + ": " + ec.message();
  }
  FsyncPath(root_, O_RDONLY | O_DIRECTORY);
  return "";
}

}  // namespace kf::build_cache
