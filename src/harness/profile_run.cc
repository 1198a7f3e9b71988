// Running profiler passes (see include/kernelfoundry/profile.hpp): availability probes, the perf / ncu /
// nsys passes around Harness::ProfileCommand, and their trace entries.
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>

#include "core/files.hpp"
#include "core/strings.hpp"
#include "harness/harness_internal.hpp"
#include "harness/isolation.hpp"
#include "harness/test_report.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/profile.hpp"

namespace kf {
namespace fs = std::filesystem;
using namespace harness_internal;

namespace {

// An executable `name` in $PATH or in one of `extra` directories; empty when there is none.
std::string FindTool(const std::string& name, const std::vector<fs::path>& extra = {}) {
  std::vector<fs::path> dirs;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::string_view rest = path;
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) dirs.emplace_back(std::string(dir));
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  dirs.insert(dirs.end(), extra.begin(), extra.end());
  for (const fs::path& d : dirs) {
    const fs::path p = d / name;
    if (::access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p)) return p.string();
  }
  return {};
}

std::vector<fs::path> CudaToolDirs() {
  std::vector<fs::path> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') dirs.push_back(fs::path(home) / "bin");
  dirs.emplace_back("/usr/local/cuda/bin");
  return dirs;
}

std::string FirstLine(std::string_view text) {
  for (std::string_view line : SplitLines(text)) {
    if (!Trim(line).empty()) return std::string(Trim(line));
  }
  return {};
}

// What the probes found about perf on this machine (computed once).
struct PerfProbe {
  std::string path;      ///< the perf binary; empty when missing
  std::string problem;   ///< why perf cannot count here; empty when it can
  bool hardware = false; ///< cycles and instructions can be counted
  std::string hardware_note;
};

