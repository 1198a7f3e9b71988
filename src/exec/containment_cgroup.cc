// Per-run cgroups (see cgroup.hpp): detection of cgroup v2 / v1 hierarchies, leaf creation with limits,
// statistics (peak memory, OOM kills, refused forks) and removal.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/files.hpp"
#include "exec/cgroup.hpp"
#include "exec/contain.hpp"
#include "kernelfoundry/error.hpp"

namespace kf::exec_internal {
namespace {

namespace fs = std::filesystem;

/// Writes `text` to a control file; returns 0 or the errno.
int WriteControl(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n = write(fd, text.data(), text.size());
  int err = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : EIO);
  close(fd);
  return err;
}

/// Value of "key N" in a flat-keyed file (memory.events, pids.events, memory.oom_control).
uint64_t KeyedValue(const std::string& path, const std::string& key) {
  auto text = ReadFileBytes(path);
  if (!text) return 0;
  std::istringstream in(*text);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

bool HasWord(const std::string& list, const std::string& word) {
  std::istringstream in(list);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

struct MountEntry {
  std::string root, mount_point, fstype, super_options;
};

std::vector<MountEntry> ReadMounts() {
  std::vector<MountEntry> mounts;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> fields;
    std::string f;
    while (ls >> f) fields.push_back(f);
    size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (fields.size() < 5 || dash + 2 >= fields.size()) continue;
    mounts.push_back({fields[3], fields[4], fields[dash + 1], dash + 3 < fields.size() ? fields[dash + 3] : ""});
  }
  return mounts;
}

/// The cgroup path per hierarchy of a process from its /proc/<pid>/cgroup file: key "" for v2 (hierarchy "0"),
/// else the controller list (or "name=…"). Empty when the file cannot be read.
std::map<std::string, std::string> CgroupsOf(const std::string& proc_file) {
  std::map<std::string, std::string> out;
  std::ifstream in(proc_file);
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string hierarchy = line.substr(0, a);
    std::string controllers = line.substr(a + 1, b - a - 1);
    out[hierarchy == "0" ? "" : controllers] = line.substr(b + 1);
  }
  return out;
}

/// Our cgroup path per hierarchy (CgroupsOf /proc/self/cgroup).
std::map<std::string, std::string> OwnCgroups() { return CgroupsOf("/proc/self/cgroup"); }

/// mount point + (own path relative to the mount's root).
std::string JoinMount(const MountEntry& m, std::string own) {
  if (m.root != "/" && own.compare(0, m.root.size(), m.root) == 0) own = own.substr(m.root.size());
  std::string dir = m.mount_point + own;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

bool Writable(const std::string& dir) { return !dir.empty() && access(dir.c_str(), W_OK) == 0; }

/// Removes leaves of earlier runs whose process is gone (rmdir fails on populated cgroups, so a live
/// cgroup is never removed).
void RemoveStaleLeaves(const std::string& base) {
  std::error_code ec;
  auto now = fs::file_time_type::clock::now();
  for (auto it = fs::directory_iterator(base, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("kf-", 0) != 0) continue;
    int pid = std::atoi(name.c_str() + 3);
    if (pid <= 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;  // owner alive
    std::error_code ec2;
    auto mtime = fs::last_write_time(it->path(), ec2);
    if (!ec2 && now - mtime < std::chrono::minutes(1)) continue;
    rmdir(it->path().c_str());
  }
}

CgroupSupport Detect() {
  CgroupSupport s;
  auto mounts = ReadMounts();
  auto own = OwnCgroups();
  if (const char* base = std::getenv("KF_CGROUP_BASE"); base != nullptr && *base != '\0') {
    s.v2_base = base;
  } else if (own.count("")) {
    for (const auto& m : mounts) {
      if (m.fstype == "cgroup2") {
        s.v2_base = JoinMount(m, own[""]);
        break;
      }
    }
  }
  if (!Writable(s.v2_base) || !fs::exists(s.v2_base + "/cgroup.procs")) s.v2_base.clear();
  if (!s.v2_base.empty()) {
    std::string available = ReadFileBytes(s.v2_base + "/cgroup.controllers").value_or("");
    for (const char* c : {"memory", "pids"}) {
      std::string enabled = ReadFileBytes(s.v2_base + "/cgroup.subtree_control").value_or("");
      if (!HasWord(enabled, c) && HasWord(available, c)) {
        WriteControl(s.v2_base + "/cgroup.subtree_control", std::string("+") + c);
      }
    }
    std::string enabled = ReadFileBytes(s.v2_base + "/cgroup.subtree_control").value_or("");
    s.v2_memory = HasWord(enabled, "memory");
    s.v2_pids = HasWord(enabled, "pids");
    RemoveStaleLeaves(s.v2_base);
  }
  for (const auto& m : mounts) {
    if (m.fstype != "cgroup") continue;
    std::string options = "," + m.super_options + ",";
    for (const auto& [controllers, path] : own) {
      if (controllers.empty()) continue;
      std::string list = "," + controllers + ",";
      for (const char* c : {"memory", "pids"}) {
        std::string needle = std::string(",") + c + ",";
        if (options.find(needle) == std::string::npos || list.find(needle) == std::string::npos) continue;
        std::string dir = JoinMount(m, path);
        if (!Writable(dir)) continue;
        if (std::string(c) == "memory") s.v1_memory_base = dir;
        else s.v1_pids_base = dir;
        RemoveStaleLeaves(dir);
      }
    }
  }
  return s;
}

std::string NewLeafName() {
  static std::atomic<uint64_t> counter{0};
  return "kf-" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1));
}

/// Creates base/name; returns the path or "" (adding a note).
std::string MakeLeaf(const std::string& base, const std::string& name, std::vector<std::string>* notes) {
  std::string dir = base + "/" + name;
  if (mkdir(dir.c_str(), 0755) != 0) {
    notes->push_back("cannot create cgroup " + dir + ": " + std::strerror(errno));
    return "";
  }
  return dir;
}

}  // namespace

