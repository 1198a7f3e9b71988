// worker_info (reference spec §4.13): machine facts and tool versions, gathered once per process. Version
// probes run in parallel under kf::RunProcess with short timeouts; an absent tool gives "". Two parts, each
// cached on its own: the machine (compilers, GPU, CPU, memory, host) and Python (python3 --version, torch's
// package metadata), the latter only for harnesses that run Python.
#include "kernelfoundry/worker_info.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/files.hpp"
#include "core/strings.hpp"
#include "kernelfoundry/cache_dir.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/process.hpp"

namespace kf {
namespace fs = std::filesystem;

namespace {

// The executable's path when `name` is found on PATH (or is an existing absolute path), else "".
std::string FindExecutable(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

// Runs a probe; returns its stdout+stderr when it exited 0, else "". Never throws.
std::string Probe(std::vector<std::string> argv, std::map<std::string, std::string> env = {}) {
  try {
    std::string exe = FindExecutable(argv[0]);
    if (exe.empty()) return "";
    argv[0] = exe;
    ProcessOptions o;
    o.argv = std::move(argv);
    o.env_add = std::move(env);
    o.wall_timeout = kProbeTimeout;
    o.kill_grace = std::chrono::milliseconds{500};
    o.output_cap_bytes = 64 << 10;
    ProcessRun run = RunProcess(o);
    if (run.reason != TerminationReason::kExited || run.result.returncode != 0) return "";
    return run.result.stdout_text + run.result.stderr_text;
  } catch (...) {
    return "";
  }
}

std::string Trimmed(std::string_view s) { return std::string(Trim(s)); }

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return Trimmed(line.substr(colon + 1));
    }
  }
  return "";
}

int64_t MemTotalKb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "MemTotal:") return value;
    std::string rest;
    std::getline(in, rest);
  }
  return 0;
}

}  // namespace

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

std::string ParseToolVersion(const std::string& text) {
  static const std::regex kNvcc(R"(release [0-9.]+, V([0-9][0-9.]*))");
  std::smatch m;
  if (std::regex_search(text, m, kNvcc)) return m[1];
  std::string first = text.substr(0, text.find('\n'));
  static const std::regex kFull(R"(^v?([0-9]+(\.[0-9]+)+)$)");
  std::stringstream ss(first);
  std::string token, last_full;
  while (ss >> token) {
    if (std::regex_match(token, m, kFull)) last_full = m[1];
  }
  if (!last_full.empty()) return last_full;
  static const std::regex kAny(R"(([0-9]+\.[0-9]+(\.[0-9]+)*))");
  if (std::regex_search(first, m, kAny)) return m[1];
  return "";
}

