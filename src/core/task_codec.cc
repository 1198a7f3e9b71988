// Task JSON codec (spec §3.4 encode/decode — the reference's exact keys), the DB `tasks` row, and the JSON
// form of block updates.
#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/task.hpp"

namespace kf {
namespace {

constexpr const char* kTaskSource = "<task json>";

const Json& Required(const Json& data, const char* key) {
  auto it = data.find(key);
  if (it == data.end())
    throw Error(ErrorKind::kParse, "missing required key of an encoded task", kTaskSource, key);
  return *it;
}

bool DecodeBool(const Json& value, const char* key) {
  if (!value.is_boolean())
    throw Error(ErrorKind::kParse, fmt::format("expected true or false, got {}", value.type_name()), kTaskSource,
                key);
  return value.get<bool>();
}

std::vector<std::string> DecodeStringList(const Json& value, const char* key) {
  if (!value.is_array())
    throw Error(ErrorKind::kParse, fmt::format("expected a list of test ids, got {}", value.type_name()),
                kTaskSource, key);
  std::vector<std::string> out;
  out.reserve(value.size());
  for (const Json& item : value) {
    if (!item.is_string())
      throw Error(ErrorKind::kParse, fmt::format("expected a string test id, got {}", item.type_name()),
                  kTaskSource, key);
    out.push_back(item.get<std::string>());
  }
  return out;
}

// Prefixes the field of errors raised by nested decoders with the task key they came from.
template <typename F>
auto WithField(const char* key, F&& decode) -> decltype(decode()) {
  try {
    return decode();
  } catch (const Error& e) {
    if (e.field().rfind(key, 0) == 0) throw;
    std::string field = e.field().empty() ? std::string(key) : fmt::format("{}.{}", key, e.field());
    throw Error(e.kind(), e.message(), e.file().empty() ? kTaskSource : e.file(), field);
  }
}

// Python truthiness of a JSON value (`if d.get("extract_code_result")`).
bool Truthy(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

Json OptionalEncode(const auto& value) { return value ? value->Encode() : Json(nullptr); }

}  // namespace

Json Task::Encode() const {
  Json j = Json::object();
  j["task_data"] = task_data.Encode();
  j["has_build_step"] = has_build_step;
  j["has_reference_build_step"] = has_reference_build_step;
  j["correctness_tests"] = correctness_tests;
  j["profile_tests"] = profile_tests;
  j["config"] = config;
  j["blocks"] = BlocksToJson(blocks);
  j["extract_code_result"] = OptionalEncode(extract_code_result);
  j["build_result"] = OptionalEncode(build_result);
  j["build_result_reference"] = OptionalEncode(build_result_reference);
  j["test_result"] = OptionalEncode(test_result);
  j["test_result_reference"] = OptionalEncode(test_result_reference);
  j["hyperparameters"] = hyperparameters;
  return j;
}

Task Task::Decode(const Json& data) {
  if (!data.is_object())
    throw Error(ErrorKind::kParse, fmt::format("an encoded task must be a JSON object, got {}", data.type_name()),
                kTaskSource);
  Task task;
  const Json& files = Required(data, "task_data");
  task.has_build_step = DecodeBool(Required(data, "has_build_step"), "has_build_step");
  task.correctness_tests = DecodeStringList(Required(data, "correctness_tests"), "correctness_tests");
  task.profile_tests = DecodeStringList(Required(data, "profile_tests"), "profile_tests");
  task.config = Required(data, "config");
  if (!task.config.is_object())
    throw Error(ErrorKind::kParse, fmt::format("expected a mapping, got {}", task.config.type_name()),
                kTaskSource, "config");
  const Json& blocks = Required(data, "blocks");

  if (!files.is_object())
    throw Error(ErrorKind::kParse, fmt::format("expected a mapping path -> file, got {}", files.type_name()),
                kTaskSource, "task_data");
  for (const auto& item : files.items()) {  // an encoded task must never name a path outside its tree
    std::string normal;
    try {
      normal = NormalizeMemberPath(item.key(), kTaskSource);
    } catch (const Error& e) {
      throw Error(ErrorKind::kUnsafe, e.message(), kTaskSource, "task_data." + item.key());
    }
    if (normal != item.key() || normal.empty())
      throw Error(ErrorKind::kUnsafe, "file paths must be normalised relative paths (no '.', '..', '//', '/')",
                  kTaskSource, "task_data." + item.key());
  }
  task.task_data = WithField("task_data", [&] { return MemoryFileMap::FromJson(files); });
  task.blocks = WithField("blocks", [&] { return BlocksFromJson(blocks, kTaskSource); });

  task.has_reference_build_step = false;  // the reference's decode default (B13: create defaults to true)
  if (auto it = data.find("has_reference_build_step"); it != data.end() && !it->is_null())
    task.has_reference_build_step = DecodeBool(*it, "has_reference_build_step");
  if (auto it = data.find("extract_code_result"); it != data.end() && Truthy(*it))
    task.extract_code_result = WithField("extract_code_result", [&] { return ProcessResult::Decode(*it); });
  if (auto it = data.find("build_result"); it != data.end())
    task.build_result = WithField("build_result", [&] { return BuildResult::Decode(*it); });
  if (auto it = data.find("build_result_reference"); it != data.end())
    task.build_result_reference = WithField("build_result_reference", [&] { return BuildResult::Decode(*it); });
  if (auto it = data.find("test_result"); it != data.end())
    task.test_result = WithField("test_result", [&] { return TestResult::Decode(*it); });
  if (auto it = data.find("test_result_reference"); it != data.end())
    task.test_result_reference = WithField("test_result_reference", [&] { return TestResult::Decode(*it); });
  if (auto it = data.find("hyperparameters"); it != data.end()) {
    if (!it->is_null() && !it->is_object())
      throw Error(ErrorKind::kParse, fmt::format("expected a mapping or null, got {}", it->type_name()),
                  kTaskSource, "hyperparameters");
    task.hyperparameters = *it;
  }
  return task;
}

Json Task::ToDatabaseTask() const {
  if (!config.is_object() || !config.contains("task_name"))
    throw Error(ErrorKind::kNotFound, "the task config has no task_name", "config", "task_name");
  if (!config.contains("task_origin") || config["task_origin"].is_null())
    throw Error(ErrorKind::kNotFound, "the task config has no task_origin (custom, KernelBench, ...)", "config",
                "task_origin");
  auto block_str = [this](const char* key) -> Json {
    auto it = blocks.find(key);
    return it == blocks.end() ? Json(nullptr) : Json(BlocksToStr(it->second));
  };
  auto hyper = [this](const char* key) -> Json {
    if (hyperparameters.is_object() && hyperparameters.contains(key)) return hyperparameters[key];
    return nullptr;
  };
  Json row = Json::object();
  row["id"] = HashId();
  row["task_name"] = config["task_name"];
  row["task_origin"] = config["task_origin"];
  row["task_data"] = task_data.Encode();
  row["has_build_step"] = has_build_step;
  row["correctness_tests"] = correctness_tests;
  row["profile_tests"] = profile_tests;
  row["evolve_block"] = block_str("EVOLVE");
  row["reference_block"] = block_str("REFERENCE");
  row["user_instructions_block"] = block_str("USER_INSTRUCTIONS");
  row["hyperparameters_buildtime"] = hyper("buildtime");
  row["hyperparameters_runtime"] = hyper("runtime");
  row["config"] = config;
  return row;
}

BlockUpdate BlockUpdateFromJson(const Json& j, const std::string& source) {
  if (!j.is_object())
    throw Error(ErrorKind::kInvalidArgument,
                "expected {KEY: text|null} or {KEY: {path: [text|null, ...]|text|null}|null}", source);
  bool any_string = false, any_dict = false;
  for (const auto& [key, value] : j.items()) {
    if (value.is_string()) any_string = true;
    else if (value.is_object()) any_dict = true;
    else if (!value.is_null())
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("expected text, a mapping path -> contents, or null; got {}", value.type_name()),
                  source, key);
  }
  if (any_string && any_dict)
    throw Error(ErrorKind::kInvalidArgument,
                "mixes the shorthand form (KEY: text) and the per-file form (KEY: {path: [...]}); use one form",
                source);
  if (!any_dict) {
    BlockUpdateShort update;
    for (const auto& [key, value] : j.items())
      update[key] = value.is_null() ? BlockContent() : BlockContent(value.get<std::string>());
    return update;
  }
  BlockUpdateFull update;
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) {
      update[key] = std::nullopt;
      continue;
    }
    std::map<std::string, std::optional<std::vector<BlockContent>>> per_path;
    for (const auto& [path, contents] : value.items()) {
      const std::string field = key + "." + path;
      if (contents.is_null()) {
        per_path[path] = std::nullopt;
      } else if (contents.is_string()) {
        per_path[path] = std::vector<BlockContent>{contents.get<std::string>()};
      } else if (contents.is_array()) {
        std::vector<BlockContent> list;
        for (const Json& c : contents) {
          if (c.is_null()) list.emplace_back(std::nullopt);
          else if (c.is_string()) list.emplace_back(c.get<std::string>());
          else
            throw Error(ErrorKind::kInvalidArgument,
                        fmt::format("block contents must be text or null, got {}", c.type_name()), source, field);
        }
        per_path[path] = std::move(list);
      } else {
        throw Error(ErrorKind::kInvalidArgument,
                    fmt::format("expected a list of contents, text or null, got {}", contents.type_name()), source,
                    field);
      }
    }
    update[key] = std::move(per_path);
  }
  return update;
}

}  // namespace kf
