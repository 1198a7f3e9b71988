// MemoryFileMap <-> directories: FromPath, FromDisk, ToDisk.
//
// FromDisk walks the tree depth-first, entries of each directory in byte order of their names (the
// reference used directory-iteration order, which is not reproducible). Ignored paths are skipped
// (ignored directories are not entered). Symlinks anywhere below the root and special files are kUnsafe
// errors: a package is plain files, and following a link could read outside it.
//
// ToDisk validates everything first (clean relative keys, no file/directory clashes, limits, no existing
// symlink or non-directory on the way), then writes. A new output directory is written whole under a staging
// name beside it and renamed into place once complete; into an existing one each file goes through a temp
// name in its directory and is renamed into place. Directories are opened once each, with O_NOFOLLOW relative
// to the output root, so a symlink planted between the check and the write is not followed either.
#include <dirent.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE (glibc >= 2.28)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "archive.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/memory_file_map.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;

/// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string Errno() { return std::strerror(errno); }

double StatMtime(const struct stat& st) {
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
}

/// Reads a whole regular file (opened without following a final symlink).
std::string ReadRegularFile(int dir_fd, const std::string& name, const std::string& shown, uint64_t limit,
                            struct stat& st) {
  Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) throw Error(ErrorKind::kIO, "cannot open: " + Errno(), shown);
  if (::fstat(fd.get(), &st) != 0) throw Error(ErrorKind::kIO, "cannot stat: " + Errno(), shown);
  if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::kUnsafe, "not a regular file", shown);
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > limit) {
    throw Error(ErrorKind::kLimit, "file has " + std::to_string(size) + " bytes, over the limit of " +
                                       std::to_string(limit), shown);
  }
  std::string data(static_cast<size_t>(size), '\0');
  size_t done = 0;
  for (;;) {
    if (done == data.size()) {  // the file may have grown since fstat
      if (data.size() >= limit) {
        char probe;
        const ssize_t n = ::read(fd.get(), &probe, 1);
        if (n > 0) throw Error(ErrorKind::kLimit, "file grew past the limit while reading", shown);
        break;
      }
      data.resize(static_cast<size_t>(std::min<uint64_t>(limit, data.size() + 64 * 1024)));
    }
    const ssize_t n = ::read(fd.get(), data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kIO, "read failed: " + Errno(), shown);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return data;
}

struct Walker {
  const fs::path& root;
  const FileMapLimits& limits;
  MemoryFileMap& map;
  uint64_t total = 0;

  void Walk(int dir_fd, const std::string& rel) {
    DIR* dir = ::fdopendir(::dup(dir_fd));
    if (!dir) throw Error(ErrorKind::kIO, "cannot list directory: " + Errno(), (root / rel).string());
    std::vector<std::string> names;
    while (dirent* d = ::readdir(dir)) {
      const std::string_view n = d->d_name;
      if (n != "." && n != "..") names.emplace_back(n);
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string key = rel.empty() ? name : rel + "/" + name;
      const std::string shown = (root / key).string();
      struct stat st {};
      if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        throw Error(ErrorKind::kIO, "cannot stat: " + Errno(), shown);
      }
      if (IsIgnoredPath(key)) continue;
      if (S_ISLNK(st.st_mode)) {
        throw Error(ErrorKind::kUnsafe, "symlinks are not allowed inside a task package", shown);
      }
      if (S_ISDIR(st.st_mode)) {
        Fd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (sub.get() < 0) throw Error(ErrorKind::kIO, "cannot open directory: " + Errno(), shown);
        Walk(sub.get(), key);
        continue;
      }
      if (!S_ISREG(st.st_mode)) {
        throw Error(ErrorKind::kUnsafe, "special files (device, fifo, socket) are not allowed", shown);
      }
      if (map.size() + 1 > limits.max_files) {
        throw Error(ErrorKind::kLimit, "more than " + std::to_string(limits.max_files) + " files", shown);
      }
      const uint64_t room = std::min<uint64_t>(limits.max_file_bytes, limits.max_total_bytes - total);
      struct stat fst {};
      std::string data = ReadRegularFile(dir_fd, name, shown, room, fst);
      total += data.size();
      map.Set(key, std::move(data), FileMeta{static_cast<uint32_t>(fst.st_mode) & 0777u, StatMtime(fst)});
    }
  }
};

/// One file to write: its clean relative path, the index of its directory in the plan's directory list (-1: the
/// output root) and its bytes and meta.
struct FileJob {
  std::string clean;
  int dir = -1;
  const std::string* bytes = nullptr;
  const FileMeta* meta = nullptr;
};

/// Writes all of `bytes` to fd; false on a write error (errno set).
bool WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Sets the mode (meta mode & 0777, else 0644: exact, whatever the umask) and, when the meta has one, the mtime
/// of an open file; false on failure (errno set).
bool ApplyMeta(int fd, const FileMeta* meta) {
  const mode_t mode = (meta && meta->mode) ? static_cast<mode_t>(*meta->mode & 0777u) : 0644;
  if (::fchmod(fd, mode) != 0) return false;
  if (!meta || !meta->mtime) return true;
  const double t = *meta->mtime;
  const double sec = std::floor(t);
  struct timespec times[2];
  times[0].tv_sec = static_cast<time_t>(sec);
  times[0].tv_nsec = std::min(999'999'999L, static_cast<long>(std::llround((t - sec) * 1e9)));
  times[1] = times[0];
  return ::futimens(fd, times) == 0;
}

