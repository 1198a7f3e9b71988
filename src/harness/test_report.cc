// Test reports and the verdict of a test run (see test_report.hpp).
#include "harness/test_report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kernelfoundry/error.hpp"

namespace kf::harness_internal {

int TestReport::Count(std::string_view status) const {
  int n = 0;
  for (const Test& t : tests) n += t.status == status ? 1 : 0;
  return n;
}

const TestReport::Test* TestReport::Find(std::string_view name) const {
  for (const Test& t : tests) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

TestReport ParseTestReport(const std::string& text) {
  Json doc = ParseJson(text, "result document");
  auto bad = [](const std::string& field, const std::string& what) {
    return Error(ErrorKind::kInvalidArgument, "expected " + what, "result document", field);
  };
  if (!doc.is_object()) throw bad("", "a JSON object");
  TestReport out;
  if (!doc.contains("tests") || !doc["tests"].is_array()) throw bad("tests", "an array of test entries");
  for (const Json& t : doc["tests"]) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("status") ||
        !t["status"].is_string()) {
      throw bad("tests", "entries {\"name\": string, \"status\": string, ...}");
    }
    TestReport::Test s;
    s.name = t["name"].get<std::string>();
    s.status = t["status"].get<std::string>();
    if (s.status != "passed" && s.status != "failed" && s.status != "skipped" && s.status != "error") {
      throw bad("tests." + s.name + ".status", "passed, failed, skipped or error, got " + s.status);
    }
    if (t.contains("kind") && t["kind"].is_string()) s.kind = t["kind"].get<std::string>();
    if (t.contains("message") && t["message"].is_string()) s.message = t["message"].get<std::string>();
    out.tests.push_back(std::move(s));
  }
  if (doc.contains("runtimes") && !doc["runtimes"].is_null()) {
    if (!doc["runtimes"].is_object()) throw bad("runtimes", "an object {name: [ms, ...]}");
    for (const auto& [name, list] : doc["runtimes"].items()) {
      if (!list.is_array()) throw bad("runtimes." + name, "an array of milliseconds");
      for (const Json& v : list) {
        if (!v.is_number()) throw bad("runtimes." + name, "numbers (milliseconds)");
      }
    }
    out.runtimes = doc["runtimes"];
  }
  if (doc.contains("elapsed_ms") && doc["elapsed_ms"].is_number() && doc["elapsed_ms"].get<double>() >= 0) {
    out.elapsed_s = doc["elapsed_ms"].get<double>() / 1000.0;
  }
  if (doc.contains("skipped_reason") && doc["skipped_reason"].is_string()) {
    out.skipped_reason = doc["skipped_reason"].get<std::string>();
  }
  if (doc.contains("build_error") && !doc["build_error"].is_null()) {
    const Json& b = doc["build_error"];
    if (!b.is_object() || !b.contains("message") || !b["message"].is_string()) {
      throw bad("build_error", "an object {\"message\": string, \"log\": string}");
    }
    out.build_error = TestReport::BuildError{
        b["message"].get<std::string>(), b.contains("log") && b["log"].is_string() ? b["log"].get<std::string>() : ""};
  }
  out.document = std::move(doc);
  return out;
}

std::optional<TestReport> ReadTestReport(const ProcessRun& run, std::string* problem) {
  if (!run.result_data || run.result_data->empty()) {
    *problem = "the test run wrote no result report (it ended early, crashed, or does not use the KernelFoundry "
               "plugin/SDK)";
    return std::nullopt;
  }
  try {
    return ParseTestReport(*run.result_data);
  } catch (const Error& e) {
    *problem = std::string("the result report is invalid: ") + e.what();
    return std::nullopt;
  }
}

namespace {

bool IsShapeTest(const std::string& name) { return name.find("test_output_shapes_match") != std::string::npos; }

Classification ClassifyFailures(const TestReport& report) {
  bool shape_passed = false, shape_failed = false;
  for (const TestReport::Test& t : report.tests) {
    if (!IsShapeTest(t.name)) continue;
    shape_passed = shape_passed || t.status == "passed";
    shape_failed = shape_failed || t.status == "failed" || t.status == "error";
  }
  // The reference: any passing shape test means a value mismatch (perf 4). The failing tests and their
  // messages are in the run's output and the report, not in the one-line detail.
  if (shape_passed) return {EvalStatus::kValueMismatch, "tests failed although the output shapes match"};
  if (shape_failed) return {EvalStatus::kShapeMismatch, "the output shape test failed"};
  return {EvalStatus::kTestsFailed, "tests failed (no output shape test result)"};
}

}  // namespace

