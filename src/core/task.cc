// Task: creation from a package (spec §1.2), structure checks, info, with_blocks (spec §3.4; B11/B12 fixed),
// apply_config. The JSON codec and the DB row are in task_codec.cc, the hash id in hash_id.cc.
#include "kernelfoundry/task.hpp"

#include <fmt/format.h>

#include <sstream>

#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

// True for a task whose config names `harness: native` (C++/OpenCL/CUDA test program, task_sdk.hpp).
bool IsNativeTaskConfig(const Json& config) {
  return config.is_object() && config.contains("harness") && config["harness"].is_string() &&
         config["harness"].get<std::string>() == "native";
}

// The test names of a native task from config `tests: {correctness: [...], performance: [...]}`; entries
// that are not strings are ignored (Problems reports empty lists).
TestLists NativeTestLists(const Json& config) {
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


constexpr const char* kNoneStderr =
    "SyntaxError. \n Your output was not in the required format. The code could not be extracted.";
constexpr const char* kNoneMessage = "One or more blocks to update were None";
constexpr const char* kModifiedMessage = "Code blocks have been modified successfully.";

// config.get(key, default) for a flag that must be a boolean.
bool FlagFromConfig(const Json& config, const char* key, bool fallback, const std::string& source) {
  auto it = config.find(key);
  if (it == config.end()) return fallback;
  if (!it->is_boolean())
    throw Error(ErrorKind::kInvalidArgument, fmt::format("expected true or false, got {}", it->dump()), source,
                key);
  return it->get<bool>();
}

bool HasNone(const BlockUpdate& update) {
  if (const auto* shorthand = std::get_if<BlockUpdateShort>(&update)) {
    for (const auto& [key, content] : *shorthand)
      if (!content) return true;
    return false;
  }
  for (const auto& [key, per_path] : std::get<BlockUpdateFull>(update)) {
    if (!per_path) return true;
    for (const auto& [path, contents] : *per_path) {
      if (!contents) return true;
      for (const BlockContent& c : *contents)  // B11: a None inside the list is a None too
        if (!c) return true;
    }
  }
  return false;
}

}  // namespace

std::pair<Task, TaskMetadata> Task::Create(const std::filesystem::path& path, const TaskCreateOptions& options) {
  return CreateFromFiles(MemoryFileMap::FromPath(path, options.limits), options);
}

std::pair<Task, TaskMetadata> Task::CreateFromBytes(std::string_view bytes, const TaskCreateOptions& options) {
  return CreateFromFiles(MemoryFileMap::FromArchive(bytes, "<bytes>", options.limits), options);
}

std::pair<Task, TaskMetadata> Task::CreateFromFiles(MemoryFileMap files, const TaskCreateOptions& options) {
  files.RemoveRootDir();
  Task task;
  task.config = GetConfig(files);
  const std::string config_name = FindTopLevelConfig(files, "config").value_or("config.yaml");

  TaskMetadata metadata = Json::object();
  if (std::optional<Json> overrides = TakeOverrides(files)) metadata["overrides"] = std::move(*overrides);

  task.blocks = GetAllBlocks(files);  // throws on nested / stray / unclosed markers and non-UTF-8 sources

  if (IsNativeTaskConfig(task.config)) {
    // Native tasks (harness: native) list their tests in config.yaml; nothing is collected (so this is done
    // even without discover_tests: it reads the config only).
    TestLists lists = NativeTestLists(task.config);
    task.correctness_tests = std::move(lists.correctness);
    task.profile_tests = std::move(lists.profile);
  } else if (options.discover_tests) {
    DiscoveryOptions discovery;
    discovery.cache_dir = options.cache_dir;
    discovery.use_cache = options.use_cache;
    TestLists lists = DiscoverTests(files, options.collector, discovery);
    RequirePerformanceTest(lists);
    task.correctness_tests = std::move(lists.correctness);
    task.profile_tests = std::move(lists.profile);
  }

  task.has_build_step = FlagFromConfig(task.config, "has_build_step", true, config_name);
  task.has_reference_build_step = FlagFromConfig(task.config, "has_reference_build_step", true, config_name);
  if (auto it = task.config.find("hyperparameters"); it != task.config.end()) {
    if (!it->is_null() && !it->is_object())
      throw Error(ErrorKind::kInvalidArgument, "expected a mapping {buildtime: ..., runtime: ...} or null",
                  config_name, "hyperparameters");
    task.hyperparameters = *it;
  }
  task.task_data = std::move(files);
  return {std::move(task), std::move(metadata)};
}

