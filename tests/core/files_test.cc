// ReadFileBytes (core/files.hpp): exact bytes of regular files of any size, files whose stat size says
// nothing (/proc), and nullopt for what cannot be read as a file.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/files.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

TEST(ReadFileBytes, ReadsExactBytesOfAnySize) {
  testing::TempDir dir;
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, (size_t{1} << 20) + 3}) {
    std::string bytes(size, '\0');
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 31 + 7);  // NULs included
    const auto path = dir.path() / ("f" + std::to_string(size));
    std::ofstream(path, std::ios::binary) << bytes;
    const std::optional<std::string> read = ReadFileBytes(path);
    ASSERT_TRUE(read.has_value()) << size;
    EXPECT_EQ(read->size(), size);
    EXPECT_TRUE(*read == bytes) << size;
  }
}

TEST(ReadFileBytes, ReadsProcFilesWhoseSizeIsZero) {
  const std::optional<std::string> status = ReadFileBytes("/proc/self/status");
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(status->find("Pid:"), std::string::npos);
}

TEST(ReadFileBytes, DirectoriesAndMissingFilesAreNullopt) {
  testing::TempDir dir;
  EXPECT_FALSE(ReadFileBytes(dir.path()).has_value());
  EXPECT_FALSE(ReadFileBytes(dir.path() / "missing").has_value());
}

}  // namespace
}  // namespace kf
