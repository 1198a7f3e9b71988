// Job runners of a worker slot (see job_runner.hpp).
#include "worker/job_runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "kernelfoundry/error.hpp"

extern char** environ;

namespace kf::worker_internal {

namespace {

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 1000);
        continue;
      }
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::string LengthPrefix(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

uint64_t ParseLength(const char* p) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(p[i]);
  return n;
}

std::string DescribeStatus(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return fmt::format("signal {} ({})", sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
  }
  if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
  return "unknown status";
}

Json Failure(std::string exc_type, std::string exc_module, std::string message) {
  return Json{{"failure", Json{{"exc_type", std::move(exc_type)},
                               {"exc_module", std::move(exc_module)},
                               {"message", std::move(message)}}}};
}

class ChildJobRunner final : public JobRunner {
 public:
  ChildJobRunner(std::vector<std::string> argv, DeviceSlots& slots)
      : argv_(std::move(argv)), gate_(MakeSlotsGate(slots)) {}
  ~ChildJobRunner() override { Reap(true); }

  void Start(const Json& request) override {
    if (pid_ <= 0) Spawn();
    buffer_.clear();
    if (!Write(request)) {
      // The idle child died (killed from outside); start a fresh one and try once more.
      Reap(true);
      Spawn();
      if (!Write(request)) throw Error(ErrorKind::kIO, "the job process does not accept jobs");
    }
  }

  void RequestStop() override {
    if (pid_ > 0) (void)Write(Json{{"stop", true}});
  }