std::vector<std::string> Task::Problems() const {
  std::vector<std::string> problems;
  if (task_data.empty()) problems.push_back("the task has no files");
  if (IsNativeTaskConfig(config)) {
    // Native task: a test program built by config `build`/`cmake`; tests listed under config `tests`.
    if (!config.contains("build") && !config.contains("cmake")) {
      problems.push_back("config has no build commands (`build: [cmd, ...]` or `cmake: true`)");
    }
    TestLists lists = NativeTestLists(config);
    if (lists.correctness.empty()) problems.push_back("no correctness test (config tests: correctness: [names])");
    if (lists.profile.empty()) problems.push_back("no performance test (config tests: performance: [names])");
  } else {
    if (!task_data.Contains("task.py")) problems.push_back("task.py is missing at the top level");
    if (!task_data.Contains("conftest.py")) problems.push_back("conftest.py is missing at the top level");
    if (correctness_tests.empty()) problems.push_back("no correctness test (a test without @pytest.mark.performance)");
    if (profile_tests.empty()) problems.push_back("no performance test (mark one with @pytest.mark.performance)");
  }
  if (!blocks.count("EVOLVE")) problems.push_back("no [EVOLVE_START] ... [EVOLVE_END] block in any source file");
  if (!config.is_object() || !config.contains("task_name")) problems.push_back("config has no task_name");
  if (!config.is_object() || !config.contains("job_name")) problems.push_back("config has no job_name");
  return problems;
}

void Task::Validate() const {
  std::vector<std::string> problems = Problems();
  if (problems.empty()) return;
  std::string joined;
  for (const std::string& p : problems) joined += (joined.empty() ? "" : "; ") + p;
  throw Error(ErrorKind::kInvalidArgument, fmt::format("invalid task ({} problem(s)): {}", problems.size(), joined));
}

void Task::PrintInfo(const std::function<void(const std::string&)>& print) const {
  Json info = Json::object();
  info["has_build_step"] = has_build_step;
  info["has_reference_build_step"] = has_reference_build_step;
  info["correctness_tests"] = correctness_tests;
  info["profile_tests"] = profile_tests;
  info["config"] = config;
  Json block_files = Json::object();
  for (const char* key : kBlockKeys) {
    auto it = blocks.find(key);
    if (it == blocks.end()) continue;
    Json paths = Json::array();
    for (const auto& [path, contents] : it->second) paths.push_back(path);
    block_files[key] = std::move(paths);
  }
  info["blocks"] = std::move(block_files);
  std::istringstream lines(DumpYaml(info));
  for (std::string line; std::getline(lines, line);) print(line);
}

Task Task::WithBlocks(const BlockUpdate& update, bool keep_test_result_reference) const {
  Task out;
  out.has_build_step = has_build_step;
  out.has_reference_build_step = has_reference_build_step;
  out.correctness_tests = correctness_tests;
  out.profile_tests = profile_tests;
  out.config = config;
  out.hyperparameters = hyperparameters;
  if (keep_test_result_reference) {
    out.build_result_reference = build_result_reference;
    out.test_result_reference = test_result_reference;
  }

  if (HasNone(update)) {  // the reference's failure path: an empty file map marks the task invalid
    out.blocks = blocks;
    out.extract_code_result = ProcessResult{1, "", kNoneStderr, std::string(kNoneMessage), std::nullopt};
    return out;
  }

  out.task_data = task_data;  // deep copy (B12 fixed): the parent's bytes are never shared
  if (const auto* shorthand = std::get_if<BlockUpdateShort>(&update)) {
    for (const auto& [key, content] : *shorthand) {
      if (!blocks.count(key))
        throw Error(ErrorKind::kNotFound,
                    fmt::format("the task has no [{}_START] block to replace", key), "", key);
      const std::string path = FindPath(blocks, key);
      UpdateBlock(out.task_data, key, path, *content, 0);
    }
  } else {
    for (const auto& [key, per_path] : std::get<BlockUpdateFull>(update)) {
      for (const auto& [path, contents] : *per_path)
        for (size_t i = 0; i < contents->size(); ++i) UpdateBlock(out.task_data, key, path, *(*contents)[i], i);
    }
  }
  out.blocks = GetAllBlocks(out.task_data);
  out.extract_code_result = ProcessResult{0, "", "", std::string(kModifiedMessage), std::nullopt};
  return out;
}

void Task::ApplyConfig(const Json& merged_config) {
  config = merged_config;
  if (!config.is_object()) return;
  if (auto it = config.find("has_build_step"); it != config.end() && it->is_boolean())
    has_build_step = it->get<bool>();
  if (auto it = config.find("has_reference_build_step"); it != config.end() && it->is_boolean())
    has_reference_build_step = it->get<bool>();
  if (auto it = config.find("hyperparameters"); it != config.end()) hyperparameters = *it;
}

}  // namespace kf
