// Containment of a child process (contain.hpp): ContainSelf, the one function both the shepherd's child and a
// warm-start worker call, and PeerContainment, the plan a warm-start worker takes from its contained client.
#include "exec/contain.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "exec/private_ipc.hpp"
#include "exec/seccomp.hpp"
#include "kernelfoundry/error.hpp"

namespace kf::exec_internal {
namespace {

/// Writes "0" (the calling process) to a cgroup.procs file. Async-signal-safe. Returns 0 or errno.
int JoinCgroup(const char* procs_file) {
  const int fd = open(procs_file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const ssize_t n = write(fd, "0", 1);
  const int err = n == 1 ? 0 : (n < 0 ? errno : EIO);
  close(fd);
  return err;
}

int Fail(SpawnStage stage, int err, SpawnStage* failed) {
  *failed = stage;
  return err;
}

}  // namespace

const char* SpawnStageName(SpawnStage stage) {
  switch (stage) {
    case SpawnStage::kFork: return "fork";
    case SpawnStage::kCgroup: return "joining the cgroup";
    case SpawnStage::kRlimit: return "setting resource limits";
    case SpawnStage::kStdio: return "setting up stdin/stdout/stderr";
    case SpawnStage::kChdir: return "changing to the working directory";
    case SpawnStage::kExec: return "exec";
    case SpawnStage::kSession: return "setsid";
    case SpawnStage::kIsolation: return "applying filesystem isolation (Landlock)";
    case SpawnStage::kPrivileges: return "dropping privileges (sandbox user, capabilities)";
    case SpawnStage::kSeccomp: return "installing the system-call filter (seccomp)";
    case SpawnStage::kNetwork: return "isolating the network (a network namespace of its own)";
    case SpawnStage::kIpc: return "giving it its own /dev/shm and IPC namespace";
  }
  return "spawn";
}

int ContainSelf(const ChildContainment& c, SpawnStage* failed) {
  if (c.new_session && setsid() < 0) return Fail(SpawnStage::kSession, errno, failed);
  if (c.v2_join_file != nullptr) {
    if (int err = JoinCgroup(c.v2_join_file); err != 0) return Fail(SpawnStage::kCgroup, err, failed);
  }
  for (int i = 0; i < c.n_join_files; ++i) {
    if (int err = JoinCgroup(c.join_files[i]); err != 0) return Fail(SpawnStage::kCgroup, err, failed);
  }
  for (int i = 0; i < c.n_rlimits; ++i) {
    const rlimit rl{static_cast<rlim_t>(c.rlimits[i].soft), static_cast<rlim_t>(c.rlimits[i].hard)};
    if (setrlimit(c.rlimits[i].resource, &rl) != 0) {
      return Fail(SpawnStage::kRlimit, errno, failed);
    }
  }
  // Its own /dev/shm and IPC namespace while it still has the capability, and before the Landlock rules, whose
  // /dev/shm rule must name the new tmpfs.
  if (c.private_ipc) {
    if (int err = MakePrivateIpc(); err != 0) return Fail(SpawnStage::kIpc, err, failed);
  }
  // The sandbox, after the cgroup writes (which Landlock forbids). The Landlock rules are made while every path can
  // still be opened; then the identity and capabilities go (issue 25), which clears the parent-death signal (set
  // again, and the parent checked again); then the process reads and writes only what the plan allows, and the
  // system-call filter comes last.
  int ruleset = -1;
  if (int err = PrepareLandlock(c.landlock, &ruleset); err != 0) return Fail(SpawnStage::kIsolation, err, failed);
  if (c.privileges.active) {
    int death_signal = 0;
    prctl(PR_GET_PDEATHSIG, &death_signal, 0, 0, 0);
    const pid_t parent = getppid();
    if (int err = DropPrivileges(c.privileges); err != 0) {
      if (ruleset >= 0) close(ruleset);
      return Fail(SpawnStage::kPrivileges, err, failed);
    }
    // As after an exec (the shepherd's child execs next): /proc/self stays the process's own, not root's.
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    if (death_signal != 0) {
      prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0);
      if (getppid() != parent) {
        if (ruleset >= 0) close(ruleset);
        return Fail(SpawnStage::kPrivileges, ESRCH, failed);
      }
    }
  }
  if (int err = RestrictLandlock(ruleset); err != 0) return Fail(SpawnStage::kIsolation, err, failed);
  if (int err = InstallSeccomp(c.seccomp, c.seccomp_len); err != 0) return Fail(SpawnStage::kSeccomp, err, failed);
  return 0;
}

ChildPolicy::ChildPolicy(const std::optional<FilesystemIsolation>& isolation,
                         const std::optional<ProcessSandbox>& sandbox) {
  if (isolation) MakeIsolation(*isolation);
  if (sandbox && refusal_.empty()) MakeSandbox(*sandbox);
}

void ChildPolicy::MakeIsolation(const FilesystemIsolation& isolation) {
  const int abi = LandlockAbi();
  isolation_ = LandlockDescription(abi);
  if (abi < 1 && isolation.required) {
    refusal_ = "filesystem isolation is required but " + isolation_;
    return;
  }
  if (isolation.writable_paths.size() > 20) {
    throw Error(ErrorKind::kInvalidArgument, "too many writable paths for filesystem isolation (at most 20)", "",
                "filesystem_isolation.writable_paths");
  }
  for (const auto& p : isolation.writable_paths) writable_.push_back(p.string());
  const auto& readable = isolation.readable_paths;
  if (readable) {
    if (readable->size() > 40) {
      throw Error(ErrorKind::kInvalidArgument, "too many readable paths for filesystem isolation (at most 40)", "",
                  "filesystem_isolation.readable_paths");
    }
    for (const auto& p : *readable) readable_.push_back(p.string());
  }
  if (!MakeLandlockPlan(abi, writable_, readable ? &readable_ : nullptr, &landlock_)) {
    throw Error(ErrorKind::kInvalidArgument, "too many paths for filesystem isolation", "", "filesystem_isolation");
  }
}

void ChildPolicy::MakeSandbox(const ProcessSandbox& sb) {
  privileges_.active = true;
  std::string name = "ours";
  if (sb.user) {
    if (sb.user->groups.size() > static_cast<size_t>(PrivilegePlan::kMaxGroups)) {
      throw Error(ErrorKind::kInvalidArgument, "too many supplementary groups for the sandbox user (at most 32)", "",
                  "sandbox.user.groups");
    }
    if (sb.user->uid == 0) {
      throw Error(ErrorKind::kInvalidArgument, "the sandbox user must not be root (uid 0)", "", "sandbox.user");
    }
    privileges_.switch_ids = true;
    privileges_.uid = sb.user->uid;
    privileges_.gid = sb.user->gid;
    for (uint32_t g : sb.user->groups) privileges_.groups[privileges_.n_groups++] = g;
    name = sb.user->name.empty() ? "sandbox user" : sb.user->name;
  } else if (geteuid() == 0) {
    refusal_ = "the sandbox needs a user to switch to when running as root";
    return;
  }
  sandbox_ = PrivilegeDescription(privileges_, name);
  // A sandbox user's runs would all share /dev/shm and System V IPC (private_ipc.hpp); kf's own user (not root)
  // cannot make the namespaces.
  private_ipc_ = privileges_.switch_ids && PrivateIpcAvailable();
  sandbox_ += private_ipc_ ? ", " + PrivateIpcDescription() : ", /dev/shm and IPC " + PrivateIpcDescription();
  if (!SeccompAvailable()) {
    sandbox_ += ", seccomp " + SeccompDescription();
    if (sb.required) refusal_ = "the sandbox is required but seccomp is " + SeccompDescription();
    return;
  }
  seccomp_ = BuildSeccompFilter(sb.allow_perf_events, sb.allow_loopback_sockets);
  sandbox_ += ", " + SeccompDescription() + (sb.allow_perf_events ? " (perf events allowed)" : "") +
              (sb.allow_loopback_sockets ? " (inet sockets in the run's own network namespace)" : "");
}

void ChildPolicy::ApplyTo(ChildContainment* c) const {
  c->landlock = landlock_;
  c->privileges = privileges_;
  c->private_ipc = private_ipc_;
  c->seccomp = seccomp_.empty() ? nullptr : seccomp_.data();
  c->seccomp_len = static_cast<uint16_t>(seccomp_.size());
}

namespace {

/// The real, effective, saved and filesystem uids of `pid` (the "Uid:" line of /proc/<pid>/status).
std::vector<uid_t> UidsOf(const std::string& proc) {
  std::ifstream in(proc + "/status");
  std::vector<uid_t> uids;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Uid:", 0) != 0) continue;
    std::istringstream words(line.substr(4));
    for (uid_t u; words >> u;) uids.push_back(u);
  }
  if (uids.size() != 4) throw Error(ErrorKind::kIO, "cannot read the process's uids", proc + "/status");
  return uids;
}

/// The number of threads of the calling process ("Threads:" in /proc/self/status), 0 when unreadable.
int ThreadCount() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return 0;
}

}  // namespace

