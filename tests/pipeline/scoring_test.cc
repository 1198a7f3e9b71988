// Scoring against the reference's answers: the 15 scoring probes (probes.json "scoring") and the
// end-to-end relu_cpu run (e2e_relu_cpu.json). Where a bug fix changes a value, the test asserts ours and
// says why.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/scoring.hpp"
#include "pipeline/eval_log.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Golden;

const Json& Scoring() {
  static const Json probes = Golden("probes")["scoring"];
  return probes;
}

TestResult DecodeTR(const Json& j) {
  auto tr = TestResult::Decode(j);
  EXPECT_TRUE(tr.has_value());
  return *tr;
}

TestResult ProbeReference() { return DecodeTR(Scoring()["reference"]); }
TestResult ProbeCase(const std::string& name) { return DecodeTR(Scoring()[name]["test_result"]); }

/// The golden exec_result minus the probe's extra keys, for comparison with ToReferenceJson()+eval_log.
Json GoldenExec(const std::string& name) {
  Json j = Scoring()[name]["exec_result"];
  j.erase("status");
  j.erase("combined_fitness");
  return j;
}

Json OursExec(const EvalResult& r) {
  Json j = r.ToReferenceJson();
  j["eval_log"] = r.eval_log;
  return j;
}

/// Fails when any number in `j` is NaN or infinite.
void ExpectAllFinite(const Json& j, const std::string& path = "$") {
  if (j.is_number_float()) {
    EXPECT_TRUE(std::isfinite(j.get<double>())) << path;
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) ExpectAllFinite(v, path + "." + k);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) ExpectAllFinite(j[i], path + "[" + std::to_string(i) + "]");
  }
}

double Mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); }

/// Checks the probe's status string and combined fitness against ours.
void ExpectStatusAndFitness(const EvalResult& r, const std::string& name) {
  const Json& g = Scoring()[name]["exec_result"];
  EXPECT_EQ(r.ReferenceStatus(), g["status"].get<std::string>()) << name;
  EXPECT_DOUBLE_EQ(ComputePerformanceScore(r), g["combined_fitness"].get<double>()) << name;
  ExpectAllFinite(r.ToJson());
}

// --- failures: reproduced exactly, with typed statuses ---

struct FailureCase {
  const char* name;
  EvalStatus status;
};

class ScoringFailureProbe : public ::testing::TestWithParam<FailureCase> {};

TEST_P(ScoringFailureProbe, MatchesReferenceExactly) {
  const FailureCase& c = GetParam();
  EvalResult r = ConvertTestResult(ProbeCase(c.name), std::nullopt);
  EXPECT_EQ(OursExec(r), GoldenExec(c.name)) << OursExec(r).dump(1);
  EXPECT_EQ(r.status, c.status) << EvalStatusName(r.status) << ": " << r.status_detail;
  EXPECT_EQ(r.perf_score, PerfScoreFor(c.status));
  ExpectStatusAndFitness(r, c.name);
  // With a (passing) reference present the verdict is the same.
  EvalResult with_ref = ConvertTestResult(ProbeCase(c.name), ProbeReference());
  EXPECT_EQ(OursExec(with_ref), GoldenExec(c.name));
}

INSTANTIATE_TEST_SUITE_P(
    Probes, ScoringFailureProbe,
    ::testing::Values(FailureCase{"no_correctness_result", EvalStatus::kNoTestResult},
                      FailureCase{"pytest_failed_no_shape_test", EvalStatus::kTestsFailed},
                      FailureCase{"pytest_failed_shape_test_passed", EvalStatus::kValueMismatch},
                      FailureCase{"killed_by_signal", EvalStatus::kTestTimeout},  // message says timed out
                      FailureCase{"pytest_usage_error_4", EvalStatus::kPytestUsage},
                      FailureCase{"no_tests_collected_5", EvalStatus::kNoTestsCollected}),
    [](const auto& p) { return std::string(p.param.name); });

// --- correct runs ---

