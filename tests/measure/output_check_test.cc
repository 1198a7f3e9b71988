// The output rule of the paired modes (kernelfoundry/output_check.hpp): every case where its branch-free first
// pass cannot decide alone (NaN/Inf on either side, elements at the tolerance's edge, a tolerated share of bad
// elements) must give what the element-by-element rule gives.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernelfoundry/output_check.hpp"

namespace kf {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::optional<std::string> Compare(const std::vector<double>& a, const std::vector<double>& e, double rtol,
                                   double atol_rms, double min_ok) {
  return CompareOutputValues(
      static_cast<int64_t>(e.size()), [&](int64_t i) { return a[static_cast<size_t>(i)]; },
      [&](int64_t i) { return e[static_cast<size_t>(i)]; }, rtol, atol_rms, min_ok);
}

// 1, 2, …, n: rms = sqrt((n + 1)(2n + 1) / 6).
std::vector<double> Ramp(size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>(i + 1);
  return v;
}

TEST(OutputCheck, EqualOutputsAgreeAndEmptyOnesToo) {
  const std::vector<double> e = Ramp(1001);  // not a multiple of the first pass's four partial sums
  EXPECT_EQ(Compare(e, e, 0, 0, 1.0), std::nullopt);
  EXPECT_EQ(Compare({}, {}, 0, 0, 1.0), std::nullopt);
}

TEST(OutputCheck, AnElementExactlyAtTheToleranceAgreesAndOneUlpBeyondDoesNot) {
  // rtol 0.5 of |e| = 4 is exactly 2 (atol 0): a = 6 is at the edge, the next double above 6 is not.
  EXPECT_EQ(Compare({6.0}, {4.0}, 0.5, 0, 1.0), std::nullopt);
  const auto beyond = Compare({std::nextafter(6.0, 7.0)}, {4.0}, 0.5, 0, 1.0);
  ASSERT_TRUE(beyond.has_value());
  EXPECT_EQ(beyond->rfind("1 of 1 values differ", 0), 0u) << *beyond;
}

TEST(OutputCheck, TheAbsolutePartScalesWithTheReferencesRms) {
  std::vector<double> e = Ramp(4), a = e;  // rms of 1..4 = sqrt(7.5) = 2.7386
  a[0] += 0.27;                              // within 0.1 · rms
  EXPECT_EQ(Compare(a, e, 0, 0.1, 1.0), std::nullopt);
  a[0] += 0.01;  // 0.28 > 0.27386
  EXPECT_TRUE(Compare(a, e, 0, 0.1, 1.0).has_value());
  // An all-zeros reference has rms 0: only exact values agree.
  EXPECT_TRUE(Compare({1e-30}, {0.0}, 0, 0.1, 1.0).has_value());
}

TEST(OutputCheck, NonFiniteValuesWhereTheReferenceHasTheSameAgree) {
  std::vector<double> e = Ramp(9), a = e;
  e[2] = a[2] = kNan;
  e[5] = a[5] = kInf;
  e[7] = a[7] = -kInf;
  EXPECT_EQ(Compare(a, e, 1e-6, 0, 1.0), std::nullopt);
  a[5] = -kInf;  // the wrong infinity
  const auto wrong = Compare(a, e, 1e-6, 0, 1.0);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(wrong->find("NaN/Inf where the reference is finite"), std::string::npos) << *wrong;
  EXPECT_EQ(wrong->rfind("1 of 9 values differ from the reference's (first at index 5", 0), 0u) << *wrong;
}

TEST(OutputCheck, ANanWhereTheReferenceIsFiniteFailsEvenWhenTheShareOfBadElementsIsTolerated) {
  std::vector<double> e = Ramp(1000), a = e;
  a[500] = kNan;
  const auto nan = Compare(a, e, 1e-6, 0, 0.99);  // 1 bad of 1000 is within min_ok 0.99, the NaN is not
  ASSERT_TRUE(nan.has_value());
  EXPECT_NE(nan->find("1 NaN/Inf where the reference is finite"), std::string::npos) << *nan;
}

TEST(OutputCheck, ATolerantShareOfBadElementsAgreesAndOneMoreDoesNot) {
  std::vector<double> e = Ramp(1000), a = e;
  for (size_t i = 0; i < 10; ++i) a[i * 100] += 1000;  // 10 bad of 1000: ok ratio 0.99
  EXPECT_EQ(Compare(a, e, 1e-6, 0, 0.99), std::nullopt);
  a[999] += 1000;
  const auto eleven = Compare(a, e, 1e-6, 0, 0.99);
  ASSERT_TRUE(eleven.has_value());
  EXPECT_EQ(eleven->rfind("11 of 1000 values differ from the reference's (first at index 0: 1001 vs 1)", 0), 0u) << *eleven;
}

}  // namespace
}  // namespace kf
