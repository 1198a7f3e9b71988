// kf::Error — the one error model of KernelFoundry.
//
// Every module reports failures by throwing kf::Error. An Error carries a kind (what went wrong, for callers
// to branch on), the file it concerns (a task-package path, an archive member, a config file…), the field
// inside that file (a config key, a JSON key, a block marker…) and a human message. what() renders one line:
//   "<file>: <field>: <message>"   (parts that are empty are left out)
// The CLI maps kinds to exit codes in one place (src/cli/exit_codes.hpp). Errors are values: copyable,
// thread-safe to read.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace kf {

/// What went wrong. Stable: used for exit codes and tests.
enum class ErrorKind {
  kInvalidArgument,  ///< The caller passed something malformed (bad option, wrong JSON shape).
  kNotFound,         ///< A required file, key or object does not exist.
  kParse,            ///< Input could not be parsed (YAML, JSON, archive, block markers, UTF-8).
  kIO,               ///< The operating system refused a read/write/spawn.
  kLimit,            ///< A configured limit was exceeded (file count, size, time, memory).
  kUnsafe,           ///< Input tried to escape its sandbox (zip-slip, absolute path, link, device node).
  kUnsupported,      ///< A feature not available here (format, device, platform).
  kInternal,         ///< A bug in KernelFoundry itself.
};

/// Returns the stable lower-case name of a kind ("invalid_argument", "not_found", …).
std::string_view ErrorKindName(ErrorKind kind);

/// An exception with a kind, the file and field it concerns, and a message.
class Error : public std::runtime_error {
 public:
  /// REQUIRES: message is non-empty. file and field may be empty.
  Error(ErrorKind kind, std::string message, std::string file = {}, std::string field = {});

  ErrorKind kind() const { return kind_; }
  const std::string& file() const { return file_; }
  const std::string& field() const { return field_; }
  /// The message alone, without file and field.
  const std::string& message() const { return message_; }

 private:
  ErrorKind kind_;
  std::string file_;
  std::string field_;
  std::string message_;
};

}  // namespace kf