TEST(ScoringProbe, CorrectWithReferenceSpeedupsFromUnroundedMeans) {
  EvalResult r = ConvertTestResult(ProbeCase("correct_with_reference"), ProbeReference());
  Json expected = GoldenExec("correct_with_reference");
  // B16: the reference divided the rounded means (2.03 / 1.01 = 2.0099); we divide the unrounded ones.
  const double speedup_a = Mean({2.0, 2.0, 2.1}) / Mean({1.0, 1.0, 1.02});
  const double speedup_b = Mean({4.0, 4.4}) / Mean({2.0, 2.2});
  EXPECT_DOUBLE_EQ(speedup_a, 2.019867549668874);
  EXPECT_NE(speedup_a, expected["runtime_stats"]["task.py::T::test_bench[a]"]["speedup"].get<double>());
  expected["runtime_stats"]["task.py::T::test_bench[a]"]["speedup"] = speedup_a;
  expected["runtime_stats"]["task.py::T::test_bench[b]"]["speedup"] = speedup_b;
  expected["runtime_improvement"] = std::exp((std::log(speedup_a) + std::log(speedup_b)) / 2);
  EXPECT_EQ(OursExec(r), expected) << OursExec(r).dump(1);
  EXPECT_EQ(r.status, EvalStatus::kCorrect);
  EXPECT_EQ(r.ReferenceStatus(), "correct");
  EXPECT_DOUBLE_EQ(ComputePerformanceScore(r), 5 + r.runtime_improvement);
  // runtime stays the mean of the rounded means, as in the reference.
  EXPECT_EQ(r.runtime, 1.5550000000000002);
  ASSERT_EQ(r.benchmarks.size(), 2u);
  EXPECT_EQ(r.benchmarks[0].name, "task.py::T::test_bench[a]");
  EXPECT_DOUBLE_EQ(r.benchmarks[0].reference_mean_ms, Mean({2.0, 2.0, 2.1}));
  EXPECT_DOUBLE_EQ(r.benchmarks[0].candidate_mean_ms, Mean({1.0, 1.0, 1.02}));
  EXPECT_DOUBLE_EQ(r.benchmarks[0].speedup, speedup_a);
  EXPECT_EQ(r.benchmarks[1].num_trials, 2);
}

TEST(ScoringProbe, CorrectRounding3SignificantDigits) {
  // The probe's reference timed test_bench[a] at 0.988 ms (its ref_speed).
  TestResult ref = ProbeReference();
  ref.performance_result->output_data = Json{{"runtimes", {{"task.py::T::test_bench[a]", {0.988}}}}};
  EvalResult r = ConvertTestResult(ProbeCase("correct_rounding_3_sig"), ref);
  Json expected = GoldenExec("correct_rounding_3_sig");
  // B16: 0.988 / 0.123 = 8.0325 in the reference; unrounded 0.988 / 0.1234575 = 8.0027.
  const double speedup = 0.988 / Mean({0.123456, 0.123459});
  EXPECT_NEAR(speedup, 8.0027, 1e-4);
  expected["runtime_stats"]["task.py::T::test_bench[a]"]["speedup"] = speedup;
  expected["runtime_improvement"] = speedup;
  EXPECT_EQ(OursExec(r), expected) << OursExec(r).dump(1);
  EXPECT_EQ(r.status, EvalStatus::kCorrect);
}

TEST(ScoringProbe, PerformanceMissingIsNoMeasurement) {
  for (const char* name : {"correct_perf_missing_timed_out", "correct_perf_failed_message"}) {
    EvalResult r = ConvertTestResult(ProbeCase(name), ProbeReference());
    Json expected = GoldenExec(name);
    // numpy's exp(log(9.999e-10)) is 9.998999999999998e-10 (1 ulp off); the geometric mean of a single
    // value is that value for us.
    EXPECT_DOUBLE_EQ(expected["runtime_improvement"].get<double>(), kInvalidSpeedup);
    expected["runtime_improvement"] = kInvalidSpeedup;
    EXPECT_EQ(OursExec(r), expected) << name << OursExec(r).dump(1);
    EXPECT_EQ(r.status, EvalStatus::kNoMeasurement) << name;
    EXPECT_EQ(r.perf_score, 5);
    ExpectStatusAndFitness(r, name);
  }
  EvalResult failed = ConvertTestResult(ProbeCase("correct_perf_failed_message"), ProbeReference());
  EXPECT_NE(failed.status_detail.find("timed out"), std::string::npos) << failed.status_detail;
}

