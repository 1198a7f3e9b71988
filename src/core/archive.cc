// Archives for MemoryFileMap, via libarchive.
//
// Reading: formats tar (ustar/pax/gnu) and zip, filters gzip/bzip2/xz, sniffed from the content (never from
// the file name). The "raw" and "empty" formats are deliberately not enabled, so bytes that are not an
// archive fail with kParse "not a zip or tar archive". Every member is checked before its data is read:
// absolute names, ".." components, symlinks, hardlinks and device/fifo/socket members are kUnsafe errors
// (never silently skipped). Limits (file count, bytes per file, total bytes) are enforced while the data
// are decompressed, so a zip bomb stops at the limit instead of being inflated into memory.
//
// Writing: tar (pax-restricted: ustar, pax headers only where needed), optionally gzip/bzip2/xz, or zip.
// Per member: name = key, mode = meta mode or 0644, mtime = whole seconds of meta mtime or now (reference
// to_tarball), uid/gid 0.
#include "archive.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
#include <unordered_map>

#include "core/clock.hpp"
#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

struct ReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct WriteDeleter {
  void operator()(archive* a) const { archive_write_free(a); }
};
using ReadHandle = std::unique_ptr<archive, ReadDeleter>;
using WriteHandle = std::unique_ptr<archive, WriteDeleter>;

std::string LibError(archive* a) {
  const char* msg = archive_error_string(a);
  return msg ? msg : "unknown libarchive error";
}

ReadHandle NewReader() {
  ReadHandle a(archive_read_new());
  if (!a) throw Error(ErrorKind::kInternal, "archive_read_new failed");
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_bzip2(a.get());
  archive_read_support_filter_xz(a.get());
  archive_read_support_format_tar(a.get());
  // Seekable zip only: it reads the central directory (authoritative, unlike local headers) and a zip
  // without a valid end-of-central-directory record (e.g. truncated) is rejected. Inputs are always
  // seekable here (memory or a regular file).
  archive_read_support_format_zip_seekable(a.get());
  return a;
}

std::string_view TypeName(mode_t type) {
  switch (type) {
    case AE_IFLNK: return "symlink";
    case AE_IFCHR: return "character device";
    case AE_IFBLK: return "block device";
    case AE_IFIFO: return "fifo";
    case AE_IFSOCK: return "socket";
    default: return "special file";
  }
}

/// Appends one member's data to `out`, enforcing the limits before growing the buffer. `declared` is the
/// size from the member header (-1 if unknown): the buffer is reserved once for it, and data beyond it is
/// refused at once (libarchive does not check it for deflated zip members; a zip bomb lies here).
void ReadMemberData(archive* a, const std::string& source, const std::string& member, const FileMapLimits& limits,
                    int64_t declared, uint64_t& total, std::string& out) {
  if (declared > 0) out.reserve(static_cast<size_t>(declared));
  for (;;) {
    const void* block = nullptr;
    size_t len = 0;
    la_int64_t offset = 0;
    const int r = archive_read_data_block(a, &block, &len, &offset);
    if (r == ARCHIVE_EOF) return;
    if (r < ARCHIVE_WARN) {
      throw Error(ErrorKind::kParse, "truncated or corrupt archive data: " + LibError(a), source, member);
    }
    // Sparse members: a gap before `offset` is zeros.
    const uint64_t gap = static_cast<uint64_t>(offset) > out.size() ? static_cast<uint64_t>(offset) - out.size() : 0;
    const uint64_t grow = gap + len;
    if (out.size() + grow > limits.max_file_bytes) {
      throw Error(ErrorKind::kLimit,
                  "member is larger than the per-file limit of " + std::to_string(limits.max_file_bytes) + " bytes",
                  source, member);
    }
    if (total + grow > limits.max_total_bytes) {
      throw Error(ErrorKind::kLimit,
                  "archive content exceeds the total limit of " + std::to_string(limits.max_total_bytes) + " bytes",
                  source, member);
    }
    if (declared >= 0 && out.size() + grow > static_cast<uint64_t>(declared)) {
      throw Error(ErrorKind::kLimit,
                  "member inflates past its declared size of " + std::to_string(declared) +
                      " bytes (zip bomb or corrupt archive)",
                  source, member);
    }
    const size_t need = out.size() + grow;
    if (need > out.capacity()) {  // size unknown: grow geometrically, never past the per-file limit
      const uint64_t doubled = std::max<uint64_t>(need, uint64_t{out.capacity()} * 2);
      out.reserve(static_cast<size_t>(std::min<uint64_t>(doubled, limits.max_file_bytes)));
    }
    out.append(gap, '\0');
    out.append(static_cast<const char*>(block), len);
    total += grow;
  }
}

