// The native harness's side of the test-program protocol (documented in include/kernelfoundry/sdk/task_sdk.hpp)
// and the build-input mapping (buildtime hyperparameters -> compile definitions, gpu_arch -> nvcc -arch).
// Internal to the harness module.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/test_report.hpp"
#include "kernelfoundry/json.hpp"

namespace kf::native {

/// pytest-shaped lines for the wire (a reference client of our farm scores results from text):
/// "<program>::<name> PASSED|FAILED|SKIPPED|ERROR" per test and a summary "==== 2 passed, 1 failed in
/// 0.12s ====" (FormatPytestSummary). The time is the program's own elapsed_s when it reported one (as pytest
/// reports its session time), else `wall_s` (the pipeline's wall time of the process). Our own verdicts
/// never read these lines.
std::string PytestStyleReport(const harness_internal::TestReport& report, const std::string& program, double wall_s);

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