ProcessRun RunQuick(const std::vector<std::string>& argv) {
  ProcessOptions o;
  o.argv = argv;
  o.wall_timeout = std::chrono::milliseconds{20'000};
  o.env_add["LC_ALL"] = "C";
  return RunProcess(o);
}

const PerfProbe& Perf() {
  static const PerfProbe probe = [] {
    PerfProbe p;
    p.path = FindTool("perf");
    if (p.path.empty()) {
      p.problem = "perf not found on PATH (Debian: apt-get install linux-perf)";
      return p;
    }
    ProcessRun sw = RunQuick({p.path, "stat", "-x", ",", "-e", "task-clock", "--", "true"});
    if (sw.reason != TerminationReason::kExited || sw.result.returncode != 0) {
      p.problem = "perf cannot count events here: " + FirstLine(sw.result.stderr_text + "\n" + sw.result.message.value_or("")) +
                  " (see /proc/sys/kernel/perf_event_paranoid)";
      return p;
    }
    ProcessRun hw = RunQuick({p.path, "stat", "-x", ",", "-e", "cycles,instructions", "--", "true"});
    try {
      Json parsed = ParsePerfStat(hw.result.stderr_text, std::nullopt);
      const Json& c = parsed["counters"];
      p.hardware = hw.result.returncode == 0 && c.contains("cycles") && c["cycles"]["value"].is_number() &&
                   c.contains("instructions") && c["instructions"]["value"].is_number();
    } catch (const Error&) {
      p.hardware = false;
    }
    if (!p.hardware) {
      std::string seen;
      try {
        const Json probe_counts = ParsePerfStat(hw.result.stderr_text, std::nullopt);
        for (const auto& [name, c] : probe_counts["counters"].items()) {
          seen += (seen.empty() ? "" : ", ") + name + ": " + c.value("status", "?");
        }
      } catch (const Error&) {
      }
      if (seen.empty()) seen = FirstLine(hw.result.stderr_text + "\n" + hw.result.message.value_or(""));
      p.hardware_note = "hardware counters are not exposed here (perf stat -e cycles,instructions: " + seen +
                        "); software events only";
    }
    return p;
  }();
  return probe;
}

// The verdict of a pass's own test run, and the number of timed calls its report gives.
struct PassCheck {
  Classification verdict;
  std::optional<int64_t> timed_calls;
};

PassCheck CheckPassRun(const Harness& harness, const ProcessRun& run, const TestRequest& req) {
  PassCheck out;
  std::string problem;
  std::optional<TestReport> report = ReadTestReport(run, &problem);
  out.verdict = JudgeTestRun(run, report, problem, req.expected_tests,
                             harness.Name() == "pytest" ? ExitCodes::kPytest : ExitCodes::kNative);
  if (report && report->document.contains("timed_calls") && report->document["timed_calls"].is_number_integer()) {
    out.timed_calls = report->document["timed_calls"].get<int64_t>();
  }
  return out;
}

// The pass's ProcessResult: the run's output and message, plus a note when its tests did not pass.
ProcessResult PassResult(const ProcessRun& run, const PassCheck& check) {
  ProcessResult r = run.result;
  if (check.verdict.status != EvalStatus::kCorrect) {
    r.message = JoinNotes(r.message, "the profiled run did not pass: " + std::string(EvalStatusName(check.verdict.status)) +
                                         (check.verdict.detail.empty() ? "" : ": " + check.verdict.detail));
  }
  return r;
}

/// A fresh FIFO at `p` (mode 0600) for perf's control channel, owned by the sandbox user when the profiled run
/// takes one (perf runs inside the run as that user and must open it; issue 25). Throws kf::Error(kIO).
void MakeFifo(const fs::path& p, const ProcessOptions& o) {
  std::error_code ec;
  fs::remove(p, ec);
  if (::mkfifo(p.c_str(), 0600) != 0) {
    throw Error(ErrorKind::kIO, std::string("cannot create a FIFO: ") + std::strerror(errno), p.string());
  }
  if (o.sandbox && o.sandbox->user && ::chown(p.c_str(), o.sandbox->user->uid, o.sandbox->user->gid) != 0) {
    throw Error(ErrorKind::kIO, std::string("cannot hand a FIFO to the sandbox user: ") + std::strerror(errno),
                p.string());
  }
}

ProcessResult RunPerfPass(const Harness& harness, const ProfileRequest& req, ProcessOptions o, const fs::path& dir) {
  const PerfProbe& probe = Perf();
  const fs::path csv = dir / "perf_stat.csv", ctl = dir / "perf_ctl.fifo", ack = dir / "perf_ack.fifo";
  MakeFifo(ctl, o);
  MakeFifo(ack, o);
  const std::vector<std::string> events =
      req.settings.perf.events.empty() ? DefaultPerfEvents(probe.hardware) : req.settings.perf.events;
  o.argv = PerfStatCommand(probe.path, events, csv, ctl, ack, req.settings.perf.extra_args, o.argv);
  o.env_add[kPerfControlFifoEnv] = ctl.string();
  o.env_add[kPerfAckFifoEnv] = ack.string();
  o.env_add["LC_NUMERIC"] = "C";  // perf prints numbers in the locale's format
  ProcessRun run = RunProcess(o);
  PassCheck check = CheckPassRun(harness, run, req.test);
  ProcessResult r = PassResult(run, check);
  const std::optional<std::string> read = ReadChildFile(csv);
  const bool ok = read.has_value();
  const std::string text = read.value_or("");
  Json data = Json::object();
  if (!ok) {
    r.message = JoinNotes(r.message, "Failed to read perf output: perf wrote no " + csv.filename().string());
    data = Json{{"tool", "perf stat"}, {"timed_calls", check.timed_calls ? Json(*check.timed_calls) : Json(nullptr)}};
  } else {
    try {
      data = ParsePerfStat(text, check.timed_calls);
    } catch (const Error& e) {
      r.message = JoinNotes(r.message, std::string("Failed to read perf output: ") + e.what());
      data = Json{{"tool", "perf stat"}};
    }
    data["perf_stat.csv"] = text;
  }
  data["hardware_counters"] = probe.hardware;
  data["events"] = events;
  if (!probe.hardware) data["note"] = probe.hardware_note;
  bool counted = false;
  if (data.contains("counters")) {
    for (const auto& [name, c] : data["counters"].items()) {
      (void)name;
      counted = counted || c.value("status", "") == "counted";
    }
  }
  if (ok && !counted) {
    r.message = JoinNotes(r.message, "perf counted nothing: the timing loop never switched the counters on (the "
                                     "benchmark does not time through kernelfoundry's measure_runtime)");
  } else if (ok && !check.timed_calls) {
    r.message = JoinNotes(r.message, "the run reported no timed_calls: counts are totals, not per call");
  }
  r.output_data = std::move(data);
  return r;
}

ProcessResult RunNcuPass(const Harness& harness, const ProfileRequest& req, ProcessOptions o, const fs::path& dir,
                         const std::string& ncu) {
  const fs::path report = dir / "ncu_report.csv";
  o.argv = NcuCommand(ncu, req.settings.ncu, report, o.argv);
  o.env_add["KERNELFOUNDRY_PROFILER"] = "ncu";
  ProcessRun run = RunProcess(o);
  ProcessResult r = PassResult(run, CheckPassRun(harness, run, req.test));
  const std::optional<std::string> read = ReadChildFile(report);
  const bool ok = read.has_value();
  const std::string text = read.value_or("");
  if (!ok || Trim(text).empty()) {
    // The reference's ProfilerUnavailable: no report usually means no permission to the GPU counters.
    r.message = JoinNotes(r.message, "Failed to read ncu output: no report written (no permission to the GPU "
                                     "performance counters? ERR_NVGPUCTRPERM)");
    r.output_data = Json::object();
    return r;
  }
  Json data = Json::object();
  try {
    data = ParseNcuCsv(text);
  } catch (const Error& e) {
    r.message = JoinNotes(r.message, std::string("Failed to read ncu output: ") + e.what());
    data = Json{{"tool", "ncu"}};
  }
  data["ncu_report.csv"] = text;  // the reference's output_data key
  r.output_data = std::move(data);
  return r;
}

ProcessResult RunNsysPass(const Harness& harness, const ProfileRequest& req, ProcessOptions o, const fs::path& dir,
                          const std::string& nsys) {
  const fs::path prefix = dir / "nsys_report";
  o.argv = NsysProfileCommand(nsys, req.settings.nsys, prefix, o.argv);
  o.env_add["KERNELFOUNDRY_PROFILER"] = "nsys";
  ProcessRun run = RunProcess(o);
  ProcessResult r = PassResult(run, CheckPassRun(harness, run, req.test));
  ProcessOptions stats;
  stats.argv = NsysStatsCommand(nsys, fs::path(prefix.string() + ".nsys-rep"), dir / "nsys");
  stats.cwd = dir;
  stats.wall_timeout = o.wall_timeout;
  ProcessRun s = RunProcess(stats);
  const std::optional<std::string> read = ReadChildFile(dir / "nsys_cuda_gpu_kern_sum.csv");
  const bool ok = read.has_value();
  const std::string text = read.value_or("");
  if (!ok) {
    r.message = JoinNotes(r.message, "Failed to read nsys output: nsys stats wrote no kernel summary: " +
                                         FirstLine(s.result.stderr_text + "\n" + s.result.stdout_text));
    r.output_data = Json::object();
    return r;
  }
  Json data = Json::object();
  try {
    data = ParseNsysKernelSummary(text);
  } catch (const Error& e) {
    r.message = JoinNotes(r.message, std::string("Failed to read nsys output: ") + e.what());
    data = Json{{"tool", "nsys"}};
  }
  data["nsys_cuda_gpu_kern_sum.csv"] = text;
  r.output_data = std::move(data);
  return r;
}

}  // namespace