TEST(ScoringProbe, ReferenceWithoutRuntimes) {
  TestResult ref = ProbeReference();
  ref.performance_result.reset();
  EvalResult r = ConvertTestResult(ProbeCase("correct_reference_without_runtimes"), ref);
  EXPECT_EQ(OursExec(r), GoldenExec("correct_reference_without_runtimes")) << OursExec(r).dump(1);
  EXPECT_EQ(r.status, EvalStatus::kNoReference);
  ExpectStatusAndFitness(r, "correct_reference_without_runtimes");
  EXPECT_EQ(r.benchmarks.at(0).speedup, -1);  // the table shows no sentinel
}

TEST(ScoringProbe, BenchmarkMissingInReference) {
  EvalResult r = ConvertTestResult(ProbeCase("correct_benchmark_missing_in_reference"), ProbeReference());
  Json expected = GoldenExec("correct_benchmark_missing_in_reference");
  // B16: 2.0333… / 1.0 instead of the rounded 2.03. The sentinel still enters the geometric mean.
  const double speedup = Mean({2.0, 2.0, 2.1});
  expected["runtime_stats"]["task.py::T::test_bench[a]"]["speedup"] = speedup;
  expected["runtime_improvement"] = std::exp((std::log(speedup) + std::log(kInvalidSpeedup)) / 2);
  EXPECT_EQ(OursExec(r), expected) << OursExec(r).dump(1);
  EXPECT_EQ(r.status, EvalStatus::kCorrect);
  EXPECT_NE(r.status_detail.find("task.py::T::other"), std::string::npos) << r.status_detail;
  EXPECT_NEAR(ComputePerformanceScore(r), 5.0000450532684715, 1e-6);
}

TEST(ScoringProbe, NoReferenceRun) {
  EvalResult r = ConvertTestResult(ProbeCase("correct_no_reference"), std::nullopt);
  EXPECT_EQ(OursExec(r), GoldenExec("correct_no_reference")) << OursExec(r).dump(1);
  EXPECT_EQ(r.status, EvalStatus::kNoReference);
  ExpectStatusAndFitness(r, "correct_no_reference");  // 5 + 1/0.5 = 7
}

TEST(ScoringProbe, EmptyRuntimeListIsNoMeasurementNotACrash) {
  // B18: the reference raised "zero-size array to reduction operation minimum".
  for (const auto& ref : {std::optional<TestResult>(), std::optional<TestResult>(ProbeReference())}) {
    EvalResult r = ConvertTestResult(ProbeCase("empty_runtime_list_B18"), ref);
    EXPECT_EQ(r.status, EvalStatus::kNoMeasurement);
    EXPECT_EQ(r.perf_score, 5);
    EXPECT_TRUE(r.correctness);
    const Json& stats = r.runtime_stats["task.py::T::test_bench[a]"];
    EXPECT_EQ(stats["num_trials"], 0);
    EXPECT_EQ(stats["mean"].get<double>(), 1e11);
    EXPECT_EQ(stats["speedup"].get<double>(), ref ? kInvalidSpeedup : -1);
    EXPECT_NE(r.status_detail.find("recorded no runtimes"), std::string::npos) << r.status_detail;
    EXPECT_NE(r.eval_log.find("No runtime measurement found for custom benchmark"), std::string::npos);
    ExpectAllFinite(r.ToJson());
  }
}

TEST(ScoringProbe, WorkerInfoNoneIsScored) {
  // The reference raised TypeError ('NoneType' object is not subscriptable) reading gpu_name.
  EvalResult r = ConvertTestResult(ProbeCase("worker_info_none"), std::nullopt);
  EXPECT_EQ(r.status, EvalStatus::kNoReference);
  EXPECT_TRUE(r.metadata["eval_worker_info"].is_null());
  EXPECT_EQ(r.eval_log.rfind("\nTest result on platform unknown:\n", 0), 0u) << r.eval_log;
  EXPECT_EQ(r.runtime, 1.0);
}

TEST(ScoringProbe, TimingStats) {
  TimingStats s = ComputeTimingStats({1, 2, 3, 4, 10});
  EXPECT_EQ(TimingStatsToReferenceJson(s), Scoring()["get_timing_stats"]);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(10.0));  // population std
  EXPECT_EQ(ComputeTimingStats({2.0, 2.2}).median, 2.1);
  EXPECT_EQ(RoundTimingStats(ComputeTimingStats({0.123456, 0.123459})).std, 1.5e-06);
  EXPECT_THROW(ComputeTimingStats(std::vector<double>{}), Error);
  EXPECT_THROW(ComputeTimingStats({1.0, std::nan("")}), Error);
}

