// Process runner — runs one untrusted command (a candidate's build or test) and always gets it back.
//
// Contract (reference spec §4.7 robust_subprocess_run and §4.11 safe_copy_env, with their gaps fixed):
//  * The child starts from argv (no shell unless `use_shell`), in `cwd`, with an explicit environment
//    (allow-list + caller additions, secrets never pass), stdin = /dev/null, in its own session and
//    process group, with default signal dispositions and an empty signal mask.
//  * Containment: when RunProcess returns, no process of the child's tree is alive — grandchildren that
//    called setsid(), double-forked or ignore SIGTERM included. Each run forks a small "shepherd" process
//    that is a child subreaper (PR_SET_CHILD_SUBREAPER): every orphan of the tree reparents to it, and it
//    kills and reaps the whole tree. When a cgroup v2 sub-tree is writable the child is also put into its
//    own cgroup (killed at once with cgroup.kill; gives peak memory and memory/pids limits when those
//    controllers are delegated); `containment` reports which method was used.
//  * The run ends as soon as the main child has exited and its leftovers are gone (leftovers get SIGTERM,
//    kill_grace later SIGKILL). On a limit: SIGTERM to the tree, kill_grace later SIGKILL. RunProcess never
//    blocks longer than wall_timeout + kill_grace + about one second.
//  * stdout and stderr are drained concurrently (poll), capped per stream (first and last halves kept, the
//    cut marked "\n[... N bytes cut by kf ...]\n"), decoded as UTF-8 with replacement, NUL shown as U+2400,
//    terminal escapes stripped (kf::ProcessResult::Create). Output is kept on every termination path.
//  * Filesystem isolation (optional, `filesystem_isolation`): the child tree may write only the listed
//    directories (its work dir, a private temp dir) and, with a read allow-list, read only those, the listed
//    readable paths and the system's shared parts (the cache, the database, HOME and other work dirs are then
//    unreadable; without one they stay readable but not writable). Applied with Landlock (the kernel's unprivileged
//    sandboxing LSM, Linux >= 5.13) between fork and exec; `ProcessRun::isolation` says how it was applied
//    or why it could not be ("unavailable: …"), and a run that requires it fails to spawn instead.
//  * Sandbox (optional, `sandbox`, issue 25): the child tree runs under an unprivileged uid with no
//    capabilities, no_new_privs and a seccomp filter; `ProcessRun::sandbox` says what was applied.
//  * Thread-safe: RunProcess may be called from many threads at once (the shepherd runs only
//    async-signal-safe code between fork and exec).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/verdict.hpp"  // TerminationReason

