// Warm starts of pytest test runs (issue 15, "warm test processes"): internal to the harness module.
//
// A test phase started cold pays ~1.5-2 s of interpreter start and torch / numpy / pytest imports before its
// first test. With warm starts, kf keeps one pre-initialised Python per distinct test environment (a "zygote",
// python/host/kernelfoundry/zygote.py, host side: those modules imported, no task code) and a run's command
// becomes a small client (python/task/kernelfoundry/warm_client.py, task side) that the process runner starts and
// contains exactly as before (session, cgroup, scrubbed environment, Landlock, limits, timeouts, output caps). The
// zygote forks a worker that takes the client's containment through the exec module's own function
// (src/exec/contain.hpp ContainLikePeer -> ContainSelf, the shepherd's, via the binding kernelfoundry._contain):
// the client's cgroups and limits and kf's Landlock policy; then its working directory and environment, drops
// the host directory and host modules, and runs pytest with the client's descriptors; the client ends with the
// worker's status. Whatever cannot start warm starts cold, from the client, with one line on stderr saying why.
//
// Warm starts need each run in its own cgroup v2 (kf::CgroupTreeContainment), because the worker is not a
// descendant of the runner's shepherd; without one every run starts cold. $KF_WARM_START: unset/"on" = warm
// where possible, "off" = always cold.
#pragma once

#include <string>

#include "kernelfoundry/process.hpp"

namespace kf::harness_internal {

/// "on" or "off" from $KF_WARM_START (unset = "on"). Throws kf::Error(kInvalidArgument, field KF_WARM_START)
/// for another value.
std::string WarmStartSetting();

/// Rewrites `o`, a `python -u -m pytest …` test run or a `python -u -m kernelfoundry.build_target …` build child
/// built for RunProcess, to start by fork from a zygote for
/// its environment (started on first use; the first start waits for its imports, up to 60 s). Returns "" when
/// `o` was rewritten, else why it stays a cold start (`o` unchanged): warm starts off, no cgroup v2, another
/// command, or a zygote that failed to start (then that environment starts cold for the rest of the process).
/// Thread-safe. Throws what WarmStartSetting throws.
std::string UseWarmStart(ProcessOptions& o);

}  // namespace kf::harness_internal