TEST(ScoringProbe, RoundSignificant) {
  EXPECT_EQ(RoundSignificant(2.0333333333333337), 2.03);
  EXPECT_EQ(RoundSignificant(9.999e10), 1e11);
  EXPECT_EQ(RoundSignificant(0.0094280904), 0.00943);
  EXPECT_EQ(RoundSignificant(-1234.5), -1230.0);
  EXPECT_EQ(RoundSignificant(0.0), 0.0);
  EXPECT_EQ(RoundSignificant(999.96), 1000.0);
}

// --- combination ---

EvalResult ArchResult(double runtime, const Json& stats, int perf, bool compiled = true) {
  EvalResult r;
  r.compiled = compiled;
  r.correctness = perf == 5;
  r.runtime = perf == 5 ? runtime : -1;
  r.runtime_stats = perf == 5 ? stats : Json::object();
  r.perf_score = perf;
  r.status = perf == 5 ? EvalStatus::kCorrect : perf == 3 ? EvalStatus::kTestsFailed : EvalStatus::kBuildError;
  return r;
}

TEST(ScoringProbe, CombineGpuArch) {
  const Json& g = Scoring()["combine_gpu_arch"];
  Json bmg = {{"task.py::T::test_bench[a]", {{"mean", 1.0}, {"speedup", 2.0}}},
              {"task.py::T::test_bench[b]", {{"mean", 3.0}, {"speedup", 0.5}}}};
  Json lnl = {{"task.py::T::test_bench[a]", {{"mean", 3.0}, {"speedup", 4.0}}}};
  EvalResult two = CombineArchResults({{"bmg", ArchResult(1.0, bmg, 5)}, {"lnl", ArchResult(3.0, lnl, 5)}});
  EXPECT_EQ(two.ToReferenceJson(), g["two_correct"]) << two.ToReferenceJson().dump(1);
  EXPECT_EQ(two.status, EvalStatus::kCorrect);

  EvalResult incorrect = CombineArchResults({{"bmg", ArchResult(1.0, bmg, 5)}, {"lnl", ArchResult(3.0, lnl, 3)}});
  EXPECT_EQ(incorrect.ToReferenceJson(), g["one_incorrect"]) << incorrect.ToReferenceJson().dump(1);
  EXPECT_EQ(incorrect.status, EvalStatus::kTestsFailed);
  EXPECT_EQ(incorrect.status_detail.rfind("lnl: ", 0), 0u);

  EvalResult not_compiled =
      CombineArchResults({{"bmg", ArchResult(1.0, bmg, 5)}, {"lnl", ArchResult(3.0, lnl, 1, false)}});
  EXPECT_EQ(not_compiled.ToReferenceJson(), g["one_not_compiled"]) << not_compiled.ToReferenceJson().dump(1);
  EXPECT_EQ(not_compiled.status, EvalStatus::kBuildError);

  // The std::map overload orders by arch.
  std::map<std::string, EvalResult> as_map{{"lnl", ArchResult(3.0, lnl, 5)}, {"bmg", ArchResult(1.0, bmg, 5)}};
  EXPECT_EQ(CombineArchResults(as_map).ToReferenceJson(), g["two_correct"]);
  EXPECT_THROW(CombineArchResults(std::vector<std::pair<std::string, EvalResult>>{}), Error);
}

TEST(ScoringProbe, CombineWithoutReferenceHasNoNaN) {
  // Fixtures README: the reference's combined speedup was NaN (geometric mean of -1); ours is -1 with
  // status no_reference, and the fitness falls back to 1/runtime.
  EvalResult one = ConvertTestResult(ProbeCase("correct_no_reference"), std::nullopt);
  EvalResult combined = CombineArchResults({{"cpu", one}, {"bmg", one}});
  EXPECT_EQ(combined.runtime_improvement, -1);
  EXPECT_EQ(combined.status, EvalStatus::kNoReference);
  EXPECT_EQ(combined.perf_score, 5);
  EXPECT_DOUBLE_EQ(ComputePerformanceScore(combined), 7.0);
  ExpectAllFinite(combined.ToJson());
  EXPECT_EQ(combined.benchmarks.size(), 2u);
  EXPECT_EQ(combined.benchmarks[1].arch, "bmg");
}

