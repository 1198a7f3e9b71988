// The table of harness kinds (kernelfoundry/harness.hpp HarnessDescriptors): for each kind, how core sees it
// (its tests and structure checks), how to make its harness, and what kf validate says it checks. Adding a
// kind is one row here plus its implementation file.
#include <fmt/format.h>

#include <filesystem>

#include "harness/native_harness.hpp"
#include "harness/pytest_harness.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/pytest_collect.hpp"

namespace kf {
namespace {

std::vector<ConfigProblem> PytestProblems(const Task& task) {
  std::vector<ConfigProblem> out;
  if (!task.task_data.Contains("task.py")) out.push_back({"", "task.py is missing at the top level"});
  if (!task.task_data.Contains("conftest.py")) out.push_back({"", "conftest.py is missing at the top level"});
  if (task.correctness_tests.empty()) {
    out.push_back({"", "no correctness test (a test without @pytest.mark.performance)"});
  }
  if (task.profile_tests.empty()) out.push_back({"", "no performance test (mark one with @pytest.mark.performance)"});
  return out;
}

std::vector<HarnessDescriptor> MakeTable() {
  std::vector<HarnessDescriptor> table;

  HarnessDescriptor pytest;
  pytest.kind.name = "pytest";
  pytest.kind.collector = PytestCollector();
  pytest.kind.problems = PytestProblems;
  pytest.make = [](const Task& task) -> std::unique_ptr<Harness> {
    const bool named = task.config.is_object() && task.config.contains("harness") && !task.config["harness"].is_null();
    if (!named && !task.task_data.Contains("task.py")) {
      throw Error(ErrorKind::kInvalidArgument,
                  "the task has no task.py and names no harness (set `harness: pytest` or `harness: native`)",
                  "config.yaml", "harness");
    }
    return MakePytestHarness();
  };
  pytest.checks = {"task.py and conftest.py at the top level", "correctness and performance tests collected by pytest",
                   "an EVOLVE block", "task_name and job_name"};
  table.push_back(std::move(pytest));

  HarnessDescriptor native;
  native.kind.name = "native";
  native.kind.declared_tests = NativeDeclaredTests;
  native.kind.problems = [](const Task& task) { return NativeConfigProblems(task.config, task.task_data); };
  native.make = [](const Task& task) -> std::unique_ptr<Harness> {
    // Config mistakes are the task's, not the candidate's: refuse before building anything (kf run: exit 3).
    std::vector<ConfigProblem> problems = NativeConfigProblems(task.config, task.task_data);
    if (!problems.empty()) {
      throw Error(ErrorKind::kInvalidArgument, problems.front().message, "config.yaml", problems.front().field);
    }
    return MakeNativeHarness(task.config);
  };
  native.reference_uses_candidate_build = true;
  native.checks = {"config build commands (build: [...] or cmake: true)",
                   "config tests: correctness and performance names", "an EVOLVE block", "task_name and job_name"};
  table.push_back(std::move(native));
  return table;
}

}  // namespace

const std::vector<HarnessDescriptor>& HarnessDescriptors() {
  static const std::vector<HarnessDescriptor> table = MakeTable();
  return table;
}

const HarnessDescriptor& HarnessDescriptorFor(const Json& config, const std::string& config_file) {
  const std::vector<HarnessDescriptor>& table = HarnessDescriptors();
  if (!config.is_object() || !config.contains("harness") || config["harness"].is_null()) return table.front();
  const Json& h = config["harness"];
  std::string names;
  for (const HarnessDescriptor& d : table) names += (names.empty() ? "" : " or ") + d.kind.name;
  if (!h.is_string()) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("expected a string ({}), got {}", names, h.dump()),
                config_file, "harness");
  }
  for (const HarnessDescriptor& d : table) {
    if (d.kind.name == h.get<std::string>()) return d;
  }
  throw Error(ErrorKind::kInvalidArgument, fmt::format("unknown harness {} (expected {})", h.dump(), names),
              config_file, "harness");
}

TaskKindLookup HarnessTaskKinds() {
  return [](const Json& config, const std::string& config_file) -> const TaskKind& {
    return HarnessDescriptorFor(config, config_file).kind;
  };
}

}  // namespace kf
