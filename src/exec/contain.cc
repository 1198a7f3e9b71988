// Containment of a child process (contain.hpp): ContainSelf, the one function both the shepherd's child and a
// warm-start worker call, and PeerContainment, the plan a warm-start worker takes from its contained client.
#include "exec/contain.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>

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
  // Last, after the cgroup writes (which it forbids): from here on the process writes only what the plan allows.
  if (int err = ApplyLandlock(c.landlock); err != 0) return Fail(SpawnStage::kIsolation, err, failed);
  return 0;
}

PeerContainment::PeerContainment(pid_t pid, bool isolate, const std::vector<std::string>& writable, bool required) {
  const std::string proc = "/proc/" + std::to_string(pid);
  if (access(proc.c_str(), F_OK) != 0) throw Error(ErrorKind::kNotFound, "no such process", proc);
  CgroupJoinFilesOf(pid, &v2_join_file_, &join_files_);
  if (join_files_.size() > ChildContainment::kMaxJoinFiles) {
    throw Error(ErrorKind::kInternal, "more cgroup v1 hierarchies than a containment plan holds", proc + "/cgroup");
  }
  plan_.new_session = true;
  plan_.v2_join_file = v2_join_file_.empty() ? nullptr : v2_join_file_.c_str();
  for (const std::string& f : join_files_) plan_.join_files[plan_.n_join_files++] = f.c_str();
  // Every limit of the peer: those the runner set (ProcessOptions) and those it inherited from kf.
  static_assert(RLIM_NLIMITS <= ChildContainment::kMaxRlimits);
  for (int r = 0; r < RLIM_NLIMITS; ++r) {
    rlimit rl{};
    if (prlimit(pid, static_cast<__rlimit_resource>(r), nullptr, &rl) != 0) {
      throw Error(ErrorKind::kIO, std::string("prlimit: ") + std::strerror(errno), proc + "/limits");
    }
    plan_.rlimits[plan_.n_rlimits++] = {r, static_cast<uint64_t>(rl.rlim_cur), static_cast<uint64_t>(rl.rlim_max)};
  }
  if (!isolate) return;
  const int abi = LandlockAbi();
  isolation_ = LandlockDescription(abi);
  if (abi < 1 && required) {
    throw Error(ErrorKind::kInvalidArgument, "filesystem isolation is required but " + isolation_);
  }
  writable_ = writable;
  if (!MakeLandlockPlan(abi, writable_, &plan_.landlock)) {
    throw Error(ErrorKind::kInvalidArgument, "too many writable paths for filesystem isolation", "",
                "filesystem_isolation.writable_paths");
  }
}

std::string ContainLikePeer(pid_t pid, bool isolate, const std::vector<std::string>& writable, bool required) {
  const PeerContainment peer(pid, isolate, writable, required);
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