std::vector<RlimitSetting> ResourceLimitsFromProc(pid_t pid) {
  const std::string file = "/proc/" + std::to_string(pid) + "/limits";
  static constexpr const char* kLabels[] = {
      "Max cpu time",        "Max file size",        "Max data size",       "Max stack size",
      "Max core file size",  "Max resident set",     "Max processes",       "Max open files",
      "Max locked memory",   "Max address space",    "Max file locks",      "Max pending signals",
      "Max msgqueue size",   "Max nice priority",    "Max realtime priority", "Max realtime timeout"};
  static_assert(std::size(kLabels) >= RLIM_NLIMITS);
  std::ifstream in(file);
  std::vector<RlimitSetting> out(RLIM_NLIMITS, RlimitSetting{-1, 0, 0});
  for (std::string line; std::getline(in, line);) {
    for (int r = 0; r < RLIM_NLIMITS; ++r) {
      const std::string label = kLabels[r];
      if (line.rfind(label + " ", 0) != 0) continue;
      std::istringstream words(line.substr(label.size()));
      std::string soft, hard;
      words >> soft >> hard;
      auto value = [&](const std::string& w) -> uint64_t {
        if (w == "unlimited") return RLIM_INFINITY;
        char* end = nullptr;
        const uint64_t v = std::strtoull(w.c_str(), &end, 10);
        if (w.empty() || *end != '\0') throw Error(ErrorKind::kIO, "unexpected limit '" + w + "'", file);
        return v;
      };
      out[static_cast<size_t>(r)] = {r, value(soft), value(hard)};
    }
  }
  for (const RlimitSetting& l : out) {
    if (l.resource < 0) throw Error(ErrorKind::kIO, "cannot read every resource limit of the process", file);
  }
  return out;
}

