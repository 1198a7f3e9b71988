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

/// One problem of a task's configuration or structure: the config key or file (e.g. "build[1]",
/// "test_executable", "task.py") and what is wrong.
struct ConfigProblem {
  std::string field;
  std::string message;
};

class Task;

/// What core needs to know about a package kind (the harness that runs it: "pytest", "native", …). The
/// harness module provides the table (kf::HarnessTaskKinds() in kernelfoundry/harness.hpp); core receives
/// it through TaskCreateOptions, as it receives the test collector, so it never depends on the harnesses.
struct TaskKind {
  std::string name;  ///< the config `harness:` value, e.g. "pytest"
  /// Tests the kind declares in its config (native: config `tests`); empty function = the tests are
  /// collected with `collector` instead.
  std::function<TestLists(const Json& config)> declared_tests;
  /// Collects the tests of a package of this kind (pytest); used when declared_tests is empty.
  TestCollector collector;
  /// Structure and config problems that need no build, for kf validate / Task::Problems (e.g. "task.py is
  /// missing", "build[1]: expected a shell command"). Empty function = none.
  std::function<std::vector<ConfigProblem>(const Task& task)> problems;
};

/// Finds the kind of a package from its config; throws kf::Error(kInvalidArgument, <config file>,
/// "harness") for an unknown kind. `config_file` names the config in messages.
using TaskKindLookup = std::function<const TaskKind&(const Json& config, const std::string& config_file)>;

/// Options for Task::Create.
struct TaskCreateOptions {
  FileMapLimits limits;
  /// Run test discovery (cached, see test_discovery.hpp) for kinds whose tests are collected. Off only for
  /// tools that do not need test names (hash, blocks); their test lists then stay empty. Declared tests
  /// (native) are always read: that reads the config only.
  bool discover_tests = true;
  /// The package kinds (kf::HarnessTaskKinds()). Empty: every package is collected with `collector`.
  TaskKindLookup kinds;
  /// A collector that replaces the kind's own (tests inject fakes here); empty = the kind's.
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

/// Task::Create's second value (the reference's metadata dict): {} or {"overrides": {...}} when the package
/// has a top-level overrides.yml/.yaml (removed from task_data, so not part of the hash id).
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

  /// Loads a package (directory or archive path) — spec §1.2: root dir stripped, config (config.hpp),
  /// overrides taken out, blocks extracted, tests discovered (options.collector, cached; materialised to a
  /// temp dir only on a cache miss), flags and hyperparameters read from the config. Returns the task and
  /// its metadata. Throws kf::Error naming the file/field (missing config, two configs, bad YAML, bad
  /// overrides, block errors incl. an unclosed START, collection errors, no performance test, a
  /// non-boolean has_build_step).
  static std::pair<Task, TaskMetadata> Create(const std::filesystem::path& path, const TaskCreateOptions& = {});
  /// Same from archive bytes (format sniffed).
  static std::pair<Task, TaskMetadata> CreateFromBytes(std::string_view bytes, const TaskCreateOptions& = {});
  /// Builds from an already-loaded file map (root dir already removed or not; it is removed here).
  static std::pair<Task, TaskMetadata> CreateFromFiles(MemoryFileMap files, const TaskCreateOptions& = {});

  /// Structure checks of the reference's validate(), returning every problem found (empty = valid): the
  /// task has files; the kind's own checks (pytest: task.py, conftest.py, >= 1 correctness and >= 1
  /// performance test; native: build commands and declared tests — see HarnessTaskKinds); an EVOLVE block;
  /// task_name and job_name in config. Without `kinds` only the kind-independent checks run.
  std::vector<std::string> Problems(const TaskKindLookup& kinds = {}) const;
  /// Throws kf::Error(kInvalidArgument) listing all Problems(kinds) when not valid.
  void Validate(const TaskKindLookup& kinds = {}) const;
  /// Prints build flags, tests, config and block keys as YAML to `print` (one call per line).
  void PrintInfo(const std::function<void(const std::string&)>& print) const;

  /// Returns a new Task with the blocks replaced (spec §3.4; never modifies the receiver). A None anywhere
  /// (top level, per path, or inside a list — B11 fixed) gives the reference's failure task: no files, old
  /// blocks, extract_code_result returncode 1. Otherwise blocks are rewritten (UpdateBlock) and re-extracted,
  /// results cleared except the reference ones when `keep_test_result_reference`. Throws kf::Error:
  /// kNotFound (key without block, missing file or block index), kInvalidArgument (shorthand for a key
  /// with several blocks), kParse (malformed markers).
  Task WithBlocks(const BlockUpdate& update, bool keep_test_result_reference = false) const;

  /// Sets config from a merged config and copies has_build_step / has_reference_build_step /
  /// hyperparameters from it when present.
  void ApplyConfig(const Json& merged_config);

  /// The reference's Task.encode(): exactly its 13 keys, in its order.
  Json Encode() const;
  /// The reference's Task.decode(): task_data, has_build_step, correctness_tests, profile_tests, config and
  /// blocks are required; has_reference_build_step defaults to false; a falsy extract_code_result is None.
  /// Throws kf::Error(kParse) naming the missing/ill-typed key, kUnsafe for a task_data path that is not a
  /// normalised relative path ("../x", "/x", "./x").
  static Task Decode(const Json& data);
  /// The JSON text of Encode() written directly — file contents are base64-encoded straight into the
  /// output and no kf::Json is built: byte-identical to DumpJson(Encode(), indent), several times faster
  /// for big tasks. indent < 0: compact.
  std::string EncodeToString(int indent = -1) const;
  /// Decode(ParseJson(json, source)) through simdjson (text -> Task without an intermediate kf::Json):
  /// the same Task and the same errors. Throws kf::Error(kParse) naming `source` for malformed JSON, else
  /// as Decode (file "<task json>", field = the key). Use this wherever bytes become a Task.
  static Task DecodeFromString(std::string_view json, const std::string& source = "<task json>");

  /// The DB `tasks` row fields (spec §3.4 to_database_task): id (= HashId()), task_name, task_origin,
  /// task_data, has_build_step, correctness_tests, profile_tests, evolve/reference/user_instructions_block
  /// (blocks_to_str or null), hyperparameters_buildtime/_runtime, config. Throws kf::Error(kNotFound) when
  /// config lacks task_name or task_origin.
  Json ToDatabaseTask() const;
  /// SHA-256 hash id of the task data (spec §3.4 generate_hash_id; identical to the reference).
  std::string HashId() const;
};

/// The reference's generate_hash_id over an encoded task_data JSON object (or a string, hashed directly).
std::string GenerateHashId(const Json& encoded_task_data);

}  // namespace kf