const CgroupSupport& DetectCgroups() {
  static const CgroupSupport support = Detect();
  return support;
}

RunCgroups::RunCgroups(const ProcessOptions& o, std::map<std::string, std::string>* limits,
                       std::vector<std::string>* notes) {
  const CgroupSupport& s = DetectCgroups();
  const std::string name = NewLeafName();
  if (!s.v2_base.empty()) {
    v2_dir_ = MakeLeaf(s.v2_base, name, notes);
    if (!v2_dir_.empty()) created_.push_back(v2_dir_);
  }
  if (o.memory_limit_bytes) {
    const std::string bytes = std::to_string(*o.memory_limit_bytes);
    if (!v2_dir_.empty() && s.v2_memory) {
      int err = WriteControl(v2_dir_ + "/memory.max", bytes);
      if (err == 0) {
        WriteControl(v2_dir_ + "/memory.swap.max", "0");
        WriteControl(v2_dir_ + "/memory.oom.group", "1");
        mem_dir_ = v2_dir_;
        (*limits)["memory"] = "cgroup2 memory.max";
      } else {
        notes->push_back(std::string("cgroup2 memory.max: ") + std::strerror(err));
      }
    }
    if (mem_dir_.empty() && !s.v1_memory_base.empty()) {
      std::string dir = MakeLeaf(s.v1_memory_base, name, notes);
      if (!dir.empty()) {
        created_.push_back(dir);
        int err = WriteControl(dir + "/memory.limit_in_bytes", bytes);
        if (err == 0) {
          WriteControl(dir + "/memory.memsw.limit_in_bytes", bytes);  // no swap escape, when accounted
          mem_dir_ = dir;
          mem_v1_ = true;
          (*limits)["memory"] = "cgroup1 memory.limit_in_bytes";
        } else {
          notes->push_back(std::string("cgroup1 memory.limit_in_bytes: ") + std::strerror(err));
        }
      }
    }
  }
  if (o.process_limit) {
    const std::string max = std::to_string(*o.process_limit);
    if (!v2_dir_.empty() && s.v2_pids && WriteControl(v2_dir_ + "/pids.max", max) == 0) {
      pids_dir_ = v2_dir_;
      (*limits)["processes"] = "cgroup2 pids.max";
    }
    if (pids_dir_.empty() && !s.v1_pids_base.empty()) {
      std::string dir = MakeLeaf(s.v1_pids_base, name, notes);
      if (!dir.empty()) {
        created_.push_back(dir);
        int err = WriteControl(dir + "/pids.max", max);
        if (err == 0) {
          pids_dir_ = dir;
          pids_v1_ = true;
          (*limits)["processes"] = "cgroup1 pids.max";
        } else {
          notes->push_back(std::string("cgroup1 pids.max: ") + std::strerror(err));
        }
      }
    }
  }
}