/// Reads `len` bytes at `offset` of the raw input (shorter at the end).
using ReadAt = std::function<std::string(uint64_t offset, size_t len)>;

uint64_t Le(std::string_view b, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(b[at + i])} << (8 * i);
  return v;
}

/// The reference's zip mode per member name: (external_attr >> 16) & 0777 from the central directory
/// (libarchive synthesises 0664 for DOS-made entries, which the reference stores as "no mode"). Returns an
/// empty map when the directory cannot be parsed; libarchive's own mode is used then.
std::unordered_map<std::string, uint32_t> ZipCentralModes(const ReadAt& read_at, uint64_t size) {
  std::unordered_map<std::string, uint32_t> modes;
  const size_t tail_len = static_cast<size_t>(std::min<uint64_t>(size, 22 + 65535));
  const std::string tail = read_at(size - tail_len, tail_len);
  const size_t eocd = tail.size() >= 22 ? tail.rfind(std::string_view("PK\x05\x06", 4), tail.size() - 22)
                                        : std::string::npos;
  if (eocd == std::string::npos) return modes;
  uint64_t cd_size = Le(tail, eocd + 12, 4), cd_offset = Le(tail, eocd + 16, 4);
  const uint64_t eocd_abs = size - tail_len + eocd;
  if ((cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) && eocd_abs >= 20) {  // zip64
    const std::string loc = read_at(eocd_abs - 20, 20);
    if (loc.size() != 20 || loc.compare(0, 4, "PK\x06\x07", 4) != 0) return modes;
    const std::string rec = read_at(Le(loc, 8, 8), 56);
    if (rec.size() != 56 || rec.compare(0, 4, "PK\x06\x06", 4) != 0) return modes;
    cd_size = Le(rec, 40, 8);
    cd_offset = Le(rec, 48, 8);
  }
  if (cd_size > size || cd_size > (64ull << 20)) return modes;
  std::string cd = read_at(cd_offset, static_cast<size_t>(cd_size));
  if (cd.compare(0, 4, "PK\x01\x02", 4) != 0 && eocd_abs >= cd_size) {  // data prepended (self-extractor)
    cd = read_at(eocd_abs - cd_size, static_cast<size_t>(cd_size));
  }
  for (size_t at = 0; at + 46 <= cd.size() && cd.compare(at, 4, "PK\x01\x02", 4) == 0;) {
    const size_t name_len = Le(cd, at + 28, 2), extra_len = Le(cd, at + 30, 2), comment_len = Le(cd, at + 32, 2);
    if (at + 46 + name_len > cd.size()) break;
    modes[cd.substr(at + 46, name_len)] = static_cast<uint32_t>(Le(cd, at + 38, 4) >> 16) & 0777u;
    at += 46 + name_len + extra_len + comment_len;
  }
  return modes;
}

/// The input matched no enabled format. Bytes that start like a zip but lack a readable end-of-central-
/// directory record are reported as a broken zip rather than as "not an archive".
[[noreturn]] void ThrowUnrecognized(archive* a, const std::string& source, bool zip_magic) {
  if (zip_magic) {
    throw Error(ErrorKind::kParse, "truncated or corrupt zip archive (no valid end-of-central-directory record)",
                source);
  }
  throw Error(ErrorKind::kParse, "not a zip or tar archive (" + LibError(a) + ")", source);
}

