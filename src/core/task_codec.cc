// Task JSON codec (spec §3.4 encode/decode — the reference's exact keys), the DB `tasks` row, and the JSON
// form of block updates.
#include <fmt/format.h>

#include "core/codec_impl.hpp"
#include "core/json_view.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/task.hpp"

namespace kf {
namespace {

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

Task Task::Decode(const Json& data) { return internal::DecodeTaskView(internal::NlohmannView(data)); }

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
