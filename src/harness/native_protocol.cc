// Native harness protocol helpers: result-document parsing, the pytest-shaped report, buildtime defines and
// the gpu_arch -> nvcc -arch mapping (see native_protocol.hpp and include/kernelfoundry/task_sdk.hpp).
#include "harness/native_protocol.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include <cctype>
#include <regex>

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"

namespace kf::native {

int ResultDoc::Count(const std::string& status) const {
  int n = 0;
  for (const auto& t : tests) n += t.status == status ? 1 : 0;
  return n;
}

ResultDoc ParseResultDoc(const std::string& text) {
  Json doc = ParseJson(text, "result document");
  auto bad = [](const std::string& field, const std::string& what) {
    return Error(ErrorKind::kInvalidArgument, "expected " + what, "result document", field);
  };
  if (!doc.is_object()) throw bad("", "a JSON object");
  ResultDoc out;
  if (!doc.contains("tests") || !doc["tests"].is_array()) throw bad("tests", "an array of test entries");
  for (const Json& t : doc["tests"]) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("status") ||
        !t["status"].is_string()) {
      throw bad("tests", "entries {\"name\": string, \"status\": string, ...}");
    }
    TestStatus s;
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
  if (doc.contains("build_error") && !doc["build_error"].is_null()) {
    const Json& b = doc["build_error"];
    if (!b.is_object() || !b.contains("message") || !b["message"].is_string()) {
      throw bad("build_error", "an object {\"message\": string, \"log\": string}");
    }
    out.build_error = ResultDoc::BuildError{b["message"].get<std::string>(),
                                            b.contains("log") && b["log"].is_string() ? b["log"].get<std::string>() : ""};
  }
  if (doc.contains("skipped_reason") && doc["skipped_reason"].is_string()) {
    out.skipped_reason = doc["skipped_reason"].get<std::string>();
  }
  return out;
}

std::string PytestStyleReport(const ResultDoc& doc, const std::string& program, double wall_s) {
  const double seconds = doc.elapsed_s.value_or(wall_s);
  std::string out;
  for (const auto& t : doc.tests) {
    std::string word = t.status == "passed" ? "PASSED" : t.status == "skipped" ? "SKIPPED"
                       : t.status == "error" ? "ERROR" : "FAILED";
    out += program + "::" + t.name + " " + word;
    if (!t.message.empty()) out += " - " + t.message.substr(0, t.message.find('\n'));
    out += "\n";
  }
  std::vector<std::string> parts;
  for (const char* s : {"failed", "passed", "skipped"}) {
    if (int n = doc.Count(s)) parts.push_back(fmt::format("{} {}", n, s));
  }
  if (int n = doc.Count("error")) parts.push_back(fmt::format("{} error{}", n, n == 1 ? "" : "s"));
  std::string counts = parts.empty() ? "no tests ran" : fmt::format("{}", fmt::join(parts, ", "));
  out += fmt::format("==================== {} in {:.2f}s ====================\n", counts, seconds);
  return out;
}

std::vector<std::string> BuildtimeDefines(const Json& hyperparameters) {
  std::vector<std::string> out;
  if (!hyperparameters.is_object() || !hyperparameters.contains("buildtime")) return out;
  const Json& bt = hyperparameters["buildtime"];
  if (bt.is_null()) return out;
  if (!bt.is_object()) {
    throw Error(ErrorKind::kInvalidArgument, "expected an object {NAME: value}", "config.yaml",
                "hyperparameters.buildtime");
  }
  static const std::regex kName("[A-Za-z_][A-Za-z0-9_]*");
  for (const auto& [name, value] : bt.items()) {
    const std::string field = "hyperparameters.buildtime." + name;
    if (!std::regex_match(name, kName)) {
      throw Error(ErrorKind::kInvalidArgument, "a define name must be a C identifier", "config.yaml", field);
    }
    std::string text;
    if (value.is_string()) text = value.get<std::string>();
    else if (value.is_boolean()) text = value.get<bool>() ? "1" : "0";
    else if (value.is_number()) text = DumpJson(value);
    else throw Error(ErrorKind::kInvalidArgument, "expected a string, number or boolean", "config.yaml", field);
    for (char c : text) {
      if (std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\'' || c == '\\' || c == '$' ||
          c == '`') {
        throw Error(ErrorKind::kInvalidArgument, "a define value may not contain spaces, quotes, $ or `",
                    "config.yaml", field);
      }
    }
    out.push_back("-D" + name + "=" + text);
  }
  return out;
}

std::string NvccArchFlag(const std::string& gpu_arch) {
  std::string a = gpu_arch.substr(0, gpu_arch.find(','));
  if (a == "native") return "-arch=native";
  static const std::regex kSm(R"((?:sm_?|compute_)?([0-9])\.?([0-9]a?))");
  std::smatch m;
  if (std::regex_match(a, m, kSm)) return "-arch=sm_" + m[1].str() + m[2].str();
  return "";
}

std::string FindNvcc() {
  namespace fs = std::filesystem;
  auto executable = [](const fs::path& p) { return ::access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p); };
  if (const char* env = std::getenv("KF_NVCC"); env && *env) return env;
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest = path;
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      if (!dir.empty() && executable(fs::path(dir) / "nvcc")) return (fs::path(dir) / "nvcc").string();
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  if (const char* home = std::getenv("CUDA_HOME"); home && *home && executable(fs::path(home) / "bin" / "nvcc"))
    return (fs::path(home) / "bin" / "nvcc").string();
  if (executable("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  return "nvcc";
}

}  // namespace kf::native