  std::optional<Json> Wait(std::chrono::milliseconds timeout) override {
    if (pid_ <= 0) return Failure("WorkerLostError", "billiard.exceptions", "no job process");
    if (std::optional<Json> answer = TakeFrames()) return answer;
    pollfd p{from_child_, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (rc < 0 && errno != EINTR) throw Error(ErrorKind::kIO, std::string("poll: ") + std::strerror(errno));
    if (rc <= 0) return std::nullopt;
    char chunk[1 << 16];
    while (true) {
      ssize_t n = ::read(from_child_, chunk, sizeof chunk);
      if (n > 0) {
        buffer_.append(chunk, static_cast<size_t>(n));
        if (std::optional<Json> answer = TakeFrames()) return answer;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return std::nullopt;
      // EOF: the job process died in the middle of the job.
      int status = Reap(false);
      return Failure("WorkerLostError", "billiard.exceptions",
                     "Worker exited prematurely: the job process ended with " + DescribeStatus(status));
    }
  }

  void Kill() override { Reap(true); }
  int pid() const override { return pid_; }
  void Prepare() override {
    if (pid_ <= 0) Spawn();
  }

 private:
  // A lease the child asked for: taken on its own thread (waiting must not block the slot's loop).
  struct LeaseRequest {
    std::stop_source stop;
    std::unique_ptr<DeviceGate::Lease> lease;   // guarded by lease_mu_
    std::thread thread;
  };

  bool Write(const Json& frame) {
    std::lock_guard<std::mutex> lock(write_mu_);
    return to_child_ >= 0 && WriteFrame(to_child_, frame);
  }

  // Handles the whole frames in buffer_: lease requests and releases are served, the first answer frame
  // ({"result"} or {"failure"}) ends the job and is returned.
  std::optional<Json> TakeFrames() {
    while (buffer_.size() >= 8) {
      const uint64_t len = ParseLength(buffer_.data());
      if (buffer_.size() < 8 + len) return std::nullopt;
      Json frame = Json::from_msgpack(buffer_.begin() + 8, buffer_.begin() + 8 + static_cast<long>(len));
      buffer_.erase(0, 8 + len);
      if (frame.is_object() && frame.contains("lease")) {
        Lease(frame["lease"]);
      } else if (frame.is_object() && frame.contains("release")) {
        if (frame["release"].is_number_integer()) Release(frame["release"].get<int64_t>());
      } else {
        ReleaseAll();  // the job is over; whatever it still held goes back
        return frame;
      }
    }
    return std::nullopt;
  }

  void Lease(const Json& request) {
    if (!request.is_object() || !request.contains("id") || !request["id"].is_number_integer()) return;
    const int64_t id = request["id"].get<int64_t>();
    const std::optional<DeviceUse> use = DeviceUseFromName(request.value("use", ""));
    const std::string arch = request.value("arch", "");
    if (!use) return;
    auto entry = std::make_shared<LeaseRequest>();
    entry->thread = std::thread([this, entry, id, use, arch] {
      std::unique_ptr<DeviceGate::Lease> lease = gate_->Acquire(*use, arch, entry->stop.get_token());
      if (!lease) return;
      {
        std::lock_guard<std::mutex> lock(lease_mu_);
        entry->lease = std::move(lease);
      }
      (void)Write(Json{{"granted", id}});
    });
    std::lock_guard<std::mutex> lock(lease_mu_);
    leases_[id] = std::move(entry);
  }

  static void Drop(const std::shared_ptr<LeaseRequest>& entry) {
    entry->stop.request_stop();
    if (entry->thread.joinable()) entry->thread.join();
  }

  void Release(int64_t id) {
    std::shared_ptr<LeaseRequest> entry;
    {
      std::lock_guard<std::mutex> lock(lease_mu_);
      auto it = leases_.find(id);
      if (it == leases_.end()) return;
      entry = std::move(it->second);
      leases_.erase(it);
    }
    Drop(entry);
  }

  void ReleaseAll() {
    std::map<int64_t, std::shared_ptr<LeaseRequest>> all;
    {
      std::lock_guard<std::mutex> lock(lease_mu_);
      all.swap(leases_);
    }
    for (auto& [id, entry] : all) Drop(entry);
  }

  void Spawn() {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) throw Error(ErrorKind::kIO, std::string("pipe: ") + std::strerror(errno));
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      ::close(in[1]);
      throw Error(ErrorKind::kIO, std::string("pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Own process group: a Ctrl-C at the worker's terminal reaches the worker, which decides.
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    std::vector<char*> argv;
    for (std::string& a : argv_) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    int rc = ::posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
      ::close(in[1]);
      ::close(out[0]);
      throw Error(ErrorKind::kIO, fmt::format("cannot start the job process {}: {}", argv_[0], std::strerror(rc)));
    }
    pid_ = pid;
    {
      std::lock_guard<std::mutex> lock(write_mu_);
      to_child_ = in[1];
    }
    from_child_ = out[0];
    ::fcntl(from_child_, F_SETFL, ::fcntl(from_child_, F_GETFL) | O_NONBLOCK);
  }

  void CloseToChild() {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (to_child_ >= 0) ::close(to_child_);
    to_child_ = -1;
  }

  // Closes the pipes, reaps the child (killing it first when `kill`) and releases its leases. Returns its
  // wait status.
  int Reap(bool kill) {
    int status = 0;
    if (pid_ > 0) {
      if (kill) ::kill(pid_, SIGKILL);
      CloseToChild();
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    ReleaseAll();
    CloseToChild();
    if (from_child_ >= 0) ::close(from_child_);
    from_child_ = -1;
    pid_ = -1;
    buffer_.clear();
    return status;
  }

  std::vector<std::string> argv_;
  std::unique_ptr<DeviceGate> gate_;
  pid_t pid_ = -1;
  std::mutex write_mu_;   // guards to_child_ and the frames written to it (slot thread and lease threads)
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
  std::mutex lease_mu_;
  std::map<int64_t, std::shared_ptr<LeaseRequest>> leases_;
};

class ThreadJobRunner final : public JobRunner {
 public:
  ThreadJobRunner(BodyFn body, DeviceSlots& slots) : body_(std::move(body)), gate_(MakeSlotsGate(slots)) {}
  ~ThreadJobRunner() override { Kill(); }

  void Start(const Json& request) override {
    Kill();
    auto promise = std::make_shared<std::promise<Json>>();
    future_ = promise->get_future();
    thread_ = std::jthread([body = body_, gate = gate_.get(), request, promise](std::stop_token stop) {
      TaskBodyContext ctx = ContextFor(request);
      ctx.stop = stop;
      ctx.devices = gate;
      try {
        promise->set_value(AnswerFor(body(request["task"].get<std::string>(), request["args"], request["kwargs"], ctx)));
      } catch (const std::exception& e) {
        promise->set_value(Failure("RuntimeError", "builtins", e.what()));
      }
    });
  }

  std::optional<Json> Wait(std::chrono::milliseconds timeout) override {
    if (!future_.valid()) return std::nullopt;
    if (future_.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    Json answer = future_.get();
    if (thread_.joinable()) thread_.join();
    return answer;
  }

  void RequestStop() override {
    if (thread_.joinable()) thread_.request_stop();
  }

  void Kill() override {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
    future_ = {};
  }

  int pid() const override { return 0; }

 private:
  BodyFn body_;
  std::unique_ptr<DeviceGate> gate_;
  std::jthread thread_;
  std::future<Json> future_;
};

}  // namespace

bool WriteFrame(int fd, const Json& value) {
  std::string body;
  Json::to_msgpack(value, nlohmann::detail::output_adapter<char>(body));
  std::string frame = LengthPrefix(body.size());
  return WriteAll(fd, frame.data(), frame.size()) && WriteAll(fd, body.data(), body.size());
}

std::optional<Json> ReadFrame(int fd) {
  auto read_exact = [fd](char* p, size_t n, bool eof_ok) -> bool {
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::read(fd, p + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw Error(ErrorKind::kIO, std::string("reading a job frame: ") + std::strerror(errno));
      if (r == 0) {
        if (got == 0 && eof_ok) return false;
        throw Error(ErrorKind::kIO, "a job frame was cut short");
      }
      got += static_cast<size_t>(r);
    }
    return true;
  };
  char header[8];
  if (!read_exact(header, 8, true)) return std::nullopt;
  std::string body(ParseLength(header), '\0');
  read_exact(body.data(), body.size(), false);
  try {
    return Json::from_msgpack(body);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kParse, std::string("bad job frame: ") + e.what());
  }
}

Json AnswerFor(const TaskBodyResult& r) {
  if (r.failure) return Failure(r.failure->exc_type, r.failure->exc_module, r.failure->message);
  Json answer{{"result", r.result.value_or(nullptr)}};
  if (!r.cached.is_null()) answer["cached"] = r.cached;
  return answer;
}

TaskBodyContext ContextFor(const Json& request) {
  TaskBodyContext ctx;
  ctx.queue = request.value("queue", "");
  ctx.work_root = request.value("work_root", "");
  ctx.verdict_cache = request.value("verdict_cache", false);
  return ctx;
}

std::unique_ptr<JobRunner> MakeChildJobRunner(std::vector<std::string> argv, DeviceSlots& slots) {
  return std::make_unique<ChildJobRunner>(std::move(argv), slots);
}

std::unique_ptr<JobRunner> MakeThreadJobRunner(BodyFn body, DeviceSlots& slots) {
  return std::make_unique<ThreadJobRunner>(std::move(body), slots);
}

}  // namespace kf::worker_internal