TEST(ScoringProbe, ComputePerformanceScore) {
  const Json& g = Scoring()["compute_performance_score"];
  EvalResult r;
  r.perf_score = 5;
  r.correctness = true;
  r.runtime = 4.0;
  r.runtime_improvement = 2.0;
  EXPECT_EQ(ComputePerformanceScore(r), g["speedup_2"].get<double>());
  r.runtime_improvement = -1;
  EXPECT_EQ(ComputePerformanceScore(r), g["no_reference_runtime_4ms"].get<double>());
  EvalResult incorrect;
  incorrect.perf_score = 3;
  EXPECT_EQ(ComputePerformanceScore(incorrect), g["incorrect"].get<double>());
  EvalResult unevaluated;
  try {
    ComputePerformanceScore(unevaluated);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), g["unevaluated"]["error"]["message"].get<std::string>());
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

TEST(ScoringProbe, PostprocessPytestOutput) {
  std::string out =
      "============================= test session starts ==============================\n"
      "collected 1 item\n\n"
      "task.py::T::a PASSED\n"
      "E   TypeError: bad tensor([[1., 2.],\n        [3., 4.]], dtype=torch.float64)\n";
  EXPECT_EQ(PostprocessPytestOutput(out + "\n" + "err"), Scoring()["postprocess_pytest_output"].get<std::string>());
}

// --- end to end: relu_cpu through the reference ---

TEST(ScoringE2E, ReluCpu) {
  const Json e2e = Golden("e2e_relu_cpu");
  const Json& eq = e2e["candidate_reference_equivalent"];
  const TestResult reference = DecodeTR(eq["test_results"]["reference"]);
  for (const char* name : {"candidate_reference_equivalent", "candidate_slower"}) {
    const Json& run = e2e[name];
    const Json& golden = run["score"];
    EvalResult r = ConvertTestResult(DecodeTR(run["test_results"]["custom"]), reference);
    EXPECT_EQ(r.eval_log, golden["eval_log"].get<std::string>()) << name;
    EXPECT_EQ(r.ReferenceStatus(), golden["status"].get<std::string>());
    EXPECT_EQ(r.status, EvalStatus::kCorrect);
    Json expected = golden["exec_result"];
    Json ours = r.ToReferenceJson();
    // B16: our speedup divides the unrounded means; it agrees with the reference's to within the 3-digit
    // rounding of both means (< 0.2 % each here).
    const std::string bench = "task.py::TestReluCpu::test_benchmark";
    const auto samples = [&](const Json& tr) {
      return tr["performance_result"]["output_data"]["runtimes"][bench].get<std::vector<double>>();
    };
    const double speedup = Mean(samples(eq["test_results"]["reference"])) / Mean(samples(run["test_results"]["custom"]));
    const double golden_speedup = expected["runtime_improvement"].get<double>();
    EXPECT_NEAR(speedup / golden_speedup, 1.0, 0.01) << name;
    EXPECT_DOUBLE_EQ(ours["runtime_stats"][bench]["speedup"].get<double>(), speedup);
    EXPECT_DOUBLE_EQ(ours["runtime_improvement"].get<double>(), speedup);
    expected["runtime_stats"][bench]["speedup"] = ours["runtime_stats"][bench]["speedup"];
    expected["runtime_improvement"] = ours["runtime_improvement"];
    EXPECT_EQ(ours, expected) << name << ours.dump(1);
    EXPECT_NEAR(ComputePerformanceScore(r), golden["compute_performance_score"].get<double>(), 0.01);

    EvalResult combined = CombineArchResults({{"cpu", r}});
    Json expected_combined = golden["combine_gpu_arch_results"];
    expected_combined["runtime_stats"]["cpu"][bench]["speedup"] = speedup;
    expected_combined["runtime_improvement"] = speedup;
    EXPECT_EQ(combined.ToReferenceJson(), expected_combined) << name;
    EXPECT_EQ(combined.status, EvalStatus::kCorrect);
    EXPECT_EQ(combined.eval_log, r.eval_log);
    EXPECT_EQ(ComputePerformanceScore(combined), ComputePerformanceScore(r));
  }
}

}  // namespace
}  // namespace kf
