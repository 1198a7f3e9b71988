// Profiler passes — what goes into TestResult.trace_results (reference spec §4.4 step 8, §4.8).
//
// Contract:
//  * After a variant's performance run, the test stage may run PROFILER PASSES: separate runs of that
//    variant's performance tests (Harness::ProfileCommand, an argv — never a shell string, B7 — with the
//    template and runtime parameters of the timed run) wrapped by a profiler. Each pass gives one
//    ProcessResult stored as trace_results["<name>.<iii>"] (3-digit pass index, the reference's keys), its
//    parsed outputs in output_data. Passes never change a verdict and their times never enter runtimes.
//  * Which variants (ShouldProfileVariant): config eval_config.profile_custom_model (default true) for
//    "custom*" keys, eval_config.profile_original_model (default false) for "reference" (B13: the
//    reference's layers disagree; we take base.yaml's values); EvaluateOptions::profile forces on or off.
//  * Which profilers (SelectProfilers): config profiler_kernel (candidate) / profiler_reference (reference),
//    a name or a list of names; null = the language default of the reference's table (cuda -> ncu; sycl ->
//    unitrace; ocl -> vtune; pytorch/triton -> ncu on a CUDA arch, else unitrace), with our addition that
//    code running on the host (gpu_arch "cpu", or language cpp/c/openmp) gets `perf`.
//  * perf: `perf stat -x,` with its events DISABLED at start (-D -1) and switched on and off through its
//    control FIFOs (--control fifo:CTL,ACK) by the timing loop's begin/end hooks (kernelfoundry.profilers
//    .TimedPhaseHooks for pytest tasks, kf::PerfControl in the native SDK): only the timed kernel calls are
//    counted, not pytest, imports, warm-up or correctness checks. Counts are divided by the number of timed
//    calls the test program reports ("timed_calls" in its result document). Where the machine exposes no
//    hardware counters (VMs), the pass counts software events only and says so.
//  * ncu / nsys: command lines from the task's `profiler_settings`; reports parsed (ParseNcuCsv,
//    ParseNsysKernelSummary). Without a CUDA device or the tool the pass is not started.
//  * A profiler that cannot run here (no device, tool missing, counters not permitted, unknown language or
//    name, a harness without a profiling command, a broken profiler_settings) gives a trace entry
//    (returncode -1, message "profiler unavailable: <why>", output_data {"profiler", "available": false,
//    "reason"}) — never an exception and never a changed verdict (B8).
//  * Thread-safety: the parsers, formatters and selection are pure; RunProfilerPasses may run concurrently
//    (each pass has its own output directory); the tool probes are computed once per process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/results.hpp"

namespace kf {

/// Environment variables through which a profiler pass tells the test program's timing loop where perf's
/// control FIFOs are (`perf stat --control fifo:CTL,ACK`). Unset outside perf passes.
inline constexpr const char* kPerfControlFifoEnv = "KF_PERF_CTL_FIFO";
inline constexpr const char* kPerfAckFifoEnv = "KF_PERF_ACK_FIFO";

/// The profilers KernelFoundry knows by name: "perf", "ncu", "nsys" (run here), "unitrace", "vtune"
/// (recognised from the reference's table; not run by this implementation — their pass says so).
const std::vector<std::string>& KnownProfilers();

/// Whether the variant `variant_key` gets profiler passes: `force` when set (kf run --profile), else
/// eval_config.profile_custom_model (default true) for keys containing "custom" and
/// eval_config.profile_original_model (default false) for keys containing "reference" (spec §4.4 step 8).
/// Throws kf::Error(kInvalidArgument, "config.yaml", key) when a key is not a boolean.
bool ShouldProfileVariant(const Json& config, const std::string& variant_key, std::optional<bool> force);

/// The profilers of one variant on one arch.
struct ProfilerSelection {
  std::vector<std::string> profilers;  ///< names in pass order (may contain unknown names: their pass says so)
  std::string problem;                 ///< non-empty when none could be chosen (then `profilers` is empty)
};

/// The reference's selection rules (see the file comment). `reference` selects profiler_reference and the
/// reference language (prompt.reference_language, else language; "pytorch" is its default in the
/// reference). Never throws: a malformed profiler_kernel/profiler_reference is reported in `problem`.
ProfilerSelection SelectProfilers(const Json& config, bool reference, const std::string& gpu_arch);

/// True for archs that name an NVIDIA GPU: the reference's VALID_CUDA_ARCHS (Maxwell … Ada, native, A100,
/// A6000, L40S, L4; case-insensitive) and compute capabilities ("90", "sm_90", "9.0", "90a", "10.0f").
bool IsCudaArch(const std::string& gpu_arch);

/// The trace_results key of pass `index`: "<name>.<iii>" (e.g. "perf.000").
std::string TraceKey(const std::string& name, size_t index);

/// Task-side profiler settings: config `profiler_settings: {perf: {...}, ncu: {...}, nsys: {...}}`.
struct ProfilerSettings {
  struct Perf {
    std::vector<std::string> events;      ///< `events`: perf event names; empty = DefaultPerfEvents
    std::vector<std::string> extra_args;  ///< `extra_args`: more perf stat options (argv elements)
  } perf;
  struct Ncu {
    std::string set = "detailed";         ///< `set`: ncu --set (the reference's "detailed")
    std::vector<std::string> metrics;     ///< `metrics`: extra --metrics
    std::string kernel_name;              ///< `kernel_name`: ncu --kernel-name (e.g. "regex:softmax")
    std::optional<int64_t> launch_skip;   ///< `launch_skip`: ncu --launch-skip
    std::optional<int64_t> launch_count;  ///< `launch_count`: ncu --launch-count
    std::vector<std::string> extra_args;  ///< `extra_args`
  } ncu;
  struct Nsys {
    std::string trace = "cuda,nvtx";      ///< `trace`: nsys profile --trace
    std::vector<std::string> extra_args;  ///< `extra_args`
  } nsys;

