// Exit codes of `kf`, defined in one place (documented in README.md "Exit codes").
#pragma once

#include "kernelfoundry/error.hpp"

namespace kf::cli {

enum ExitCode : int {
  kExitOk = 0,              ///< Success; for `kf run`: the candidate is correct.
  kExitVerdictFailed = 1,   ///< `kf run`/`kf validate`: evaluation ran, verdict negative (see status).
  kExitUsage = 2,           ///< Bad command line (CLI11 parse error).
  kExitBadInput = 3,        ///< The input (task package, JSON, archive, YAML, blocks) is invalid.
  kExitNotFound = 4,        ///< A named file or object does not exist.
  kExitUnsafe = 5,          ///< The input tried to escape (zip-slip, links, devices) or exceeded a limit.
  kExitIO = 6,              ///< The system refused an operation (disk, permissions, spawn).
  kExitUnsupported = 7,     ///< Not available on this machine.
  kExitInternal = 70,       ///< A bug in kf (EX_SOFTWARE).
};

/// The exit code for an error kind.
inline int ExitCodeFor(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kParse: return kExitBadInput;
    case ErrorKind::kNotFound: return kExitNotFound;
    case ErrorKind::kUnsafe:
    case ErrorKind::kLimit: return kExitUnsafe;
    case ErrorKind::kIO: return kExitIO;
    case ErrorKind::kUnsupported: return kExitUnsupported;
    case ErrorKind::kInternal: return kExitInternal;
  }
  return kExitInternal;
}

}  // namespace kf::cli
