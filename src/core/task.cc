// Task: creation from a package (spec §1.2), structure checks, info, with_blocks (spec §3.4; B11/B12 fixed),
// apply_config. The JSON codec and the DB row are in task_codec.cc, the hash id in hash_id.cc.
#include "kernelfoundry/task.hpp"

#include <fmt/format.h>

#include <sstream>

#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

constexpr const char* kNoneStderr =
    "SyntaxError. \n Your output was not in the required format. The code could not be extracted.";
constexpr const char* kNoneMessage = "One or more blocks to update were None";
constexpr const char* kModifiedMessage = "Code blocks have been modified successfully.";

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

  // The package kind decides where the tests come from: declared in the config (native) or collected
  // (pytest). An unknown kind fails here, before any collection: a typo must not become "task.py is missing".
  const TaskKind* kind = options.kinds ? &options.kinds(task.config, config_name) : nullptr;
  if (kind && kind->declared_tests) {
    TestLists lists = kind->declared_tests(task.config);
    task.correctness_tests = std::move(lists.correctness);
    task.profile_tests = std::move(lists.profile);
  } else if (options.discover_tests) {
    DiscoveryOptions discovery;
    discovery.cache_dir = options.cache_dir;
    discovery.use_cache = options.use_cache;
    const TestCollector& collector = options.collector || !kind ? options.collector : kind->collector;
    TestLists lists = DiscoverTests(files, collector, discovery);
    RequirePerformanceTest(lists);
    task.correctness_tests = std::move(lists.correctness);
    task.profile_tests = std::move(lists.profile);
  }

  const ConfigView view(task.config, config_name);
  task.has_build_step = view.Bool("has_build_step", true);
  task.has_reference_build_step = view.Bool("has_reference_build_step", true);
  if (const Json* h = view.Find("hyperparameters")) {
    if (!h->is_object())
      throw Error(ErrorKind::kInvalidArgument, "expected a mapping {buildtime: ..., runtime: ...} or null",
                  config_name, "hyperparameters");
    task.hyperparameters = *h;
  }
  task.task_data = std::move(files);
  return {std::move(task), std::move(metadata)};
}

std::vector<std::string> Task::Problems(const TaskKindLookup& kinds) const {
  std::vector<std::string> problems;
  if (task_data.empty()) problems.push_back("the task has no files");
  const TaskKind* kind = nullptr;
  if (kinds) {
    try {
      kind = &kinds(config, "config.yaml");
    } catch (const Error& e) {
      problems.push_back(fmt::format("config.yaml: {}: {}", e.field(), e.message()));
    }
  }
  if (kind && kind->problems) {
    for (const ConfigProblem& p : kind->problems(*this)) {
      problems.push_back(p.field.empty() ? p.message : fmt::format("config.yaml: {}: {}", p.field, p.message));
    }
  }
  if (!blocks.count("EVOLVE")) problems.push_back("no [EVOLVE_START] ... [EVOLVE_END] block in any source file");
  if (!config.is_object() || !config.contains("task_name")) problems.push_back("config has no task_name");
  if (!config.is_object() || !config.contains("job_name")) problems.push_back("config has no job_name");
  return problems;
}

void Task::Validate(const TaskKindLookup& kinds) const {
  std::vector<std::string> problems = Problems(kinds);
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
