// Remote kernels — a native task's candidate in a process of its own (issue 9, item 4).
//
// In a plain native task the candidate is linked into the test program, so candidate code (a global
// constructor, an interposed `clock_gettime`, a write to the result descriptor) runs beside the timer, the
// checker and the report. A task that declares its kernel entry points with KF_REMOTE builds two programs:
//   * the test program (the *checker*): tests, reference, inputs, the clock and the comparison — no candidate
//     code. A call of a KF_REMOTE function there is a call into the executor;
//   * the *executor* (config `executor_executable`), built from the candidate's sources with -DKF_EXECUTOR
//     (and -DKF_EXECUTOR_MAIN in one translation unit, which gets `int main`): it serves those calls.
//
//   // kernel_api.hpp, included by the test program and by the candidate's file:
//   #include "kernelfoundry/sdk/remote.hpp"
//   KF_REMOTE(double, kf_sum_squares, const float*, std::size_t)
//   // test program:  kf::sdk::SharedVector<float> x(n); ... double s = kf_sum_squares(x.data(), x.size());
//
// Memory. Arguments are copied by value (they must be trivially copyable); a pointer argument must point into
// the *shared arena* (kf::sdk::SharedVector / SharedAllocator), a memfd the checker maps at a fixed address
// and the executor maps at the same address, so pointers mean the same in both. Only what crosses the call
// belongs there: the executor can write the whole arena, so the expected output stays in ordinary memory.
//
// The executor is started on the first call (or when a paired measurement begins) by fork + exec from the
// checker: in its process group and cgroup (kf's timeouts kill it), under its limits and Landlock domain, with
// its environment and stdout/stderr, with no other descriptor (not kf's result descriptor), with every Linux
// capability dropped, no_new_privs and a Landlock domain of its own (as root or under the checker's uid it cannot
// ptrace the checker or write /proc/<checker>/mem),
// and PR_SET_PDEATHSIG (it dies with the checker). Calls go over two pipes: a request (function index, argument
// bytes), a reply (value bytes, or the executor's exception text, rethrown in the checker as
// kf::sdk::RemoteError). When the executor dies during a call the checker ends with the same signal (the
// verdict of a crash in process), after a line on stderr.
//
// Timing. The checker's clock times the call, round trip included (a few microseconds). In a paired
// measurement the reference side, which runs in the checker, makes as many empty round trips per call as the
// candidate's call made remote calls, so both sides pay the same; the executor's CPU after each reply is
// measured from the checker (its CPU clock, /proc) and counted as the candidate's after-return CPU (work left
// running in a background thread is `suspicious`).
#pragma once

#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <vector>

#ifdef KF_EXECUTOR
// The executor (the candidate's program, compiled for every candidate) uses none of the checker's SDK. It gets
// every standard header task_sdk.hpp reaches (nlohmann/json's included: g++ -H, GCC 12), so candidate code that
// relied on one without including it compiles as before, but not nlohmann/json's and kf's own templates, which
// were most of every candidate's compile. tests/sdk/executor_header_check.cc holds both halves of that rule.
#include <poll.h>

#include <algorithm>
#include <any>
#include <cassert>
#include <chrono>
#include <cmath>
#include <codecvt>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <forward_list>
#include <functional>
#include <iomanip>
#include <locale>
#include <optional>
#include <random>
#include <ranges>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>
#include <valarray>
#include <version>
#else
#include "kernelfoundry/sdk/task_sdk.hpp"
#endif

