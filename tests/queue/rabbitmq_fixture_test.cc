// The ctest fixture that starts one throwaway RabbitMQ for the whole test run and stops it afterwards
// (tests/CMakeLists.txt: rabbitmq.start / rabbitmq.stop run these two disabled cases explicitly with
// KF_RABBITMQ_FIXTURE_DIR set). Tests then find the broker through that directory's url file
// (services/rabbitmq.hpp TestBroker). Without rabbitmq-server installed, Start does nothing and the broker
// tests skip.
#include <cstdlib>
#include <cstdio>

#include <gtest/gtest.h>

#include "services/rabbitmq.hpp"
#include "test_util.hpp"

namespace kf::testing {
namespace {

std::filesystem::path FixtureDir() {
  const char* dir = std::getenv("KF_RABBITMQ_FIXTURE_DIR");
  return dir && *dir ? std::filesystem::path(dir) : kf::testing::BinaryDir() / "test-rabbitmq";
}

TEST(DISABLED_RabbitMqFixture, Start) {
  if (!RabbitMqInstalled()) GTEST_SKIP() << "rabbitmq-server is not installed: broker tests will skip";
  const std::filesystem::path dir = FixtureDir();
  if (std::filesystem::exists(dir / "node.txt")) StopRabbitMq(LoadRabbitMq(dir));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  const auto t0 = std::chrono::steady_clock::now();
  RabbitMq node = StartRabbitMq(dir);
  SaveRabbitMq(node);
  std::printf("RabbitMQ ready at %s after %.1f s (server pid %d)\n", node.url().c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), node.server_pid);
}

TEST(DISABLED_RabbitMqFixture, Stop) {
  const std::filesystem::path dir = FixtureDir();
  if (!std::filesystem::exists(dir / "node.txt")) return;
  StopRabbitMq(LoadRabbitMq(dir));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace kf::testing
