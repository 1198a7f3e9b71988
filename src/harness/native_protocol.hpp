// The native harness's side of the test-program protocol (documented in include/kernelfoundry/task_sdk.hpp)
// and the build-input mapping (buildtime hyperparameters -> compile definitions, gpu_arch -> nvcc -arch).
// Internal to the harness module.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernelfoundry/json.hpp"

namespace kf::native {

/// One test's entry of the result document.
struct TestStatus {
  std::string name, kind, status, message;  ///< status: passed | failed | skipped | error
};

/// The result document a test program writes to its result descriptor.
struct ResultDoc {
  std::vector<TestStatus> tests;
  Json runtimes = Json::object();            ///< {name: [ms, ...]}
  std::optional<std::string> skipped_reason;
  std::optional<double> elapsed_s;  ///< the program's own time from main() to the document ("elapsed_ms"), seconds
  /// Code the program compiles at run time (OpenCL, NVRTC…) did not build: {"message", "log"} of the first
  /// failure (task_sdk.hpp, kf::sdk::BuildFailure). nullopt when absent.
  struct BuildError {
    std::string message, log;
  };
  std::optional<BuildError> build_error;
  int Count(const std::string& status) const;
};

/// Parses the result document. Throws kf::Error(kParse/kInvalidArgument, file "result document", field) for
/// malformed JSON or wrong types.
ResultDoc ParseResultDoc(const std::string& text);

/// pytest-shaped lines for the scoring: "<program>::<name> PASSED|FAILED|SKIPPED" per test and a summary
/// "==== 2 passed, 1 failed in 0.12s ====" (so ClassifyCorrectness's shape/value/skip logic applies). The
/// time is the program's own elapsed_s when it reported one (as pytest reports its session time), else
/// `wall_s` (the pipeline's wall time of the process).
std::string PytestStyleReport(const ResultDoc& doc, const std::string& program, double wall_s);

/// "-DNAME=VALUE ..." from hyperparameters.buildtime (an object; strings unquoted, booleans 1/0, numbers as
/// JSON). Throws kf::Error(kInvalidArgument, "config.yaml", "hyperparameters.buildtime.<name>") for a name that
/// is not an identifier or a value that is not a scalar or contains whitespace/quotes.
std::vector<std::string> BuildtimeDefines(const Json& hyperparameters);

/// Maps a gpu_arch to nvcc's -arch flag: "80", "sm_80", "8.0", "sm80" -> "-arch=sm_80"; "native" ->
/// "-arch=native"; "cpu", "" or anything else -> "" (nvcc's default architecture). Only the first entry of a
/// comma list is used.
std::string NvccArchFlag(const std::string& gpu_arch);

/// The nvcc a CUDA task's build should call (exported to the build as $KF_NVCC): $KF_NVCC when set, else
/// `nvcc` found on PATH, else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc (NVIDIA's default install
/// prefix) when it exists; plain "nvcc" otherwise, so the build fails with the shell's "nvcc: not found".
std::string FindNvcc();

}  // namespace kf::native