namespace kf::sdk {

/// A call into the executor failed: the candidate threw (what() is "<name>: <its message>") or the executor
/// broke the protocol.
struct RemoteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The shared arena (see the file comment): a memfd mapped at the same address in the checker and the executor.
/// First-fit allocation with coalescing, 64-byte aligned, thread-safe. In the executor (KF_EXECUTOR) nothing is
/// allocated from it: SharedAllocator there uses the ordinary heap.
class SharedArena {
 public:
  /// The checker's arena, created on first use: `KF_SHARED_ARENA_BYTES` of address space (default 16 GiB,
  /// sparse: pages cost memory only once touched), halved down to 64 MiB while the kernel refuses.
  /// Throws std::runtime_error when no memfd can be mapped.
  static SharedArena& Get() {
    static SharedArena* arena = new SharedArena();  // never destroyed: the executor may outlive static teardown
    return *arena;
  }
  /// Maps the checker's arena (executor side). Throws std::runtime_error when the address is taken.
  static void Adopt(int fd, std::uintptr_t base, std::size_t size) {
    void* p = ::mmap(reinterpret_cast<void*>(base), size, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED_NOREPLACE | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED || reinterpret_cast<std::uintptr_t>(p) != base) {
      throw std::runtime_error("kf executor: cannot map the shared arena at its address (" +
                               std::string(std::strerror(errno)) + ")");
    }
  }
  /// `bytes` from the arena; throws std::bad_alloc when it is full.
  void* Allocate(std::size_t bytes) {
    const std::size_t need = std::max<std::size_t>(64, (bytes + 63) & ~std::size_t{63});
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < need) continue;
      const std::size_t off = it->first, len = it->second;
      free_.erase(it);
      if (len > need) free_[off + need] = len - need;
      used_[off] = need;
      return reinterpret_cast<void*>(base_ + off);
    }
    throw std::bad_alloc();
  }
  /// Returns a block from Allocate (nullptr and unknown pointers are ignored).
  void Free(void* p) noexcept {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    const std::size_t off = reinterpret_cast<std::uintptr_t>(p) - base_;
    auto u = used_.find(off);
    if (u == used_.end()) return;
    std::size_t start = off, len = u->second;
    used_.erase(u);
    auto next = free_.lower_bound(off);
    if (next != free_.end() && next->first == off + len) {
      len += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == start) {
        start = prev->first;
        len += prev->second;
        free_.erase(prev);
      }
    }
    free_[start] = len;
  }
  /// True when [p, p + bytes) lies inside the arena.
  bool Contains(const void* p, std::size_t bytes = 1) const {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return a >= base_ && a - base_ <= size_ && bytes <= size_ - (a - base_);
  }
  int fd() const { return fd_; }
  std::uintptr_t base() const { return base_; }
  std::size_t size() const { return size_; }

 private:
  SharedArena() {
    fd_ = static_cast<int>(::syscall(SYS_memfd_create, "kf_shared_arena", 1u /* MFD_CLOEXEC */));
    if (fd_ < 0) throw std::runtime_error(std::string("kf sdk: memfd_create: ") + std::strerror(errno));
    std::size_t size = std::size_t{16} << 30;
    if (const char* env = std::getenv("KF_SHARED_ARENA_BYTES")) size = std::strtoull(env, nullptr, 10);
    // Fixed addresses far from the heap and executables (0x55…), the mmap area (0x7f…) and AddressSanitizer's
    // shadow (up to 0x10007fff7fff), the same in every process; else where the kernel puts it (the executor
    // then maps it at that address, which a fresh process almost never uses).
    for (; size >= (std::size_t{64} << 20); size /= 2) {
      if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) continue;
      for (std::uintptr_t hint = 0x4f0000000000; hint >= 0x300000000000; hint -= 0x10000000000) {
        if (MapAt(hint, size)) return;
      }
      if (MapAt(0, size)) return;
    }
    throw std::runtime_error("kf sdk: cannot map a shared arena of 64 MiB or more (KF_SHARED_ARENA_BYTES)");
  }
  // Maps the memfd at `hint` exactly (0: anywhere); true on success.
  bool MapAt(std::uintptr_t hint, std::size_t size) {
    const int fixed = hint != 0 ? MAP_FIXED_NOREPLACE : 0;
    void* p = ::mmap(reinterpret_cast<void*>(hint), size, PROT_READ | PROT_WRITE, MAP_SHARED | fixed | MAP_NORESERVE,
                     fd_, 0);
    if (p == MAP_FAILED) return false;
    if (hint != 0 && reinterpret_cast<std::uintptr_t>(p) != hint) {
      ::munmap(p, size);
      return false;
    }
    base_ = reinterpret_cast<std::uintptr_t>(p);
    size_ = size;
    free_[0] = size;
    return true;
  }

  int fd_ = -1;
  std::uintptr_t base_ = 0;
  std::size_t size_ = 0;
  std::mutex mu_;
  std::map<std::size_t, std::size_t> free_, used_;  // offset -> length
};

