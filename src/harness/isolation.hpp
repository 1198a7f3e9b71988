// Filesystem isolation of build and test children (issue 10, "Deliver as well"): the policy every harness
// applies, on top of the exec module's mechanism (ProcessOptions::filesystem_isolation, Landlock).
//
// A child may write only its work dir (builds: the build's own work dir; test runs: a fresh private
// directory per variant and phase, so a candidate's test run cannot touch the task tree, the reference's
// artifacts or another run's outputs) and a private temp dir; the cache, the database, HOME, the source
// checkout and the rest of the filesystem are read-only to it. TMPDIR and the caches tools write on their
// own (XDG_CACHE_HOME, POCL_CACHE_DIR, TORCH_EXTENSIONS_DIR, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR,
// CUDA_CACHE_PATH, MPLCONFIGDIR) point into the private temp dir, so well-behaved tools keep working.
//
// KF_ISOLATION in kf's environment: unset/"on" = isolate when the machine can (else run unisolated and say
// so), "required" = refuse to run a child unisolated (its spawn fails: infrastructure error), "off" = no
// isolation (the private temp dir is still used). Internal to the harness and pipeline modules (and read by
// the verdict cache's key, record module: a verdict is reused only under the same isolation).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kernelfoundry/process.hpp"

namespace kf {

/// How build and test children are isolated in this process: "landlock (ABI 7)", "unavailable: <why>", or
/// "off (KF_ISOLATION=off)". Throws kf::Error(kInvalidArgument, field KF_ISOLATION) for an unknown value.
std::string ChildIsolationStatus();

/// True when ChildIsolationStatus() is an applied isolation (starts with "landlock").
bool ChildIsolationApplied();

/// Makes `private_tmp` (fresh: removed first when it exists), points the child's temp and cache variables
/// at it, and — unless KF_ISOLATION=off — restricts the child to writing `writable` and `private_tmp`.
/// Throws kf::Error(kIO, file = the path) when private_tmp cannot be created (our environment's fault).
void IsolateChild(ProcessOptions& options, const std::vector<std::filesystem::path>& writable,
                  const std::filesystem::path& private_tmp);

/// A fresh, empty directory `<parent>/<prefix>XXXXXX` (mkdtemp) for one test run. Throws kf::Error(kIO,
/// file = the path) when it cannot be created.
std::filesystem::path FreshRunDir(const std::filesystem::path& parent, const std::string& prefix);

}  // namespace kf
