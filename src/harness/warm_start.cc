// Warm starts of pytest test runs: the zygotes kf keeps and the rewrite of a run's command (warm_start.hpp).
#include "harness/warm_start.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/resources.hpp"

extern char** environ;

namespace kf::harness_internal {
namespace {

namespace fs = std::filesystem;

// Variables that differ from run to run (IsolateChild points them at the run's private temp dir). They are left
// out of a zygote's key; the zygote gets its own, and each worker takes the run's from its client.
constexpr const char* kPerRunNames[] = {"TMPDIR",          "TMP",           "TEMP",
                                        "XDG_CACHE_HOME",  "POCL_CACHE_DIR", "TORCH_EXTENSIONS_DIR",
                                        "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH",
                                        "MPLCONFIGDIR",    "KERNELFOUNDRY_TEST", "KF_BUILD_DEADLINE",
                                        "KF_TORCH_PCH_REQUESTS", "HOME"};

constexpr std::chrono::seconds kReadyTimeout{60};

// One zygote: a running `python -u -m kernelfoundry.zygote`, or why it could not start.
struct Zygote {
  pid_t pid = -1;
  int control = -1;     // our end of its stdin (a socket pair): registrations, EOF ends it
  fs::path dir;         // private directory with its socket and temp dir
  std::string failed;   // non-empty: it could not start or died; runs of its environment start cold
  uint64_t last_used = 0;

  fs::path Socket() const { return dir / "s"; }

  // EOF on its control socket: it starts nothing more and ends after its running workers (still reported to
  // their clients, which are connected to its socket: the directory stays until it has ended).
  void CloseControl() {
    if (control >= 0) close(control);
    control = -1;
  }

  // True (and its directory removed) once it has ended; never blocks.
  bool Ended() {
    if (pid > 0 && waitpid(pid, nullptr, WNOHANG) != pid) return false;
    pid = -1;
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
    return true;
  }

