// Shared helpers of the task verbs (see load_task.hpp).
#include "cli/load_task.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>

#include "core/files.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/test_discovery.hpp"

namespace kf::cli {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool IsEncodedTaskArg(const std::string& arg) {
  if (arg == "-") return true;
  return EndsWith(arg, ".json") && !std::filesystem::is_directory(arg);
}

TaskCreateOptions CliCreateOptions(bool discover_tests) {
  TaskCreateOptions options;
  options.discover_tests = discover_tests;
  options.kinds = HarnessTaskKinds();
  return options;
}

std::string ReadInput(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(ErrorKind::kNotFound, "no such file", path);
  if (std::filesystem::is_directory(path, ec)) throw Error(ErrorKind::kInvalidArgument, "is a directory", path);
  std::optional<std::string> bytes = ReadFileBytes(path);  // one read of the file's size, not 8 KB at a time
  if (!bytes) throw Error(ErrorKind::kIO, "cannot read", path);
  return std::move(*bytes);
}

LoadedTask LoadTask(const std::string& arg, bool discover_tests) {
  LoadedTask out;
  if (arg == "-") {
    out.task = Task::DecodeFromString(ReadInput(arg), "<stdin>");
    out.from_json = true;
    return out;
  }
  LoadForRunOptions options;
  options.discover_tests = discover_tests;
  TaskForRun loaded = LoadTaskSource(arg, options);
  out.task = std::move(loaded.task);
  out.metadata = std::move(loaded.metadata);
  out.from_json = loaded.from_json;
  return out;
}

TaskForRun LoadTaskForRunArg(const std::string& arg) {
  if (arg != "-") return LoadTaskForRun(arg);
  LoadForRunOptions options;
  options.json_source = "<stdin>";
  return LoadTaskForRun(ReadInput(arg), options);
}

namespace {

// Where WriteFileAtomic puts `given`'s bytes: `given` itself, or the file a symlink names (created when missing).
std::filesystem::path OutputTarget(const std::filesystem::path& given) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(given, ec)) return given;
  std::filesystem::path target = std::filesystem::read_symlink(given, ec);
  if (ec) return given;
  if (target.is_relative()) target = given.parent_path() / target;
  return OutputTarget(target);  // a chain of links ends at a file or a missing name (a loop: the OS refuses it)
}

}  // namespace

void CheckOutputFile(const std::filesystem::path& given) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(given, ec);  // symlinks followed
  if (std::filesystem::is_directory(status))
    throw Error(ErrorKind::kInvalidArgument, "the output path is a directory", given.string());
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) return;  // written in place
  const std::filesystem::path path = OutputTarget(given);
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(dir, ec))
    throw Error(ErrorKind::kNotFound, "the output's directory does not exist", given.string());
}

void WriteFileAtomic(const std::filesystem::path& given, std::string_view bytes) {
  static std::atomic<unsigned> counter{0};
  CheckOutputFile(given);
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(given, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    // A device, FIFO or socket (/dev/null, /dev/stdout, a named pipe): written in place. Regression (2026-12-04):
    // `kf run … --json /dev/null` as root renamed its temporary file over /dev/null, which became a regular file
    // and broke every later run of the machine (pytest opens /dev/null for writing).
    std::ofstream out(given, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw Error(ErrorKind::kIO, "write failed", given.string());
    return;
  }
  // A symlink's file is replaced, not the link (a dangling link's file is created).
  const std::filesystem::path path = OutputTarget(given);
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::filesystem::path tmp =
      dir / fmt::format(".{}.tmp.{}.{}", path.filename().string(), static_cast<long>(getpid()), counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorKind::kIO, "cannot create the output file", given.string());
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      out.close();
      std::filesystem::remove(tmp, ec);
      throw Error(ErrorKind::kIO, "write failed (disk full?)", given.string());
    }
  }
  // The replaced file's permissions stay (a 0444 result file stays 0444).
  if (const std::filesystem::file_status old = std::filesystem::status(path, ec); std::filesystem::exists(old)) {
    std::filesystem::permissions(tmp, old.permissions(), ec);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error(ErrorKind::kIO, "cannot move the output into place", given.string());
  }
}