RunCgroups::~RunCgroups() {
  // The tree is gone when we get here; a dying task can keep a cgroup busy for a moment.
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      if (rmdir(it->c_str()) == 0 || errno == ENOENT) break;
      if (errno != EBUSY) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

std::vector<std::string> RunCgroups::V1JoinFiles() const {
  std::vector<std::string> files;
  if (mem_v1_) files.push_back(mem_dir_ + "/cgroup.procs");
  if (pids_v1_) files.push_back(pids_dir_ + "/cgroup.procs");
  return files;
}

std::string RunCgroups::KillFile() const {
  if (v2_dir_.empty()) return "";
  std::string f = v2_dir_ + "/cgroup.kill";
  return access(f.c_str(), W_OK) == 0 ? f : "";
}

std::string RunCgroups::ProcsFile() const { return v2_dir_.empty() ? "" : v2_dir_ + "/cgroup.procs"; }

uint64_t RunCgroups::PidsMaxHits() const {
  return pids_dir_.empty() ? 0 : KeyedValue(pids_dir_ + "/pids.events", "max");
}

uint64_t RunCgroups::OomKills() const {
  if (mem_dir_.empty()) return 0;
  if (mem_v1_) return KeyedValue(mem_dir_ + "/memory.oom_control", "oom_kill");
  return std::max(KeyedValue(mem_dir_ + "/memory.events", "oom_kill"),
                  KeyedValue(mem_dir_ + "/memory.events", "oom_group_kill"));
}

std::optional<int64_t> RunCgroups::CpuMicros() const {
  if (v2_dir_.empty()) return std::nullopt;
  const uint64_t usec = KeyedValue(v2_dir_ + "/cpu.stat", "usage_usec");
  return usec > 0 ? std::optional<int64_t>(static_cast<int64_t>(usec)) : std::nullopt;
}

std::optional<uint64_t> RunCgroups::PeakMemory() const {
  std::string file;
  if (mem_v1_) {
    file = mem_dir_ + "/memory.max_usage_in_bytes";
  } else if (!v2_dir_.empty()) {
    file = v2_dir_ + "/memory.peak";
  }
  if (file.empty()) return std::nullopt;
  auto text = ReadFileBytes(file);
  if (!text || text->empty()) return std::nullopt;
  char* end = nullptr;
  uint64_t v = std::strtoull(text->c_str(), &end, 10);
  if (end == text->c_str() || v == 0) return std::nullopt;
  return v;
}

void CgroupJoinFilesOf(pid_t pid, std::string* v2, std::vector<std::string>* v1) {
  v2->clear();
  v1->clear();
  const std::string proc_file = "/proc/" + std::to_string(pid) + "/cgroup";
  const std::map<std::string, std::string> theirs = CgroupsOf(proc_file);
  if (theirs.empty()) throw Error(ErrorKind::kIO, "cannot read the process's cgroups", proc_file);
  const std::map<std::string, std::string> mine = OwnCgroups();
  const std::vector<MountEntry> mounts = ReadMounts();
  for (const auto& [controllers, path] : theirs) {
    auto it = mine.find(controllers);
    if (it != mine.end() && it->second == path) continue;
    // The mount of this hierarchy: cgroup2 for v2; for v1 the cgroup mount whose options name exactly these
    // controllers (or this name=).
    const MountEntry* found = nullptr;
    for (const MountEntry& m : mounts) {
      if (controllers.empty() ? m.fstype == "cgroup2" : m.fstype == "cgroup") {
        if (!controllers.empty()) {
          const std::string options = "," + m.super_options + ",";
          bool all = true;
          std::istringstream list(controllers);
          for (std::string c; all && std::getline(list, c, ',');) all = options.find("," + c + ",") != std::string::npos;
          if (!all) continue;
        }
        found = &m;
        break;
      }
    }
    if (found == nullptr) {
      throw Error(ErrorKind::kIO, "no mount of the cgroup hierarchy '" + (controllers.empty() ? "cgroup2" : controllers) +
                                      "' here", "/proc/self/mountinfo");
    }
    const std::string procs = JoinMount(*found, path) + "/cgroup.procs";
    if (controllers.empty()) {
      *v2 = procs;
    } else {
      v1->push_back(procs);
    }
  }
}

}  // namespace kf::exec_internal

namespace kf {

bool CgroupTreeContainment() { return !exec_internal::DetectCgroups().v2_base.empty(); }

std::string CgroupLimitMechanism(TreeLimit which) {
  const exec_internal::CgroupSupport& s = exec_internal::DetectCgroups();
  const bool memory = which == TreeLimit::kMemory;
  if (!s.v2_base.empty() && (memory ? s.v2_memory : s.v2_pids)) return "cgroup v2";
  if (!(memory ? s.v1_memory_base : s.v1_pids_base).empty()) return "cgroup v1";
  return "";
}

}  // namespace kf