/// Reads every member of an opened archive into a map (see the file comment for the rules).
MemoryFileMap ReadAll(archive* a, const std::string& source, const FileMapLimits& limits, bool zip_magic,
                      const ReadAt& read_at, uint64_t size) {
  MemoryFileMap map;
  std::optional<std::unordered_map<std::string, uint32_t>> zip_modes;  // parsed on the first zip member
  uint64_t total = 0;
  archive_entry* entry = nullptr;
  for (size_t index = 0;; ++index) {
    const int r = archive_read_next_header(a, &entry);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      if (index == 0 && archive_format(a) == 0) ThrowUnrecognized(a, source, zip_magic);
      throw Error(ErrorKind::kParse, "truncated or corrupt archive: " + LibError(a), source);
    }
    const char* raw_name = archive_entry_pathname_utf8(entry);
    if (!raw_name) raw_name = archive_entry_pathname(entry);
    if (!raw_name || !*raw_name) throw Error(ErrorKind::kParse, "member without a name", source);
    const std::string name = raw_name;
    const std::string key = NormalizeMemberPath(name, source);  // kUnsafe: absolute, ".."
    if (const char* target = archive_entry_hardlink(entry)) {
      throw Error(ErrorKind::kUnsafe, std::string("hardlink member (to '") + target + "') is not allowed", source,
                  name);
    }
    const mode_t type = archive_entry_filetype(entry);
    if (type == AE_IFDIR) continue;
    if (type != AE_IFREG) {
      std::string what = std::string(TypeName(type)) + " member is not allowed";
      if (type == AE_IFLNK && archive_entry_symlink(entry)) {
        what = std::string("symlink member (to '") + archive_entry_symlink(entry) + "') is not allowed";
      }
      throw Error(ErrorKind::kUnsafe, what, source, name);
    }
    if (key.empty()) throw Error(ErrorKind::kParse, "regular-file member with an empty name", source, name);
    if (IsIgnoredPath(key)) continue;  // libarchive skips the data on the next header call
    if (!map.Contains(key) && map.size() + 1 > limits.max_files) {
      throw Error(ErrorKind::kLimit, "archive has more than " + std::to_string(limits.max_files) + " files",
                  source, name);
    }
    if (archive_entry_is_encrypted(entry)) {
      throw Error(ErrorKind::kUnsupported, "encrypted member", source, name);
    }
    int64_t declared = -1;
    if (archive_entry_size_is_set(entry)) {  // early refusal on declared sizes; the real check is below
      declared = std::max<la_int64_t>(0, archive_entry_size(entry));
      if (static_cast<uint64_t>(declared) > limits.max_file_bytes) {
        throw Error(ErrorKind::kLimit,
                    "member declares " + std::to_string(declared) + " bytes, over the per-file limit of " +
                        std::to_string(limits.max_file_bytes),
                    source, name);
      }
      if (total + static_cast<uint64_t>(declared) > limits.max_total_bytes) {
        throw Error(ErrorKind::kLimit,
                    "archive content exceeds the total limit of " + std::to_string(limits.max_total_bytes) +
                        " bytes",
                    source, name);
      }
    }
    std::string data;
    ReadMemberData(a, source, name, limits, declared, total, data);
    const bool is_zip = (archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_ZIP;
    if (declared >= 0 && data.size() < static_cast<uint64_t>(declared)) {
      if (is_zip) {
        throw Error(ErrorKind::kParse,
                    "member has " + std::to_string(data.size()) + " bytes but its header declares " +
                        std::to_string(declared),
                    source, name);
      }
      total += static_cast<uint64_t>(declared) - data.size();
      data.resize(static_cast<size_t>(declared));  // tar: a sparse file's trailing hole
    }
    FileMeta meta;
    const uint32_t perm = static_cast<uint32_t>(archive_entry_perm(entry)) & 0777u;
    if (is_zip) {
      // Reference from_zip: mode = (external_attr >> 16) & 0777, recorded only when non-zero.
      if (!zip_modes) zip_modes = ZipCentralModes(read_at, size);
      auto it = zip_modes->find(name);
      const uint32_t zip_mode = it != zip_modes->end() ? it->second : perm;
      if (zip_mode != 0) meta.mode = zip_mode;
    } else {
      meta.mode = perm;
    }
    if (archive_entry_mtime_is_set(entry)) {
      meta.mtime = static_cast<double>(archive_entry_mtime(entry)) +
                   static_cast<double>(archive_entry_mtime_nsec(entry)) * 1e-9;
    }
    map.Set(key, std::move(data), meta);
  }
  return map;
}

la_ssize_t AppendToString(archive*, void* client, const void* buffer, size_t length) {
  static_cast<std::string*>(client)->append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
}

void CheckWrite(archive* a, int r, const std::string& what) {
  if (r < ARCHIVE_WARN) throw Error(ErrorKind::kInternal, "archive writer: " + what + ": " + LibError(a));
}

}  // namespace

MemoryFileMap MemoryFileMap::FromArchive(std::string_view bytes, const std::string& source,
                                         const FileMapLimits& limits) {
  if (bytes.empty()) throw Error(ErrorKind::kParse, "not a zip or tar archive (empty input)", source);
  ReadHandle a = NewReader();
  const bool zip_magic = bytes.substr(0, 4) == std::string_view("PK\x03\x04", 4);
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK) {
    ThrowUnrecognized(a.get(), source, zip_magic);
  }
  auto read_at = [bytes](uint64_t offset, size_t len) {
    return offset >= bytes.size() ? std::string() : std::string(bytes.substr(static_cast<size_t>(offset), len));
  };
  return ReadAll(a.get(), source, limits, zip_magic, read_at, bytes.size());
}

