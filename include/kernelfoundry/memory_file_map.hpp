// MemoryFileMap — a task package held in memory: relative POSIX path -> bytes, plus per-file metadata.
//
// Contract (reference spec §2, with bugs B1–B4 fixed):
//  * Loaders produce normalised relative POSIX keys ("a/b.cpp"; never "./a", "/a", "a/../b", or empty).
//    Set/Decode store keys as given; ToDisk/ToArchive refuse unsafe ones (kUnsafe) before writing.
//  * Insertion order is kept (list_files, encode) — the reference's dict order.
//  * meta: mode (permission bits & 0777) and mtime (float epoch seconds); either may be absent.
//  * Loaders (directory, archive bytes/path) drop ignored paths: a path component equal to __pycache__,
//    .git, __MACOSX, or a file name equal to .DS_Store / Thumbs.db or ending in .pyc/.pyo/.swp (B4 fixed:
//    .gitignore and .github/ are kept).
//  * Archives are read with libarchive; the format is sniffed from the content (zip, tar, tar.gz/bz2/xz).
//    Unsafe members (absolute, "..", symlink/hardlink, device, fifo) are a kf::Error(kUnsafe), never skipped.
//    Member names are normalised ("./a" -> "a", B3); member order is kept. Limits are checked while the
//    data are decompressed; a zip member that inflates past its declared size is refused at once (kLimit).
//  * Zip meta follows the reference's from_zip: mode = (external_attr >> 16) & 0777 read from the central
//    directory, recorded only when non-zero (DOS-made zips carry no mode); mtime from the archive.
//  * Source: reference spec §2 (MemoryFileMap) and §1.3 (remove_root_dir); bugs B1-B4, B12 fixed.
//  * Not thread-safe for concurrent mutation; const methods may be called concurrently. Copies are deep
//    (value semantics: a copy never shares bytes with its source — B12 fixed).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"

namespace kf {

namespace internal {
struct FileMapAccess;  // the shared decoder (src/core/codec_impl.hpp)
}

/// Per-file metadata. mode: permission bits (& 0777); mtime: seconds since the epoch.
struct FileMeta {
  std::optional<uint32_t> mode;
  std::optional<double> mtime;
  bool operator==(const FileMeta&) const = default;
};

/// Limits enforced by MemoryFileMap::FromArchive / FromDisk / ToDisk before anything is written.
struct FileMapLimits {
  size_t max_files = 10'000;                  ///< number of regular files
  uint64_t max_total_bytes = 1ull << 30;      ///< sum of file sizes, bytes (1 GiB)
  uint64_t max_file_bytes = 512ull << 20;     ///< one file, bytes (512 MiB)
};

/// Archive formats that ToArchive can write.
enum class ArchiveFormat { kTar, kTarGz, kTarBz2, kTarXz, kZip };

class MemoryFileMap {
 public:
  MemoryFileMap() = default;

  // ---- loading ----
  /// A directory goes to FromDisk; a regular file is read as an archive (streamed from disk, format sniffed
  /// from the content, never from the extension). Throws kf::Error: kNotFound (no such path),
  /// kInvalidArgument (neither directory nor regular file), kParse (not a zip/tar, truncated, corrupt),
  /// kUnsafe (see the class comment), kLimit, kIO.
  static MemoryFileMap FromPath(const std::filesystem::path& path, const FileMapLimits& limits = {});
  /// Loads a directory tree: regular files only, depth-first with each directory's entries in byte order of
  /// their names; ignored paths skipped (ignored directories are not entered). meta = {stat mode & 0777,
  /// stat mtime (ns precision)}. A symlink or special file (fifo, socket, device) below `dir` is kUnsafe (a
  /// package is plain files; following a link could read outside it). kNotFound / kInvalidArgument (not a
  /// directory) / kLimit / kIO.
  static MemoryFileMap FromDisk(const std::filesystem::path& dir, const FileMapLimits& limits = {});
  /// Loads archive bytes, format sniffed from content. `source` names the input in errors (every error is
  /// one line "<source>: <member>: <what>"). Non-archive or empty bytes: kParse "not a zip or tar archive".
  static MemoryFileMap FromArchive(std::string_view bytes, const std::string& source = "<bytes>",
                                   const FileMapLimits& limits = {});