  void Stop() {
    CloseControl();
    if (pid > 0) {
      for (int i = 0; i < 100; ++i) {  // up to 1 s, then SIGKILL
        if (waitpid(pid, nullptr, WNOHANG) == pid) {
          pid = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        pid = -1;
      }
    }
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

// Reads one line from `fd` within `timeout`; "" on timeout, EOF or error.
std::string ReadLine(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "";
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return "";
    char c;
    const ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    if (c == '\n') return line;
    line += c;
  }
}

// Starts a zygote with environment `env` (per-run names pointed at its own temp dir) and waits for "ready".
void Start(Zygote& z, const std::string& python, std::map<std::string, std::string> env) {
  char tmpl[] = "/tmp/kf-zygote-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    z.failed = std::string("cannot create its directory: ") + std::strerror(errno);
    return;
  }
  z.dir = tmpl;
  // Clients run as the sandbox user (issue 25): they may reach the socket, not list the directory.
  ::chmod(z.dir.c_str(), 0711);
  std::error_code ec;
  fs::create_directories(z.dir / "tmp", ec);
  for (const char* name : kPerRunNames) env.erase(name);
  for (const char* name : {"TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME", "MPLCONFIGDIR", "HOME"}) {
    env[name] = (z.dir / "tmp").string();
  }
  // The zygote itself is host side (kernelfoundry.zygote, kernelfoundry._contain): the host directory goes last on
  // its path, after the run's (the task side first, so that its package is the one imported). Its workers drop it
  // before they run anything of the task (zygote.py), as they take their client's environment.
  try {
    const std::string host = HostPythonDir().path.string();
    std::string& path = env["PYTHONPATH"];
    path = path.empty() ? host : path + ":" + host;
  } catch (const Error& e) {
    z.failed = e.what();
    return;
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = {python, "-u", "-m", "kernelfoundry.zygote", "--socket", z.Socket().string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int control[2], out[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, control) != 0) {
    z.failed = std::string("socketpair: ") + std::strerror(errno);
    return;
  }
  if (pipe2(out, O_CLOEXEC) != 0) {
    z.failed = std::string("pipe: ") + std::strerror(errno);
    close(control[0]);
    close(control[1]);
    return;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, control[1], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // nothing of kf's (a database, a broker socket) leaks in
  posix_spawn_file_actions_addchdir_np(&fa, z.dir.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);  // not in kf's process group: a terminal's Ctrl-C goes to kf, which stops it
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, python.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(control[1]);
  close(out[1]);
  if (err != 0) {
    z.failed = "cannot start " + python + ": " + std::strerror(err);
    close(control[0]);
    close(out[0]);
    return;
  }
  z.pid = pid;
  z.control = control[0];
  const std::string ready = ReadLine(out[0], kReadyTimeout);
  close(out[0]);
  if (ready.rfind("ready ", 0) != 0) {
    z.failed = ready.empty() ? fmt::format("the zygote did not report ready within {} s", kReadyTimeout.count())
                             : "the zygote said: " + ready;
    z.Stop();
  }
}

std::string Token() {
  unsigned char bytes[16];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    throw Error(ErrorKind::kIO, std::string("getrandom: ") + std::strerror(errno), "warm start");
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

// The process's zygotes, one per (interpreter, environment) key; stopped at exit.
class Zygotes {
 public:
  ~Zygotes() {
    for (auto& [key, z] : zygotes_) z->Stop();
    for (auto& z : retired_) z->Stop();
  }

  // The zygote for `python` and `env` (started when new); nullptr and *why when there is none.
  Zygote* Get(const std::string& python, const std::map<std::string, std::string>& env, std::string* why) {
    std::string key = python;
    for (const auto& [k, v] : env) {
      bool per_run = false;
      for (const char* name : kPerRunNames) per_run = per_run || k == name;
      if (!per_run) key += "\n" + k + "=" + v;
    }
    if (!zygotes_.count(key) && zygotes_.size() >= kMaxZygotes) Retire();
    std::unique_ptr<Zygote>& slot = zygotes_[key];
    if (!slot) {
      slot = std::make_unique<Zygote>();
      Start(*slot, python, env);
    }
    slot->last_used = ++uses_;
    if (!slot->failed.empty()) {
      *why = "warm start unavailable: " + slot->failed;
      return nullptr;
    }
    return slot.get();
  }

  std::mutex mu;

 private:
  // At most this many zygotes (each holds torch in memory, ~300 MB); a new environment retires the least
  // recently used one (Zygote::CloseControl), reaped once it has ended.
  static constexpr size_t kMaxZygotes = 4;

  void Retire() {
    auto oldest = zygotes_.begin();
    for (auto it = zygotes_.begin(); it != zygotes_.end(); ++it) {
      if (it->second->last_used < oldest->second->last_used) oldest = it;
    }
    oldest->second->CloseControl();
    retired_.push_back(std::move(oldest->second));
    zygotes_.erase(oldest);
    std::erase_if(retired_, [](const std::unique_ptr<Zygote>& z) { return z->Ended(); });
  }

  std::map<std::string, std::unique_ptr<Zygote>> zygotes_;
  uint64_t uses_ = 0;
  std::vector<std::unique_ptr<Zygote>> retired_;  ///< control closed, not yet ended
};

Zygotes& AllZygotes() {
  static Zygotes zygotes;
  return zygotes;
}

}  // namespace

std::string WarmStartSetting() {
  const char* v = std::getenv("KF_WARM_START");
  const std::string s = v ? v : "";
  if (s.empty() || s == "on" || s == "1") return "on";
  if (s == "off" || s == "0") return "off";
  throw Error(ErrorKind::kInvalidArgument, "expected on or off, got '" + s + "'", "environment", "KF_WARM_START");
}

std::string UseWarmStart(ProcessOptions& o) {
  if (WarmStartSetting() == "off") return "warm starts are off (KF_WARM_START=off)";
  if (o.force_subreaper || !CgroupTreeContainment()) return "warm starts need a cgroup v2 per run (none here)";
  // A run allowed inet sockets gets its network namespace at spawn (ProcessSandbox::allow_loopback_sockets).
  if (o.no_network || (o.sandbox && o.sandbox->allow_loopback_sockets)) return "warm starts do not isolate the network";
  if (o.use_shell || o.argv.size() < 4 || o.argv[1] != "-u" || o.argv[2] != "-m" ||
      (o.argv[3] != "pytest" && o.argv[3] != "kernelfoundry.build_target")) {
    return "only `python -u -m pytest|kernelfoundry.build_target …` runs start warm";
  }
  const fs::path client = TaskPythonPath() / "kernelfoundry" / "warm_client.py";
  if (!fs::exists(client)) return "no " + client.string();

  Json registration = Json::object();
  registration["token"] = Token();
  registration["argv"] = o.argv;
  // The run's child-side containment request (Landlock with its read allow-list, the sandbox user, the seccomp
  // filter; issue 25): the worker makes the same plan from it as the process runner makes for the client
  // (kernelfoundry._contain -> ChildPolicy, ContainSelf) after taking the client's cgroups and limits.
  registration["contain"] = ChildContainmentRequest(o);
  const std::string line = DumpJson(registration) + "\n";

  Zygotes& all = AllZygotes();
  std::lock_guard<std::mutex> lock(all.mu);
  std::string why;
  Zygote* z = all.Get(o.argv[0], BuildChildEnvironment(o), &why);
  if (z == nullptr) return why;
  const ssize_t n = send(z->control, line.data(), line.size(), MSG_NOSIGNAL);
  if (n != static_cast<ssize_t>(line.size())) {
    z->failed = std::string("the zygote is gone (") + std::strerror(errno) + ")";
    z->Stop();
    return "warm start unavailable: " + z->failed;
  }
  // The token travels in the client's environment, never on its command line: /proc/<pid>/cmdline is readable by
  // every process, /proc/<pid>/environ only by one allowed to ptrace the client (another run's candidate is not:
  // Landlock scopes ptrace to a run's own domain). The zygote starts a worker only for the process whose
  // environment holds the token, so a token seen elsewhere cannot start one (a stranger test stole them).
  o.env_add["KF_WARM_TOKEN"] = registration["token"].get<std::string>();
  o.allow_secret_names.push_back("KF_WARM_TOKEN");  // a secret indeed, but the client's own
  std::vector<std::string> argv = {o.argv[0], "-I", "-S", client.string(), z->Socket().string(), "--"};
  argv.insert(argv.end(), o.argv.begin(), o.argv.end());
  o.argv = std::move(argv);
  return "";
}

}  // namespace kf::harness_internal
