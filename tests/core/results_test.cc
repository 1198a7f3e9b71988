// ProcessResult / BuildResult / TestResult against the reference's probes and real encodings (spec §3.1–§3.3).
#include "kernelfoundry/results.hpp"

#include <gtest/gtest.h>

#include "kernelfoundry/error.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

const Json& Probes() {
  static const Json probes = testing::Golden("probes");
  return probes;
}

// ---------------------------------------------------------------- ProcessResult

TEST(ProcessResult, CreateDecodesBytesAndStripsEscapes) {
  const Json& want = Probes()["process_result"];
  ProcessResult r = ProcessResult::Create(0, "\xff\x1b[31mred\x1b[0m\n", "\x1b[1mok\x1b[0m", "\x1b[33mmsg\x1b[0m");
  EXPECT_EQ(r.Encode(), want["bytes_and_escapes"]);
  EXPECT_EQ(r.CombineOutput(), want["combine_output"][0].get<std::string>());
  EXPECT_EQ(r.CombineOutput(false), want["combine_output"][1].get<std::string>());
  EXPECT_EQ(ProcessResult::Create(0, "o", "e").CombineOutput(), want["combine_output"][2].get<std::string>());
  EXPECT_EQ(ProcessResult::Create(3, "so", "se", "m", Json{{"k", 1}}).Encode(), want["create"]);
}

TEST(ProcessResult, EncodeDecodeRoundTrip) {
  ProcessResult r = ProcessResult::Create(-9, "out", "err", "killed", ParseJson(R"({"runtimes": {"t": [1.5, 2.0]}})", "x"));
  Json j = r.Encode();
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"returncode", "stdout", "stderr", "message", "output_data"}));
  EXPECT_EQ(ProcessResult::Decode(j), r);
  EXPECT_EQ(ProcessResult::Decode(ParseJson(DumpJson(j), "x")), r);
  // message/output_data may be absent; Decode sanitises again (idempotent).
  ProcessResult d = ProcessResult::Decode(ParseJson(R"({"returncode": 2, "stdout": "\u001b[31mx", "stderr": ""})", "x"));
  EXPECT_EQ(d.stdout_text, "x");
  EXPECT_FALSE(d.message.has_value());
  EXPECT_FALSE(d.output_data.has_value());
}

TEST(ProcessResult, DecodeRejectsUnknownKeysAndWrongTypes) {
  // The reference raises TypeError "ProcessResult.__init__() got an unexpected keyword argument 'extra'".
  Error e = testing::ErrorOf([] {
    ProcessResult::Decode(ParseJson(R"({"returncode":0,"stdout":"","stderr":"","extra":1})", "x"));
  });
  EXPECT_EQ(e.kind(), ErrorKind::kParse);
  EXPECT_NE(e.message().find("'extra'"), std::string::npos);
  EXPECT_EQ(e.field(), "ProcessResult.extra");
  EXPECT_TRUE(Probes()["process_result"]["decode_unknown_key"].contains("error"));
  for (const char* bad : {R"({"stdout":"","stderr":""})", R"({"returncode":"0","stdout":"","stderr":""})",
                          R"({"returncode":1.5,"stdout":"","stderr":""})", R"({"returncode":0,"stdout":1,"stderr":""})",
                          R"({"returncode":0,"stdout":"","stderr":"","message":3})", R"([1])",
                          R"({"returncode":18446744073709551615,"stdout":"","stderr":""})"}) {
    EXPECT_EQ(testing::ErrorOf([&] { ProcessResult::Decode(ParseJson(bad, "x")); }).kind(), ErrorKind::kParse) << bad;
  }
}

std::vector<std::pair<std::string, ProcessResult>> ThreeParts() {
  return {{"a", ProcessResult::Create(0, "a", "b")},
          {"b", ProcessResult::Create(1, "c", "d", "killed")},
          {"c", ProcessResult::Create(-9, "e", "f", "")}};
}

TEST(ProcessResult, MergeMatchesReferenceProbe) {
  const Json& want = Probes()["process_result"];
  EXPECT_EQ(ProcessResult::Merge({}), std::nullopt);
  EXPECT_TRUE(want["merge_empty"].is_null());
  auto merged = ProcessResult::Merge(ThreeParts());
  ASSERT_TRUE(merged);
  EXPECT_EQ(merged->Encode(), want["merge"]);  // first non-zero code (1) happens to equal the reference's max
}

TEST(ProcessResult, MergeFailsIfAnyPartFailedB9) {
  // Regression B9: the reference took max(returncode), so a signal-killed arch (-9) merged with a passing
  // one reported 0 (success), and output_data was dropped.
  auto merged = ProcessResult::Merge({{"bmg", ProcessResult::Create(0, "ok", "", std::nullopt, ParseJson(R"({"runtimes": {}})", "x"))},
                                      {"lnl", ProcessResult::Create(-9, "", "", "killed")}});
  ASSERT_TRUE(merged);
  EXPECT_EQ(merged->returncode, -9);
  EXPECT_EQ(merged->message, "killed");
  EXPECT_EQ(merged->output_data, ParseJson(R"({"bmg": {"runtimes": {}}})", "x"));
  EXPECT_EQ(ProcessResult::Merge({{"x", ProcessResult::Create(0, "", "")}})->message, "");
  EXPECT_EQ(ProcessResult::Merge({{"x", ProcessResult::Create(0, "", "")}})->output_data, std::nullopt);
}

