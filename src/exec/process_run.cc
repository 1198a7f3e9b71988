// ProcessRun: the typed termination reason, the reference's messages, JSON, and the enum names.
#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string_view>

#include "exec/internal.hpp"
#include "exec/run_state.hpp"
#include "kernelfoundry/process.hpp"

namespace kf {

EndMarker EndMarker::Literal(std::string text, std::chrono::milliseconds grace) {
  EndMarker m;
  m.grace = grace;
  m.match = [text = std::move(text)](std::string_view line) -> std::optional<std::string> {
    if (text.empty() || line.find(text) == std::string_view::npos) return std::nullopt;
    return std::string();
  };
  return m;
}

const char* ContainmentMethodName(ContainmentMethod m) {
  return m == ContainmentMethod::kCgroupV2 ? "cgroup_v2" : "subreaper";
}

Json ProcessRun::ToJson() const {
  Json j = Json::object();
  j["result"] = result.Encode();
  j["reason"] = TerminationReasonName(reason);
  j["containment"] = ContainmentMethodName(containment);
  j["pid"] = pid;
  j["wall_seconds"] = wall_seconds;
  j["cpu_seconds"] = cpu_seconds;
  j["peak_rss_bytes"] = peak_rss_bytes ? Json(*peak_rss_bytes) : Json(nullptr);
  j["stdout_bytes"] = stdout_bytes;
  j["stderr_bytes"] = stderr_bytes;
  j["end_marker_line"] = end_marker_line ? Json(*end_marker_line) : Json(nullptr);
  j["network_isolated"] = network_isolated;
  j["network_note"] = network_note;
  j["isolation"] = isolation;
  j["sandbox"] = sandbox;
  j["limits"] = Json::object();
  for (const auto& [k, v] : limits) j["limits"][k] = v;
  j["notes"] = notes;
  return j;
}

namespace exec_internal {

std::string FormatSeconds(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ms.count()) / 1000.0);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  return s;
}

namespace {

/// Signs of an allocation failure under RLIMIT_AS, and of EFBIG, in what the child printed.
constexpr std::array<std::string_view, 5> kAllocationFailure = {
    "MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory", "Out of memory"};
constexpr std::array<std::string_view, 1> kFileTooLarge = {"File too large"};

template <size_t N>
bool MentionsAny(const RunState& st, const std::array<std::string_view, N>& signs) {
  for (auto sign : signs) {
    if (st.stderr_raw.find(sign) != std::string::npos || st.stdout_raw.find(sign) != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::optional<std::string> MessageFor(TerminationReason r, const ProcessOptions& o, const RunState& st) {
  switch (r) {
    case TerminationReason::kWallTimeout:
      return "Process timed out after " + FormatSeconds(*o.wall_timeout) + " seconds";
    case TerminationReason::kInactivity: return std::string("Process killed due to inactivity");
    case TerminationReason::kEndMarkerGrace: return st.marker_message;
    case TerminationReason::kMemoryLimit:
      return "Process exceeded the memory limit of " + std::to_string(o.memory_limit_bytes.value_or(0)) +
             " bytes";
    case TerminationReason::kProcessLimit:
      return "Process exceeded the process limit of " + std::to_string(o.process_limit.value_or(0));
    case TerminationReason::kOutputLimit:
      return "Process output exceeded " + std::to_string(o.output_kill_bytes.value_or(0)) + " bytes";
    case TerminationReason::kCpuLimit:
      return "Process exceeded the CPU time limit of " + std::to_string(o.cpu_limit_seconds.value_or(0)) +
             " seconds";
    case TerminationReason::kFileSizeLimit:
      return "Process exceeded the file size limit of " +
             std::to_string(o.file_size_limit_bytes.value_or(0)) + " bytes";
    case TerminationReason::kSpawnFailed: return st.spawn_error;
    case TerminationReason::kCanceled: return std::string("Process canceled");
    case TerminationReason::kExited:
    case TerminationReason::kSignaled: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

void BuildProcessRun(const ProcessOptions& o, const RunState& st, ProcessRun* run) {
  run->wall_seconds = st.wall_seconds;
  run->cpu_seconds = static_cast<double>(st.cpu_us) / 1e6;
  if (st.cgroup_peak) {
    run->peak_rss_bytes = st.cgroup_peak;
  } else if (st.maxrss_kib > 0) {
    run->peak_rss_bytes = static_cast<uint64_t>(st.maxrss_kib) * 1024;
  }
  if (o.no_network && !run->network_isolated && run->network_note.empty() && !st.spawn_error) {
    run->network_note = "network isolation was not applied";
  }
  if (o.no_network) run->limits["network"] = run->network_isolated ? "netns (loopback only)" : "unavailable";

  int returncode = -1;
  TerminationReason reason = TerminationReason::kExited;
  if (st.spawn_error) {
    reason = TerminationReason::kSpawnFailed;
  } else {
    bool signaled = false;
    int sig = 0;
    if (!st.main_status) {
      returncode = -SIGKILL;
      signaled = true;
      sig = SIGKILL;
      run->notes.push_back("the exit status of the child was not reported");
    } else if (WIFEXITED(*st.main_status)) {
      returncode = WEXITSTATUS(*st.main_status);
    } else if (WIFSIGNALED(*st.main_status)) {
      sig = WTERMSIG(*st.main_status);
      returncode = -sig;
      signaled = true;
    }
    auto mem = run->limits.find("memory");
    const bool rlimit_memory = mem != run->limits.end() && mem->second.rfind("RLIMIT_AS", 0) == 0;
    if (st.kill_reason) {
      reason = *st.kill_reason;
      if (st.oom_kills > 0 && reason != TerminationReason::kMemoryLimit) {
        run->notes.push_back("the memory limit was hit (" + std::to_string(st.oom_kills) + " OOM kills)");
      }
    } else if (st.oom_kills > 0) {
      reason = TerminationReason::kMemoryLimit;
    } else if (st.pids_hits > 0) {  // forks were refused: the run did not get what it asked for
      reason = TerminationReason::kProcessLimit;
    } else if (signaled && (sig == SIGXCPU || (sig == SIGKILL && o.cpu_limit_seconds &&
                                              run->cpu_seconds >= static_cast<double>(*o.cpu_limit_seconds)))) {
      reason = TerminationReason::kCpuLimit;
    } else if (o.file_size_limit_bytes && ((signaled && sig == SIGXFSZ) ||
                                           (returncode != 0 && MentionsAny(st, kFileTooLarge)))) {
      reason = TerminationReason::kFileSizeLimit;  // programs that ignore SIGXFSZ (Python) see EFBIG
    } else if (returncode != 0 && rlimit_memory && MentionsAny(st, kAllocationFailure)) {
      reason = TerminationReason::kMemoryLimit;
    } else if (signaled) {
      reason = TerminationReason::kSignaled;
    }
  }
  run->reason = reason;
  run->result = ProcessResult::Create(returncode, st.stdout_raw, st.stderr_raw, MessageFor(reason, o, st));
}

}  // namespace exec_internal
}  // namespace kf
