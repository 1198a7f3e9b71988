// Whole-file reads (files.hpp).
#include "core/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace kf {

namespace {

std::optional<std::string> ReadOpened(int fd, bool regular_only) {
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode) || (regular_only && !S_ISREG(st.st_mode))) {
    ::close(fd);
    return std::nullopt;
  }
  // One read into a buffer of the file's size plus one byte, so the read that sees the end needs no larger
  // buffer; files whose size says nothing (/proc, pipes) or that grow while read continue in steps that
  // double the buffer.
  std::string out(S_ISREG(st.st_mode) && st.st_size > 0 ? static_cast<size_t>(st.st_size) + 1 : size_t{4096}, '\0');
  size_t used = 0;
  while (true) {
    if (used == out.size()) out.resize(out.size() * 2);
    const ssize_t n = ::read(fd, out.data() + used, out.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(used);
  return out;
}

}  // namespace

std::optional<std::string> ReadFileBytes(const std::filesystem::path& path) {
  return ReadOpened(::open(path.c_str(), O_RDONLY | O_CLOEXEC), false);
}

std::optional<std::string> ReadChildFile(const std::filesystem::path& path) {
  return ReadOpened(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY), true);
}

std::string FileStamp(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  return std::to_string(static_cast<int64_t>(st.st_size)) + " " +
         std::to_string(static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec);
}

}  // namespace kf
