// Isolation of build and test children (issue 10, "Deliver as well"; issue 25): the policy every harness
// applies, on top of the exec module's mechanisms (ProcessOptions::filesystem_isolation, Landlock;
// ProcessOptions::sandbox, the unprivileged user and the seccomp filter).
//
// A child may write only its work dir (builds: the build's own work dir; test runs: a fresh private
// directory per variant and phase, so a candidate's test run cannot touch the task tree, the reference's
// artifacts or another run's outputs) and a private temp dir, which is also its HOME. It may read only those,
// the paths its harness names (the task tree, the task-side Python package, the SDK, published precompiled
// headers), the task Python's installation and the system's shared parts (exec: SandboxSystemPaths) — the
// home directory, the database, the caches, other work dirs and kf's configuration are unreadable. TMPDIR and
// the caches tools write on their own (XDG_CACHE_HOME, POCL_CACHE_DIR, TORCH_EXTENSIONS_DIR, TRITON_CACHE_DIR,
// TORCHINDUCTOR_CACHE_DIR, CUDA_CACHE_PATH, MPLCONFIGDIR) point into the private temp dir.
// The child runs unprivileged: when kf is root, as the sandbox user ($KF_SANDBOX_USER, else `kf-sandbox`,
// which scripts/install-deps.sh creates, else `nobody`) with a uid and gid of its own per child (run_identity.hpp;
// the sandbox user's name and groups kept), so children running at the same time cannot reach each other;
// otherwise as kf's own user — always with no capabilities, no_new_privs and the seccomp filter. The
// directories it may write are handed to that user (chown); the test work dir (0710) and the trees it reads
// (group read) are shared with the sandbox user's group, so it reaches them; kf stays their owner.
//
// KF_ISOLATION in kf's environment: unset/"on" = isolate as far as the machine can (else run with what is
// there and say so), "required" = refuse to run a child without every part (its spawn fails: infrastructure
// error; `kf run --require-isolation` sets it), "off" = none of it (the private temp dir is still used).
// KF_SANDBOX_READ: extra directories children may read (':'-separated; e.g. a toolchain in a home directory).
// Internal to the harness and pipeline modules (and read by the verdict cache's key, record module: a
// verdict is reused only under the same isolation).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/process.hpp"

namespace kf {

/// How build and test children are isolated in this process, part by part.
struct ChildIsolation {
  std::string mode;        ///< "on", "required" or "off"
  std::string filesystem;  ///< "landlock (ABI 7)", "unavailable: <why>" or "off (KF_ISOLATION=off)"
  /// "uid of its own per run (kf-sandbox's groups), no capabilities" (kf as root: run_identity.hpp), "uid 999
  /// (kf-sandbox; shared by all runs: <why>), no capabilities", "uid N (kf's own), …" or "off (KF_ISOLATION=off)"
  std::string privileges;
  std::string seccomp;     ///< "seccomp filter (x86_64)", "unavailable: <why>" or "off (KF_ISOLATION=off)"
  /// "private" (each sandboxed child has its own /dev/shm and IPC namespace), "shared with other runs: <why>"
  /// (kf is not root, or the machine refuses the namespaces) or "off (KF_ISOLATION=off)". Reported, not part of
  /// Complete(): a kf that is not root cannot have it.
  std::string ipc;

  /// Every part applied.
  bool Complete() const;
  /// One line: "off (KF_ISOLATION=off)", else "<filesystem>; <privileges>; <seccomp>; /dev/shm and IPC <ipc>".
  std::string Summary() const;
  /// {"mode", "filesystem", "privileges", "seccomp", "ipc", "complete"} (the verdict's `isolation` field).
  Json ToJson() const;
};

/// The isolation of this process's children. Throws kf::Error(kInvalidArgument, field KF_ISOLATION or
/// KF_SANDBOX_USER) for an unknown mode or an unusable sandbox user.
ChildIsolation DescribeChildIsolation();

/// DescribeChildIsolation().Summary().
std::string ChildIsolationStatus();

/// True when DescribeChildIsolation() is complete (Landlock, the unprivileged user and seccomp all applied).
bool ChildIsolationApplied();

/// The user children run as when kf is root (see above); nullopt when kf is not root (they keep kf's uid).
/// Throws kf::Error(kInvalidArgument, field KF_SANDBOX_USER) when the named user does not exist or is root.
std::optional<SandboxUser> ChildSandboxUser();

/// Makes `private_tmp` (fresh: removed first when it exists), points the child's temp and cache variables
/// and HOME at it, and — unless KF_ISOLATION=off — restricts the child to writing `writable` and
/// `private_tmp`, to reading those, `readable`, the task Python's installation, the task-side resources
/// (TaskSideReadablePaths), the directories of CXX / CC given by absolute path, KF_SANDBOX_READ and the system's
/// shared parts, and runs it unprivileged (the writable directories are handed to the sandbox user). As root,
/// the child gets a uid and gid of its own, leased until `options` is destroyed (harness/run_identity.hpp), and
/// its writable directories are sealed against every other run (root's, group = its gid, mode 0770).
/// Throws kf::Error(kIO, file = the path) when private_tmp cannot be created or the sandbox user cannot reach
/// the child's working directory or a writable one (our environment's fault).
void IsolateChild(ProcessOptions& options, const std::vector<std::filesystem::path>& writable,
                  const std::filesystem::path& private_tmp,
                  const std::vector<std::filesystem::path>& readable = {});

/// Adds `dir` to an isolated child's writable paths (after IsolateChild), handing it to the sandbox user.
/// Does nothing for a child without filesystem isolation.
void AddWritable(ProcessOptions& options, const std::filesystem::path& dir);

/// Makes a tree a child wrote kf's again before kf publishes it for others (a precompiled header): owned by
/// kf's user, not writable by group or others, so no later child can change it. Symlinks are not followed.
/// Does nothing when children keep kf's uid. Throws kf::Error(kIO).
void TakeBackFromChildren(const std::filesystem::path& dir);

/// Makes `dir` (created by kf, mode 0700) traversable for the sandbox user's group without letting it list
/// it (group = the sandbox user's, mode 0710): a test work dir, whose task tree children read and whose run
/// dirs they write. Does nothing when children keep kf's uid. Throws kf::Error(kIO).
void OpenToChildren(const std::filesystem::path& dir);

/// Lets the sandbox user read a tree kf wrote (a test work dir's task tree, the collector's copy of a task)
/// whatever modes its files came with, never write it: group = the sandbox user's, group read (and execute
/// where the owner may) added, group write, set-uid and set-gid removed. Owners and symlinks are left alone.
/// Does nothing when children keep kf's uid. Throws kf::Error(kIO).
void ShareWithChildren(const std::filesystem::path& dir);

/// When kf is root and the sandbox user cannot reach `path` (an ancestor lacks the search permission for
/// it): why, naming that ancestor. nullopt when it can, or when children keep kf's uid.
std::optional<std::string> ChildCannotReach(const std::filesystem::path& path);

/// The task-side resources children read: the `kernelfoundry` package directory and the task SDK (those that
/// exist; never throws).
std::vector<std::filesystem::path> TaskSideReadablePaths();

/// A fresh, empty directory `<parent>/<prefix>XXXXXX` (mkdtemp) for one test run. Throws kf::Error(kIO,
/// file = the path) when it cannot be created.
std::filesystem::path FreshRunDir(const std::filesystem::path& parent, const std::string& prefix);

}  // namespace kf
