// A uid and gid of its own per sandboxed child (src/harness/run_identity.hpp): leases, sealed writable
// directories, and the stranger test's attack (2026-12-07): two candidates running at the same time met through a
// pathname Unix socket (one published its path, the other connected) and could pass descriptors.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "harness/isolation.hpp"
#include "harness/run_identity.hpp"
#include "core/temp_dir.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using harness_internal::kRunIdBase;
using harness_internal::kRunIdSlots;
using harness_internal::LeaseRunIdentity;
using harness_internal::RunIdentity;
using harness_internal::RunIdentityUnavailable;

bool PerRunIds() { return RunIdentityUnavailable().empty(); }

TEST(RunIdentity, LiveLeasesHaveDistinctIdsInTheRangeWithTheSandboxUsersNameAndGroups) {
  if (!PerRunIds()) GTEST_SKIP() << "per-run ids unavailable here: " << RunIdentityUnavailable();
  const SandboxUser base{999, 995, {995, 44}, "kf-sandbox"};
  std::string why;
  std::vector<RunIdentity> held;
  for (int i = 0; i < 50; ++i) {
    std::optional<RunIdentity> id = LeaseRunIdentity(base, &why);
    ASSERT_TRUE(id.has_value()) << why;
    EXPECT_GE(id->user.uid, kRunIdBase);
    EXPECT_LT(id->user.uid, kRunIdBase + kRunIdSlots);
    EXPECT_EQ(id->user.gid, id->user.uid);
    EXPECT_EQ(id->user.name, "kf-sandbox");
    ASSERT_EQ(id->user.groups.size(), 3u);
    EXPECT_EQ(id->user.groups[0], id->user.gid);  // its own group first, then the sandbox user's
    EXPECT_EQ(id->user.groups[1], 995u);
    EXPECT_EQ(id->user.groups[2], 44u);
    for (const RunIdentity& other : held) EXPECT_NE(other.user.uid, id->user.uid);
    held.push_back(*id);
  }
}

// The lock is per open file: another process cannot take a slot this one holds (flock, run_identity.cc).
TEST(RunIdentity, AnotherProcessCannotLeaseAHeldSlot) {
  if (!PerRunIds()) GTEST_SKIP() << "per-run ids unavailable here: " << RunIdentityUnavailable();
  std::string why;
  std::optional<RunIdentity> id = LeaseRunIdentity(SandboxUser{999, 995, {995}, "kf-sandbox"}, &why);
  ASSERT_TRUE(id.has_value()) << why;
  const std::string slot = std::to_string(id->user.uid - kRunIdBase);
  auto [rc, out] = testing::RunShell("flock --nonblock --conflict-exit-code 7 /run/kernelfoundry/run-ids/" + slot +
                                     " true");
  EXPECT_EQ(rc, 7) << out;
  id.reset();
  auto [rc2, out2] = testing::RunShell("flock --nonblock --conflict-exit-code 7 /run/kernelfoundry/run-ids/" + slot +
                                       " true");
  EXPECT_EQ(rc2, 0) << out2;
}

TEST(RunIdentity, EachIsolatedChildGetsItsOwnIdAndSealedWritableDirectories) {
  if (::geteuid() != 0 || !ChildSandboxUser()) GTEST_SKIP() << "needs root (children switch users only then)";
  if (!PerRunIds()) GTEST_SKIP() << "per-run ids unavailable here: " << RunIdentityUnavailable();
  kf::TempDir tmp({}, "kf-run-identity-");
  OpenToChildren(tmp.path());
  ProcessOptions a, b;
  fs::create_directories(tmp.path() / "a_out");
  IsolateChild(a, {tmp.path() / "a_out"}, tmp.path() / "a_tmp");
  IsolateChild(b, {}, tmp.path() / "b_tmp");
  ASSERT_TRUE(a.sandbox && a.sandbox->user && b.sandbox && b.sandbox->user);
  EXPECT_NE(a.sandbox->user->uid, b.sandbox->user->uid);
  EXPECT_NE(a.sandbox->user->uid, ChildSandboxUser()->uid);
  EXPECT_NE(a.sandbox->user_lease, nullptr);
  for (const char* dir : {"a_out", "a_tmp"}) {
    struct stat st {};
    ASSERT_EQ(::stat((tmp.path() / dir).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u) << dir;  // the child cannot chmod it open
    EXPECT_EQ(st.st_gid, a.sandbox->user->gid) << dir;
    EXPECT_EQ(st.st_mode & 07777, 0770u) << dir;
  }
  EXPECT_EQ(DescribeChildIsolation().privileges, "uid of its own per run (" + ChildSandboxUser()->name +
                                                    "'s groups), no capabilities");
}

}  // namespace
}  // namespace kf
