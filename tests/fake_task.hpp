// The task of the tests that run the pipeline with a fake harness (nothing is built or run for real): a
// config, one EVOLVE block in kernel.cpp, and the test names the fake harness answers for. Header-only: also
// used by kf_fake_worker_child, which does not link the gtest helpers.
#pragma once

#include <string>

#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/task.hpp"

namespace kf::testing {

/// A Task from `config_yaml` (config.yaml as is) and kernel.cpp holding `evolve` in its EVOLVE block, created
/// without test discovery; correctness test "TestX::test_a", profile (performance) test "TestX::test_bench".
inline Task MakeFakeTask(const std::string& config_yaml, const std::string& evolve = "int k() { return 1; }\n") {
  MemoryFileMap files;
  files.Set("config.yaml", config_yaml);
  files.Set("kernel.cpp", "// [EVOLVE_START]\n" + evolve + "// [EVOLVE_END]\n");
  TaskCreateOptions o;
  o.discover_tests = false;
  Task task = Task::CreateFromFiles(files, o).first;
  task.correctness_tests = {"TestX::test_a"};
  task.profile_tests = {"TestX::test_bench"};
  return task;
}

}  // namespace kf::testing
