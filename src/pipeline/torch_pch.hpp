// Precompiled torch headers for torch-extension builds (issue "Throughput", item 3): the trusted half.
// Internal to the pipeline module (used by the build stage).
//
// A build child (kernelfoundry.compiler, through kernelfoundry.pch) uses a published precompiled header of
// torch/extension.h when one fits its compile, and otherwise leaves a request in its work dir. The child runs
// candidate code, so it never writes a shared PCH: after the build, kf runs `python -m kernelfoundry.pch` for
// each request in a sandboxed child that may write only a fresh directory (the helper refuses flags outside
// its allow-list and computes the key itself), then publishes that directory as <root>/<key> with one
// rename. A per-key lock (flock) makes concurrent requests build once; a helper that fails or is killed
// leaves a temp directory that is removed, never a published entry. KF_TORCH_PCH=off disables both halves.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace kf::torch_pch {

/// False when KF_TORCH_PCH is "off" or "0".
bool Enabled();

/// Where published PCHs live: $KF_TORCH_PCH_DIR when set (one directory several caches share, e.g. the test
/// suite's: a PCH is keyed by compiler, torch, Python and flags, never by a task), else <cache_dir>/pch/v1.
std::filesystem::path Root(const std::filesystem::path& cache_dir);

/// Where build children find published PCHs: Root(cache_dir) when the sandbox user can reach it (issue 25;
/// always when children keep kf's uid), else a shared directory <system temp dir>/kernelfoundry-pch-<uid>/v1
/// (mode 0755, accepted only when it is a real directory owned by us that nobody else can write). Created
/// readable for everyone, its entries are owned by kf. nullopt (and *why) when neither is usable.
std::optional<std::filesystem::path> RootForChildren(const std::filesystem::path& cache_dir, std::string* why);

/// Adds what a build child needs: KF_TORCH_PCH_DIR (= root, read-only to it) and KF_TORCH_PCH_REQUESTS
/// (= `requests`, a directory inside its own work dir).
void AddBuildEnv(std::map<std::string, std::string>& env, const std::filesystem::path& root,
                 const std::filesystem::path& requests);

/// Builds and publishes what the requests in `requests` ask for (at most 4; file names must be
/// <64 hex>.json), each helper limited to `timeout`. Returns one line per request for the build's log, e.g.
/// "precompiled torch header 0123abcd… built in 31.2 s for later builds". Never throws.
std::vector<std::string> BuildRequested(const std::filesystem::path& root, const std::filesystem::path& requests,
                                        std::chrono::milliseconds timeout, std::stop_token stop);

}  // namespace kf::torch_pch
