// worker_info — a description of the machine that builds or tests a candidate (reference spec §4.13).
//
// Every BuildResult and TestResult carries it, and the kernels row stores it (eval/compile_worker_info).
// Contract:
//  * Gathered once per process (std::call_once) and cached; later calls return the cached value. The
//    Python facts (python_version, torch_version: two `python3` probes) are a separate part, gathered only
//    for a harness that runs Python (WorkerInfoNeedsPython) — a native evaluation starts no Python process;
//    its worker_info has the same keys with "" for those two.
//  * Never fails: a tool that is absent or slow gives "" (versions) or 0 (memory). The version probes run
//    in parallel through kf::RunProcess with a short timeout each (kProbeTimeout), so the first call costs
//    about one probe's time, not their sum; compiler versions are remembered across processes
//    (CachedToolVersion).
//  * Keys: the reference's 13 keys in the reference's order (nvcc_version, icpx_version,
//    ocl_driver_version, neo_revision, igc_revision, cpu_info, total_system_memory_kb, device_id, gpu_name,
//    nvidia_compute_capabilities, git_commit_hash, torch_version, hostname), then ours: gxx_version,
//    clang_version, python_version, kf_version. git_commit_hash is always "" (the reference describes the
//    worker's cwd, which says nothing about the candidate); kf_version identifies the evaluator instead.
//  * Thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "kernelfoundry/json.hpp"

namespace kf {

/// Time limit of one version probe (each runs once per process).
inline constexpr std::chrono::milliseconds kProbeTimeout{5'000};

/// True when the worker info of an evaluation by `harness_kind` (Harness::Name(): "pytest", "native", …)
/// includes the Python facts: every kind except "native" (a kind that runs no Python must be listed here).
bool WorkerInfoNeedsPython(std::string_view harness_kind);

/// This machine's host name (gethostname; "" when it fails), as worker_info["hostname"] reports it.
std::string HostName();

/// The cached worker info of this process for an evaluation by `harness_kind` (see the header comment for
/// keys and failure behaviour). The machine part is gathered at the first call of any kind, the Python part
/// at the first call of a kind that needs it; each once per process.
const Json& GetWorkerInfo(std::string_view harness_kind);
/// The full worker info (Python facts included), cached: GetWorkerInfo("pytest").
const Json& GetWorkerInfo();

/// Gathers the full worker info now, without the cache (for tests and `kf info`). Never throws.
Json GatherWorkerInfo();

/// Parses the version out of a tool's `--version` text: "release 13.0, V13.0.88" -> "13.0.88" (nvcc);
/// otherwise the first token that starts with a digit and contains a '.', e.g. "g++ (Debian 12.2.0-14) 12.2.0"
/// -> "12.2.0", "Python 3.11.2" -> "3.11.2". Returns "" when nothing matches.
std::string ParseToolVersion(const std::string& text);

/// ParseToolVersion of `tool --version` (tool found in PATH, or a path), remembered across processes in
/// <cache dir>/tool_versions.json under the executable's real path, size and modification time: a tool that
/// is replaced or touched is probed again. The probes were most of what a native `kf run` spent before its
/// build (nvcc, g++, clang: ~55 ms of waiting per process). An empty answer (tool absent, failed, slow) is
/// never remembered; with no usable cache dir every call probes. Concurrent writers may drop each other's
/// entries (the file is replaced whole, temp + rename), never corrupt the file. Never throws.
std::string CachedToolVersion(const std::string& tool);

}  // namespace kf
