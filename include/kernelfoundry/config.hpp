// Config — task config files (config.yaml / overrides.yml) read into kf::Json (reference spec §1.4–§1.6).
//
// Contract:
//  * YAML is parsed with yaml-cpp and typed the way the reference's OmegaConf loader (PyYAML SafeLoader,
//    YAML 1.1) types plain scalars: int (decimal, 0x, 0b, legacy octal 0NN, sexagesimal, underscores),
//    float (incl. "1e3", ".inf", ".nan"), bool (true/yes/on/false/no/off in three casings), null
//    (~/null/empty), otherwise str. Quoted scalars are always str; timestamps stay str. Mapping key order
//    is kept; duplicate keys are an error.
//  * The top level follows OmegaConf.create: empty document -> {}, a bare string -> {string: null},
//    a mapping -> itself; anything else is an error. Interpolations "${a.b}", "${.sibling}",
//    "${oc.env:NAME[,default]}" are resolved (OmegaConf to_container(resolve=True)); "\${" escapes.
//  * Discovery (our fix of B4): only TOP-LEVEL "<stem>.yaml" / "<stem>.yml" count; nested files of the same
//    name are ordinary files. Both present -> kf::Error naming both.
//  * Legacy keys: "run_name" -> "job_name" and "Op_Name" -> "task_name" when the new key is absent; the
//    value moves to the END of the mapping (job_name first, then task_name), as in the reference.
//  * Overrides: a top-level overrides.yml/.yaml is parsed and removed from the file map. A broken or
//    duplicated overrides file is an error naming it (the reference silently ignores it).
// All functions are pure or touch only their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/memory_file_map.hpp"

namespace kf {

/// Parses YAML text into JSON with the typing rules above (no top-level rules, no interpolation).
/// Throws kf::Error(kParse) with file = `source` and the line/column of the problem.
Json ParseYaml(std::string_view text, const std::string& source);

/// For an error about a value that should have been a mapping or a number: when `value` is a one-line string like
/// "threads:1" (what YAML makes of a `key:value` line without a space after the colon when it is a mapping's only
/// entry), a hint " (expected 'threads: 1'? YAML needs a space after the colon)"; otherwise "".
std::string ColonValueHint(const Json& value);

/// Types one plain (unquoted, untagged) YAML scalar the way PyYAML's SafeLoader + OmegaConf do.
Json ResolvePlainScalar(const std::string& text);

/// Resolves OmegaConf-style interpolations in every string of `root` (see header comment).
/// Throws kf::Error(kParse) naming `source` and the key path on missing targets or cycles.
Json ResolveInterpolations(const Json& root, const std::string& source);

/// ParseYaml + the OmegaConf.create top-level rules + ResolveInterpolations. Returns a JSON object.
Json LoadConfigText(std::string_view text, const std::string& source);

/// The top-level "<stem>.yaml" or "<stem>.yml" in `files`, or nullopt when there is none.
/// Throws kf::Error(kInvalidArgument) naming both when both exist.
std::optional<std::string> FindTopLevelConfig(const MemoryFileMap& files, std::string_view stem);

/// Renames the legacy keys run_name -> job_name and Op_Name -> task_name (see header comment).
void RenameLegacyKeys(Json& config);

/// The reference's get_config for a package: the top-level config.yaml/.yml, loaded, legacy keys renamed.
/// Throws kf::Error(kNotFound) when there is no config file, kInvalidArgument for two, kParse for bad YAML.
Json GetConfig(const MemoryFileMap& files);

/// Reads and removes the top-level overrides.yml / overrides.yaml. nullopt when absent.
/// Throws kf::Error(kParse / kInvalidArgument) naming the file when it is broken or duplicated.
std::optional<Json> TakeOverrides(MemoryFileMap& files);

/// Deep merge (OmegaConf.merge for plain containers): mappings merge key by key (new keys appended),
/// anything else in `overlay` replaces the value in `base`.
Json MergeConfig(const Json& base, const Json& overlay);

/// Typed read access to a task config (LevelDB's Options idea: one place that knows each key's type). Keys
/// are paths with dots for nested mappings ("eval_config.num_perf_trials"). A key that is absent or null
/// gives the fallback; a key present with another type throws kf::Error(kInvalidArgument, file, key) saying
/// what was expected and what was found. The view refers to `config`, which must outlive it.
class ConfigView {
 public:
  explicit ConfigView(const Json& config, std::string file = "config.yaml");

  /// The value at `key`, or nullptr when absent or null.
  const Json* Find(std::string_view key) const;
  /// True when `key` is present and not null.
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  /// A boolean (true/false only).
  bool Bool(std::string_view key, bool fallback) const;
  /// An integer (a JSON integer, or a float with an integral value).
  int64_t Int(std::string_view key, int64_t fallback) const;
  /// A finite number.
  double Number(std::string_view key, double fallback) const;
  /// A string.
  std::string String(std::string_view key, const std::string& fallback) const;
  /// A list of strings; nullopt when absent or null.
  std::optional<std::vector<std::string>> StringList(std::string_view key) const;
  /// A duration in seconds, a number in [0, 1e7]: nullopt when absent, 0 when null (callers decide what 0
  /// means: "use the default" for wall-clock limits, "off" for inactivity limits).
  std::optional<double> Seconds(std::string_view key) const;
  /// A size in bytes: a whole number, or a string ParseByteSize reads ("512M", "1.5G"); nullopt when absent,
  /// 0 when null, 0, false or "off" (callers decide what 0 means). Throws kf::Error naming the key otherwise.
  std::optional<uint64_t> Bytes(std::string_view key) const;
  /// A count: a whole number >= 0; nullopt when absent, 0 when null, 0, false or "off". Throws kf::Error naming
  /// the key otherwise.
  std::optional<uint64_t> Count(std::string_view key) const;

 private:
  [[noreturn]] void Fail(std::string_view key, const std::string& expected, const Json& got) const;
  const Json& config_;
  std::string file_;
};

/// "512M", "1.5G", "64k", "4096", "2GiB" -> bytes (binary units: k = 1024; b, K, M, G, T with an optional
/// "B" or "iB"); nullopt for anything else (negative, no number, an unknown unit).
std::optional<uint64_t> ParseByteSize(std::string_view text);

/// Renders JSON as block-style YAML (strings that would re-type, e.g. "01" or "true", are quoted).
std::string DumpYaml(const Json& value);

}  // namespace kf
