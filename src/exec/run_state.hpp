// What the runner observed during one run; turned into a ProcessRun by BuildProcessRun (process_run.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernelfoundry/process.hpp"

namespace kf::exec_internal {

struct RunState {
  std::optional<TerminationReason> kill_reason;  ///< why we asked the shepherd to kill the tree
  std::optional<int> main_status;                ///< wait status of the main child
  std::optional<std::string> spawn_error;        ///< message when the start failed
  std::string marker_message;                    ///< message of a matched end marker
  bool done = false;                             ///< the shepherd reported the tree gone (or exited)
  int64_t cpu_us = 0;                            ///< user + system of the tree, microseconds
  int64_t maxrss_kib = 0;                        ///< largest process's max rss, KiB
  double wall_seconds = 0;
  std::string stdout_raw, stderr_raw;            ///< capped bytes (NULs already made visible)
  uint64_t oom_kills = 0, pids_hits = 0;         ///< from the run's cgroups
  std::optional<uint64_t> cgroup_peak;           ///< peak memory of the run's cgroup, bytes
};

/// Fills reason, returncode, message, result and statistics of `run` from what was observed.
void BuildProcessRun(const ProcessOptions& options, const RunState& state, ProcessRun* run);

}  // namespace kf::exec_internal