/// Writes one file into the open directory `dir_fd`. In a fresh tree (nobody else can see it yet) the file is
/// created under its own name; in an existing directory it is written to a temp name and renamed, so a reader
/// never sees it half-written. Throws kIO naming `shown`.
void WriteOneFile(int dir_fd, const std::string& name, const FileJob& job, bool fresh, const std::string& shown) {
  const std::string tmp = fresh ? name : ".kf-tmp-" + std::to_string(::getpid()) + "-" + name;
  Fd fd(::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) throw Error(ErrorKind::kIO, "cannot create: " + Errno(), shown);
  const bool ok = WriteAll(fd.get(), *job.bytes) && ApplyMeta(fd.get(), job.meta);
  if (ok && (fresh || ::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) == 0)) return;
  const std::string why = Errno();
  ::unlinkat(dir_fd, tmp.c_str(), 0);
  throw Error(ErrorKind::kIO, "write failed: " + why, shown);
}

/// Writes the planned tree under the open directory `root`: every directory once (parents first, opened without
/// following links), then the files on up to four threads (file creation is mostly kernel time, and a
/// 1,200-file package spends most of its decode there). The first failing file in plan order is thrown.
void WriteTree(int root, const fs::path& shown_root, const std::vector<std::string>& dirs,
               const std::vector<FileJob>& files, bool fresh) {
  std::vector<Fd> dir_fds;
  dir_fds.reserve(dirs.size());
  std::map<std::string, int, std::less<>> index;
  for (const std::string& d : dirs) {  // sorted: a parent comes before its children
    const size_t slash = d.rfind('/');
    const int parent = slash == std::string::npos ? root : dir_fds[static_cast<size_t>(index.at(d.substr(0, slash)))].get();
    const std::string name = slash == std::string::npos ? d : d.substr(slash + 1);
    const std::string shown = (shown_root / d).string();
    if (::mkdirat(parent, name.c_str(), 0755) != 0 && (fresh || errno != EEXIST)) {
      throw Error(ErrorKind::kIO, "cannot create directory: " + Errno(), shown);
    }
    Fd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) throw Error(ErrorKind::kUnsafe, "cannot enter directory (symlink?): " + Errno(), shown);
    index.emplace(d, static_cast<int>(dir_fds.size()));
    dir_fds.push_back(std::move(fd));
  }
  const size_t threads = std::min<size_t>({4, std::max(1u, std::thread::hardware_concurrency()),
                                           std::max<size_t>(1, files.size() / 64)});
  std::vector<std::optional<std::pair<size_t, Error>>> failed(threads);
  auto work = [&](size_t t) {
    for (size_t i = t; i < files.size(); i += threads) {
      const FileJob& job = files[i];
      const size_t slash = job.clean.rfind('/');
      try {
        WriteOneFile(job.dir < 0 ? root : dir_fds[static_cast<size_t>(job.dir)].get(),
                     slash == std::string::npos ? job.clean : job.clean.substr(slash + 1), job, fresh,
                     (shown_root / job.clean).string());
      } catch (const Error& e) {
        failed[t].emplace(i, e);
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();
  const std::optional<std::pair<size_t, Error>>* first = nullptr;
  for (const auto& f : failed) {
    if (f && (first == nullptr || f->first < (*first)->first)) first = &f;
  }
  if (first != nullptr) throw (*first)->second;
}

/// A new, empty directory beside `target` (same filesystem, so it can be renamed onto it), named so no other
/// writer picks it. Throws kIO.
fs::path MakeStagingDir(const fs::path& target) {
  static std::atomic<unsigned> counter{0};
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw Error(ErrorKind::kIO, "cannot create directory: " + ec.message(), parent.string());
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path stage = parent / ("." + target.filename().string() + ".kf-tmp-" + std::to_string(::getpid()) + "-" +
                               std::to_string(counter++));
    if (::mkdir(stage.c_str(), 0755) == 0) return stage;
    if (errno != EEXIST) throw Error(ErrorKind::kIO, "cannot create directory: " + Errno(), stage.string());
  }
  throw Error(ErrorKind::kIO, "cannot create a staging directory", target.string());
}

}  // namespace

MemoryFileMap MemoryFileMap::FromPath(const fs::path& path, const FileMapLimits& limits) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw Error(ErrorKind::kNotFound, "no such file or directory", path.string());
  if (fs::is_directory(st)) return FromDisk(path, limits);
  if (!fs::is_regular_file(st)) {
    throw Error(ErrorKind::kInvalidArgument, "expected a directory or an archive file", path.string());
  }
  return detail::ReadArchiveFile(path, limits);
}

