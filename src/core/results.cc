// ProcessResult / BuildResult / TestResult (see include/kernelfoundry/results.hpp; spec §3.1–§3.3).
#include "kernelfoundry/results.hpp"

#include <cstdint>

#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

/// Re-establishes the text invariant: valid UTF-8, no terminal escapes.
std::string Sanitize(std::string_view bytes) { return StripTerminalEscapes(DecodeUtf8Replace(bytes)); }

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::kParse, what, "", where);
}

std::string Join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

const char* TypeName(const Json& j) { return j.type_name(); }

ProcessResult DecodeProcess(const Json& j, const std::string& where) {
  if (!j.is_object()) Fail(where, std::string("expected a ProcessResult object, got ") + TypeName(j));
  static constexpr const char* kKeys[] = {"returncode", "stdout", "stderr", "message", "output_data"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      Fail(Join(where, key), "unexpected key '" + key +
                                 "' in ProcessResult (allowed: returncode, stdout, stderr, message, output_data)");
    }
  }
  ProcessResult r;
  auto rc = j.find("returncode");
  if (rc == j.end()) Fail(Join(where, "returncode"), "missing required key 'returncode'");
  if (!rc->is_number_integer()) {
    Fail(Join(where, "returncode"), std::string("expected an integer, got ") + TypeName(*rc));
  }
  const bool in_range = rc->is_number_unsigned() ? rc->get<uint64_t>() <= uint64_t{INT32_MAX}
                                                 : rc->get<int64_t>() >= INT32_MIN && rc->get<int64_t>() <= INT32_MAX;
  if (!in_range) Fail(Join(where, "returncode"), "integer out of range for a return code");
  const int64_t rc_value = rc->get<int64_t>();
  r.returncode = static_cast<int>(rc_value);
  for (auto [key, dst] : {std::pair{"stdout", &r.stdout_text}, std::pair{"stderr", &r.stderr_text}}) {
    auto it = j.find(key);
    if (it == j.end()) Fail(Join(where, key), std::string("missing required key '") + key + "'");
    if (!it->is_string()) Fail(Join(where, key), std::string("expected a string, got ") + TypeName(*it));
    *dst = Sanitize(it->get_ref<const std::string&>());
  }
  if (auto it = j.find("message"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) Fail(Join(where, "message"), std::string("expected a string or null, got ") + TypeName(*it));
    r.message = Sanitize(it->get_ref<const std::string&>());
  }
  if (auto it = j.find("output_data"); it != j.end() && !it->is_null()) r.output_data = *it;
  return r;
}

std::optional<ProcessResult> DecodeOptionalProcess(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return DecodeProcess(*it, Join(where, key));
}

std::optional<Json> OptionalJson(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return *it;
}

Json EncodeOptional(const std::optional<ProcessResult>& r) { return r ? r->Encode() : Json(nullptr); }

std::optional<TestResult> DecodeTest(const Json& j, const std::string& where) {
  if (j.is_null()) return std::nullopt;
  if (!j.is_object()) Fail(where, std::string("expected a TestResult object or null, got ") + TypeName(j));
  TestResult t;
  t.worker_info = OptionalJson(j, "worker_info");
  t.correctness_result = DecodeOptionalProcess(j, "correctness_result", where);
  t.performance_result = DecodeOptionalProcess(j, "performance_result", where);
  if (auto it = j.find("trace_results"); it != j.end() && !it->is_null()) {
    const std::string tw = Join(where, "trace_results");
    if (!it->is_object()) Fail(tw, std::string("expected an object, got ") + TypeName(*it));
    for (const auto& [name, value] : it->items()) t.trace_results.emplace_back(name, DecodeProcess(value, Join(tw, name)));
  }
  if (auto it = j.find("results_per_gpu"); it != j.end() && !it->is_null()) {
    const std::string rw = Join(where, "results_per_gpu");
    if (!it->is_object()) Fail(rw, std::string("expected an object or null, got ") + TypeName(*it));
    t.results_per_gpu.emplace();
    for (const auto& [arch, value] : it->items()) {
      auto sub = DecodeTest(value, Join(rw, arch));
      if (!sub) Fail(Join(rw, arch), "expected a TestResult object, got null");
      t.results_per_gpu->emplace_back(arch, std::move(*sub));
    }
  }
  return t;
}

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

ProcessResult ProcessResult::Decode(const Json& j) { return DecodeProcess(j, "ProcessResult"); }

// ---- BuildResult ----

Json BuildResult::Encode() const {
  Json j = Json::object();
  j["worker_info"] = worker_info ? *worker_info : Json(nullptr);
  j["result"] = EncodeOptional(result);
  j["artifacts"] = artifacts ? artifacts->Encode() : Json(nullptr);
  return j;
}

std::optional<BuildResult> BuildResult::Decode(const Json& j) {
  if (j.is_null()) return std::nullopt;
  const std::string where = "BuildResult";
  if (!j.is_object()) Fail(where, std::string("expected a BuildResult object or null, got ") + TypeName(j));
  BuildResult b;
  b.worker_info = OptionalJson(j, "worker_info");
  b.result = DecodeOptionalProcess(j, "result", where);
  if (auto it = j.find("artifacts"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) Fail(Join(where, "artifacts"), std::string("expected an object, got ") + TypeName(*it));
    b.artifacts = MemoryFileMap::FromJson(*it);
  }
  return b;
}

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

std::optional<TestResult> TestResult::Decode(const Json& j) { return DecodeTest(j, "TestResult"); }

bool TestResult::operator==(const TestResult& other) const {
  return worker_info == other.worker_info && correctness_result == other.correctness_result &&
         performance_result == other.performance_result && trace_results == other.trace_results &&
         results_per_gpu == other.results_per_gpu;
}

}  // namespace kf
