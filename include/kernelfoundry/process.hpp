// Process runner — runs one untrusted command (a candidate's build or test) and always gets it back.
//
// Contract:
//  * The child starts from argv (no shell unless `use_shell`), in `cwd`, with an explicit environment
//    (allow-list + caller additions, secrets never pass), stdin = /dev/null, in its own session and
//    process group.
//  * Containment: when Run returns, no process of the child's tree is alive — grandchildren that called
//    setsid(), double-forked or ignore SIGTERM included. A writable cgroup v2 sub-tree is used when
//    available (also peak memory + memory limit); otherwise PR_SET_CHILD_SUBREAPER plus a /proc scan.
//  * Termination: SIGTERM to the tree, `kill_grace` later SIGKILL. Run never blocks longer than
//    wall_timeout + kill_grace + a small constant.
//  * stdout and stderr are drained concurrently (poll), capped per stream (first and last halves kept, the
//    cut marked with the number of dropped bytes), decoded as UTF-8 with replacement, NUL made visible,
//    terminal escapes stripped.
//  * Thread-safe: Run may be called from many threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernelfoundry/results.hpp"

namespace kf {

/// Why the child stopped. Stable names (TerminationReasonName) appear in JSON.
enum class TerminationReason {
  kExited,             ///< exited on its own (any exit code)
  kSignaled,           ///< killed by a signal it did not get from us (e.g. SIGSEGV)
  kWallTimeout,        ///< wall_timeout elapsed
  kInactivity,         ///< no output for inactivity_timeout
  kEndMarkerGrace,     ///< end marker seen, process did not exit within end_marker_grace
  kMemoryLimit,        ///< memory limit hit (cgroup OOM kill or allocation failure under RLIMIT_AS)
  kOutputLimit,        ///< total output exceeded output_kill_bytes
  kCpuLimit,           ///< RLIMIT_CPU exceeded (SIGXCPU/SIGKILL)
  kSpawnFailed,        ///< could not start (exec error, bad cwd)
};
const char* TerminationReasonName(TerminationReason r);

/// How the process tree was contained.
enum class ContainmentMethod { kCgroupV2, kSubreaper };
const char* ContainmentMethodName(ContainmentMethod m);

/// End-of-run marker: "pytest" matches the pytest summary line (any counts, singular/plural, xfailed,
/// xpassed, rerun); anything else matches as a literal substring of a line.
struct EndMarker {
  std::string marker;                                   ///< "pytest" or a literal
  std::chrono::milliseconds grace{10'000};              ///< wait after the marker before killing
};

struct ProcessOptions {
  std::vector<std::string> argv;                        ///< argv[0] looked up in PATH of `env`
  bool use_shell = false;                               ///< run argv[0] through /bin/sh -c
  std::filesystem::path cwd;                            ///< empty = current directory
  /// Extra variables set in the child (override inherited ones). Names that look secret are still
  /// dropped unless listed in `allow_secret_names`.
  std::map<std::string, std::string> env_add;
  /// When true, start from the allow-listed part of our environment (PATH, HOME, LANG, LC_*, TERM, TMPDIR,
  /// USER, LOGNAME, SHELL, PYTHON*, CUDA*, NVIDIA*, OCL*, POCL*, OMP_*, LD_LIBRARY_PATH, …); otherwise only
  /// env_add + a minimal PATH.
  bool inherit_allowed_env = true;
  std::vector<std::string> secret_patterns = {"PASSWORD", "SECRET", "TOKEN", "API_KEY", "KEY_ID",
                                              "CREDENTIAL", "PRIVATE", "AUTH"};
  std::vector<std::string> allow_secret_names;

  std::optional<std::chrono::milliseconds> wall_timeout;
  std::optional<std::chrono::milliseconds> inactivity_timeout;   ///< no bytes on stdout/stderr this long
  std::optional<EndMarker> end_marker;
  std::chrono::milliseconds kill_grace{2'000};                    ///< SIGTERM -> SIGKILL

  std::optional<uint64_t> memory_limit_bytes;    ///< cgroup memory.max, else RLIMIT_AS
  std::optional<uint64_t> cpu_limit_seconds;     ///< RLIMIT_CPU
  std::optional<uint64_t> file_size_limit_bytes; ///< RLIMIT_FSIZE
  std::optional<uint64_t> open_files_limit;      ///< RLIMIT_NOFILE
  std::optional<uint64_t> process_limit;         ///< cgroup pids.max, else RLIMIT_NPROC
  bool no_network = false;                       ///< fresh network namespace with loopback only

  size_t output_cap_bytes = 1 << 20;             ///< per stream kept in the result (first+last halves)
  std::optional<uint64_t> output_kill_bytes;     ///< kill when a stream produced more than this in total

  /// Called for each complete output line (from the runner's thread; must be thread-safe).
  std::function<void(bool is_stderr, const std::string& line)> on_line;
};

struct ProcessRun {
  ProcessResult result;                          ///< returncode (negative = signal), output, message
  TerminationReason reason = TerminationReason::kExited;
  ContainmentMethod containment = ContainmentMethod::kSubreaper;
  double wall_seconds = 0;
  double cpu_seconds = 0;                        ///< user + system of the whole tree
  std::optional<uint64_t> peak_rss_bytes;        ///< cgroup memory.peak or max rusage
  uint64_t stdout_bytes = 0, stderr_bytes = 0;   ///< produced in total (before capping)
  bool network_isolated = false;                 ///< true when no_network was applied
  std::string network_note;                      ///< why isolation was unavailable, when requested
  Json ToJson() const;
};

/// Runs a command to completion under the options. Never throws for a failing child (spawn failure is a
/// kSpawnFailed result with returncode -1); throws kf::Error(kInvalidArgument) for empty argv.
ProcessRun RunProcess(const ProcessOptions& options);

/// The environment a child would get (for `kf exec --print-env` and tests).
std::map<std::string, std::string> BuildChildEnvironment(const ProcessOptions& options);

}  // namespace kf