namespace kf {

/// How the process tree was contained.
enum class ContainmentMethod { kCgroupV2, kSubreaper };
/// "cgroup_v2" or "subreaper".
const char* ContainmentMethodName(ContainmentMethod m);

/// What a child may write and read (ProcessOptions::filesystem_isolation). Everything outside the writable
/// paths is read-only to it: creating, writing, truncating, renaming or removing files anywhere else fails
/// with EACCES; /dev/shm stays writable (POSIX shared memory; a sandboxed child of a root kf gets its own:
/// PrivateIpcSupport).
struct FilesystemIsolation {
  /// Directories (and everything below them) the child tree may write, create and delete in. Paths that
  /// do not exist when the child starts are skipped. At most 20.
  std::vector<std::filesystem::path> writable_paths;
  /// When the machine cannot isolate (no Landlock): true = the run fails to spawn (kSpawnFailed, message
  /// names why); false = it runs unisolated and ProcessRun::isolation says "unavailable: <why>".
  bool required = false;
  /// Reads (issue 25). nullopt: everything stays readable and executable, and /dev keeps write access to
  /// existing device nodes. A list: only these paths (and below), the writable paths and the system's shared
  /// parts (SandboxSystemPaths(): /usr, /lib*, /bin, /sbin, /etc, /opt, /proc, parts of /sys, /dev/null,
  /// /dev/zero, /dev/full, /dev/random, /dev/urandom, /dev/shm and the GPU device nodes, which stay writable)
  /// may be read or executed; opening anything else (the home directory, a database, other work dirs)
  /// fails with EACCES. At most 40.
  std::optional<std::vector<std::filesystem::path>> readable_paths;
};

/// The system paths every child with a read allow-list may read (FilesystemIsolation::readable_paths),
/// then the device nodes it may also write. Computed once per process.
std::vector<std::string> SandboxSystemPaths();

/// An unprivileged identity for sandboxed children (ProcessSandbox::user).
struct SandboxUser {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  ///< supplementary groups (e.g. video/render for GPU nodes); at most 32
  std::string name;              ///< for messages ("kf-sandbox")
};

/// The unprivileged sandbox of a child tree (issue 25), applied by the child between fork and exec, after its
/// cgroup, limits and working directory and before Landlock: (1) when `user` is set, the child takes that
/// uid/gid/groups (only root may; the capability bounding set is emptied first); (2) every capability set
/// is emptied, the ambient set cleared, no_new_privs set — the child and everything it starts hold no
/// privilege, and set-uid programs cannot give any back; (3) a seccomp filter refuses what no kernel
/// evaluation needs: module loading, kexec, reboot, swap, mount, chroot, bpf, raw I/O and clock setting kill
/// the process with SIGSYS (an isolation violation); ptrace, process_vm_*, keyctl, userfaultfd, namespaces
/// and perf_event_open (unless allowed) fail with EPERM; sockets other than AF_UNIX/AF_NETLINK with EACCES
/// (no network); clone3 and io_uring with ENOSYS (callers fall back).
struct ProcessSandbox {
  std::optional<SandboxUser> user;  ///< the identity to take; nullopt = keep ours (then we must not be root)
  /// Opaque to the exec module, kept alive with these options: what reserves `user` for this run alone (the
  /// harness's per-run id lease, src/harness/run_identity.hpp), so no other live run is given its uid.
  std::shared_ptr<const void> user_lease;
  bool allow_perf_events = false;   ///< perf_event_open allowed (profiler passes)
  /// AF_INET/AF_INET6 sockets allowed, for profilers whose front end talks to the library it injects into the
  /// program over TCP (ncu, nsys). Only inside a network namespace of the run's own (loopback only): it implies
  /// ProcessOptions::no_network, and a run whose namespace cannot be made fails to spawn instead of getting the
  /// host's network.
  bool allow_loopback_sockets = false;
  /// When seccomp is unavailable: true = the run fails to spawn; false = it runs without the filter and
  /// ProcessRun::sandbox says so.
  bool required = false;
};

/// How the system-call filter would be applied here: "seccomp filter (x86_64)" or "unavailable: <why>".
/// Probed once per process; never throws.
std::string SeccompSupport();

/// Whether a sandboxed child gets a /dev/shm and System V / POSIX-mqueue IPC of its own, not shared with other
/// runs: "private /dev/shm and IPC namespace" (kf is root and may make mount and IPC namespaces) or "shared with
/// other runs: <why>". Probed once per process (in a throwaway child); never throws.
std::string PrivateIpcSupport();

/// How filesystem isolation would be applied on this machine: "landlock (ABI <n>)" or "unavailable: <why>".
/// Probed once per process; never throws.
std::string FilesystemIsolationSupport();

/// True when each run gets its own cgroup v2 (containment "cgroup_v2"): then a process that joins a run's
/// cgroup from outside its tree is contained like the run's own children (signalled, killed with the tree,
/// waited for before RunProcess returns, its CPU time counted). Warm-started test processes rely on it.
/// Probed once per process; never throws.
bool CgroupTreeContainment();

/// The tree-wide limits a run's cgroups can enforce on this machine.
enum class TreeLimit { kMemory, kProcesses };

/// How `which` would be enforced on a run's whole process tree here: "cgroup v2" or "cgroup v1" (a writable
/// cgroup with the memory resp. pids controller), or "" when neither exists. Probed once per process; never throws.
std::string CgroupLimitMechanism(TreeLimit which);

/// End-of-run marker (reference spec §4.7): a line matcher. When a line of stdout or stderr (escapes
/// stripped) matches, the process gets `grace` to exit on its own and is then killed (reason
/// kEndMarkerGrace, message = what the matcher returned). The runner knows no line format: the pytest
/// harness passes a matcher for pytest's summary line; `Literal` matches a substring.
struct EndMarker {
  /// nullopt: not the end line. A string: the end line; the message to use if the process must be killed.
  std::function<std::optional<std::string>(std::string_view line)> match;
  /// Wait after the marker before killing (the reference: 10 s for pytest, 2 s for literals). The run
  /// still ends as soon as the process exits — the grace is never waited when it is not needed.
  std::chrono::milliseconds grace{10'000};

  /// A marker matching any line that contains `text` (empty text matches nothing); kill message "".
  static EndMarker Literal(std::string text, std::chrono::milliseconds grace = std::chrono::milliseconds{2'000});
};

/// The environment names a child may inherit by default (ProcessOptions::allowed_env): exact names, or
/// prefixes written with a trailing '*' (PATH, HOME, LANG, LC_*, toolchain and device-runtime variables,
/// KERNELFOUNDRY_*, KF_*, …; see environment.cc for the list and why each is there).
const std::vector<std::string>& DefaultAllowedEnv();

struct ProcessOptions {
  std::vector<std::string> argv;                        ///< argv[0] looked up in PATH of the child env
  /// Run argv[0] through `/bin/sh -c`; further argv entries become $1, $2, … of that script.
  bool use_shell = false;
  std::filesystem::path cwd;                            ///< empty = current directory

  /// Extra variables set in the child (override inherited ones). Names that look secret are still
  /// dropped unless listed in `allow_secret_names`.
  std::map<std::string, std::string> env_add;
  /// When true, start from the allow-listed part of our environment (`allowed_env`); otherwise only
  /// env_add + a minimal PATH.
  bool inherit_allowed_env = true;
  /// Inherited names that may pass: exact names, or prefixes written with a trailing '*'.
  std::vector<std::string> allowed_env = DefaultAllowedEnv();
  /// A name (inherited or added) is secret when its upper-cased form contains one of these.
  /// "_USERNAME" keeps the reference's *_USERNAME rule while a bare USERNAME passes.
  std::vector<std::string> secret_patterns = {"PASSWORD", "SECRET", "TOKEN",   "API_KEY", "KEY_ID",
                                              "CREDENTIAL", "PRIVATE", "AUTH", "_USERNAME"};
  std::vector<std::string> allow_secret_names;          ///< exact names exempt from secret_patterns
  /// Entries put in front of PYTHONPATH (joined with ':'; no trailing ':' when PYTHONPATH was unset,
  /// unlike the reference, whose empty entry put the working directory on sys.path).
  std::vector<std::string> pythonpath_prepend;

  std::optional<std::chrono::milliseconds> wall_timeout;
  std::optional<std::chrono::milliseconds> inactivity_timeout;   ///< no bytes on stdout/stderr this long
  std::optional<EndMarker> end_marker;
  std::chrono::milliseconds kill_grace{2'000};                    ///< SIGTERM -> SIGKILL

  std::optional<uint64_t> memory_limit_bytes;    ///< cgroup memory.max (v2, else v1), else RLIMIT_AS
  /// memory_limit_bytes and process_limit only through cgroups: without a writable memory (pids) cgroup the limit
  /// is not applied — no RLIMIT_AS (address space, which CUDA and torch reserve far beyond use) or RLIMIT_NPROC
  /// (every process of the user) fallback — and limits["memory"] (["processes"]) says so.
  bool cgroup_limits_only = false;
  std::optional<uint64_t> cpu_limit_seconds;     ///< RLIMIT_CPU, per process
  std::optional<uint64_t> file_size_limit_bytes; ///< RLIMIT_FSIZE
  std::optional<uint64_t> open_files_limit;      ///< RLIMIT_NOFILE
  /// Tasks (processes and threads) of the whole tree: cgroup pids.max (v2, else v1), else RLIMIT_NPROC
  /// (per user; not enforced for root — then reported in `limits` as unavailable).
  std::optional<uint64_t> process_limit;
  bool no_network = false;                       ///< fresh network namespace with loopback only
  /// Restrict what the child tree may write (see FilesystemIsolation); nullopt = no restriction.
  std::optional<FilesystemIsolation> filesystem_isolation;
  /// Run the child tree unprivileged (see ProcessSandbox); nullopt = with our rights.
  std::optional<ProcessSandbox> sandbox;
  /// Cancellation: when stop is requested the whole tree is killed at once (SIGKILL) and the run ends with
  /// reason kCanceled. A default-constructed token never stops.
  std::stop_token stop;
  /// Use no cgroup at all (containment by the subreaper shepherd, limits by rlimits) — what a machine
  /// without a writable cgroup gets. For tests and `kf exec --force-subreaper`.
  bool force_subreaper = false;

  size_t output_cap_bytes = 1 << 20;             ///< per stream kept in the result (first+last halves)
  std::optional<uint64_t> output_kill_bytes;     ///< kill when a stream produced more than this in total

  /// Give the child the write end of an extra pipe at descriptor kResultFd (a fixed number, inherited
  /// across exec) and collect everything written to it into ProcessRun::result_data (capped like a
  /// stream at output_cap_bytes; raw bytes, not decoded). For a result document the child hands back
  /// without a path in its working directory (the native harness protocol). Writes count as activity.
  bool result_pipe = false;
  /// The descriptor number of the result pipe in the child when result_pipe is set.
  static constexpr int kResultFd = 6;

  /// Called for each complete output line (decoded, escapes stripped, without '\n'; lines longer than
  /// 64 KiB are cut to 64 KiB), from the calling thread of RunProcess. A final line without '\n' is
  /// delivered at the end.
  std::function<void(bool is_stderr, const std::string& line)> on_line;
};

struct ProcessRun {
  ProcessResult result;                          ///< returncode (negative = signal), output, message
  TerminationReason reason = TerminationReason::kExited;
  ContainmentMethod containment = ContainmentMethod::kSubreaper;
  int pid = -1;                                  ///< pid of the main child (-1 when it never started)
  double wall_seconds = 0;                       ///< from the spawn to the end of the run
  double cpu_seconds = 0;                        ///< user + system of the whole tree
  std::optional<uint64_t> peak_rss_bytes;        ///< cgroup peak memory, else the largest process's rss
  uint64_t stdout_bytes = 0, stderr_bytes = 0;   ///< produced in total (before capping)
  std::optional<std::string> end_marker_line;    ///< the line that matched the end marker
  bool network_isolated = false;                 ///< true when no_network was applied
  std::string network_note;                      ///< why isolation was unavailable, when requested
  /// Filesystem isolation: "" when not requested; "landlock (ABI 7)" when applied; "unavailable: <why>".
  std::string isolation;
  /// The sandbox (ProcessOptions::sandbox): "" when not requested; else e.g. "uid 999 (kf-sandbox), no
  /// capabilities, seccomp filter (x86_64)", with "seccomp unavailable: <why>" in place of the filter.
  std::string sandbox;
  /// How each requested limit was enforced: {"memory": "cgroup2 memory.max", "processes":
  /// "unavailable: …", "cpu": "RLIMIT_CPU", …}.
  std::map<std::string, std::string> limits;
  std::vector<std::string> notes;                ///< anything the caller should know (limits not applied)
  /// What the child wrote to the result pipe (ProcessOptions::result_pipe); nullopt when no pipe was asked
  /// for or the child never started.
  std::optional<std::string> result_data;

  /// {"result": ProcessResult JSON, "reason", "containment", "pid", "wall_seconds", "cpu_seconds",
  ///  "peak_rss_bytes" (or null), "stdout_bytes", "stderr_bytes", "end_marker_line" (or null),
  ///  "network_isolated", "network_note", "isolation", "sandbox", "limits", "notes"}.
  Json ToJson() const;
};

/// Runs a command to completion under the options. Never throws for a failing child (a spawn failure is a
/// kSpawnFailed result with returncode -1 and a message); throws kf::Error(kInvalidArgument) for an empty
/// argv and kf::Error(kIO) when the runner's own pipes/fork fail.
ProcessRun RunProcess(const ProcessOptions& options);

/// The child-side containment a run asks for (`options.filesystem_isolation` and `options.sandbox`) as data, for a
/// process that contains itself like the run's child (a warm-started test worker forked by kf's zygote, which
/// takes it through the binding kernelfoundry._contain; the Landlock rules and the seccomp program are made there by
/// the code RunProcess uses): {"filesystem_isolation": null | {"writable_paths": [...], "readable_paths": null |
/// [...], "required": bool}, "sandbox": null | {"user": null | {"uid", "gid", "groups", "name"},
/// "allow_perf_events": bool, "required": bool}}. Never throws.
Json ChildContainmentRequest(const ProcessOptions& options);

/// The inverse of ChildContainmentRequest: sets `options->filesystem_isolation` and `options->sandbox` (a missing
/// or null part resets it). Throws kf::Error(kInvalidArgument, naming the field) for a malformed request.
void ParseChildContainmentRequest(const Json& request, ProcessOptions* options);

/// For a termination handler (kf stopped by SIGINT/SIGTERM): SIGKILLs the tree of every RunProcess in
/// flight, waits up to `wait` until those trees are gone, and from then on parks every thread that calls
/// RunProcess or whose run ends (so no half-finished evaluation is used or stored); the handler then cleans
/// up and ends the process. Returns how many runs were in flight.
int AbortAllRunsForShutdown(std::chrono::milliseconds wait);

/// The environment a child would get (for `kf exec --print-env` and tests). Reads our environment.
std::map<std::string, std::string> BuildChildEnvironment(const ProcessOptions& options);

/// True when `name` would be dropped as a secret under `options` (secret_patterns, allow_secret_names).
bool IsSecretEnvName(const std::string& name, const ProcessOptions& options);

}  // namespace kf