Classification JudgeTestRun(const ProcessRun& run, const std::optional<TestReport>& report,
                            std::string_view report_problem, const std::vector<std::string>& expected,
                            ExitCodes exit_codes) {
  const int rc = run.result.returncode;
  if (auto decided = ClassifyTermination(run.reason, rc, run.result.message.value_or(""))) return *decided;
  if (exit_codes == ExitCodes::kPytest && run.reason == TerminationReason::kExited) {
    switch (rc) {
      case 2: return {EvalStatus::kPytestInterrupted, "pytest was interrupted (exit code 2)"};
      case 3: return {EvalStatus::kPytestInternal, "pytest internal error (exit code 3)"};
      case 4: return {EvalStatus::kPytestUsage, "pytest usage error (exit code 4)"};
      case 5: return {EvalStatus::kNoTestsCollected, "pytest collected no tests (exit code 5)"};
      default: break;
    }
  }
  if (!report) {
    return {EvalStatus::kTestError, fmt::format("protocol error: {} (exit code {})", report_problem, rc)};
  }
  // Issue 10 fault 7: a kernel the run compiles (OpenCL JIT…) that does not build is a build error, not a
  // failed (or shape-mismatching) test.
  if (report->build_error) return {EvalStatus::kBuildError, report->build_error->message};
  std::vector<std::string> missing;
  for (const std::string& name : expected) {
    if (report->Find(name) == nullptr) missing.push_back(name);
  }
  if (!missing.empty()) {
    std::string names;
    for (size_t i = 0; i < missing.size() && i < 5; ++i) names += (i ? ", " : "") + missing[i];
    if (missing.size() > 5) names += fmt::format(", … ({} in all)", missing.size());
    return {EvalStatus::kTestError,
            fmt::format("protocol error: the run did not report {} of the {} expected test(s): {} (exit code {})",
                        missing.size(), expected.size(), names, rc)};
  }
  if (report->Count("failed") + report->Count("error") > 0) return ClassifyFailures(*report);
  if (report->tests.empty() && expected.empty()) {
    return {EvalStatus::kTestError, fmt::format("protocol error: the run reported no test (exit code {})", rc)};
  }
  if (report->Count("passed") == 0) {
    return {EvalStatus::kSkipped, "every test was skipped" +
                                      (report->skipped_reason ? " (" + *report->skipped_reason + ")" : std::string())};
  }
  if (run.reason == TerminationReason::kEndMarkerGrace) {
    return {EvalStatus::kCorrect, "all tests passed; the process did not exit afterwards and was killed"};
  }
  if (rc != 0) {
    return {EvalStatus::kTestError, fmt::format("exit code {} although every reported test passed", rc)};
  }
  return {EvalStatus::kCorrect, ""};
}

Classification RequireRuntimes(Classification verdict, const TestReport& report,
                               const std::vector<std::string>& expected,
                               const std::function<std::string(const std::string&)>& runtime_key) {
  if (verdict.status != EvalStatus::kCorrect) return verdict;
  std::string missing;
  for (const TestReport::Test& t : report.tests) {
    if (t.status != "passed") continue;
    if (!expected.empty() && std::find(expected.begin(), expected.end(), t.name) == expected.end()) continue;
    const std::string key = runtime_key(t.name);
    if (!report.runtimes.contains(key) || report.runtimes[key].empty()) {
      missing += (missing.empty() ? "" : ", ") + t.name;
    }
  }
  if (missing.empty()) return verdict;
  return {EvalStatus::kNoMeasurement,
          "no runtime measurement for benchmark(s): " + missing + " (measure_runtime was not called)"};
}