namespace {

/// The facts of the machine and its compilers (no Python), in the order of the keys they fill.
struct MachineFacts {
  std::string nvcc, icpx, gxx, clang, gpu_name, caps, cpu, host;
  int64_t mem_kb = 0;
};

/// The Python facts: `python3 --version` and torch's package metadata (importing torch would take seconds).
struct PythonFacts {
  std::string python, torch;
};

MachineFacts GatherMachine() {
  auto async = [](auto fn) { return std::async(std::launch::async, fn); };
  auto nvcc = async([] { return CachedToolVersion("nvcc"); });
  auto icpx = async([] { return CachedToolVersion("icpx"); });
  auto gxx = async([] { return CachedToolVersion("g++"); });
  auto clang = async([] { return CachedToolVersion("clang"); });
  auto gpu = async([] {
    return Probe({"nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"});
  });
  MachineFacts m;
  std::stringstream ss(gpu.get());
  std::string line;
  while (std::getline(ss, line)) {
    line = Trimmed(line);
    if (line.empty()) continue;
    size_t comma = line.rfind(',');
    std::string name = Trimmed(comma == std::string::npos ? line : line.substr(0, comma));
    std::string cap = comma == std::string::npos ? "" : Trimmed(line.substr(comma + 1));
    if (m.gpu_name.empty()) m.gpu_name = name;
    if (!cap.empty()) m.caps += (m.caps.empty() ? "" : " ") + cap;
  }
  m.nvcc = nvcc.get();
  m.icpx = icpx.get();
  m.gxx = gxx.get();
  m.clang = clang.get();
  m.cpu = CpuModel();
  m.mem_kb = MemTotalKb();
  m.host = HostName();
  return m;
}

PythonFacts GatherPython() {
  auto python = std::async(std::launch::async, [] { return ParseToolVersion(Probe({TaskPython(), "--version"})); });
  const char* script = "import importlib.metadata as m\ntry:\n print(m.version('torch'))\nexcept Exception:\n pass";
  PythonFacts p;
  p.torch = Trimmed(Probe({TaskPython(), "-c", script}));
  p.python = python.get();
  return p;
}

/// The reference's 13 keys in its order, then ours.
Json Assemble(const MachineFacts& m, const PythonFacts& p) {
  Json info = Json::object();
  info["nvcc_version"] = m.nvcc;
  info["icpx_version"] = m.icpx;
  info["ocl_driver_version"] = "";
  info["neo_revision"] = "";
  info["igc_revision"] = "";
  info["cpu_info"] = m.cpu;
  info["total_system_memory_kb"] = m.mem_kb;
  info["device_id"] = "";
  info["gpu_name"] = m.gpu_name;
  info["nvidia_compute_capabilities"] = m.caps;
  info["git_commit_hash"] = "";
  info["torch_version"] = p.torch;
  info["hostname"] = m.host;
  info["gxx_version"] = m.gxx;
  info["clang_version"] = m.clang;
  info["python_version"] = p.python;
  info["kf_version"] = KF_VERSION;
  return info;
}

const MachineFacts& CachedMachine() {
  static std::once_flag once;
  static MachineFacts facts;
  std::call_once(once, [] { facts = GatherMachine(); });
  return facts;
}

const PythonFacts& CachedPython() {
  static std::once_flag once;
  static PythonFacts facts;
  std::call_once(once, [] { facts = GatherPython(); });
  return facts;
}

}  // namespace

bool WorkerInfoNeedsPython(std::string_view harness_kind) { return harness_kind != "native"; }

std::string CachedToolVersion(const std::string& tool) {
  const std::string exe = FindExecutable(tool);
  if (exe.empty()) return "";
  std::error_code ec;
  const fs::path real = fs::canonical(exe, ec);
  const std::string file_stamp = ec ? "" : FileStamp(real);
  const CacheDirChoice cache = ResolveCacheDir();
  if (file_stamp.empty() || !cache.usable()) return ParseToolVersion(Probe({exe, "--version"}));
  const std::string stamp = real.string() + " " + file_stamp;
  const fs::path file = cache.path / "tool_versions.json";
  auto load = [&file] {
    try {
      Json j = ParseJson(ReadFileBytes(file).value_or("{}"), file.string());
      return j.is_object() ? j : Json::object();
    } catch (const Error&) {
      return Json::object();  // unreadable: rebuilt from the probes
    }
  };
  if (Json known = load(); known.contains(stamp) && known[stamp].is_string()) return known[stamp].get<std::string>();
  const std::string version = ParseToolVersion(Probe({exe, "--version"}));
  if (version.empty()) return version;
  Json known = load();
  known[stamp] = version;
  static std::atomic<int> sequence{0};  // the probes run on parallel threads of one process
  const fs::path tmp = file.string() + fmt::format(".tmp{}.{}", ::getpid(), sequence++);
  bool written = false;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << known.dump(1);
    out.flush();
    written = static_cast<bool>(out);
  }
  if (!written) {  // disk full, read-only cache: leave nothing behind
    fs::remove(tmp, ec);
    return version;
  }
  fs::rename(tmp, file, ec);
  if (ec) fs::remove(tmp, ec);
  return version;
}

Json GatherWorkerInfo() {
  auto python = std::async(std::launch::async, GatherPython);
  MachineFacts machine = GatherMachine();
  return Assemble(machine, python.get());
}

const Json& GetWorkerInfo(std::string_view harness_kind) {
  if (!WorkerInfoNeedsPython(harness_kind)) {
    static std::once_flag once;
    static Json info;
    std::call_once(once, [] { info = Assemble(CachedMachine(), PythonFacts{}); });
    return info;
  }
  static std::once_flag once;
  static Json info;
  std::call_once(once, [] {
    auto python = std::async(std::launch::async, CachedPython);  // in parallel with the machine probes
    const MachineFacts& machine = CachedMachine();
    info = Assemble(machine, python.get());
  });
  return info;
}

const Json& GetWorkerInfo() { return GetWorkerInfo("pytest"); }

}  // namespace kf