namespace detail {

MemoryFileMap ReadArchiveFile(const std::filesystem::path& path, const FileMapLimits& limits) {
  const std::string source = path.string();
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) == 0 && !ec) {
    throw Error(ErrorKind::kParse, "not a zip or tar archive (empty file)", source);
  }
  char magic[4] = {};
  std::ifstream(path, std::ios::binary).read(magic, sizeof magic);
  const bool zip_magic = std::string_view(magic, 4) == std::string_view("PK\x03\x04", 4);
  ReadHandle a = NewReader();
  if (archive_read_open_filename(a.get(), source.c_str(), 64 * 1024) != ARCHIVE_OK) {
    const int err = archive_errno(a.get());
    if (err == ENOENT) throw Error(ErrorKind::kNotFound, "no such file", source);
    if (err == EACCES || err == EPERM || err == EIO || err == EISDIR) {
      throw Error(ErrorKind::kIO, "cannot open: " + LibError(a.get()), source);
    }
    ThrowUnrecognized(a.get(), source, zip_magic);
  }
  std::ifstream in(path, std::ios::binary);
  auto read_at = [&in](uint64_t offset, size_t len) {
    std::string out(len, '\0');
    in.clear();
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(out.data(), static_cast<std::streamsize>(len));
    out.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
    return out;
  };
  return ReadAll(a.get(), source, limits, zip_magic, read_at, std::filesystem::file_size(path));
}

}  // namespace detail

std::string MemoryFileMap::ToArchive(ArchiveFormat format) const {
  // `out` is declared before the writer: when an entry throws (unsafe path), the writer's deleter flushes into
  // `out`, which must still be alive (it was destroyed first: heap corruption on a refused path).
  std::string out;  // reserved once: tar = 512-byte header + data padded to 512 per file, plus the trailer
  const uint64_t tar_bytes = TotalBytes() + 1024 * (order_.size() + 1) + 10240;
  out.reserve(static_cast<size_t>(format == ArchiveFormat::kTar ? tar_bytes : tar_bytes / 3 + 65536));
  WriteHandle a(archive_write_new());
  if (!a) throw Error(ErrorKind::kInternal, "archive_write_new failed");
  if (format == ArchiveFormat::kZip) {
    CheckWrite(a.get(), archive_write_set_format_zip(a.get()), "zip format");
  } else {
    CheckWrite(a.get(), archive_write_set_format_pax_restricted(a.get()), "tar format");
    switch (format) {
      case ArchiveFormat::kTarGz: CheckWrite(a.get(), archive_write_add_filter_gzip(a.get()), "gzip"); break;
      case ArchiveFormat::kTarBz2: CheckWrite(a.get(), archive_write_add_filter_bzip2(a.get()), "bzip2"); break;
      case ArchiveFormat::kTarXz: CheckWrite(a.get(), archive_write_add_filter_xz(a.get()), "xz"); break;
      default: break;
    }
  }
  if (format != ArchiveFormat::kTar) {  // no zero padding after a compressed stream or a zip directory
    CheckWrite(a.get(), archive_write_set_bytes_in_last_block(a.get(), 1), "block size");
  }
  CheckWrite(a.get(), archive_write_open(a.get(), &out, nullptr, AppendToString, nullptr), "open");
  const double now = UnixTimeNow();
  std::unique_ptr<archive_entry, void (*)(archive_entry*)> entry(archive_entry_new(), archive_entry_free);
  for (const std::string& key : order_) {
    const std::string clean = NormalizeMemberPath(key, "<file map>");
    if (clean.empty()) throw Error(ErrorKind::kUnsafe, "empty path", "<file map>", key);
    const std::string& bytes = files_.at(key);
    const FileMeta* meta = Meta(key);
    archive_entry_clear(entry.get());
    archive_entry_set_pathname(entry.get(), clean.c_str());
    archive_entry_set_filetype(entry.get(), AE_IFREG);
    archive_entry_set_perm(entry.get(), (meta && meta->mode) ? (*meta->mode & 0777u) : 0644u);
    archive_entry_set_size(entry.get(), static_cast<la_int64_t>(bytes.size()));
    const double mtime = (meta && meta->mtime) ? *meta->mtime : now;
    archive_entry_set_mtime(entry.get(), static_cast<time_t>(std::floor(mtime)), 0);
    archive_entry_set_uid(entry.get(), 0);
    archive_entry_set_gid(entry.get(), 0);
    CheckWrite(a.get(), archive_write_header(a.get(), entry.get()), "header of " + key);
    size_t done = 0;
    while (done < bytes.size()) {
      const la_ssize_t n = archive_write_data(a.get(), bytes.data() + done, bytes.size() - done);
      if (n <= 0) throw Error(ErrorKind::kInternal, "archive writer: data of " + key + ": " + LibError(a.get()));
      done += static_cast<size_t>(n);
    }
  }
  CheckWrite(a.get(), archive_write_close(a.get()), "close");
  return out;
}

}  // namespace kf
