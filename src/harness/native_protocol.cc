// Native harness protocol helpers: result-document parsing, the pytest-shaped report, buildtime defines and
// the gpu_arch -> nvcc -arch mapping (see native_protocol.hpp and include/kernelfoundry/sdk/task_sdk.hpp).
#include "harness/native_protocol.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include <cctype>
#include <regex>

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/pytest_summary.hpp"

namespace kf::native {

std::string PytestStyleReport(const harness_internal::TestReport& report, const std::string& program,
                              double wall_s) {
  std::string out;
  PytestSummary summary;
  summary.seconds = report.elapsed_s.value_or(wall_s);
  for (const auto& t : report.tests) {
    const std::string word = t.status == "passed" ? "PASSED" : t.status == "skipped" ? "SKIPPED"
                             : t.status == "error" ? "ERROR" : "FAILED";
    out += program + "::" + t.name + " " + word;
    if (!t.message.empty()) out += " - " + t.message.substr(0, t.message.find('\n'));
    out += "\n";
    summary.counts[t.status == "error" ? "errors" : t.status] += 1;
  }
  return out + FormatPytestSummary(summary) + "\n";
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
  static const std::regex kSm(R"((?:sm_?|compute_)?([0-9]{1,2})\.?([0-9][af]?))");
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