/// A std::allocator over the shared arena (checker); the ordinary heap in the executor.
template <typename T>
struct SharedAllocator {
  using value_type = T;
  SharedAllocator() = default;
  template <typename U>
  SharedAllocator(const SharedAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) {
#ifdef KF_EXECUTOR
    return std::allocator<T>().allocate(n);
#else
    return static_cast<T*>(SharedArena::Get().Allocate(n * sizeof(T)));
#endif
  }
  void deallocate(T* p, std::size_t n) noexcept {
#ifdef KF_EXECUTOR
    std::allocator<T>().deallocate(p, n);
#else
    (void)n;
    SharedArena::Get().Free(p);
#endif
  }
  template <typename U>
  bool operator==(const SharedAllocator<U>&) const noexcept { return true; }
};
/// A vector in the shared arena: what a test program passes to a KF_REMOTE function by pointer.
template <typename T>
using SharedVector = std::vector<T, SharedAllocator<T>>;

namespace remote_internal {

inline bool ReadAll(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}
inline bool WriteAll(int fd, const void* p, std::size_t n) {
  const auto* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t r = ::write(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}
inline bool WriteFrame(int fd, std::uint32_t tag, const std::string& body) {
  const std::uint32_t head[2] = {tag, static_cast<std::uint32_t>(body.size())};
  std::string frame(reinterpret_cast<const char*>(head), sizeof head);
  frame += body;
  return WriteAll(fd, frame.data(), frame.size());
}
inline bool ReadFrame(int fd, std::uint32_t* tag, std::string* body) {
  std::uint32_t head[2];
  if (!ReadAll(fd, head, sizeof head)) return false;
  if (head[1] > (64u << 20)) return false;
  *tag = head[0];
  body->assign(head[1], '\0');
  return ReadAll(fd, body->data(), body->size());
}

/// An exported function of the executor: its name, signature (the mangled type) and a trampoline that
/// unpacks the argument bytes and packs the value bytes.
using AnyFunction = void (*)();
struct Export {
  std::string name, signature;
  std::string (*call)(const std::string& args, AnyFunction fn);
  AnyFunction fn;
};
inline std::vector<Export>& Exports() {
  static std::vector<Export> exports;
  return exports;
}

template <typename R, typename... A>
std::string Trampoline(const std::string& bytes, AnyFunction fn) {
  std::tuple<std::decay_t<A>...> args;
  std::size_t off = 0;
  std::apply([&](auto&... a) { ((std::memcpy(&a, bytes.data() + off, sizeof a), off += sizeof a), ...); }, args);
  auto* f = reinterpret_cast<R (*)(A...)>(fn);
  if constexpr (std::is_void_v<R>) {
    std::apply(f, args);
    return {};
  } else {
    R r = std::apply(f, args);
    return std::string(reinterpret_cast<const char*>(&r), sizeof r);
  }
}

/// Linux capability sets of the calling thread all emptied, the bounding set too (as far as allowed), then a
/// Landlock domain of its own, nested in the checker's: the kernel refuses it ptrace access (/proc/<pid>/mem,
/// environ, fd) to every process outside that domain — the checker included, even under the same uid (sandboxed
/// test processes all run as one user). The layer restricts nothing else: it only forbids making block devices.
inline void DropCapabilities() {
  for (int cap = 0; cap < 64; ++cap) ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  ::syscall(SYS_capset, &head, data);
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
#ifdef SYS_landlock_create_ruleset
  const uint64_t make_block = 1ULL << 11;  // LANDLOCK_ACCESS_FS_MAKE_BLOCK
  const long ruleset = ::syscall(SYS_landlock_create_ruleset, &make_block, sizeof make_block, 0U);
  if (ruleset >= 0) {
    ::syscall(SYS_landlock_restrict_self, static_cast<int>(ruleset), 0U);
    ::close(static_cast<int>(ruleset));
  }
#endif
}

inline double ClockSeconds(clockid_t id) {
  timespec ts{};
  if (clock_gettime(id, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

#ifndef KF_EXECUTOR
/// The checker's side: the executor process, started once, its calls serialised.
class Executor {
 public:
  static Executor& Get() {
    static Executor* e = new Executor();  // never destroyed: calls may come from static teardown
    return *e;
  }
  /// Starts the executor unless it runs (see the file comment). Throws RemoteError.
  void Ensure() {
    std::lock_guard<std::mutex> lock(mu_);
    EnsureLocked();
  }
  /// The index of `name` in the executor (0 is the empty round trip). Throws RemoteError for a name the
  /// executor does not export or a different signature.
  std::uint32_t Index(const char* name, const char* signature) {
    std::lock_guard<std::mutex> lock(mu_);
    EnsureLocked();
    for (std::size_t i = 0; i < names_.size(); ++i) {
      if (names_[i].first != name) continue;
      if (names_[i].second != signature) {
        throw RemoteError(std::string("kf sdk: the executor's ") + name + " has the signature " + names_[i].second +
                          ", the test program expects " + signature);
      }
      return static_cast<std::uint32_t>(i + 1);
    }
    throw RemoteError(std::string("kf sdk: the executor exports no function ") + name);
  }
  /// One call: `args` to function `index`; returns the value bytes. Rethrows the executor's exception as
  /// RemoteError; ends this process with the executor's signal when it died.
  std::string Call(std::uint32_t index, const std::string& args, const char* name) {
    std::lock_guard<std::mutex> lock(mu_);
    EnsureLocked();
    std::uint32_t tag = 0;
    std::string body;
    if (!WriteFrame(cmd_, index, args) || !ReadFrame(rep_, &tag, &body)) Died(name);
    mark_ = ClockSeconds(cpu_clock_);  // the executor's CPU at the reply (see Settle)
    if (tag != 0) throw RemoteError(std::string(name) + ": " + body);
    return body;
  }
  /// An empty round trip (what the reference side pays per remote call of the candidate's).
  void Ping() { Call(0, std::string(), "ping"); }
  /// Waits until the executor is idle (kf::WaitProcessQuiet, paired.hpp: the rule every side uses) and returns
  /// the CPU seconds it used after its last reply.
  double Settle(double max_s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pid_ <= 0) return 0;
    const double last = kf::WaitProcessQuiet(pid_, max_s);
    const double used = std::max(0.0, last - mark_);
    mark_ = last;
    return used;
  }
  bool Started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

 private:
  void EnsureLocked() {
    if (pid_ > 0) return;
    const std::string& path = GetState().executor_path;
    if (path.empty()) {
      throw RemoteError("kf sdk: this test program calls KF_REMOTE functions but was started without "
                        "--kf-executor=PATH (config.yaml: executor_executable)");
    }
    SharedArena& arena = SharedArena::Get();
    int cmd[2], rep[2];
    if (::pipe2(cmd, O_CLOEXEC) != 0 || ::pipe2(rep, O_CLOEXEC) != 0) {
      throw RemoteError(std::string("kf sdk: pipe: ") + std::strerror(errno));
    }
    const std::string arg_fds = "--kf-executor-fds=3,4";
    const std::string arg_arena = "--kf-arena=5," + std::to_string(arena.base()) + "," + std::to_string(arena.size());
    const char* argv[] = {path.c_str(), arg_fds.c_str(), arg_arena.c_str(), nullptr};
    const pid_t parent = ::getpid();
    const pid_t child = ::fork();
    if (child < 0) throw RemoteError(std::string("kf sdk: fork: ") + std::strerror(errno));
    if (child == 0) {  // only async-signal-safe calls until exec
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      const int c = ::fcntl(cmd[0], F_DUPFD, 10), r = ::fcntl(rep[1], F_DUPFD, 10),
                a = ::fcntl(arena.fd(), F_DUPFD, 10);
      if (c < 0 || r < 0 || a < 0 || ::dup2(c, 3) < 0 || ::dup2(r, 4) < 0 || ::dup2(a, 5) < 0) ::_exit(127);
      if (::syscall(SYS_close_range, 6u, ~0u, 0u) != 0) {
        for (int fd = 6; fd < 65536; ++fd) ::close(fd);
      }
      DropCapabilities();
      ::execv(argv[0], const_cast<char* const*>(argv));
      static const char msg[] = "kf sdk: cannot execute the executor program\n";
      [[maybe_unused]] ssize_t w = ::write(2, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::close(cmd[0]);
    ::close(rep[1]);
    pid_ = child;
    cmd_ = cmd[1];
    rep_ = rep[0];
    ::signal(SIGPIPE, SIG_IGN);  // a dead executor is seen as a failed write, then waited for
    if (clock_getcpuclockid(pid_, &cpu_clock_) != 0) cpu_clock_ = CLOCK_MONOTONIC;
    std::uint32_t tag = 0;
    std::string hello;
    if (!ReadFrame(rep_, &tag, &hello)) Died("start-up");
    std::size_t off = 0;
    auto take = [&](std::string* out) {
      std::uint32_t n = 0;
      if (off + 4 > hello.size()) return false;
      std::memcpy(&n, hello.data() + off, 4);
      off += 4;
      if (off + n > hello.size()) return false;
      out->assign(hello.data() + off, n);
      off += n;
      return true;
    };
    for (std::uint32_t i = 0; i < tag; ++i) {
      std::string name, signature;
      if (!take(&name) || !take(&signature)) throw RemoteError("kf sdk: the executor's greeting is malformed");
      names_.emplace_back(name, signature);
    }
    mark_ = ClockSeconds(cpu_clock_);
  }

  [[noreturn]] void Died(const char* during) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    if (WIFSIGNALED(status)) {  // end the checker the same way: the verdict of a crash in process
      std::fprintf(stderr, "kf sdk: the executor died of signal %d (%s) during %s; ending the test program with it\n",
                   WTERMSIG(status), strsignal(WTERMSIG(status)), during);
      std::fflush(nullptr);
      ::signal(WTERMSIG(status), SIG_DFL);
      ::kill(::getpid(), WTERMSIG(status));
      for (;;) ::pause();
    }
    pid_ = -1;
    throw RemoteError(std::string("kf sdk: the executor exited with status ") +
                      std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + " during " + during);
  }

  std::mutex mu_;
  pid_t pid_ = -1;
  int cmd_ = -1, rep_ = -1;
  clockid_t cpu_clock_ = CLOCK_MONOTONIC;
  double mark_ = 0;
  std::vector<std::pair<std::string, std::string>> names_;
};

/// Gives task_sdk.hpp's paired measurement its hooks into the executor (test program only). Returns true.
inline bool InstallHooks() {
  State& st = GetState();
  st.remote_start = [] { Executor::Get().Ensure(); };
  st.remote_ping = [] { Executor::Get().Ping(); };
  st.remote_settle = [](double max_s) { return Executor::Get().Settle(max_s); };
  return true;
}

#endif  // !KF_EXECUTOR

/// The executor's main loop (see ExecutorMain).
inline int Serve(int cmd, int rep) {
  std::string hello;
  for (const Export& e : Exports()) {
    for (const std::string* s : {&e.name, &e.signature}) {
      const auto n = static_cast<std::uint32_t>(s->size());
      hello.append(reinterpret_cast<const char*>(&n), 4);
      hello += *s;
    }
  }
  if (!WriteFrame(rep, static_cast<std::uint32_t>(Exports().size()), hello)) return 1;
  std::uint32_t index = 0;
  std::string args;
  while (ReadFrame(cmd, &index, &args)) {
    std::string value;
    std::uint32_t tag = 0;
    if (index > 0 && index <= Exports().size()) {
      const Export& e = Exports()[index - 1];
      try {
        value = e.call(args, e.fn);
      } catch (const std::exception& ex) {
        tag = 1;
        value = ex.what();
      } catch (...) {
        tag = 1;
        value = "unknown exception";
      }
    } else if (index != 0) {
      tag = 1;
      value = "no function with index " + std::to_string(index);
    }
    if (!WriteFrame(rep, tag, value)) return 1;
  }
  return 0;
}

}  // namespace remote_internal

#ifndef KF_EXECUTOR
/// A KF_REMOTE function as the test program sees it: calling it calls the executor's function of that name.
template <typename Sig>
class Remote;
template <typename R, typename... A>
class Remote<R(A...)> {
  static_assert((std::is_trivially_copyable_v<std::decay_t<A>> && ...),
                "KF_REMOTE arguments are copied by value: they must be trivially copyable");
  static_assert(std::is_void_v<R> || std::is_trivially_copyable_v<R>,
                "a KF_REMOTE function returns void or a trivially copyable value");

 public:
  explicit Remote(const char* name) : name_(name) {}
  /// Calls the executor's function with these arguments (pointer arguments must point into the shared arena:
  /// kf::sdk::Failure otherwise). Throws RemoteError as Executor::Call.
  R operator()(A... a) const {
    std::string bytes;
    bytes.reserve((sizeof(std::decay_t<A>) + ... + 0));
    int k = 0;
    auto put = [&](const auto& v) {
      using V = std::decay_t<decltype(v)>;
      if constexpr (std::is_pointer_v<V>) {
        if (v != nullptr && !SharedArena::Get().Contains(v)) {
          throw Failure(std::string("argument ") + std::to_string(k + 1) + " of " + name_ +
                        " points outside the shared arena: allocate what a KF_REMOTE function reads or writes "
                        "with kf::sdk::SharedVector");
        }
      }
      bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
      ++k;
    };
    (put(a), ...);
    auto& ex = remote_internal::Executor::Get();
    std::uint32_t index = index_.load();
    if (index == 0) index_.store(index = ex.Index(name_, typeid(R(A...)).name()));
    ++GetState().remote_calls;
    const std::string value = ex.Call(index, bytes, name_);
    if constexpr (std::is_void_v<R>) {
      return;
    } else {
      if (value.size() != sizeof(R)) throw RemoteError(std::string(name_) + ": the executor's reply has the wrong size");
      R r;
      std::memcpy(&r, value.data(), sizeof r);
      return r;
    }
  }

 private:
  const char* name_;
  mutable std::atomic<std::uint32_t> index_{0};
};

#endif  // !KF_EXECUTOR

/// Registers `fn` as the executor's function `name` (used by KF_REMOTE in the executor). Returns true.
template <typename R, typename... A>
bool ExportFunction(const char* name, R (*fn)(A...)) {
  remote_internal::Exports().push_back({name, typeid(R(A...)).name(), &remote_internal::Trampoline<R, A...>,
                                        reinterpret_cast<remote_internal::AnyFunction>(fn)});
  return true;
}

/// The executor program's main: `PROG --kf-executor-fds=CMD,REP --kf-arena=FD,BASE,BYTES` (started by the
/// checker, never by hand): maps the arena, greets with its exports, serves calls until the checker closes.
inline int ExecutorMain(int argc, char** argv) {
  int cmd = -1, rep = -1, fd = -1;
  unsigned long long base = 0, size = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::sscanf(argv[i], "--kf-executor-fds=%d,%d", &cmd, &rep) == 2) continue;
    if (std::sscanf(argv[i], "--kf-arena=%d,%llu,%llu", &fd, &base, &size) == 3) continue;
    std::fprintf(stderr, "kf executor: unknown argument %s (this program is started by a KF_REMOTE test program)\n",
                 argv[i]);
    return 2;
  }
  if (cmd < 0 || rep < 0 || fd < 0) {
    std::fprintf(stderr, "usage: %s --kf-executor-fds=CMD,REP --kf-arena=FD,BASE,BYTES\n", argv[0]);
    return 2;
  }
  try {
    SharedArena::Adopt(fd, static_cast<std::uintptr_t>(base), static_cast<std::size_t>(size));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return remote_internal::Serve(cmd, rep);
}

}  // namespace kf::sdk

#ifdef KF_EXECUTOR
/// Declares a kernel entry point that runs in the executor (see the file comment): `ret name(types...)`.
/// In the executor build (-DKF_EXECUTOR) this declares the candidate's function and exports it.
#define KF_REMOTE(ret, name, ...) \
  ret name(__VA_ARGS__);          \
  [[maybe_unused]] inline const bool kf_exported_##name = ::kf::sdk::ExportFunction(#name, &name);
#else
/// Declares a kernel entry point that runs in the executor (see the file comment): `ret name(types...)`.
/// In the test program `name` is a kf::sdk::Remote: calling it calls the executor.
#define KF_REMOTE(ret, name, ...) inline const ::kf::sdk::Remote<ret(__VA_ARGS__)> name{#name};
[[maybe_unused]] inline const bool kf_remote_hooks_installed = ::kf::sdk::remote_internal::InstallHooks();
#endif

#if defined(KF_EXECUTOR) && defined(KF_EXECUTOR_MAIN)
int main(int argc, char** argv) { return ::kf::sdk::ExecutorMain(argc, argv); }
#endif
