// The native task SDK's checks (include/kernelfoundry/task_sdk.hpp), issue 10 faults 3, 4 and 7:
// assert_allclose fails on any NaN/Inf where the reference is finite (whatever the ratio allows) naming the
// first bad index and the counts, compares element types, and a run-time build failure becomes the result
// document's "build_error" with the compiler's first error.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernelfoundry/sdk/task_sdk.hpp"

namespace kf {
namespace {

std::string FailureOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const sdk::Failure& e) {
    return e.what();
  }
  return "";
}

TEST(TaskSdkAllclose, NanInUnderOnePercentFailsNamingTheFirstIndexAndCounts) {
  std::vector<float> expected(1000);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = 1.0f + static_cast<float>(i) / 1000.0f;
  std::vector<float> actual = expected;
  for (size_t i : {3, 10, 20, 30, 40, 50, 60, 500, 997}) actual[i] = std::numeric_limits<float>::quiet_NaN();
  const std::string msg = FailureOf([&] { sdk::assert_allclose(actual, expected); });
  EXPECT_NE(msg.find("9 of 1000 elements are bad: 9 NaN and 0 Inf where the reference is finite, 0 exceed"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("first bad element at index 3:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("non-finite values fail whatever ratio_below_max_err allows"), std::string::npos) << msg;
  // Even a ratio that allows half the elements to be wrong does not let a NaN through.
  EXPECT_NE(FailureOf([&] { sdk::assert_allclose(actual, expected, 1e-7, 0.01, 0.5); }), "");
}

TEST(TaskSdkAllclose, InfAndOutOfToleranceAreCountedSeparately) {
  std::vector<double> expected(400, 2.0), actual(400, 2.0);
  actual[17] = std::numeric_limits<double>::infinity();
  actual[5] = -std::numeric_limits<double>::infinity();
  actual[300] = 9.0;
  const std::string msg = FailureOf([&] { sdk::assert_allclose(actual, expected, 1e-7, 0.01, 0.5); });
  EXPECT_NE(msg.find("0 NaN and 2 Inf where the reference is finite, 1 exceed rtol"), std::string::npos) << msg;
  EXPECT_NE(msg.find("first bad element at index 5:"), std::string::npos) << msg;
  // Special values where the reference has them too still match; the ratio rule is unchanged otherwise.
  std::vector<double> special = {std::nan(""), std::numeric_limits<double>::infinity(), 1.0};
  EXPECT_EQ(FailureOf([&] { sdk::assert_allclose(special, special); }), "");
  std::vector<double> e2(1000, 1.0), a2(1000, 1.0);
  for (int i = 0; i < 9; ++i) a2[static_cast<size_t>(i)] = 2.0;  // 0.9 % out of tolerance, finite: passes
  EXPECT_EQ(FailureOf([&] { sdk::assert_allclose(a2, e2); }), "");
}

TEST(TaskSdkAllclose, ElementTypesAreComparedUnlessTheTaskAllowsIt) {
  std::vector<double> wide = {1.0, 2.0, 3.0};
  std::vector<float> narrow = {1.0f, 2.0f, 3.0f};
  EXPECT_NE(FailureOf([&] { sdk::assert_allclose(wide, narrow); })
                .find("dtype mismatch: actual float64 vs expected float32"),
            std::string::npos);
  EXPECT_EQ(FailureOf([&] { sdk::assert_allclose(wide, narrow, 1e-7, 0.01, 0.99, /*check_dtype=*/false); }), "");
  std::vector<int> ints = {1, 2, 3};
  EXPECT_NE(FailureOf([&] { sdk::assert_allclose(ints, narrow); }).find("actual int32 vs expected float32"),
            std::string::npos);
  EXPECT_EQ(FailureOf([&] { sdk::assert_allclose(narrow, narrow); }), "");
}

TEST(TaskSdkBuildFailure, FirstCompilerErrorSkipsAnyNumberOfWarnings) {
  std::string log;
  for (int i = 1; i <= 1500; ++i) log += "<source>:" + std::to_string(i) + ":2: warning: this is warning " + std::to_string(i) + "\n";
  log += "<source>:1509:35: error: use of undeclared identifier 'not_declared_anywhere'\n";
  log += "  C[i] = A[i] + not_declared_anywhere;\n                ^\n";
  log += "<source>:1510:1: error: a second error\n";
  EXPECT_EQ(sdk::FirstCompilerError(log),
            "<source>:1509:35: error: use of undeclared identifier 'not_declared_anywhere'\n"
            "  C[i] = A[i] + not_declared_anywhere;\n                ^");
  // PoCL's style: "error: <file>:<line>:<col>: …"
  EXPECT_EQ(sdk::FirstCompilerError("warning: a.cl:1:2: w\nerror: a.cl:3:4: use of undeclared identifier 'x'\n"),
            "error: a.cl:3:4: use of undeclared identifier 'x'");
  EXPECT_EQ(sdk::FirstCompilerError("only warnings: warning: x\n"), "");
}

TEST(TaskSdkBuildFailure, TheResultDocumentCarriesBuildErrorWithTheLogCapped) {
  static std::string big_log(200 * 1024, 'w');
  sdk::GetState().tests.clear();
  sdk::Register("test_jit", "correctness", [] {
    throw sdk::BuildFailure("OpenCL build of k.cl failed (CL_BUILD_PROGRAM_FAILURE); first error: error: x", big_log);
  });
  sdk::Register("test_after", "correctness", [] {});
  // A file, not a pipe: the document is larger than a pipe's buffer and nobody reads while Main writes.
  FILE* doc_file = std::tmpfile();
  ASSERT_NE(doc_file, nullptr);
  std::string arg = "--kf-result-fd=" + std::to_string(::fileno(doc_file));
  std::vector<std::string> args = {"prog", "--kf-run", "--kf-select=correctness", arg};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  int rc = sdk::Main(static_cast<int>(argv.size()), argv.data());
  ::testing::internal::GetCapturedStdout();
  std::string text;
  char buf[65536];
  ::lseek(::fileno(doc_file), 0, SEEK_SET);
  ssize_t n;
  while ((n = ::read(::fileno(doc_file), buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  std::fclose(doc_file);
  sdk::GetState().tests.clear();
  EXPECT_EQ(rc, 1);
  nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["tests"][0]["status"], "error");
  EXPECT_EQ(doc["tests"][1]["status"], "passed");
  EXPECT_EQ(doc["build_error"]["message"], "OpenCL build of k.cl failed (CL_BUILD_PROGRAM_FAILURE); first error: error: x");
  const std::string log = doc["build_error"]["log"];
  EXPECT_LT(log.size(), 70u * 1024u);
  EXPECT_NE(log.find("bytes cut by kf"), std::string::npos);
}

}  // namespace
}  // namespace kf
