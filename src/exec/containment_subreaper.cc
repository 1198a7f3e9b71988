// Tree signalling for the shepherd: descendants by a /proc scan (the shepherd is a child subreaper, so every
// process of the tree has a ppid chain leading to it) and members of a cgroup. Async-signal-safe only:
// raw syscalls, static buffers (each shepherd is a single-threaded process with its own copy).
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "exec/shepherd.hpp"

namespace kf::exec_internal {
namespace {

constexpr int kMaxProcs = 1 << 16;
constexpr int kMaxPid = 1 << 22;  // Linux PID_MAX_LIMIT

struct ProcEntry {
  int pid, ppid;
};

ProcEntry g_procs[kMaxProcs];
uint8_t g_marked[kMaxPid / 8];
alignas(8) char g_dents[1 << 15];
char g_read[1 << 14];

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];  // NUL-terminated, longer than declared
};

bool Marked(int pid) { return pid > 0 && pid < kMaxPid && (g_marked[pid >> 3] & (1u << (pid & 7))) != 0; }
void Mark(int pid) {
  if (pid > 0 && pid < kMaxPid) g_marked[pid >> 3] = static_cast<uint8_t>(g_marked[pid >> 3] | (1u << (pid & 7)));
}

/// Parses a decimal at s; returns -1 when there is none.
int ParseInt(const char* s, const char** end) {
  int v = 0;
  const char* p = s;
  if (*p < '0' || *p > '9') return -1;
  while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
  if (end) *end = p;
  return v;
}

/// Writes "/proc/<pid>/stat" into buf.
void StatPath(int pid, char* buf) {
  char digits[16];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid > 0);
  std::memcpy(buf, "/proc/", 6);
  int i = 6;
  while (n > 0) buf[i++] = digits[--n];
  std::memcpy(buf + i, "/stat", 6);
}

/// ppid from /proc/<pid>/stat ("pid (comm) S ppid …"; comm may contain ')' so take the last one).
int ReadPpid(int pid) {
  char path[40];
  StatPath(pid, path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[512];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char* close_paren = nullptr;
  for (char* p = buf; *p; ++p) {
    if (*p == ')') close_paren = p;
  }
  if (!close_paren || close_paren[1] != ' ' || close_paren[2] == '\0' || close_paren[3] != ' ') return -1;
  return ParseInt(close_paren + 4, nullptr);
}

/// Fills g_procs with (pid, ppid) of every process; returns the count.
int ScanProcs() {
  int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  int count = 0;
  while (count < kMaxProcs) {
    long n = syscall(SYS_getdents64, dir, g_dents, sizeof g_dents);
    if (n <= 0) break;
    for (long off = 0; off < n && count < kMaxProcs;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(g_dents + off);
      off += d->d_reclen;
      const char* end = nullptr;
      int pid = ParseInt(d->d_name, &end);
      if (pid <= 0 || *end != '\0') continue;
      int ppid = ReadPpid(pid);
      if (ppid < 0) continue;
      g_procs[count++] = {pid, ppid};
    }
  }
  close(dir);
  return count;
}

}  // namespace

int SignalDescendants(int sig) {
  int count = ScanProcs();
  std::memset(g_marked, 0, sizeof g_marked);
  const int self = getpid();
  Mark(self);
  // Mark by ppid chains; one pass per tree level (entries are in pid order, not tree order).
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < count; ++i) {
      if (!Marked(g_procs[i].pid) && Marked(g_procs[i].ppid)) {
        Mark(g_procs[i].pid);
        changed = true;
      }
    }
  }
  int signalled = 0;
  for (int i = 0; i < count; ++i) {
    int pid = g_procs[i].pid;
    if (pid == self || !Marked(pid)) continue;
    if (kill(pid, sig) == 0) ++signalled;
    if (sig == SIGTERM) kill(pid, SIGCONT);
  }
  return signalled;
}

int SignalCgroupMembers(const char* procs_file, int sig) {
  if (procs_file == nullptr) return 0;
  int fd = open(procs_file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int signalled = 0;
  int value = -1;
  while (true) {
    ssize_t n = read(fd, g_read, sizeof g_read);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      char c = g_read[i];
      if (c >= '0' && c <= '9') {
        value = (value < 0 ? 0 : value * 10) + (c - '0');
      } else {
        if (value > 0 && kill(value, sig) == 0) ++signalled;
        if (value > 0 && sig == SIGTERM) kill(value, SIGCONT);
        value = -1;
      }
    }
  }
  if (value > 0 && kill(value, sig) == 0) ++signalled;
  close(fd);
  return signalled;
}

}  // namespace kf::exec_internal
