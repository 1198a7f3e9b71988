// Loading a task for a run (see kernelfoundry/record.hpp): one path for every verb that evaluates.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/record.hpp"

namespace kf {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsJsonText(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i < s.size() && s[i] == '{';
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIO, "cannot open for reading", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(ErrorKind::kIO, "read failed", path);
  return ss.str();
}

/// Re-throws a kf::Error with its file placed under the TASK argument ("pkg/config.yaml").
[[noreturn]] void RethrowUnder(const Error& e, const std::string& arg) {
  std::string file = e.file();
  if (file.empty() || file == "<task json>" || file == "<bytes>") {
    file = arg;
  } else if (file != arg && file.rfind(arg, 0) != 0 && file[0] != '/' && file[0] != '<') {
    file = (std::filesystem::path(arg) / file).string();
  }
  throw Error(e.kind(), e.message(), file, e.field());
}

}  // namespace

TaskForRun LoadTaskSource(const std::string& path_or_json, const LoadForRunOptions& options) {
  TaskForRun out;
  if (IsJsonText(path_or_json)) {
    out.task = Task::DecodeFromString(path_or_json, options.json_source);
    out.from_json = true;
    return out;
  }
  const std::string& arg = path_or_json;
  try {
    std::error_code ec;
    if (EndsWith(arg, ".json") && !std::filesystem::is_directory(arg, ec)) {
      if (!std::filesystem::exists(arg, ec)) throw Error(ErrorKind::kNotFound, "no such file", arg);
      out.task = Task::DecodeFromString(ReadWholeFile(arg), arg);
      out.from_json = true;
      return out;
    }
    if (!std::filesystem::exists(arg, ec)) {
      throw Error(ErrorKind::kNotFound, "no such task package (directory, archive or .json)", arg);
    }
    TaskCreateOptions create;
    create.discover_tests = options.discover_tests;
    create.cache_dir = options.cache_dir;
    create.kinds = HarnessTaskKinds();  // each package kind's own test collector (pytest, native)
    auto [task, metadata] = Task::Create(arg, create);
    out.task = std::move(task);
    out.metadata = std::move(metadata);
  } catch (const Error& e) {
    RethrowUnder(e, arg);
  }
  return out;
}

void ApplyOverrides(Task& task, const TaskMetadata& metadata) {
  // Merge precedence of the reference's driver: task config < overrides.yml (spec §1.5).
  if (metadata.is_object() && metadata.contains("overrides") && metadata["overrides"].is_object()) {
    task.ApplyConfig(MergeConfig(task.config, metadata["overrides"]));
  }
}

TaskForRun LoadTaskForRun(const std::string& path_or_json, const LoadForRunOptions& options) {
  TaskForRun loaded = LoadTaskSource(path_or_json, options);
  loaded.task.Validate(HarnessTaskKinds());
  ApplyOverrides(loaded.task, loaded.metadata);
  return loaded;
}

}  // namespace kf
