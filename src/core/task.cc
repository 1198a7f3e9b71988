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

  if (task.config.is_object() && task.config.contains("harness") && !task.config["harness"].is_null() &&
      !IsNativeTaskConfig(task.config) && task.config["harness"] != "pytest") {
    // Before any collection: a typo must not turn into "task.py is missing".
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("unknown harness {} (expected pytest or native)", task.config["harness"].dump()),
                config_name, "harness");
  }
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

std::vector<ConfigProblem> ConfigProblems(const Json& config, const MemoryFileMap& files) {
  std::vector<ConfigProblem> out;
  if (!config.is_object()) return out;
  if (config.contains("harness") && !config["harness"].is_null()) {
    const Json& h = config["harness"];
    if (!h.is_string() || (h.get<std::string>() != "pytest" && h.get<std::string>() != "native")) {
      out.push_back({"harness", fmt::format("unknown harness {} (expected pytest or native)", h.dump())});
    }
  }
  if (!IsNativeTaskConfig(config)) return out;
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

std::vector<std::string> Task::Problems() const {
  std::vector<std::string> problems;
  if (task_data.empty()) problems.push_back("the task has no files");
  for (const ConfigProblem& p : ConfigProblems(config, task_data)) {
    problems.push_back(fmt::format("config.yaml: {}: {}", p.field, p.message));
  }
  if (!IsNativeTaskConfig(config)) {
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