std::optional<std::string> NoCudaDeviceReason() {
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/driver/nvidia/gpus", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    return std::nullopt;  // the NVIDIA driver lists at least one GPU
  }
  for (int i = 0; i < 16; ++i) {
    if (fs::exists("/dev/nvidia" + std::to_string(i), ec)) return std::nullopt;
  }
  return std::string("no CUDA device (no NVIDIA GPU is listed in /proc/driver/nvidia/gpus and there is no "
                     "/dev/nvidia<N>)");
}

std::optional<std::string> ProfilerUnavailableReason(const std::string& profiler) {
  if (profiler == "perf") {
    const PerfProbe& p = Perf();
    if (!p.problem.empty()) return p.problem;
    return std::nullopt;
  }
  if (profiler == "ncu" || profiler == "nsys") {
    if (auto why = NoCudaDeviceReason()) return why;
    if (FindTool(profiler, CudaToolDirs()).empty()) {
      return profiler + " not found (looked in PATH, $CUDA_HOME/bin and /usr/local/cuda/bin)";
    }
    return std::nullopt;
  }
  if (profiler == "unitrace" || profiler == "vtune") {
    if (FindTool(profiler).empty()) return profiler + " not found on PATH";
    return profiler + " passes are not implemented by KernelFoundry C++ (supported: perf, ncu, nsys)";
  }
  return "unknown profiler '" + profiler + "' (known: " + Join(KnownProfilers(), ", ") + ")";
}

