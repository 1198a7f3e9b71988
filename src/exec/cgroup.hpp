// Per-run cgroups: a cgroup v2 leaf for containment (cgroup.kill) and, where the controllers are available,
// memory and pids limits — from the v2 leaf, or else from writable cgroup v1 memory / pids hierarchies
// (hybrid hosts). Parent-side code only (never runs between fork and exec).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernelfoundry/process.hpp"

namespace kf::exec_internal {

/// What this host offers, detected once per process (thread-safe). The v2 base can be overridden with
/// the environment variable KF_CGROUP_BASE (a delegated cgroup2 directory we may create children in).
struct CgroupSupport {
  std::string v2_base;         ///< writable cgroup2 directory for our run leaves ("" = none)
  bool v2_memory = false;      ///< memory controller enabled for children of v2_base
  bool v2_pids = false;        ///< pids controller enabled for children of v2_base
  std::string v1_memory_base;  ///< writable cgroup v1 memory directory ("" = none)
  std::string v1_pids_base;    ///< writable cgroup v1 pids directory ("" = none)
};
const CgroupSupport& DetectCgroups();

/// The cgroups of one run. Created before the spawn; the destructor removes them (the tree must be gone).
class RunCgroups {
 public:
  /// Creates the leaves this run needs and writes the limits; records in `limits` how memory/process
  /// limits are enforced and in `notes` what failed. Never throws.
  RunCgroups(const ProcessOptions& options, std::map<std::string, std::string>* limits,
             std::vector<std::string>* notes);
  ~RunCgroups();
  RunCgroups(const RunCgroups&) = delete;
  RunCgroups& operator=(const RunCgroups&) = delete;

  bool containment_v2() const { return !v2_dir_.empty(); }
  bool memory_enforced() const { return !mem_dir_.empty(); }
  bool pids_enforced() const { return !pids_dir_.empty(); }
  /// The v2 leaf ("" without one); the child joins it before exec.
  const std::string& V2Dir() const { return v2_dir_; }
  /// cgroup v1 cgroup.procs files the child writes "0" to before exec.
  std::vector<std::string> V1JoinFiles() const;
  /// v2 cgroup.kill ("" when unavailable) and cgroup.procs ("" without v2).
  std::string KillFile() const;
  std::string ProcsFile() const;

  /// How often pids.max refused a fork; OOM kills; peak memory in bytes (nullopt = unknown).
  uint64_t PidsMaxHits() const;
  uint64_t OomKills() const;
  std::optional<uint64_t> PeakMemory() const;
  /// CPU time of everything that ran in the v2 leaf (cpu.stat usage_usec), microseconds; nullopt without one.
  /// Counts members that are not the runner's descendants (a warm-started test process), unlike rusage.
  std::optional<int64_t> CpuMicros() const;

 private:
  std::string v2_dir_;
  std::string mem_dir_;
  bool mem_v1_ = false;
  std::string pids_dir_;
  bool pids_v1_ = false;
  std::vector<std::string> created_;  ///< directories to remove, in creation order
};

}  // namespace kf::exec_internal
