// TempDir — a fresh private directory `<root>/<prefix>XXXXXX` (mkdtemp, mode 0700), removed with everything
// in it when the object dies unless kept. The one temporary-directory type of the project (work dirs of
// builds and tests, test discovery, KernelBench import, tests). Internal to the library (src/ include path).
#pragma once

#include <filesystem>
#include <string>

namespace kf {

class TempDir {
 public:
  /// Creates the directory (and `root` if needed). `root` empty = the system temp dir ($TMPDIR or /tmp).
  /// Throws kf::Error(kIO) naming the path when it cannot be created.
  explicit TempDir(const std::filesystem::path& root = {}, const std::string& prefix = "kf_", bool keep = false);
  /// Removes the tree (read-only directories left by builds are made writable first) unless kept.
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// Keep (true) or remove (false) the directory at destruction. A directory that is not kept is also
  /// removed by kf's termination handler when kf is stopped by a signal (core/live_dirs.hpp).
  void set_keep(bool keep);
  bool keep() const { return keep_; }

 private:
  std::filesystem::path path_;
  bool keep_;
};

}  // namespace kf
