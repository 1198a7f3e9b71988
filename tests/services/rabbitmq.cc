// Throwaway RabbitMQ nodes for tests (see rabbitmq.hpp).
#include "services/rabbitmq.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace kf::testing {

namespace fs = std::filesystem;

namespace {

constexpr const char* kServer = "/usr/lib/rabbitmq/bin/rabbitmq-server";

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

bool PortOpen(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// The file's bytes, or "" when it cannot be read (a log that does not exist yet).
std::string ReadIfExists(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Spawns argv detached from our stdio (its output to `log`), in its own session; returns the pid.
int SpawnDetached(const std::vector<std::string>& argv, const std::vector<std::string>& env, const fs::path& log) {
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setsid();
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

// True while the process exists and is not a zombie (PID 1 of some containers never reaps orphans).
bool Alive(int pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::string stat = ReadIfExists("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

void Reap(int pid) {
  int status = 0;
  ::waitpid(pid, &status, WNOHANG);
}

struct OwnNode {
  std::mutex mu;
  bool tried = false;
  RabbitMq node;
  ~OwnNode() {
    if (node.server_pid > 0) {
      StopRabbitMq(node);
      std::error_code ec;
      fs::remove_all(node.dir, ec);
    }
  }
};

}  // namespace

std::string RabbitMq::url() const { return "amqp://guest:guest@127.0.0.1:" + std::to_string(port) + "//"; }

bool RabbitMqInstalled() { return ::access(kServer, X_OK) == 0; }

RabbitMq StartRabbitMq(const fs::path& dir, double timeout_s) {
  RabbitMq node;
  node.dir = dir;
  fs::create_directories(dir / "mnesia");
  fs::create_directories(dir / "log");
  node.port = FreePort();
  const int dist_port = FreePort();
  const int epmd_port = FreePort();
  {
    std::ofstream conf(dir / "rabbitmq.conf");
    conf << "listeners.tcp.default = 127.0.0.1:" << node.port << "\n";
    // Test brokers are for one machine only; keep guest usable and startup short.
    conf << "loopback_users = none\n";
    std::ofstream plugins(dir / "enabled_plugins");
    plugins << "[].\n";
  }
  const std::string name = "kftest" + std::to_string(::getpid()) + "x" + std::to_string(node.port);
  std::vector<std::string> env = {
      "HOME=" + dir.string(),
      "RABBITMQ_NODENAME=" + name + "@localhost",
      "RABBITMQ_NODE_PORT=" + std::to_string(node.port),
      "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
      "RABBITMQ_DIST_PORT=" + std::to_string(dist_port),
      "ERL_EPMD_PORT=" + std::to_string(epmd_port),
      "ERL_EPMD_ADDRESS=127.0.0.1",
      "RABBITMQ_MNESIA_BASE=" + (dir / "mnesia").string(),
      "RABBITMQ_LOG_BASE=" + (dir / "log").string(),
      "RABBITMQ_CONFIG_FILE=" + (dir / "rabbitmq").string(),
      "RABBITMQ_ENABLED_PLUGINS_FILE=" + (dir / "enabled_plugins").string(),
      "RABBITMQ_PID_FILE=" + (dir / "pid").string(),
      "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
  };
  node.epmd_pid = SpawnDetached({"/usr/bin/epmd", "-port", std::to_string(epmd_port), "-address", "127.0.0.1"}, env,
                                dir / "epmd.out");
  node.server_pid = SpawnDetached({kServer}, env, dir / "server.out");
  const fs::path log = dir / "log" / (name + "@localhost.log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    Reap(node.server_pid);
    if (!Alive(node.server_pid)) break;
    if (ReadIfExists(log).find("Server startup complete") != std::string::npos && PortOpen(node.port)) return node;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::string tail = ReadIfExists(log) + ReadIfExists(dir / "server.out");
  if (tail.size() > 3000) tail = tail.substr(tail.size() - 3000);
  StopRabbitMq(node);
  throw std::runtime_error("RabbitMQ did not start (" + dir.string() + "):\n" + tail);
}

void StopRabbitMq(const RabbitMq& node) {
  if (node.server_pid > 0) {
    ::kill(-node.server_pid, SIGTERM);
    for (int i = 0; i < 150 && Alive(node.server_pid); ++i) {
      Reap(node.server_pid);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(-node.server_pid, SIGKILL);
    Reap(node.server_pid);
  }
  if (node.epmd_pid > 0) {
    ::kill(node.epmd_pid, SIGKILL);
    Reap(node.epmd_pid);
  }
}

void SaveRabbitMq(const RabbitMq& node) {
  std::ofstream out(node.dir / "node.txt");
  out << node.port << " " << node.server_pid << " " << node.epmd_pid << "\n";
  std::ofstream url(node.dir / "url");
  url << node.url() << "\n";
}

RabbitMq LoadRabbitMq(const fs::path& dir) {
  RabbitMq node;
  node.dir = dir;
  std::ifstream in(dir / "node.txt");
  in >> node.port >> node.server_pid >> node.epmd_pid;
  return node;
}

std::string TestBroker() {
  if (const char* env = std::getenv("KF_TEST_BROKER_URL"); env && *env) return env;
#ifdef KF_BINARY_DIR
  {
    const fs::path dir = fs::path(KF_BINARY_DIR) / "test-rabbitmq";
    if (fs::exists(dir / "url")) {
      RabbitMq node = LoadRabbitMq(dir);
      if (Alive(node.server_pid) && PortOpen(node.port)) return node.url();
    }
  }
#endif
  static OwnNode own;
  std::lock_guard<std::mutex> lock(own.mu);
  if (!own.tried) {
    own.tried = true;
    if (!RabbitMqInstalled()) return "";
    char tmpl[] = "/tmp/kf_rabbitmq_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return "";
    own.node = StartRabbitMq(tmpl);
  }
  return own.node.server_pid > 0 ? own.node.url() : "";
}

}  // namespace kf::testing
