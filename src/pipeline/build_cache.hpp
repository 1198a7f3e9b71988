// kf's build cache (issue 10 fault 2, issue 15 item 2): whole builds cached on the trusted side, keyed by
// everything the compile can read. Internal to the pipeline module (used by the build stage).
//
// Key = SHA-256 over: the materialised task tree (every file's path, mode and bytes after the candidate's
// blocks are applied — headers anywhere in the tree included), the build target, the gpu_arch list, the
// buildtime hyperparameters, the harness and the task config (its build settings), and a toolchain
// fingerprint: kf's version and the content of what kf hands to builds (SDK headers and sources, the
// kernelfoundry Python package), the worker's tool versions (g++, clang, nvcc, icpx, OpenCL driver, torch,
// Python, CPU model for -march=native builds), the resolved compilers (path, size, mtime; `$CXX --version`)
// and the build-relevant environment (CXX, CC, *FLAGS, PATH, include/library paths, CUDA/torch arch lists).
// What the key cannot see: system headers and libraries changed without a version change of their tools.
//
// Value = the BuildResult (artifacts, output, message) as JSON, at <cache>/builds/v1/<key>.json. Published
// atomically (temp file in the same directory, fsync, rename, fsync of the directory); a per-key lock file
// (flock) makes concurrent builds of one key compile once — the waiter then finds the entry. A build killed
// at its timeout holds no lock afterwards (flock dies with the descriptor) and leaves at most a temp file
// that nobody reads. Only successful builds are stored. KF_BUILD_CACHE=off disables the cache.
// Thread-safe (no shared mutable state besides a mutex-guarded fingerprint memo).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/task.hpp"

namespace kf::build_cache {

/// False when KF_BUILD_CACHE is "off" or "0".
bool Enabled();

/// The toolchain part of the key, as canonical JSON text (see the file comment). `harness` is "pytest" or
/// "native". Runs `$CXX --version` once per process and CXX value.
std::string ToolchainFingerprint(std::string_view harness);

/// The key (64 hex characters) of building `task` for `target` on `arch_list` with `harness`.
std::string BuildKey(const Task& task, BuildTarget target, const std::string& arch_list, std::string_view harness,
                     const std::string& toolchain);

/// A cache directory (<cache dir>/builds/v1).
class Cache {
 public:
  explicit Cache(std::filesystem::path root) : root_(std::move(root)) {}

  /// The stored result of `key`, or nullopt (absent, unreadable or corrupt — a corrupt entry is removed).
  std::optional<BuildResult> Lookup(const std::string& key) const;
  /// When the entry of `key` was stored (ISO 8601 UTC), "" when unknown.
  std::string StoredAt(const std::string& key) const;

  /// Holds the per-key lock while alive.
  class Lock {
   public:
    Lock() = default;
    explicit Lock(int fd) : fd_(fd) {}
    Lock(Lock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Lock& operator=(Lock&& o) noexcept;
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
    ~Lock();
    bool held() const { return fd_ >= 0; }

   private:
    int fd_ = -1;
  };
  /// Waits (polling, every 100 ms) for the per-key lock until `wait` has passed; an unheld Lock when it
  /// could not be taken in time or the lock file cannot be made (the caller then builds without it).
  Lock Acquire(const std::string& key, std::chrono::milliseconds wait) const;

  /// Stores a successful result atomically. Returns "" or why it could not be stored (the build stays
  /// valid; the caller notes it).
  std::string Store(const std::string& key, const BuildResult& result) const;

  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path Entry(const std::string& key) const { return root_ / (key + ".json"); }
  std::filesystem::path root_;
};

}  // namespace kf::build_cache