PeerContainment::PeerContainment(pid_t pid, const std::optional<FilesystemIsolation>& isolation,
                                 const std::optional<ProcessSandbox>& sandbox)
    : policy_(isolation, sandbox) {
  const std::string proc = "/proc/" + std::to_string(pid);
  if (access(proc.c_str(), F_OK) != 0) throw Error(ErrorKind::kNotFound, "no such process", proc);
  if (!policy_.Refusal().empty()) throw Error(ErrorKind::kInvalidArgument, policy_.Refusal());
  if (sandbox && sandbox->user) {
    for (const uid_t u : UidsOf(proc)) {
      if (u != sandbox->user->uid) {
        throw Error(ErrorKind::kInvalidArgument, "the client runs as uid " + std::to_string(u) +
                                                     ", the plan's sandbox user is uid " +
                                                     std::to_string(sandbox->user->uid), proc + "/status");
      }
    }
  }
  CgroupJoinFilesOf(pid, &v2_join_file_, &join_files_);
  if (join_files_.size() > ChildContainment::kMaxJoinFiles) {
    throw Error(ErrorKind::kInternal, "more cgroup v1 hierarchies than a containment plan holds", proc + "/cgroup");
  }
  plan_.new_session = true;
  plan_.v2_join_file = v2_join_file_.empty() ? nullptr : v2_join_file_.c_str();
  for (const std::string& f : join_files_) plan_.join_files[plan_.n_join_files++] = f.c_str();
  // Every limit of the peer: those the runner set (ProcessOptions) and those it inherited from kf.
  static_assert(RLIM_NLIMITS <= ChildContainment::kMaxRlimits);
  std::optional<std::vector<RlimitSetting>> from_proc;
  for (int r = 0; r < RLIM_NLIMITS; ++r) {
    rlimit rl{};
    if (prlimit(pid, static_cast<__rlimit_resource>(r), nullptr, &rl) == 0) {
      plan_.rlimits[plan_.n_rlimits++] = {r, static_cast<uint64_t>(rl.rlim_cur), static_cast<uint64_t>(rl.rlim_max)};
      continue;
    }
    // prlimit on a process of another uid (a client running as the sandbox user) needs CAP_SYS_RESOURCE, which
    // kf may lack even as root (containers); /proc/<pid>/limits is readable by everyone.
    if (errno != EPERM) throw Error(ErrorKind::kIO, std::string("prlimit: ") + std::strerror(errno), proc + "/limits");
    if (!from_proc) from_proc = ResourceLimitsFromProc(pid);
    plan_.rlimits[plan_.n_rlimits++] = (*from_proc)[static_cast<size_t>(r)];
  }
  policy_.ApplyTo(&plan_);
}

std::string ContainLikePeer(pid_t pid, const std::optional<FilesystemIsolation>& isolation,
                            const std::optional<ProcessSandbox>& sandbox) {
  if (const int threads = ThreadCount(); threads != 1) {
    throw Error(ErrorKind::kInternal, "a process that contains itself must be single-threaded (it has " +
                                          std::to_string(threads) + " threads)");
  }
  const PeerContainment peer(pid, isolation, sandbox);
  SpawnStage stage = SpawnStage::kCgroup;
  if (const int err = ContainSelf(peer.Plan(), &stage); err != 0) {
    throw Error(ErrorKind::kIO, std::string(SpawnStageName(stage)) + ": " + std::strerror(err));
  }
  std::string v2;
  std::vector<std::string> v1;
  CgroupJoinFilesOf(pid, &v2, &v1);
  if (!v2.empty() || !v1.empty()) {
    throw Error(ErrorKind::kIO, "still outside a cgroup of the process after joining: " + (v2.empty() ? v1[0] : v2));
  }
  return peer.Isolation();
}

}  // namespace kf::exec_internal
