// kf_test_rabbitmq start|stop DIR — the ctest fixture that starts one throwaway RabbitMQ for the whole test
// run (tests find it through DIR/url) and stops it by pid afterwards. Without rabbitmq-server installed,
// `start` prints a note and exits 0 (the broker tests then skip).
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>

#include "services/rabbitmq.hpp"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 3 || (std::strcmp(argv[1], "start") != 0 && std::strcmp(argv[1], "stop") != 0)) {
    std::fprintf(stderr, "usage: kf_test_rabbitmq start|stop DIR\n");
    return 2;
  }
  const fs::path dir = argv[2];
  try {
    if (std::strcmp(argv[1], "start") == 0) {
      if (!kf::testing::RabbitMqInstalled()) {
        std::printf("rabbitmq-server is not installed: broker tests will skip\n");
        return 0;
      }
      if (fs::exists(dir / "node.txt")) kf::testing::StopRabbitMq(kf::testing::LoadRabbitMq(dir));
      std::error_code ec;
      fs::remove_all(dir, ec);
      auto t0 = std::chrono::steady_clock::now();
      kf::testing::RabbitMq node = kf::testing::StartRabbitMq(dir);
      kf::testing::SaveRabbitMq(node);
      std::printf("RabbitMQ ready at %s after %.1f s (server pid %d)\n", node.url().c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), node.server_pid);
      return 0;
    }
    if (fs::exists(dir / "node.txt")) {
      kf::testing::StopRabbitMq(kf::testing::LoadRabbitMq(dir));
      std::error_code ec;
      fs::remove_all(dir, ec);
      std::printf("RabbitMQ stopped\n");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kf_test_rabbitmq: %s\n", e.what());
    return 1;
  }
}