  // ---- access ----
  bool Contains(const std::string& path) const;
  /// The bytes of a file, or nullopt when absent (reference __getitem__ returns None).
  std::optional<std::string> Get(const std::string& path) const;
  /// Pointer to the stored bytes (no copy), or nullptr.
  const std::string* Find(const std::string& path) const;
  /// Stores bytes; meta becomes {existing mode or 0644, mtime = now} (reference __setitem__). Keys are stored
  /// as given (not validated here: ToDisk / ToArchive refuse unsafe ones). A new key goes to the end of the
  /// order; an existing key keeps its position.
  void Set(const std::string& path, std::string bytes);
  /// Stores bytes with explicit meta (used by loaders and decode). An all-empty meta removes the meta entry.
  void Set(const std::string& path, std::string bytes, FileMeta meta);
  /// Removes a file and its meta. Returns true if it existed.
  bool Remove(const std::string& path);
  /// The meta of a file, or nullptr when none is recorded (e.g. decoded without mode/mtime).
  const FileMeta* Meta(const std::string& path) const;
  /// Replaces the meta of an existing file (no-op for an absent path).
  void SetMeta(const std::string& path, FileMeta meta);
  /// Keys in insertion order.
  std::vector<std::string> ListFiles() const;
  size_t size() const { return order_.size(); }
  bool empty() const { return order_.empty(); }
  void Clear();
  /// Total content bytes.
  uint64_t TotalBytes() const;

  /// Strips the longest common leading *directory* prefix of all keys (file names excluded; B1/B2 fixed).
  /// Returns true iff something was stripped. "" and "." components are ignored in the comparison; keys are
  /// otherwise assumed normalised (loaders strip "./"). Meta is re-keyed with the files; order is kept.
  bool RemoveRootDir();

  // ---- writing out ----
  /// Writes every file under out_dir (created with parents), restoring mode and mtime; existing files are
  /// overwritten (overlay). Checks every path (no absolute, no "..", no existing symlink on the way) and
  /// the limits BEFORE writing anything. A new out_dir appears whole or not at all (written under a staging
  /// name beside it, then renamed; removed on failure); in an existing one each file is written to a temp name
  /// and renamed. Throws kUnsafe / kLimit / kIO (the first failing file in map order).
  void ToDisk(const std::filesystem::path& out_dir, const FileMapLimits& limits = {}) const;
  /// Serialises as an archive (default tar.gz, like the reference's to_tarball("w:gz")). Per member: name =
  /// normalised key, mode = meta mode or 0644, mtime = whole seconds of meta mtime or now, uid/gid 0. Tar is
  /// pax-restricted (ustar unless a name needs pax). Throws kUnsafe for a key with "..", "/" or empty.
  std::string ToArchive(ArchiveFormat format = ArchiveFormat::kTarGz) const;

  // ---- JSON (reference wire format) ----
  /// {path: {"content": base64, "mode": int?, "mtime": float?}} in insertion order.
  Json Encode() const;
  /// Merges an encoding into this map (no clear). Accepts the new form and the legacy {path: base64}
  /// (legacy meta: mode 0644, mtime now). Throws kParse naming the path/field on bad shapes or base64.
  void Decode(const Json& data);
  static MemoryFileMap FromJson(const Json& data);
  /// The JSON text of Encode(), written directly (base64 straight into the output, no kf::Json built):
  /// byte-identical to DumpJson(Encode(), indent).
  std::string EncodeToString(int indent = -1) const;
  /// FromJson(ParseJson(json, source)) through simdjson: same result and same errors, several times faster
  /// on big maps. Throws kf::Error(kParse) naming `source` for malformed JSON, else as Decode.
  static MemoryFileMap DecodeFromString(std::string_view json, const std::string& source = "<file map>");

  bool operator==(const MemoryFileMap& other) const;  ///< same keys, bytes and meta (order ignored)

 private:
  friend struct internal::FileMapAccess;
  std::map<std::string, std::string> files_;
  std::map<std::string, FileMeta> meta_;
  std::vector<std::string> order_;
};

/// True if a relative path is dropped by loaders (see class comment).
bool IsIgnoredPath(std::string_view path);

/// Normalises an archive/disk member name to a clean relative POSIX key ("./a//b" -> "a/b").
/// Throws kf::Error(kUnsafe) for absolute paths or ".." components; returns "" for "." / "./".
std::string NormalizeMemberPath(std::string_view name, const std::string& source);

}  // namespace kf
