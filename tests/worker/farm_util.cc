// Helpers of the farm end-to-end tests (see farm_util.hpp).
#include "worker/farm_util.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "test_util.hpp"

namespace kf::testing {

namespace fs = std::filesystem;

namespace {

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Proc::Proc(std::vector<std::string> argv, fs::path log, std::map<std::string, std::string> env)
    : log_(std::move(log)) {
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    // A test binary killed by a ctest timeout must not leave workers behind.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::setsid();
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
}

Proc::~Proc() {
  if (pid_ > 0 && status_ < 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    Wait(10);
  }
}

Proc::Proc(Proc&& o) noexcept : pid_(o.pid_), status_(o.status_), log_(std::move(o.log_)) { o.pid_ = -1; }

Proc& Proc::operator=(Proc&& o) noexcept {
  if (this != &o) {
    this->~Proc();
    pid_ = o.pid_;
    status_ = o.status_;
    log_ = std::move(o.log_);
    o.pid_ = -1;
  }
  return *this;
}

bool Proc::Running() {
  if (pid_ <= 0 || status_ >= 0) return false;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) {
    status_ = st;
    return false;
  }
  return true;
}

void Proc::Signal(int sig, bool group) {
  if (pid_ > 0 && status_ < 0) ::kill(group ? -pid_ : pid_, sig);
}

int Proc::Wait(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (Running()) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status_;
}

std::string Proc::Log() const { return Slurp(log_); }

bool Proc::WaitForLog(const std::string& text, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Log().find(text) != std::string::npos) return true;
    if (!Running()) return Log().find(text) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TcpProxy::TcpProxy(int upstream_port) : upstream_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 16) != 0) {
    throw std::runtime_error("proxy: bind/listen failed");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (::pipe2(wake_, O_CLOEXEC) != 0) throw std::runtime_error("proxy: pipe failed");
  thread_ = std::thread([this] { Loop(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  (void)!::write(wake_[1], "x", 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void TcpProxy::CutAll() {
  cut_ = true;
  (void)!::write(wake_[1], "x", 1);
}

void TcpProxy::Loop() {
  std::vector<std::pair<int, int>> pairs;  // (client, upstream)
  auto close_all = [&] {
    for (auto [a, b] : pairs) {
      ::shutdown(a, SHUT_RDWR);
      ::shutdown(b, SHUT_RDWR);
      ::close(a);
      ::close(b);
    }
    pairs.clear();
  };
  while (!stop_) {
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    for (auto [a, b] : pairs) {
      fds.push_back({a, POLLIN, 0});
      fds.push_back({b, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 200) < 0) continue;
    if (fds[1].revents & POLLIN) {
      char buf[64];
      (void)!::read(wake_[0], buf, sizeof buf);
    }
    if (cut_.exchange(false)) {
      close_all();
      continue;
    }
    if (fds[0].revents & POLLIN) {
      int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(upstream_));
      if (client >= 0 && ::connect(up, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        pairs.emplace_back(client, up);
      } else {
        if (client >= 0) ::close(client);
        ::close(up);
      }
    }
    std::vector<size_t> dead;
    for (size_t i = 0; i < pairs.size(); ++i) {
      for (int side = 0; side < 2; ++side) {
        const pollfd& f = fds[2 + 2 * i + static_cast<size_t>(side)];
        if (!(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const int from = side == 0 ? pairs[i].first : pairs[i].second;
        const int to = side == 0 ? pairs[i].second : pairs[i].first;
        char buf[1 << 16];
        ssize_t n = ::read(from, buf, sizeof buf);
        bool ok = n > 0;
        for (ssize_t off = 0; ok && off < n;) {
          ssize_t w = ::write(to, buf + off, static_cast<size_t>(n - off));
          if (w <= 0) ok = false;
          off += w;
        }
        if (!ok) {
          dead.push_back(i);
          break;
        }
      }
    }
    for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
      ::close(pairs[*it].first);
      ::close(pairs[*it].second);
      pairs.erase(pairs.begin() + static_cast<long>(*it));
    }
  }
  close_all();
}

bool PidAlive(int pid) {
  std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

std::vector<int> ChildPids(int pid) {
  std::vector<int> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::string stat = Slurp(e.path() / "stat");
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == pid && state != 'Z') out.push_back(std::stoi(name));
  }
  return out;
}

std::vector<int> PidsWorkingUnder(const fs::path& dir) {
  std::vector<int> out;
  const std::string prefix = fs::weakly_canonical(dir).string();
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::error_code ec;
    fs::path cwd = fs::read_symlink(e.path() / "cwd", ec);
    if (ec) continue;
    if (cwd.string().rfind(prefix, 0) == 0 && PidAlive(std::stoi(name))) out.push_back(std::stoi(name));
  }
  return out;
}

fs::path KfBin() { return BinaryDir() / "kf"; }

bool PythonCeleryAvailable() {
  return RunShell("/usr/bin/python3 -c 'import celery, msgpack' 2>/dev/null").first == 0;
}

fs::path MakeOmpTask(const fs::path& dir, const std::string& tag, int test_timeout) {
  const fs::path out = dir / ("omp_" + tag);
  fs::create_directories(dir);
  fs::copy(SourceDir() / "examples/tasks/omp_reduction", out, fs::copy_options::recursive);
  std::string config = Slurp(out / "config.yaml");
  auto replace = [&](const std::string& from, const std::string& to) {
    size_t at = config.find(from);
    if (at == std::string::npos) throw std::runtime_error("config.yaml lacks " + from);
    size_t eol = config.find('\n', at);
    config.replace(at, eol - at, to);
  };
  replace("language:", "language: " + tag);
  replace("gpu_arch:", "gpu_arch: " + tag);
  replace("test_timeout:", "test_timeout: " + std::to_string(test_timeout));
  replace("test_output_inactivity_timeout:", "test_output_inactivity_timeout: " + std::to_string(test_timeout));
  // The example's own build: its test program links the SDK kf compiled once ($KF_SDK_LINK). (Compiling the SDK's
  // sources here cost every build ~50 s of one core: builds run sandboxed, without a compiler cache a candidate
  // could poison.)
  std::ofstream(out / "config.yaml") << config;
  return out;
}

std::string OmpCandidate(const std::string& kind, int slow_ms) {
  if (kind == "fast" || kind == "wrong") return Slurp(SourceDir() / "examples/candidates/omp_reduction" / (kind + ".cpp"));
  if (kind == "crash") {
    return "// Crashes: executes a trap instruction (SIGILL).\n"
           "double kf_sum_squares(const float* x, std::size_t n) {\n"
           "  if (n > 0 && x != nullptr) __builtin_trap();\n"
           "  return 0.0;\n"
           "}\n";
  }
  if (kind == "hang") {
    return "// Never returns.\n"
           "double kf_sum_squares(const float* x, std::size_t n) {\n"
           "  volatile double s = 0.0;\n"
           "  for (;;) s = s + static_cast<double>(x[0]) * static_cast<double>(n);\n"
           "}\n";
  }
  if (kind == "slow") {
    return fmt::format(
        "// Correct, but its first call in a process sleeps {} ms.\n"
        "#include <chrono>\n#include <thread>\n"
        "double kf_sum_squares(const float* x, std::size_t n) {{\n"
        "  static bool first = true;\n"
        "  if (first) {{ first = false; std::this_thread::sleep_for(std::chrono::milliseconds({})); }}\n"
        "  double s = 0.0;\n"
        "  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);\n"
        "  return s;\n"
        "}}\n",
        slow_ms, slow_ms);
  }
  throw std::runtime_error("unknown candidate kind " + kind);
}

std::string FarmTag() {
  static std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("kf{:08x}", static_cast<uint32_t>(rng()));
}

Proc StartKfWorker(const std::string& broker, const std::vector<std::string>& queues, const std::string& node,
                   const fs::path& dir, const std::vector<std::string>& extra) {
  std::string q;
  for (const std::string& s : queues) q += (q.empty() ? "" : ",") + s;
  std::vector<std::string> argv = {KfBin().string(), "worker", "--broker", broker, "-Q", q, "-n", node};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return Proc(argv, dir / (node + ".log"));
}

}  // namespace kf::testing
