// ProcessOptions::result_pipe: the child gets a pipe at descriptor kResultFd; what it writes comes back
// in ProcessRun::result_data, separate from stdout; the descriptor is absent without the option.
#include <gtest/gtest.h>

#include "kernelfoundry/process.hpp"

namespace kf {
namespace {

TEST(ResultPipe, CollectsWhatTheChildWrites) {
  ProcessOptions o;
  o.argv = {"echo out; printf '{\"ok\":true}' >&6; echo err >&2"};
  o.use_shell = true;
  o.result_pipe = true;
  o.wall_timeout = std::chrono::milliseconds(20'000);
  ProcessRun run = RunProcess(o);
  EXPECT_EQ(run.reason, TerminationReason::kExited);
  EXPECT_EQ(run.result.returncode, 0);
  ASSERT_TRUE(run.result_data.has_value());
  EXPECT_EQ(*run.result_data, "{\"ok\":true}");
  EXPECT_EQ(run.result.stdout_text, "out\n");
}

TEST(ResultPipe, EmptyWhenNothingWritten) {
  ProcessOptions o;
  o.argv = {"exit 3"};
  o.use_shell = true;
  o.result_pipe = true;
  ProcessRun run = RunProcess(o);
  EXPECT_EQ(run.result.returncode, 3);
  ASSERT_TRUE(run.result_data.has_value());
  EXPECT_EQ(*run.result_data, "");
}

TEST(ResultPipe, DescriptorAbsentWithoutOption) {
  ProcessOptions o;
  o.argv = {"printf x >&6 2>/dev/null && echo open || echo closed"};
  o.use_shell = true;
  ProcessRun run = RunProcess(o);
  EXPECT_EQ(run.result.stdout_text, "closed\n");
  EXPECT_FALSE(run.result_data.has_value());
}

TEST(ResultPipe, SpawnFailureHasNoData) {
  ProcessOptions o;
  o.argv = {"/nonexistent/kf-no-such-binary"};
  o.result_pipe = true;
  ProcessRun run = RunProcess(o);
  EXPECT_EQ(run.reason, TerminationReason::kSpawnFailed);
  EXPECT_FALSE(run.result_data.has_value());
}

}  // namespace
}  // namespace kf
