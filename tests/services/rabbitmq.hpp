// A throwaway RabbitMQ for tests: a Debian rabbitmq-server node (plus its own epmd) on 127.0.0.1 with free
// ports and all state in a temp dir, stopped by pid.
//
// Tests call TestBroker(): the broker of $KF_TEST_BROKER_URL, else the one the ctest fixture started
// (kf_test_rabbitmq start DIR writes DIR/url), else one started by this process on first use and stopped at
// exit (startup takes ~10–60 s depending on load, so it is started once per process at most). When
// rabbitmq-server is not installed, TestBroker() returns "" and the tests skip.
#pragma once

#include <filesystem>
#include <string>

namespace kf::testing {

/// A running RabbitMQ node.
struct RabbitMq {
  std::filesystem::path dir;   ///< state, logs, pids
  int port = 0;                ///< AMQP port on 127.0.0.1
  int server_pid = 0;          ///< process group leader of the server (setsid)
  int epmd_pid = 0;
  std::string url() const;     ///< amqp://guest:guest@127.0.0.1:<port>//
};

/// Starts a node with state in `dir` (created) and waits until its log says "Server startup complete" and
/// the port accepts connections. Throws std::runtime_error with the log tail on failure or after
/// `timeout_s`.
RabbitMq StartRabbitMq(const std::filesystem::path& dir, double timeout_s = 180);

/// Stops a node (SIGTERM to its process group, SIGKILL after 15 s) and its epmd.
void StopRabbitMq(const RabbitMq& node);

/// Writes/reads the node description in dir/node.txt (for the ctest fixture's start and stop steps).
void SaveRabbitMq(const RabbitMq& node);
RabbitMq LoadRabbitMq(const std::filesystem::path& dir);

/// The test broker's URL (see the file comment); "" when no RabbitMQ is available.
std::string TestBroker();

/// True when /usr/lib/rabbitmq/bin/rabbitmq-server exists.
bool RabbitMqInstalled();

}  // namespace kf::testing
