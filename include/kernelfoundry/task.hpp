// Task — one kernel-generation problem: the package files, its tests, config, blocks and (once evaluated)
// its build and test results. Reference spec §1.2, §3.4; JSON shape identical to the reference's
// Task.encode(). A Task is a value: copies are deep, WithBlocks returns a new Task and never touches the
// receiver (B12 fixed). Const methods may be called concurrently.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/test_discovery.hpp"

namespace kf {

/// Options for Task::Create.
struct TaskCreateOptions {
  FileMapLimits limits;
  /// Run test discovery (cached, see test_discovery.hpp). Off only for tools that do not need test names
  /// (hash, blocks); the task's test lists then stay empty.
  bool discover_tests = true;
  /// The collector used when discover_tests is set; core has none of its own (core must not depend on
  /// exec). Use kf::PytestCollector() from kernelfoundry/pytest_collect.hpp. Empty + discover_tests ->
  /// kf::Error(kInternal).
  TestCollector collector;
  /// Directory of the discovery cache; empty = $KF_CACHE_DIR or ~/.cache/kernelfoundry.
  std::filesystem::path cache_dir;
  /// Use (read and write) the discovery cache.
  bool use_cache = true;
};

/// Candidate block contents for WithBlocks. nullopt = "the block could not be generated" (None path).
///  * Shorthand: {KEY: content|nullopt} — requires exactly one file with one block for KEY.
///  * Full: {KEY: {path: [content|nullopt, …]}|nullopt}.
using BlockContent = std::optional<std::string>;
using BlockUpdateFull = std::map<std::string, std::optional<std::map<std::string, std::optional<std::vector<BlockContent>>>>>;
using BlockUpdateShort = std::map<std::string, BlockContent>;
using BlockUpdate = std::variant<BlockUpdateShort, BlockUpdateFull>;

/// Parses the JSON form of a block update ({KEY: str|null} or {KEY: {path: [str|null]|str|null}|null}).
BlockUpdate BlockUpdateFromJson(const Json& j, const std::string& source);

/// The result of Task::Create's metadata (reference's second return value): {"overrides": {...}}?
using TaskMetadata = Json;

class Task {
 public:
  MemoryFileMap task_data;
  bool has_build_step = true;
  bool has_reference_build_step = true;
  std::vector<std::string> correctness_tests;
  std::vector<std::string> profile_tests;
  Json config = Json::object();
  TaskBlocks blocks;
  std::optional<ProcessResult> extract_code_result;
  std::optional<BuildResult> build_result;
  std::optional<BuildResult> build_result_reference;
  std::optional<TestResult> test_result;
  std::optional<TestResult> test_result_reference;
  Json hyperparameters = nullptr;  ///< {"buildtime": {...}, "runtime": {...}} or null

  /// Loads a package (directory or archive path) — spec §1.2. Returns the task and its metadata.
  /// Throws kf::Error naming the file/field (missing config, two configs, bad YAML, bad overrides, block
  /// errors, collection errors, no performance test).
  static std::pair<Task, TaskMetadata> Create(const std::filesystem::path& path, const TaskCreateOptions& = {});
  /// Same from archive bytes (format sniffed).
  static std::pair<Task, TaskMetadata> CreateFromBytes(std::string_view bytes, const TaskCreateOptions& = {});
  /// Builds from an already-loaded file map (root dir already removed or not; it is removed here).
  static std::pair<Task, TaskMetadata> CreateFromFiles(MemoryFileMap files, const TaskCreateOptions& = {});

  /// Structure checks of the reference's validate(); returns every problem found (empty = valid).
  std::vector<std::string> Problems() const;
  /// Throws kf::Error(kInvalidArgument) listing all Problems() when not valid.
  void Validate() const;
  /// Prints build flags, tests, config and block keys as YAML to `print` (one call per line).
  void PrintInfo(const std::function<void(const std::string&)>& print) const;

  /// Returns a new Task with the blocks replaced (spec §3.4 with B11 fixed).
  Task WithBlocks(const BlockUpdate& update, bool keep_test_result_reference = false) const;

  /// Sets config from a merged config and copies has_build_step / has_reference_build_step /
  /// hyperparameters from it when present.
  void ApplyConfig(const Json& merged_config);

  Json Encode() const;
  /// Throws kf::Error(kParse) naming the missing/ill-typed key.
  static Task Decode(const Json& data);

  /// The DB `tasks` row fields (spec §3.4 to_database_task), including "id" = HashId().
  Json ToDatabaseTask() const;
  /// SHA-256 hash id of the task data (spec §3.4 generate_hash_id; identical to the reference).
  std::string HashId() const;
};

/// The reference's generate_hash_id over an encoded task_data JSON object (or a string, hashed directly).
std::string GenerateHashId(const Json& encoded_task_data);

}  // namespace kf