EvalStatus EvalStatusFor(PairedStatus status) {
  switch (status) {
    case PairedStatus::kCorrect: return EvalStatus::kCorrect;
    case PairedStatus::kNoisy: return EvalStatus::kNoisy;
    case PairedStatus::kSuspicious: return EvalStatus::kSuspicious;
    case PairedStatus::kInputMutated: return EvalStatus::kInputMutated;
    case PairedStatus::kOutputChangedUnderTiming: return EvalStatus::kOutputChangedUnderTiming;
    case PairedStatus::kError: break;
  }
  return EvalStatus::kTestError;
}

Classification JudgeTiming(const PairedTiming& timing) {
  Classification worst{EvalStatus::kCorrect, ""};
  for (const auto& [name, record] : timing.records) {
    const EvalStatus s = EvalStatusFor(record.status);
    if (PerfScoreFor(s) < PerfScoreFor(worst.status) ||
        (worst.status == EvalStatus::kCorrect && s != EvalStatus::kCorrect)) {
      worst = {s, name + (record.detail.empty() ? "" : ": " + record.detail)};
    }
  }
  return worst;
}

void FillPairedRun(const TestReport& report, PhaseRun* out) {
  const Json& doc = report.document;
  try {
    out->timing = PairedTiming::FromJson(Json{{"paired", doc.value("paired", Json::object())},
                                              {"conditions", doc.value("conditions", Json::object())}});
  } catch (const Error& e) {
    out->verdict = {EvalStatus::kTestError, "protocol error: the timing record " + e.field() + " is invalid: " +
                                                e.message()};
    return;
  }
  out->verdict = JudgeTiming(*out->timing);
  ProcessResult ref = out->result;
  ref.output_data = Json{{"runtimes", doc.value("reference_runtimes", Json::object())}};
  Classification ref_verdict{EvalStatus::kCorrect, ""};
  for (const Json& t : doc.value("reference_tests", Json::array())) {
    const std::string status = t.value("status", std::string());
    if (status == "failed" || status == "error") {
      ref_verdict = {EvalStatus::kTestsFailed, "the reference's " + t.value("name", std::string()) + " " + status};
      ref.returncode = 1;
      ref.output_data.reset();
      break;
    }
  }
  out->reference_result = std::move(ref);
  out->reference_verdict = std::move(ref_verdict);
}

void JudgePerformanceRun(const TestReport& report, const std::vector<std::string>& expected, bool paired,
                         const std::function<std::string(const std::string&)>& runtime_key, PhaseRun* out) {
  out->verdict = RequireRuntimes(out->verdict, report, expected, runtime_key);
  if (paired && out->verdict.status == EvalStatus::kCorrect) FillPairedRun(report, out);
  if (out->verdict.status == EvalStatus::kCorrect || out->timing) {
    out->result.output_data = Json{{"runtimes", report.runtimes}};
  } else if (out->verdict.status == EvalStatus::kNoMeasurement) {
    out->result.returncode = -1;
    std::optional<std::string>& message = out->result.message;
    message = message && !message->empty() ? *message + "\n" + out->verdict.detail : out->verdict.detail;
  }
}

void AttachBuildError(const TestReport& report, ProcessResult* result) {
  if (!report.build_error) return;
  const std::string note = "kernel build error: " + report.build_error->message;
  result->message = result->message && !result->message->empty() ? *result->message + "\n" + note : note;
  result->stderr_text =
      report.build_error->message + "\n\nbuild log:\n" + report.build_error->log + "\n" + result->stderr_text;
}

void MarkFailureForWire(const Classification& verdict, ProcessResult* result) {
  if (IsCorrectFamily(verdict.status) || verdict.status == EvalStatus::kSkipped) return;
  const bool reads_as_pass = result->returncode == 0;
  const bool reads_as_test_failure = result->returncode == 1 && verdict.status == EvalStatus::kTestError;
  if (!reads_as_pass && !reads_as_test_failure) return;
  const int original = result->returncode;
  result->returncode = 70;  // EX_SOFTWARE
  std::string note = std::string(EvalStatusName(verdict.status)) + ": " + verdict.detail;
  if (note.find("exit code") == std::string::npos) note += fmt::format(" (exit code {})", original);
  result->message = result->message && !result->message->empty() ? *result->message + "\n" + note : note;
}

}  // namespace kf::harness_internal
