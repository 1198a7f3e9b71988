// A uid and gid of its own for each sandboxed child (kf as root): internal to the harness module.
//
// Children that share one sandbox user can meet while they run at the same time: Landlock does not govern
// connect() on a pathname Unix socket, so a candidate that publishes a socket in its own directory can be reached
// by another candidate's run, which may then pass it descriptors (a /dev/shm file outliving its run), and
// same-uid processes may renice (setpriority) and re-pin (sched_setaffinity) each other and share the per-user
// limits (RLIMIT_NPROC, inotify instances). With an identity of its own per child they cannot: its writable
// directories are sealed (owner root, group = the run's gid, mode 0770; the child cannot chmod them), and
// uid-based checks tell children apart. The child keeps the sandbox user's name ($USER) and supplementary
// groups, its own gid added, so it still reaches what kf shares with the sandbox group (OpenToChildren,
// ShareWithChildren).
//
// Ids: kRunIdBase + slot, slot < kRunIdSlots, uid == gid. A slot is leased by an exclusive flock on
// /run/kernelfoundry/run-ids/<slot> (a 0700 directory of root's), held while the lease lives, so no two live
// children on this machine — of any kf process — hold one id. Unavailable (nullopt, with why; children then
// share the sandbox user) when kf is not root, the range is not mapped in this user namespace
// (/proc/self/uid_map, gid_map), the lock directory cannot be made, or every slot is taken.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kernelfoundry/process.hpp"

namespace kf::harness_internal {

/// First id of the per-child range (1610612736), far above the ids of any passwd/group database.
inline constexpr uint32_t kRunIdBase = 0x60000000u;
/// How many children may hold an id at once on one machine.
inline constexpr uint32_t kRunIdSlots = 65536;

/// One child's identity while the lease lives.
struct RunIdentity {
  SandboxUser user;                    ///< uid = gid = kRunIdBase + slot; `base`'s name and groups plus the gid
  std::shared_ptr<const void> lease;   ///< the slot's lock; the id is free again once every copy is gone
};

/// Leases a free id for one child of `base` (the sandbox user). Returns nullopt and sets `*why` when per-child
/// ids are unavailable (see the file comment); thread-safe.
std::optional<RunIdentity> LeaseRunIdentity(const SandboxUser& base, std::string* why);

/// "" when per-child ids can be leased here, else why not (probed once per process).
std::string RunIdentityUnavailable();

}  // namespace kf::harness_internal
