// Output capture: capping (first and last halves, marked cut on UTF-8 boundaries), NUL visibility, lines.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/capture.hpp"
#include "kernelfoundry/results.hpp"

namespace kf::exec_internal {
namespace {

TEST(CappedStream, KeepsEverythingUpToTheCap) {
  CappedStream s(10);
  s.Append("abc");
  s.Append("defghij");
  EXPECT_EQ(s.total(), 10u);
  EXPECT_EQ(s.Finish(), "abcdefghij");
}

TEST(CappedStream, KeepsHeadAndTailWithMarkedCut) {
  CappedStream s(10);
  std::string all;
  for (int i = 0; i < 100; ++i) {
    std::string chunk(1, static_cast<char>('a' + i % 26));
    all += chunk;
    s.Append(chunk);
  }
  EXPECT_EQ(s.total(), 100u);
  EXPECT_EQ(s.Finish(), all.substr(0, 5) + "\n[... 90 bytes cut by kf ...]\n" + all.substr(95));
}

TEST(CappedStream, LargeChunksKeepTheLastBytes) {
  CappedStream s(8);
  s.Append(std::string(3, 'h'));
  s.Append(std::string(1000, 'x') + "TAIL");
  EXPECT_EQ(s.Finish(), "hhhx\n[... 999 bytes cut by kf ...]\nTAIL");
}

TEST(CappedStream, CutsOnUtf8Boundaries) {
  // "é" = C3 A9, "€" = E2 82 AC. Cap 6: head 3 bytes "ab" + C3 (cut character), tail 3 bytes.
  CappedStream s(6);
  s.Append("ab\xC3\xA9zzzzzz\xE2\x82\xAC");
  std::string out = s.Finish();
  // The split é is dropped whole from the head; the tail "€" is kept whole.
  EXPECT_EQ(out, "ab\n[... 8 bytes cut by kf ...]\n\xE2\x82\xAC");
  EXPECT_EQ(DecodeUtf8Replace(out), out);  // valid UTF-8, no replacement characters
}

TEST(CappedStream, NulBytesBecomeVisible) {
  CappedStream s(100);
  s.Append(std::string("a\0b", 3));
  EXPECT_EQ(s.Finish(), "a\xE2\x90\x80" "b");
}

TEST(LineSplitter, SplitsAcrossChunksAndStripsCr) {
  std::vector<std::string> lines;
  LineSplitter split([&](std::string_view l) { lines.emplace_back(l); });
  split.Append("one\r\ntw");
  split.Append("o\nthree");
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two"}));
  split.Flush();
  EXPECT_EQ(lines.back(), "three");
}

TEST(LineSplitter, OverlongLineIsCutNotBuffered) {
  std::vector<std::string> lines;
  LineSplitter split([&](std::string_view l) { lines.emplace_back(l); });
  std::string big(200'000, 'L');
  for (size_t i = 0; i < big.size(); i += 4096) split.Append(std::string_view(big).substr(i, 4096));
  split.Append("\nnext\n");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].size(), LineSplitter::kMaxLine);
  EXPECT_EQ(lines[1], "next");
}

}  // namespace
}  // namespace kf::exec_internal
