// End markers against the reference's probes (golden probes.json "pytest_end_monitor"), with the cases the
// reference missed fixed: singular warning/error, xfailed, no tests ran.
#include <gtest/gtest.h>

#include <regex>

#include "exec/end_marker.hpp"
#include "test_util.hpp"

namespace kf::exec_internal {
namespace {

TEST(PytestMarker, MatchesReferenceProbesAndFixesItsGaps) {
  Json probes = kf::testing::Golden("probes")["pytest_end_monitor"];
  ASSERT_GE(probes.size(), 10u);
  for (const auto& probe : probes) {
    const std::string line = probe["line"];
    const bool ref_matched = probe["result"][0];
    const std::string ref_message = probe["result"][2];
    auto hit = MatchEndMarker("pytest", line);
    // Every probe line is a genuine pytest summary; the reference missed some (a bug we fix).
    ASSERT_TRUE(hit.has_value()) << line;
    if (ref_matched) {
      EXPECT_EQ(hit->message, ref_message) << line;
    } else {
      // The reference did not match these; ours reports "all passed" only for passes without failures.
      const bool all_passed = std::regex_search(line, std::regex(R"(\d+ passed)")) &&
                              !std::regex_search(line, std::regex(R"(\d+ (failed|errors?)\b)"));
      EXPECT_EQ(hit->message, all_passed ? kPytestLingeringMessage : "") << line;
    }
  }
}

TEST(PytestMarker, OtherOutcomesAndForms) {
  EXPECT_TRUE(IsPytestSummaryLine("=== 1 passed, 1 xpassed, 2 rerun in 3.00s ==="));
  EXPECT_TRUE(IsPytestSummaryLine("==== 5 passed in 65.12s (0:01:05) ===="));
  EXPECT_TRUE(IsPytestSummaryLine("=== no tests ran in 0.01s ==="));
  EXPECT_TRUE(IsPytestSummaryLine("=== 1 error in 0.2s ==="));
  EXPECT_FALSE(IsPytestSummaryLine("=== test session starts ==="));
  EXPECT_FALSE(IsPytestSummaryLine("=== 3 apples in 2s ==="));
  EXPECT_FALSE(IsPytestSummaryLine("3 passed in 0.1s"));
  EXPECT_FALSE(IsPytestSummaryLine("=========="));
  EXPECT_FALSE(IsPytestSummaryLine("=== 3 passed ==="));
  EXPECT_EQ(MatchEndMarker("pytest", "=== 1 passed, 1 error in 1s ===")->message, "");
}

TEST(LiteralMarker, MatchesSubstring) {
  EXPECT_TRUE(MatchEndMarker("DONE_MARK", "xx DONE_MARK yy").has_value());
  EXPECT_EQ(MatchEndMarker("DONE_MARK", "DONE_MARK")->message, "");
  EXPECT_FALSE(MatchEndMarker("DONE_MARK", "DONE MARK").has_value());
  EXPECT_FALSE(MatchEndMarker("", "anything").has_value());
}

}  // namespace
}  // namespace kf::exec_internal
