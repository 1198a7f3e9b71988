// The native harness's config: the tests it declares and the checks that need no build (native_harness.hpp).
// Moved out of core: core learns about package kinds only through TaskKind (kinds.cc).
#include <fmt/format.h>

#include <filesystem>

#include "harness/native_harness.hpp"

namespace kf {

TestLists NativeDeclaredTests(const Json& config) {
  TestLists lists;
  if (!config.is_object() || !config.contains("tests") || !config["tests"].is_object()) return lists;
  const Json& t = config["tests"];
  auto read = [&](const char* key, std::vector<std::string>* out) {
    if (!t.contains(key) || !t[key].is_array()) return;
    for (const Json& n : t[key]) {
      if (n.is_string()) out->push_back(n.get<std::string>());
    }
  };
  read("correctness", &lists.correctness);
  read("performance", &lists.profile);
  return lists;
}

std::vector<ConfigProblem> NativeConfigProblems(const Json& config, const MemoryFileMap& files) {
  std::vector<ConfigProblem> out;
  if (!config.is_object()) return out;
  // A relative path inside the task tree (what the harness collects as an artifact).
  auto check_path = [&](const Json& v, const std::string& field) {
    if (!v.is_string() || v.get<std::string>().empty()) {
      out.push_back({field, fmt::format("expected a relative path inside the task, got {}", v.dump())});
      return;
    }
    const std::filesystem::path p(v.get<std::string>());
    bool up = false;
    for (const auto& part : p) up = up || part == "..";
    if (p.is_absolute() || up) out.push_back({field, fmt::format("'{}' is not inside the task", p.string())});
  };
  bool cmake = false;
  if (config.contains("cmake")) {
    if (!config["cmake"].is_boolean()) {
      out.push_back({"cmake", fmt::format("expected true or false, got {}", config["cmake"].dump())});
    } else if ((cmake = config["cmake"].get<bool>()) && !files.Contains("CMakeLists.txt")) {
      out.push_back({"cmake", "cmake: true but the task has no CMakeLists.txt at the top level"});
    }
  }
  if (config.contains("build")) {
    const Json& b = config["build"];
    if (b.is_string()) {
      if (b.get<std::string>().empty()) out.push_back({"build", "empty build command"});
    } else if (b.is_array()) {
      if (b.empty() && !cmake) out.push_back({"build", "empty list of build commands"});
      for (size_t i = 0; i < b.size(); ++i) {
        if (!b[i].is_string() || b[i].get<std::string>().empty()) {
          out.push_back({fmt::format("build[{}]", i),
                         fmt::format("expected a shell command (a non-empty string; quote it in YAML), got {}",
                                     b[i].dump())});
        }
      }
    } else {
      out.push_back({"build", fmt::format("expected a list of shell commands, got {}", b.dump())});
    }
  } else if (!cmake) {
    out.push_back({"build", "no build commands (`build: [cmd, ...]` or `cmake: true`)"});
  }
  if (config.contains("test_executable")) check_path(config["test_executable"], "test_executable");
  if (config.contains("executor_executable")) check_path(config["executor_executable"], "executor_executable");
  if (config.contains("artifacts")) {
    const Json& a = config["artifacts"];
    if (!a.is_array()) {
      out.push_back({"artifacts", fmt::format("expected a list of paths, got {}", a.dump())});
    } else {
      for (size_t i = 0; i < a.size(); ++i) check_path(a[i], fmt::format("artifacts[{}]", i));
    }
  }
  const Json* tests = config.contains("tests") ? &config["tests"] : nullptr;
  if (tests && !tests->is_object()) {
    out.push_back({"tests", fmt::format("expected {{correctness: [names], performance: [names]}}, got {}",
                                        tests->dump())});
    tests = nullptr;
  }
  for (const char* key : {"correctness", "performance"}) {
    const std::string field = std::string("tests.") + key;
    if (!tests || !tests->contains(key)) {
      out.push_back({field, fmt::format("no {} test (list the test names: tests: {{{}: [names]}})", key, key)});
      continue;
    }
    const Json& list = (*tests)[key];
    if (!list.is_array() || list.empty()) {
      out.push_back({field, fmt::format("expected a non-empty list of test names, got {}", list.dump())});
      continue;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_string() || list[i].get<std::string>().empty()) {
        out.push_back({fmt::format("{}[{}]", field, i), fmt::format("expected a test name, got {}", list[i].dump())});
      }
    }
  }
  return out;
}

}  // namespace kf
