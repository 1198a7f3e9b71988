// Verdict vocabulary: the TerminationReason and EvalStatus tables (kernelfoundry/verdict.hpp).
#include "kernelfoundry/verdict.hpp"

#include <array>

namespace kf {
namespace {

constexpr int kSigSys = 31;  // SIGSYS on Linux (x86_64, aarch64): what the sandbox's filter sends

struct ReasonInfo {
  TerminationReason reason;
  const char* name;
};

constexpr std::array<ReasonInfo, 12> kReasons = {{
    {TerminationReason::kExited, "exited"},
    {TerminationReason::kSignaled, "signaled"},
    {TerminationReason::kWallTimeout, "wall_timeout"},
    {TerminationReason::kInactivity, "inactivity"},
    {TerminationReason::kEndMarkerGrace, "end_marker_grace"},
    {TerminationReason::kMemoryLimit, "memory_limit"},
    {TerminationReason::kProcessLimit, "process_limit"},
    {TerminationReason::kOutputLimit, "output_limit"},
    {TerminationReason::kCpuLimit, "cpu_limit"},
    {TerminationReason::kFileSizeLimit, "file_size_limit"},
    {TerminationReason::kSpawnFailed, "spawn_failed"},
    {TerminationReason::kCanceled, "canceled"},
}};

struct StatusInfo {
  EvalStatus status;
  std::string_view name;
  int perf_score;
};

// One row per status: adding a status is one line (plus its enum value).
constexpr std::array<StatusInfo, 30> kStatuses = {{
    {EvalStatus::kNotEvaluated, "not_evaluated", -1},
    {EvalStatus::kCorrect, "correct", 5},
    {EvalStatus::kNoisy, "noisy", 5},
    {EvalStatus::kNoReference, "no_reference", 5},
    {EvalStatus::kNoMeasurement, "no_measurement", 5},
    {EvalStatus::kReferenceOnly, "reference_only", 5},
    {EvalStatus::kValueMismatch, "value_mismatch", 4},
    {EvalStatus::kOutputChangedUnderTiming, "output_changed_under_timing", 4},
    {EvalStatus::kShapeMismatch, "shape_mismatch", 3},
    {EvalStatus::kTestsFailed, "tests_failed", 3},
    {EvalStatus::kInputMutated, "input_mutated", 3},
    {EvalStatus::kSuspicious, "suspicious", 2},
    {EvalStatus::kCrash, "crash", 2},
    {EvalStatus::kTestTimeout, "test_timeout", 2},
    {EvalStatus::kResourceLimit, "resource_limit", 2},
    {EvalStatus::kTestError, "test_error", 2},
    {EvalStatus::kNoTestResult, "no_test_result", 2},
    {EvalStatus::kPytestInterrupted, "pytest_interrupted", 2},
    {EvalStatus::kPytestInternal, "pytest_internal_error", 2},
    {EvalStatus::kPytestUsage, "pytest_usage_error", 2},
    {EvalStatus::kNoTestsCollected, "no_tests_collected", 2},
    {EvalStatus::kBuildError, "build_error", 1},
    {EvalStatus::kBuildTimeout, "build_timeout", 1},
    {EvalStatus::kExtractionFailed, "extraction_failed", 0},
    {EvalStatus::kIsolationViolation, "isolation_violation", 0},
    {EvalStatus::kSkipped, "skipped", 0},
    {EvalStatus::kReferenceFailed, "reference_failed", 0},
    {EvalStatus::kEvaluationError, "evaluation_error", 0},
    {EvalStatus::kInfrastructureError, "infrastructure_error", 0},
    {EvalStatus::kCanceled, "canceled", 0},
}};

const StatusInfo& Info(EvalStatus status) {
  for (const StatusInfo& info : kStatuses) {
    if (info.status == status) return info;
  }
  return kStatuses[0];
}

}  // namespace

const char* TerminationReasonName(TerminationReason reason) {
  for (const ReasonInfo& r : kReasons) {
    if (r.reason == reason) return r.name;
  }
  return "unknown";
}

std::optional<TerminationReason> TerminationReasonFromName(std::string_view name) {
  for (const ReasonInfo& r : kReasons) {
    if (name == r.name) return r.reason;
  }
  return std::nullopt;
}

bool IsTimeLimit(TerminationReason reason) {
  return reason == TerminationReason::kWallTimeout || reason == TerminationReason::kInactivity ||
         reason == TerminationReason::kCpuLimit;
}

bool IsResourceLimit(TerminationReason reason) {
  return reason == TerminationReason::kMemoryLimit || reason == TerminationReason::kProcessLimit ||
         reason == TerminationReason::kOutputLimit || reason == TerminationReason::kFileSizeLimit;
}

std::string_view EvalStatusName(EvalStatus status) { return Info(status).name; }

std::optional<EvalStatus> EvalStatusFromName(std::string_view name) {
  for (const StatusInfo& info : kStatuses) {
    if (info.name == name) return info.status;
  }
  return std::nullopt;
}

int PerfScoreFor(EvalStatus status) { return Info(status).perf_score; }

std::string_view ReferenceStatusFor(EvalStatus status) {
  const int perf = PerfScoreFor(status);
  if (perf == 5) return "correct";
  if (perf >= 2) return "compiled";
  return "error";
}

bool IsCorrectFamily(EvalStatus status) { return PerfScoreFor(status) == 5; }

bool IsVerdictOfCandidate(EvalStatus status) {
  return status != EvalStatus::kNotEvaluated && status != EvalStatus::kCanceled &&
         status != EvalStatus::kInfrastructureError && status != EvalStatus::kEvaluationError;
}

std::string SignalName(int sig) {
  switch (sig) {
    case 1: return "SIGHUP";
    case 2: return "SIGINT";
    case 4: return "SIGILL";
    case 6: return "SIGABRT";
    case 7: return "SIGBUS";
    case 8: return "SIGFPE";
    case 9: return "SIGKILL";
    case 11: return "SIGSEGV";
    case 13: return "SIGPIPE";
    case 15: return "SIGTERM";
    case 24: return "SIGXCPU";
    case 25: return "SIGXFSZ";
    case 31: return "SIGSYS";
    default: return "signal " + std::to_string(sig);
  }
}

std::optional<Classification> ClassifyTermination(TerminationReason reason, int returncode,
                                                  std::string_view message) {
  const std::string note = message.empty() ? std::string() : ": " + std::string(message);
  switch (reason) {
    case TerminationReason::kExited:
    case TerminationReason::kEndMarkerGrace: return std::nullopt;
    case TerminationReason::kSignaled:
      if (-returncode == kSigSys) {  // the sandbox's system-call filter (issue 25)
        return Classification{EvalStatus::kIsolationViolation,
                              "test process killed by SIGSYS: it made a system call the sandbox forbids (loading a "
                              "kernel module, kexec, mount, reboot, swap, bpf, raw I/O or setting the clock)" + note};
      }
      return Classification{EvalStatus::kCrash, "test process killed by " + SignalName(-returncode) + note};
    case TerminationReason::kWallTimeout: return Classification{EvalStatus::kTestTimeout, "test timed out" + note};
    case TerminationReason::kInactivity:
      return Classification{EvalStatus::kTestTimeout, "test killed for inactivity" + note};
    case TerminationReason::kCpuLimit:
      return Classification{EvalStatus::kResourceLimit, "CPU time limit exceeded" + note};
    case TerminationReason::kMemoryLimit:
      return Classification{EvalStatus::kResourceLimit, "memory limit exceeded" + note};
    case TerminationReason::kProcessLimit:
      return Classification{EvalStatus::kResourceLimit, "process limit exceeded" + note};
    case TerminationReason::kOutputLimit:
      return Classification{EvalStatus::kResourceLimit, "output limit exceeded" + note};
    case TerminationReason::kFileSizeLimit:
      return Classification{EvalStatus::kResourceLimit, "file size limit exceeded" + note};
    case TerminationReason::kSpawnFailed:  // [issue 10 fault 5] the interpreter / test program: our environment
      return Classification{EvalStatus::kInfrastructureError, "the test could not be started" + note};
    case TerminationReason::kCanceled: return Classification{EvalStatus::kCanceled, "canceled" + note};
  }
  return std::nullopt;
}

}  // namespace kf