std::vector<std::pair<std::string, ProcessResult>> RunProfilerPasses(const Harness& harness,
                                                                     const ProfileRequest& request) {
  std::vector<std::pair<std::string, ProcessResult>> out;
  for (size_t i = 0; i < request.profilers.size(); ++i) {
    if (request.test.stop.stop_requested()) break;
    const std::string& name = request.profilers[i];
    const std::string key = TraceKey(name, i);
    if (auto why = ProfilerUnavailableReason(name)) {
      out.emplace_back(key, UnavailableTrace(name, *why));
      continue;
    }
    std::optional<ProcessOptions> base = harness.ProfileCommand(request.test);
    if (!base) {
      out.emplace_back(key, UnavailableTrace(name, "the " + std::string(harness.Name()) +
                                                       " harness has no profiling command"));
      continue;
    }
    const fs::path dir = request.output_root / fmt::format("profiler_output_{}_{}", request.test.variant.key, i);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error(ErrorKind::kIO, "cannot create the profiler output directory: " + ec.message(), dir.string());
    // The profiler runs inside the test run's filesystem isolation (Landlock covers the whole child tree,
    // the tool included): its output directory (perf's control FIFOs and CSV, ncu's and nsys's reports) is
    // writable to it, like the run's own private directory. Nothing there decides a verdict.
    AddWritable(*base, dir);
    if (base->sandbox) {
      base->sandbox->allow_perf_events = true;  // what the profilers count with (issue 25)
      // ncu's and nsys's front ends talk to the library they inject over TCP (ncu: ports from 49152), inside
      // the run's own network namespace (loopback only). Regression (review before the first GPU run,
      // 2026-12-07): the filter refused AF_INET, so the ncu pass could not reach its target.
      base->sandbox->allow_loopback_sockets = name != "perf";
    }
    if (name == "perf") {
      out.emplace_back(key, RunPerfPass(harness, request, std::move(*base), dir));
    } else if (name == "ncu") {
      out.emplace_back(key, RunNcuPass(harness, request, std::move(*base), dir, FindTool("ncu", CudaToolDirs())));
    } else {
      out.emplace_back(key, RunNsysPass(harness, request, std::move(*base), dir, FindTool("nsys", CudaToolDirs())));
    }
  }
  return out;
}

}  // namespace kf