// ---------------------------------------------------------------- TestResult

std::vector<std::pair<std::string, TestResult>> PerGpuOfProbe() {
  std::vector<std::pair<std::string, TestResult>> per;
  for (const auto& [arch, tr] : Probes()["test_result"]["merge_two"]["results_per_gpu"].items()) {
    per.emplace_back(arch, *TestResult::Decode(tr));
  }
  return per;
}

/// The reference's merge_two answer with our two deliberate B9 differences applied.
Json ExpectedMergeTwo() {
  Json want = Probes()["test_result"]["merge_two"];
  want["correctness_result"]["returncode"] = -15;  // lnl timed out (-15); the reference's max() said 0
  want["performance_result"]["output_data"] = ParseJson(R"({"bmg": {"runtimes": {"t": [1.0]}}})", "x");  // kept per arch
  return want;
}

TEST(TestResult, MergeTwoArchs) {
  TestResult merged = TestResult::Merge(PerGpuOfProbe());
  EXPECT_EQ(merged.Encode(), ExpectedMergeTwo());
  ASSERT_EQ(merged.trace_results.size(), 2u);
  EXPECT_EQ(merged.trace_results[0].first, "unitrace.000_bmg");
}

TEST(TestResult, MergeSingleIsIdentityAndEmptyMatchesReference) {
  auto per = PerGpuOfProbe();
  EXPECT_TRUE(Probes()["test_result"]["merge_single_is_identity"].get<bool>());
  EXPECT_EQ(TestResult::Merge({per[1]}), per[1].second);
  EXPECT_EQ(TestResult::Merge({}).Encode(), Probes()["test_result"]["merge_empty"]);
}

TEST(TestResult, DecodeKeepsResultsPerGpuB10) {
  // Regression B10: the reference's decode dropped results_per_gpu (golden "decode_of_merged_drops_...").
  TestResult merged = TestResult::Merge(PerGpuOfProbe());
  auto decoded = TestResult::Decode(merged.Encode());
  ASSERT_TRUE(decoded);
  ASSERT_TRUE(decoded->results_per_gpu);
  EXPECT_EQ(decoded->results_per_gpu->size(), 2u);
  EXPECT_EQ(*decoded, merged);
  Json reference_view = decoded->Encode();
  reference_view["results_per_gpu"] = nullptr;
  Json want = Probes()["test_result"]["decode_of_merged_drops_results_per_gpu"];
  want["correctness_result"] = ExpectedMergeTwo()["correctness_result"];
  want["performance_result"] = ExpectedMergeTwo()["performance_result"];
  EXPECT_EQ(reference_view, want);  // everything else survives as in the reference
}

TEST(TestResult, DecodeNullAndRealReferenceEncodings) {
  EXPECT_EQ(TestResult::Decode(Json(nullptr)), std::nullopt);
  EXPECT_EQ(BuildResult::Decode(Json(nullptr)), std::nullopt);
  EXPECT_TRUE(Probes()["test_result"]["decode_none"].is_null());
  // The reference's TestResult encodings of a real relu_cpu run re-encode byte for byte.
  const Json e2e = testing::Golden("e2e_relu_cpu");
  for (const char* run : {"candidate_reference_equivalent", "candidate_slower"}) {
    for (const auto& [variant, tr] : e2e[run]["test_results"].items()) {
      auto decoded = TestResult::Decode(tr);
      ASSERT_TRUE(decoded);
      EXPECT_EQ(decoded->Encode(), tr) << run << "/" << variant;
      EXPECT_EQ(DumpJson(decoded->Encode()), DumpJson(tr));
    }
  }
  EXPECT_EQ(testing::ErrorOf([] { TestResult::Decode(ParseJson(R"({"trace_results": {"t": 1}})", "x")); }).field(),
            "TestResult.trace_results.t");
  EXPECT_EQ(testing::ErrorOf([] { TestResult::Decode(ParseJson(R"({"results_per_gpu": {"a": null}})", "x")); }).kind(),
            ErrorKind::kParse);
}

// ---------------------------------------------------------------- BuildResult

TEST(BuildResult, EncodeDecodeWithArtifacts) {
  const Json e2e = testing::Golden("e2e_relu_cpu")["candidate_slower"]["build_result"];
  BuildResult b;
  b.worker_info = e2e["worker_info"];
  b.result = ProcessResult::Decode(e2e["result"]);
  b.artifacts.emplace();
  b.artifacts->Set("relu_kernel.so", std::string("\x7f" "ELF\0\xff", 6), FileMeta{0755u, 1795974704.9724033});
  Json j = b.Encode();
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"worker_info", "result", "artifacts"}));
  EXPECT_EQ(j["result"], e2e["result"]);
  EXPECT_EQ(j["artifacts"]["relu_kernel.so"]["mode"], 493);
  auto back = BuildResult::Decode(ParseJson(DumpJson(j), "x"));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, b);
  EXPECT_TRUE(back->Ok());
  BuildResult empty;
  EXPECT_EQ(empty.Encode(), ParseJson(R"({"worker_info":null,"result":null,"artifacts":null})", "x"));
  EXPECT_FALSE(empty.Ok());
  EXPECT_EQ(*BuildResult::Decode(empty.Encode()), empty);
}

}  // namespace
}  // namespace kf
