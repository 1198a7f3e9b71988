// ProcessResult / BuildResult / TestResult (see include/kernelfoundry/results.hpp; spec §3.1–§3.3).
#include "kernelfoundry/results.hpp"

#include <cstdint>

#include "core/codec_impl.hpp"
#include "core/json_view.hpp"
#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

using internal::NlohmannView;

/// Re-establishes the text invariant: valid UTF-8, no terminal escapes.
std::string Sanitize(std::string_view bytes) { return internal::SanitizeText(bytes); }

Json EncodeOptional(const std::optional<ProcessResult>& r) { return r ? r->Encode() : Json(nullptr); }

}  // namespace

// ---- ProcessResult ----

ProcessResult ProcessResult::Create(int returncode, std::string_view stdout_bytes, std::string_view stderr_bytes,
                                    std::optional<std::string> message, std::optional<Json> output_data) {
  ProcessResult r;
  r.returncode = returncode;
  r.stdout_text = Sanitize(stdout_bytes);
  r.stderr_text = Sanitize(stderr_bytes);
  if (message) r.message = Sanitize(*message);
  r.output_data = std::move(output_data);
  return r;
}

std::string ProcessResult::CombineOutput(bool include_message) const {
  std::string out;
  if (include_message && message && !message->empty()) {
    out.reserve(message->size() + stdout_text.size() + stderr_text.size() + 2);
    out += *message;
    out += '\n';
  }
  out += stdout_text;
  out += '\n';
  out += stderr_text;
  return out;
}

std::optional<ProcessResult> ProcessResult::Merge(const std::vector<std::pair<std::string, ProcessResult>>& parts) {
  if (parts.empty()) return std::nullopt;
  ProcessResult r;
  std::string messages;
  Json data = Json::object();
  bool first = true;
  for (const auto& [name, part] : parts) {
    if (!first) {
      r.stdout_text += '\n';
      r.stderr_text += '\n';
    }
    first = false;
    r.stdout_text += part.stdout_text;
    r.stderr_text += part.stderr_text;
    // B9 fixed: any failure (including a signal, i.e. a negative code) fails the merge; the first wins.
    if (r.returncode == 0) r.returncode = part.returncode;
    if (part.message && !part.message->empty()) {
      if (!messages.empty()) messages += '\n';
      messages += *part.message;
    }
    if (part.output_data) data[name] = *part.output_data;
  }
  r.message = std::move(messages);
  if (!data.empty()) r.output_data = std::move(data);
  return r;
}

Json ProcessResult::Encode() const {
  Json j = Json::object();
  j["returncode"] = returncode;
  j["stdout"] = stdout_text;
  j["stderr"] = stderr_text;
  j["message"] = message ? Json(*message) : Json(nullptr);
  j["output_data"] = output_data ? *output_data : Json(nullptr);
  return j;
}

ProcessResult ProcessResult::Decode(const Json& j) { return internal::DecodeProcessView(NlohmannView(j), "ProcessResult"); }

// ---- BuildResult ----

Json BuildResult::Encode() const {
  Json j = Json::object();
  j["worker_info"] = worker_info ? *worker_info : Json(nullptr);
  j["result"] = EncodeOptional(result);
  j["artifacts"] = artifacts ? artifacts->Encode() : Json(nullptr);
  return j;
}

std::optional<BuildResult> BuildResult::Decode(const Json& j) { return internal::DecodeBuildView(NlohmannView(j)); }

// ---- TestResult ----

TestResult::TestResult() = default;
TestResult::TestResult(const TestResult&) = default;
TestResult::TestResult(TestResult&&) noexcept = default;
TestResult& TestResult::operator=(const TestResult&) = default;
TestResult& TestResult::operator=(TestResult&&) noexcept = default;
TestResult::~TestResult() = default;

TestResult TestResult::Merge(const std::vector<std::pair<std::string, TestResult>>& per_arch) {
  if (per_arch.size() == 1) return per_arch.front().second;
  TestResult t;
  t.worker_info = Json::object();
  std::vector<std::pair<std::string, ProcessResult>> correctness, performance;
  for (const auto& [arch, r] : per_arch) {
    if (r.worker_info && !r.worker_info->is_null()) (*t.worker_info)[arch] = *r.worker_info;
    if (r.correctness_result) correctness.emplace_back(arch, *r.correctness_result);
    if (r.performance_result) performance.emplace_back(arch, *r.performance_result);
    for (const auto& [name, trace] : r.trace_results) t.trace_results.emplace_back(name + "_" + arch, trace);
  }
  t.correctness_result = ProcessResult::Merge(correctness);
  t.performance_result = ProcessResult::Merge(performance);
  t.results_per_gpu = per_arch;
  return t;
}

Json TestResult::Encode() const {
  Json j = Json::object();
  j["worker_info"] = worker_info ? *worker_info : Json(nullptr);
  j["correctness_result"] = EncodeOptional(correctness_result);
  j["performance_result"] = EncodeOptional(performance_result);
  Json traces = Json::object();
  for (const auto& [name, r] : trace_results) traces[name] = r.Encode();
  j["trace_results"] = std::move(traces);
  if (results_per_gpu) {
    Json per = Json::object();
    for (const auto& [arch, r] : *results_per_gpu) per[arch] = r.Encode();
    j["results_per_gpu"] = std::move(per);
  } else {
    j["results_per_gpu"] = nullptr;
  }
  return j;
}

std::optional<TestResult> TestResult::Decode(const Json& j) {
  return internal::DecodeTestView(NlohmannView(j), "TestResult");
}

bool TestResult::operator==(const TestResult& other) const {
  return worker_info == other.worker_info && correctness_result == other.correctness_result &&
         performance_result == other.performance_result && trace_results == other.trace_results &&
         results_per_gpu == other.results_per_gpu;
}

}  // namespace kf