MemoryFileMap MemoryFileMap::FromDisk(const fs::path& dir, const FileMapLimits& limits) {
  Fd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) {
    if (errno == ENOENT) throw Error(ErrorKind::kNotFound, "no such directory", dir.string());
    if (errno == ENOTDIR) throw Error(ErrorKind::kInvalidArgument, "not a directory", dir.string());
    throw Error(ErrorKind::kIO, "cannot open directory: " + Errno(), dir.string());
  }
  MemoryFileMap map;
  Walker walker{dir, limits, map};
  walker.Walk(root.get(), "");
  return map;
}

void MemoryFileMap::ToDisk(const fs::path& out_dir, const FileMapLimits& limits) const {
  const std::string out_name = out_dir.string();
  // 1. Keys and limits, before touching the disk.
  if (order_.size() > limits.max_files) {
    throw Error(ErrorKind::kLimit, std::to_string(order_.size()) + " files, over the limit of " +
                                       std::to_string(limits.max_files), out_name);
  }
  uint64_t total = 0;
  std::vector<std::pair<std::string, const std::string*>> plan;  // clean key -> original key
  std::set<std::string> files, dirs;
  for (const std::string& key : order_) {
    const std::string clean = NormalizeMemberPath(key, out_name);
    if (clean.empty()) throw Error(ErrorKind::kUnsafe, "empty file path", out_name, key);
    const uint64_t size = files_.at(key).size();
    if (size > limits.max_file_bytes) {
      throw Error(ErrorKind::kLimit, std::to_string(size) + " bytes, over the per-file limit of " +
                                         std::to_string(limits.max_file_bytes), out_name, key);
    }
    total += size;
    if (!files.insert(clean).second) {
      throw Error(ErrorKind::kInvalidArgument, "two keys name the same file '" + clean + "'", out_name, key);
    }
    for (size_t pos = clean.find('/'); pos != std::string::npos; pos = clean.find('/', pos + 1)) {
      dirs.insert(clean.substr(0, pos));
    }
    plan.emplace_back(clean, &key);
  }
  if (total > limits.max_total_bytes) {
    throw Error(ErrorKind::kLimit, std::to_string(total) + " bytes in all, over the limit of " +
                                       std::to_string(limits.max_total_bytes), out_name);
  }
  for (const std::string& d : dirs) {
    if (files.count(d)) throw Error(ErrorKind::kInvalidArgument, "'" + d + "' is both a file and a directory",
                                    out_name, d);
  }
  // 2. What already exists on the way must be plain directories / regular files, never symlinks.
  std::error_code ec;
  auto check = [&](const std::string& rel, bool want_dir) {
    const fs::path p = out_dir / rel;
    const fs::file_status st = fs::symlink_status(p, ec);
    if (ec || !fs::exists(st)) return false;  // absent: nothing below it exists either
    if (fs::is_symlink(st)) throw Error(ErrorKind::kUnsafe, "refusing to write through a symlink", p.string());
    if (want_dir && !fs::is_directory(st)) {
      throw Error(ErrorKind::kIO, "exists and is not a directory", p.string());
    }
    if (!want_dir && !fs::is_regular_file(st)) {
      throw Error(ErrorKind::kIO, "exists and is not a regular file", p.string());
    }
    return true;
  };
  for (const std::string& d : dirs) check(d, true);
  for (const std::string& f : files) check(f, false);
  // 3. Write. A directory that does not exist yet is written whole under a staging name and renamed into place
  //    at the end: nothing half-written is ever visible under out_dir, and a failure leaves nothing behind.
  //    Into an existing directory (overlay) each file goes through a temp name and a rename.
  std::vector<std::string> dir_list(dirs.begin(), dirs.end());
  std::vector<FileJob> jobs;
  jobs.reserve(plan.size());
  for (const auto& [clean, key] : plan) {
    FileJob job{clean, -1, &files_.at(*key), Meta(*key)};
    const size_t slash = clean.rfind('/');
    if (slash != std::string::npos) {
      job.dir = static_cast<int>(std::lower_bound(dir_list.begin(), dir_list.end(), clean.substr(0, slash)) -
                                 dir_list.begin());
    }
    jobs.push_back(std::move(job));
  }
  fs::path target = out_dir;
  if (target.filename().empty()) target = target.parent_path();  // "out/" names "out"
  const bool fresh = !fs::exists(fs::symlink_status(target, ec));
  const fs::path root_path = fresh ? MakeStagingDir(target) : target;
  try {
    Fd root(::open(root_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (root.get() < 0) throw Error(ErrorKind::kIO, "cannot open directory: " + Errno(), out_name);
    WriteTree(root.get(), out_dir, dir_list, jobs, fresh);
    // RENAME_NOREPLACE: a directory that appeared meanwhile is never replaced.
    if (fresh && ::renameat2(AT_FDCWD, root_path.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) != 0) {
      throw Error(ErrorKind::kIO, "cannot move the written tree into place: " + Errno(), out_name);
    }
  } catch (...) {
    if (fresh) fs::remove_all(root_path, ec);
    throw;
  }
}

}  // namespace kf
