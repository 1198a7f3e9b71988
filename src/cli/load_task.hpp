// Helpers shared by the task verbs of `kf` (info, encode, decode, blocks, with-blocks, validate, hash):
// loading a TASK argument, writing outputs atomically, and the structure part of `kf validate`.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/task.hpp"

namespace kf::cli {

/// A loaded TASK argument.
struct LoadedTask {
  Task task;
  TaskMetadata metadata = Json::object();
  bool from_json = false;  ///< the argument was an encoded task (tests/blocks came from the JSON)
};

/// True when `arg` names an encoded task rather than a package: "-" (stdin) or a *.json file.
bool IsEncodedTaskArg(const std::string& arg);

/// TaskCreateOptions for the CLI: the pytest collector with the default cache, or no discovery.
TaskCreateOptions CliCreateOptions(bool discover_tests);

/// Loads TASK without validating it (kf::LoadTaskSource; "-" = an encoded task on stdin): a package
/// directory, an archive (zip/tar[.gz|.bz2|.xz]), or an encoded task (*.json or "-"). Test discovery runs
/// only for packages and only when `discover_tests`. Errors are kf::Error whose file is prefixed with `arg`
/// ("pkg/config.yaml: ...").
LoadedTask LoadTask(const std::string& arg, bool discover_tests);

/// TASK as `kf run` and `kf validate --run` evaluate it: kf::LoadTaskForRun (create, validate, overrides.yml
/// merged), "-" reading an encoded task from stdin.
TaskForRun LoadTaskForRunArg(const std::string& arg);

/// Reads a whole file ("-" = stdin). Throws kf::Error(kNotFound / kIO) naming it.
std::string ReadInput(const std::string& path);

/// Writes `bytes` to a temp file beside `path`, then renames it over `path` (never a partial file), keeping the
/// replaced file's permissions; a symlink's file is the one replaced (created when the link dangles). A `path`
/// that is a device, FIFO or socket (/dev/null, /dev/stdout) is written in place, never replaced. Throws kf::Error
/// naming `path` (CheckOutputFile's errors, a failed write).
void WriteFileAtomic(const std::filesystem::path& path, std::string_view bytes);

/// What WriteFileAtomic would refuse before writing: `path` is a directory (kInvalidArgument) or its directory
/// does not exist (kNotFound). Commands call it before their work, so that a bad output path costs nothing.
void CheckOutputFile(const std::filesystem::path& path);

/// Kinds of output paths: *.json, an archive (by extension), or a directory (anything else).
enum class OutputKind { kJson, kArchive, kDirectory };
/// Classifies `path`; sets *format for archives (.zip, .tar, .tar.gz/.tgz, .tar.bz2/.tbz2, .tar.xz/.txz).
OutputKind ClassifyOutput(const std::filesystem::path& path, ArchiveFormat* format);

/// Writes a task's files to a directory or an archive (by extension). A directory that exists and is not
/// empty is refused unless `force` (then files are overlaid). Every path is checked before anything is
/// written (MemoryFileMap::ToDisk); archives are written atomically.
void WriteTaskFiles(const MemoryFileMap& files, const std::filesystem::path& out, bool force);

/// Structure part of `kf validate`: loads TASK without failing on test problems and returns every problem
/// found (empty = valid). Errors that stop loading (bad YAML, bad blocks, missing config…) are thrown.
/// `*task` receives the loaded task (for a later `--run` step).
std::vector<std::string> ValidateStructure(const std::string& arg, Task* task);

}  // namespace kf::cli