OutputKind ClassifyOutput(const std::filesystem::path& path, ArchiveFormat* format) {
  const std::string s = path.filename().string();
  const std::pair<const char*, ArchiveFormat> archives[] = {
      {".zip", ArchiveFormat::kZip},     {".tar.gz", ArchiveFormat::kTarGz}, {".tgz", ArchiveFormat::kTarGz},
      {".tar.bz2", ArchiveFormat::kTarBz2}, {".tbz2", ArchiveFormat::kTarBz2}, {".tar.xz", ArchiveFormat::kTarXz},
      {".txz", ArchiveFormat::kTarXz},   {".tar", ArchiveFormat::kTar}};
  if (EndsWith(s, ".json")) return OutputKind::kJson;
  for (const auto& [ext, fmt_] : archives) {
    if (EndsWith(s, ext)) {
      if (format != nullptr) *format = fmt_;
      return OutputKind::kArchive;
    }
  }
  return OutputKind::kDirectory;
}

void WriteTaskFiles(const MemoryFileMap& files, const std::filesystem::path& out, bool force) {
  ArchiveFormat format = ArchiveFormat::kTarGz;
  switch (ClassifyOutput(out, &format)) {
    case OutputKind::kJson:
      throw Error(ErrorKind::kInvalidArgument, "expected a directory or an archive (.zip, .tar.gz, ...)",
                  out.string());
    case OutputKind::kArchive: WriteFileAtomic(out, files.ToArchive(format)); return;
    case OutputKind::kDirectory: break;
  }
  std::error_code ec;
  if (std::filesystem::exists(out, ec)) {
    if (!std::filesystem::is_directory(out, ec))
      throw Error(ErrorKind::kInvalidArgument, "exists and is not a directory", out.string());
    if (!force && !std::filesystem::is_empty(out, ec))
      throw Error(ErrorKind::kInvalidArgument, "directory exists and is not empty (use --force to overlay)",
                  out.string());
  }
  files.ToDisk(out);
}

std::vector<std::string> ValidateStructure(const std::string& arg, Task* task_out) {
  LoadedTask loaded = LoadTask(arg, /*discover_tests=*/false);
  Task& task = loaded.task;
  std::vector<std::string> problems;
  bool discovery_failed = false;
  const TaskKind& kind = HarnessDescriptorFor(task.config).kind;
  if (!loaded.from_json && kind.collector && task.task_data.Contains("task.py")) {
    try {
      TestLists lists = DiscoverTests(task.task_data, kind.collector);
      task.correctness_tests = std::move(lists.correctness);
      task.profile_tests = std::move(lists.profile);
    } catch (const Error& e) {
      problems.push_back(fmt::format("tests cannot be collected: {}", e.message()));
      discovery_failed = true;
    }
  }
  for (std::string& p : task.Problems(HarnessTaskKinds())) {
    // After a failed collection the "no correctness/performance test" lines only repeat it.
    if (discovery_failed && p.rfind("no correctness test", 0) == 0) continue;
    if (discovery_failed && p.rfind("no performance test", 0) == 0) continue;
    problems.push_back(std::move(p));
  }
  // The run limits (timeouts, memory_limit, process_limit) as kf run reads them (stranger test: `memory_limit: lots`
  // was valid here and refused only by kf run).
  // And eval_config (threads, allocator, every timing key) as kf run checks it before building (stranger test,
  // 2026-12-04: `eval_config.timing.processes: 0` or an unknown key was "valid" here and refused by kf run).
  // The checks stop at their first problem, so when the whole config fails, its problem comes first and then each
  // eval_config key (each eval_config.timing key too) is checked again alone, to list every problem (stranger
  // tests: a config with four bad warm-up keys listed one, 2026-12-04; three bad eval_config keys listed one,
  // 2026-12-05). A field already named is not named again: checked alone, a key meets the other keys' defaults
  // (max_rounds: 10 beside min_rounds: 50 would also be reported against the default min_rounds, 12).
  std::set<std::string> named;  // "file field" of every problem listed
  auto check = [&problems, &named](const Task& t) {
    try {
      (void)HarnessLimits::FromConfig(t.config);
      ValidateTestConfig(t);
    } catch (const Error& e) {
      if (named.insert(e.file() + " " + e.field()).second) problems.push_back(e.what());
      return false;
    }
    return true;
  };
  const auto eval = task.config.find("eval_config");
  if (!check(task) && eval != task.config.end() && eval->is_object()) {
    Task part = task;
    for (const auto& [key, value] : eval->items()) {
      if (key == "timing" && value.is_object()) {
        for (const auto& [name, v] : value.items()) {
          part.config["eval_config"] = Json{{"timing", Json{{name, v}}}};
          check(part);
        }
      } else {
        part.config["eval_config"] = Json{{key, value}};
        check(part);
      }
    }
  }
  if (task_out != nullptr) *task_out = std::move(task);
  return problems;
}

}  // namespace kf::cli