  /// Reads `profiler_settings` (absent or null: the defaults). Throws kf::Error(kInvalidArgument,
  /// "config.yaml", "profiler_settings.<tool>.<key>") for unknown tools/keys or wrong types.
  static ProfilerSettings FromConfig(const Json& config);
};

/// perf events counted by default. Hardware: cycles, instructions, cache-references, cache-misses,
/// branches, branch-misses (only when `hardware`); software: task-clock, page-faults, major-faults,
/// context-switches, cpu-migrations.
std::vector<std::string> DefaultPerfEvents(bool hardware);

/// `perf stat -x , --no-big-num -e E1,E2… -D -1 --control fifo:CTL,ACK -o OUT [extra…] -- ARGV…`.
std::vector<std::string> PerfStatCommand(const std::string& perf, const std::vector<std::string>& events,
                                         const std::filesystem::path& output_csv,
                                         const std::filesystem::path& ctl_fifo, const std::filesystem::path& ack_fifo,
                                         const std::vector<std::string>& extra_args,
                                         const std::vector<std::string>& argv);

/// `ncu --csv --log-file REPORT --set SET [--metrics M,…] [--kernel-name K] [--launch-skip N]
/// [--launch-count N] --target-processes all [extra…] ARGV…` (the reference's command without its
/// `sudo -E`: candidate code never runs as root here).
std::vector<std::string> NcuCommand(const std::string& ncu, const ProfilerSettings::Ncu& settings,
                                    const std::filesystem::path& report_csv, const std::vector<std::string>& argv);

/// `nsys profile --output PREFIX --force-overwrite true --trace T --sample none --cpuctxsw none
/// --stats false [extra…] ARGV…` (writes PREFIX.nsys-rep).
std::vector<std::string> NsysProfileCommand(const std::string& nsys, const ProfilerSettings::Nsys& settings,
                                            const std::filesystem::path& output_prefix,
                                            const std::vector<std::string>& argv);

/// `nsys stats --report cuda_gpu_kern_sum --format csv --force-export true --output PREFIX REPORT`
/// (writes PREFIX_cuda_gpu_kern_sum.csv).
std::vector<std::string> NsysStatsCommand(const std::string& nsys, const std::filesystem::path& report,
                                          const std::filesystem::path& output_prefix);

/// Parses `perf stat -x,` output (perf 5.x/6.x columns: value, unit, event, run time, % enabled, metric,
/// metric unit; "#" comments and perf's "Events enabled/disabled" lines ignored) into
///   {"tool": "perf stat", "timed_calls": n|null,
///    "counters": {event: {"value": v|null, "unit": "ms"|"count"|…, "per_call": v/n, "enabled_pct": p,
///                         "status": "counted"|"not supported"|"not counted"}},
///    "derived": {"ipc", "cache_misses_per_kinstr", "branch_misses_per_kinstr", "page_faults_per_call",
///                "task_clock_ms_per_call", "context_switches_per_call", "instructions_per_call",
///                "cache_miss_pct": {"value", "unit"}}}
/// (perf's own "CPUs utilized" is left out: it divides by the whole run's time, most of it not counted.)
/// Event modifiers (":u") and hybrid-PMU prefixes ("cpu_core/instructions/") are folded into the plain
/// event name (values of the same event added). Derived values appear only when their inputs were counted.
/// `timed_calls` ≤ 0 or nullopt: no per-call values. Throws kf::Error(kParse, "perf stat output") when a
/// data line has fewer than 3 fields.
Json ParsePerfStat(std::string_view text, std::optional<int64_t> timed_calls);

/// Parses an `ncu --csv` report: the "details" page (long format: one row per metric, columns "ID",
/// "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value", …) or the "raw" page (wide:
/// one row per kernel, metric names as columns, a units row). ncu's own "==PROF==" / "==WARNING==" lines
/// are skipped. Returns {"tool": "ncu", "kernels": [{"id", "name", "device", "block_size", "grid_size",
/// "metrics": {name: {"value", "unit"}}, "summary": {"duration_us", "achieved_occupancy_pct",
/// "dram_throughput_pct", "l2_throughput_pct", "memory_throughput_pct", "sm_throughput_pct"}}],
/// "longest": index of the longest kernel or null}. Numbers with thousands separators are read; durations
/// in ns/us/ms/s (or nsecond/usecond/msecond/second) are converted to µs. Throws kf::Error(kParse,
/// "ncu report") when there is no CSV header.
Json ParseNcuCsv(std::string_view text);

/// Parses `nsys stats --report cuda_gpu_kern_sum --format csv` ("Time (%)", "Total Time (ns)",
/// "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Name") into
/// {"tool": "nsys", "kernels": [{"name", "time_pct", "total_ns", "instances", "avg_ns", "med_ns", "min_ns",
/// "max_ns", "stddev_ns"}]}. Throws kf::Error(kParse, "nsys report") when the header is missing.
Json ParseNsysKernelSummary(std::string_view text);

/// One compact line for the verdict table from one side's trace results, e.g.
/// "perf: IPC 1.52, cache-misses 3.10/kinstr, branch-misses 0.80/kinstr, page-faults 0.02/call,
/// task-clock 0.412 ms/call" or, without hardware counters, "perf (software events only): page-faults
/// 0.02/call, task-clock 0.412 ms/call, context-switches 0.0001/call"; "ncu: <kernel name without its parameters> 12.3 us, occupancy
/// 85%, DRAM 72%, L2 40%, SM 30%"; an unusable profiler: "ncu: not run (no CUDA device: …)". Several passes
/// are joined with "; ". Empty when there are no traces.
std::string ProfileSummaryLine(const std::vector<std::pair<std::string, ProcessResult>>& traces);

/// The verdict table's profile lines (what `kf run` prints after the table): "profile candidate: <line>"
/// and "profile reference: <line>" (ProfileSummaryLine of each side's trace_results), for the sides that
/// have traces. Empty when neither has.
std::vector<std::string> ProfileTableLines(const std::optional<TestResult>& candidate,
                                           const std::optional<TestResult>& reference);

/// What the reference keeps in EvalResult.profiler_data from one side's traces: {name: output_data
/// without the raw report texts} per pass (pass name without its index; the first pass of a name wins).
Json ProfilerDataFromTraces(const std::vector<std::pair<std::string, ProcessResult>>& traces);

/// The trace entry of a pass that could not run: returncode -1, empty output, message "profiler
/// unavailable: <reason>", output_data {"profiler": name, "available": false, "reason": reason}.
ProcessResult UnavailableTrace(const std::string& profiler, const std::string& reason);

/// Why `profiler` cannot run on this machine, or nullopt when it can: perf missing or not permitted to
/// count (probed once: `perf stat -e task-clock -- true`), no CUDA device / ncu or nsys missing, unitrace
/// and vtune not supported, an unknown name.
std::optional<std::string> ProfilerUnavailableReason(const std::string& profiler);

/// Why there is no CUDA device, or nullopt when one is present (/proc/driver/nvidia/gpus/* or /dev/nvidia<N>).
std::optional<std::string> NoCudaDeviceReason();

/// What one set of profiler passes needs.
struct ProfileRequest {
  TestRequest test;                      ///< the variant's performance request (expected_tests = profile_tests)
  std::vector<std::string> profilers;    ///< in pass order
  ProfilerSettings settings;
  std::filesystem::path output_root;     ///< pass i writes under output_root/profiler_output_<key>_<i>
};

/// Runs every pass of `request` through `harness` and returns the trace entries in pass order. Never
/// throws for a failing or unusable profiler (that is an entry); throws kf::Error(kIO) only when an output
/// directory cannot be created.
std::vector<std::pair<std::string, ProcessResult>> RunProfilerPasses(const Harness& harness,
                                                                     const ProfileRequest& request);

}  // namespace kf
