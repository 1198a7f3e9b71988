// The task SDK's remote kernels (include/kernelfoundry/sdk/remote.hpp) on the test program's side: the shared
// arena's allocator, and the checks a KF_REMOTE call makes before it reaches an executor. The calls themselves,
// the executor's containment and the cheats are end to end in native_remote_test.cc.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "kernelfoundry/sdk/remote.hpp"

KF_REMOTE(double, kf_test_remote_sum, const float*, std::size_t)

namespace kf {
namespace {

TEST(SdkSharedArena, BlocksAreAlignedInsideTheArenaAndFreedSpaceIsCoalescedAndReused) {
  sdk::SharedArena& arena = sdk::SharedArena::Get();
  EXPECT_GE(arena.size(), std::size_t{64} << 20);
  EXPECT_EQ(arena.base() % 4096, 0u);
  void* a = arena.Allocate(100);
  void* b = arena.Allocate(1000);
  void* c = arena.Allocate(10);
  for (void* p : {a, b, c}) {
    EXPECT_TRUE(arena.Contains(p));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  }
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), 128);   // 100 bytes rounded up to 64-byte blocks
  EXPECT_EQ(static_cast<char*>(c) - static_cast<char*>(b), 1024);
  arena.Free(b);
  arena.Free(a);
  void* ab = arena.Allocate(128 + 1024);  // a and b's space, merged
  EXPECT_EQ(ab, a);
  arena.Free(ab);
  arena.Free(c);
  EXPECT_FALSE(arena.Contains(&arena));
  EXPECT_FALSE(arena.Contains(reinterpret_cast<char*>(arena.base()) + arena.size() - 8, 16));
  EXPECT_THROW(arena.Allocate(arena.size() + 1), std::bad_alloc);
  sdk::SharedVector<float> v(1000, 1.5f);
  EXPECT_TRUE(arena.Contains(v.data(), v.size() * sizeof(float)));
  EXPECT_EQ(v[999], 1.5f);
}

TEST(SdkRemote, APointerOutsideTheArenaIsRefusedNamingTheArgument) {
  std::vector<float> private_memory(16, 1.0f);
  try {
    kf_test_remote_sum(private_memory.data(), private_memory.size());
    ADD_FAILURE() << "no error";
  } catch (const sdk::Failure& e) {
    EXPECT_NE(std::string(e.what()).find("argument 1 of kf_test_remote_sum points outside the shared arena"),
              std::string::npos) << e.what();
  }
}

TEST(SdkRemote, ACallWithoutAnExecutorProgramSaysWhichOptionIsMissing) {
  sdk::SharedVector<float> x(16, 1.0f);
  try {
    kf_test_remote_sum(x.data(), x.size());
    ADD_FAILURE() << "no error";
  } catch (const sdk::RemoteError& e) {
    EXPECT_NE(std::string(e.what()).find("started without --kf-executor=PATH (config.yaml: executor_executable)"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kf
