// Terminal-escape stripping and UTF-8 helpers against the reference's probe answers (spec §3.1).
#include "kernelfoundry/terminal.hpp"

#include <gtest/gtest.h>

#include <string>

#include "test_util.hpp"

namespace kf {
namespace {

TEST(TerminalStrip, MatchesEveryReferenceProbe) {
  Json probes = testing::Golden("probes")["strip_terminal_escapes"];
  ASSERT_GE(probes.size(), 20u);
  for (const Json& c : probes) {
    const std::string in = c["input"].get<std::string>();
    const std::string want = c["output"].get<std::string>();
    std::string got = StripTerminalEscapes(in);
    EXPECT_EQ(got, want) << "input: " << c["input"].dump();
    EXPECT_EQ(StripTerminalEscapes(got), got) << "not idempotent for " << c["input"].dump();
  }
}

TEST(TerminalStrip, StepsRunInReferenceOrder) {
  // Step 4 removes "ESC[0m", which joins the first ESC with "P": step 5 then removes "ESC P" as a short escape.
  EXPECT_EQ(StripTerminalEscapes("a\x1b\x1b[0mPb"), "ab");
  // A DCS string needs its ST on the same line; otherwise only the short escapes go.
  EXPECT_EQ(StripTerminalEscapes("\x1bPabc\ndef\x1b\\"), "abc\ndef");
  // An OSC without terminator: "ESC ]" is a short escape, its payload stays.
  EXPECT_EQ(StripTerminalEscapes("\x1b]0;title"), "0;title");
  // Several intermediates before the final byte.
  EXPECT_EQ(StripTerminalEscapes("x\x1b$(By"), "xy");
  // CSI with intermediate byte (DECSCUSR) and private parameters.
  EXPECT_EQ(StripTerminalEscapes("\x1b[2 qz\x1b[?1049h"), "z");
}

TEST(TerminalStrip, Osc8Rendering) {
  // URI equals label after CSI removal -> label only.
  EXPECT_EQ(StripTerminalEscapes("\x1b]8;;u\x07\x1b[1mu\x1b[0m\x1b]8;;\x07"), "u");
  // Blank by Python's str.isspace (ideographic space U+3000) -> the URI.
  EXPECT_EQ(StripTerminalEscapes("\x1b]8;;https://a.invalid\x07\xe3\x80\x80\x1b]8;;\x07"), "https://a.invalid");
  // Empty URI and empty label.
  EXPECT_EQ(StripTerminalEscapes("[\x1b]8;;\x07\x1b]8;;\x07]"), "[]");
  // The closer must be on the same line: the parts are removed as plain OSC strings, the label stays.
  EXPECT_EQ(StripTerminalEscapes("\x1b]8;;https://a.invalid\x07lab\nel\x1b]8;;\x07"), "lab\nel");
  // Two links on one line.
  EXPECT_EQ(StripTerminalEscapes("\x1b]8;;A\x07" "a\x1b]8;;\x07 \x1b]8;;B\x1b\\b\x1b]8;;\x1b\\"), "a (A) b (B)");
}

TEST(TerminalStrip, NoEscIsUnchangedIncludingControlsAndInvalidBytes) {
  std::string s = "cr\rbs\bbel\x07 \xff\xfe tab\t";
  EXPECT_EQ(StripTerminalEscapes(s), s);
}

TEST(TerminalStrip, NoiseLineOfSlowOrHangFixture) {
  // The byte line that tasks/slow_or_hang/task.py writes in "noisy" mode, and the stderr line; the expected text
  // is the reference's stored stdout tail / stderr in golden/slow_or_hang_runs.json.
  const std::string noise =
      "\x1b[31mred\x1b[0m \x1b[1;32mbold green\x1b[0m invalid utf-8: \xff\xfe\x80 | "
      "\x1b]8;;https://example.invalid/doc\x07link\x1b]8;;\x07 " +
      std::string(40, 'x') + "\n";
  std::string one = StripTerminalEscapes(DecodeUtf8Replace(noise));
  EXPECT_EQ(one, "red bold green invalid utf-8: \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd | link (https://example.invalid/doc) " +
                     std::string(40, 'x') + "\n");
  Json runs = testing::Golden("slow_or_hang_runs")["noisy"]["variants"]["custom"]["correctness_result"];
  const std::string tail = runs["stdout"]["tail"].get<std::string>();
  EXPECT_NE(tail.find(one), std::string::npos);
  EXPECT_EQ(StripTerminalEscapes(DecodeUtf8Replace("\x1b[33mstderr warning\x1b[0m \xc3\x28\n")),
            runs["stderr"].get<std::string>());

  // 2 MiB of it, as the fixture writes: count replacement characters and check no ESC is left.
  std::string big;
  while (big.size() < 2 * 1024 * 1024) big += noise;
  std::string out = StripTerminalEscapes(DecodeUtf8Replace(big));
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
  size_t lines = big.size() / noise.size() + (big.size() % noise.size() ? 1 : 0);
  EXPECT_EQ(out.size(), lines * one.size());
}

TEST(TerminalStrip, AdversarialInputsStayLinear) {
  // Unterminated openers on one long line: a backtracking regex or naive rescans would be quadratic here
  // (~10^11 steps); the memoised scanners finish in milliseconds.
  std::string osc8, dcs, osc;
  for (int i = 0; i < 200000; ++i) {
    osc8 += "\x1b]8;;u\x07l";
    dcs += "\x1bPd";
    osc += "\x1b]0;t";
  }
  EXPECT_EQ(StripTerminalEscapes(osc8), std::string(200000, 'l'));  // each opener is then an OSC string to the next BEL
  EXPECT_EQ(StripTerminalEscapes(dcs), std::string(200000, 'd'));
  EXPECT_EQ(StripTerminalEscapes(osc), [] {
    std::string s;
    for (int i = 0; i < 200000; ++i) s += "0;t";
    return s;
  }());
  std::string csi(1 << 20, '0');
  csi.insert(0, "\x1b[");
  EXPECT_EQ(StripTerminalEscapes(csi), "[" + std::string(1 << 20, '0'));
}

struct Utf8Case {
  std::string bytes;
  std::string replaced;  // bytes.decode("utf-8", "replace") in Python 3.11
  std::string error;     // str(UnicodeDecodeError) in Python 3.11, "" when valid
};

TEST(Utf8, DecodeReplaceMatchesPython) {
  const Utf8Case cases[] = {
      {"\xff", "\xef\xbf\xbd", "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"},
      {"\xe0\x80", "\xef\xbf\xbd\xef\xbf\xbd",
       "'utf-8' codec can't decode byte 0xe0 in position 0: invalid continuation byte"},
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
       "'utf-8' codec can't decode byte 0xed in position 0: invalid continuation byte"},
      {"\xf0\x9f\x98", "\xef\xbf\xbd", "'utf-8' codec can't decode bytes in position 0-2: unexpected end of data"},
      {"\x61\xc3", "\x61\xef\xbf\xbd", "'utf-8' codec can't decode byte 0xc3 in position 1: unexpected end of data"},
      {"\xc3\x61", "\xef\xbf\xbd\x61", "'utf-8' codec can't decode byte 0xc3 in position 0: invalid continuation byte"},
      {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
       "'utf-8' codec can't decode byte 0xf4 in position 0: invalid continuation byte"},
      {"\xe2\x82", "\xef\xbf\xbd", "'utf-8' codec can't decode bytes in position 0-1: unexpected end of data"},
      {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd", "'utf-8' codec can't decode byte 0xc0 in position 0: invalid start byte"},
      {"\xf0\x9f\x98\x80\x6f\x6b", "\xf0\x9f\x98\x80\x6f\x6b", ""},
      {"\xe2\x82\xac\xe2\x82", "\xe2\x82\xac\xef\xbf\xbd",
       "'utf-8' codec can't decode bytes in position 3-4: unexpected end of data"},
      {"\xf5\x80", "\xef\xbf\xbd\xef\xbf\xbd", "'utf-8' codec can't decode byte 0xf5 in position 0: invalid start byte"},
      {"\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd", "'utf-8' codec can't decode byte 0x80 in position 0: invalid start byte"},
      {"\xef\xbf\xbf", "\xef\xbf\xbf", ""},
      {"\xf0\x80\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
       "'utf-8' codec can't decode byte 0xf0 in position 0: invalid continuation byte"},
      {"\xe0\xa0", "\xef\xbf\xbd", "'utf-8' codec can't decode bytes in position 0-1: unexpected end of data"},
      {"\x6f\x6b\xf0\x9f\x41", "\x6f\x6b\xef\xbf\xbd\x41",
       "'utf-8' codec can't decode bytes in position 2-3: invalid continuation byte"},
      {"", "", ""},
      {std::string("a\0b", 3), std::string("a\0b", 3), ""},
  };
  for (const Utf8Case& c : cases) {
    EXPECT_EQ(DecodeUtf8Replace(c.bytes), c.replaced) << ::testing::PrintToString(c.bytes);
    EXPECT_EQ(DescribeUtf8Error(c.bytes), c.error) << ::testing::PrintToString(c.bytes);
    EXPECT_EQ(IsValidUtf8(c.bytes), c.error.empty()) << ::testing::PrintToString(c.bytes);
    EXPECT_TRUE(IsValidUtf8(DecodeUtf8Replace(c.bytes)));
  }
}

TEST(Utf8, PythonBlank) {
  EXPECT_TRUE(IsPythonBlank(""));
  EXPECT_TRUE(IsPythonBlank(" \t\r\n\v\f\x1c\x1f"));
  EXPECT_TRUE(IsPythonBlank("\xc2\xa0\xe3\x80\x80\xe2\x80\xa8\xc2\x85"));  // NBSP, ideographic space, LS, NEL
  EXPECT_FALSE(IsPythonBlank(" x "));
  EXPECT_FALSE(IsPythonBlank("\xe2\x80\x8b"));  // ZERO WIDTH SPACE is not isspace()
  EXPECT_FALSE(IsPythonBlank("\xef\xbb\xbf"));  // BOM
  EXPECT_FALSE(IsPythonBlank("\xff"));
}

}  // namespace
}  // namespace kf
