// Profiler passes (kernelfoundry/profile.hpp): the reference's selection rules and keys, profiler settings,
// the exact command lines, the parsers on recorded outputs (perf stat -x, recorded on this VM; ncu and nsys
// reports hand-written from their CSV formats, see tests/harness/data/README.md), the verdict table's profile
// line, and perf's control FIFOs driven by kf::PerfControl against a real `perf stat`.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include "core/strings.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/sdk/perf_control.hpp"
#include "kernelfoundry/process.hpp"
#include "kernelfoundry/profile.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::TempDir;

std::string Data(const std::string& name) {
  return ReadFile(testing::SourceDir() / "tests" / "harness" / "data" / name);
}

Json Config(const std::string& yaml_like_json) { return ParseJson(yaml_like_json, "config"); }

// ---- selection (spec §4.4 step 8, §4.8) ----

TEST(ProfileSelection, VariantsFollowEvalConfigWithBaseYamlDefaults) {
  const Json none = Json::object();
  EXPECT_TRUE(ShouldProfileVariant(none, "custom", std::nullopt));        // profile_custom_model: true
  EXPECT_TRUE(ShouldProfileVariant(none, "custom_16_32", std::nullopt));
  EXPECT_FALSE(ShouldProfileVariant(none, "reference", std::nullopt));    // profile_original_model: false
  const Json off = Config(R"({"eval_config": {"profile_custom_model": false, "profile_original_model": true}})");
  EXPECT_FALSE(ShouldProfileVariant(off, "custom", std::nullopt));
  EXPECT_TRUE(ShouldProfileVariant(off, "reference", std::nullopt));
  // kf run --profile forces both sides; EvaluateOptions::profile = false switches everything off.
  EXPECT_TRUE(ShouldProfileVariant(off, "custom", true));
  EXPECT_FALSE(ShouldProfileVariant(none, "custom", false));
  const Error e = testing::ExpectError(ErrorKind::kInvalidArgument, [] {
    ShouldProfileVariant(Config(R"({"eval_config": {"profile_custom_model": "yes"}})"), "custom", std::nullopt);
  });
  EXPECT_EQ(e.field(), "eval_config.profile_custom_model");
}

TEST(ProfileSelection, LanguageTableOfTheReferencePlusPerfOnTheHost) {
  auto pick = [](const std::string& language, const std::string& arch, bool reference = false) {
    ProfilerSelection s = SelectProfilers(Json{{"language", language}}, reference, arch);
    return s.problem.empty() ? Join(s.profilers, ",") : "problem: " + s.problem;
  };
  EXPECT_EQ(pick("CUDA", "Ampere"), "ncu");
  EXPECT_EQ(pick("cuda", "90"), "ncu");
  EXPECT_EQ(pick("SYCL", "bmg"), "unitrace");
  EXPECT_EQ(pick("OCL", "dg2"), "vtune");
  EXPECT_EQ(pick("pytorch", "A100"), "ncu");
  EXPECT_EQ(pick("triton", "bmg"), "unitrace");
  // Ours: code on the host gets perf — B8: `language: cpp` crashed the reference's test task.
  EXPECT_EQ(pick("cpp", "cpu"), "perf");
  EXPECT_EQ(pick("python", "cpu"), "perf");
  EXPECT_EQ(pick("opencl", "cpu"), "perf");
  EXPECT_EQ(pick("cpp", "Ampere"), "perf");
  EXPECT_EQ(pick("fortran", "bmg").rfind("problem: no profiler for language 'fortran' on gpu_arch 'bmg'", 0), 0u);
}

TEST(ProfileSelection, ExplicitTypesAndTheReferenceLanguage) {
  Json c = Config(R"({"language": "cuda", "profiler_kernel": ["NCU", "nsys"], "profiler_reference": "perf"})");
  EXPECT_EQ(SelectProfilers(c, false, "90").profilers, (std::vector<std::string>{"ncu", "nsys"}));
  EXPECT_EQ(SelectProfilers(c, true, "90").profilers, (std::vector<std::string>{"perf"}));
  // The reference variant's language is prompt.reference_language when set.
  Json p = Config(R"({"language": "sycl", "prompt": {"reference_language": "Pytorch"}})");
  EXPECT_EQ(SelectProfilers(p, true, "Ampere").profilers, (std::vector<std::string>{"ncu"}));
  EXPECT_EQ(SelectProfilers(p, false, "bmg").profilers, (std::vector<std::string>{"unitrace"}));
  // A malformed type is a problem, never an exception (B8).
  ProfilerSelection bad = SelectProfilers(Config(R"({"profiler_kernel": 3})"), false, "cpu");
  EXPECT_TRUE(bad.profilers.empty());
  EXPECT_NE(bad.problem.find("profiler_kernel: expected a profiler name or a list of names"), std::string::npos);
  EXPECT_EQ(TraceKey("perf", 0), "perf.000");
  EXPECT_EQ(TraceKey("unitrace", 12), "unitrace.012");
  EXPECT_TRUE(IsCudaArch("sm_80"));
  EXPECT_TRUE(IsCudaArch("8.6"));
  EXPECT_TRUE(IsCudaArch("90a"));
  EXPECT_TRUE(IsCudaArch("sm_100f"));
  EXPECT_FALSE(IsCudaArch("a"));
  EXPECT_TRUE(IsCudaArch("L40S"));
  EXPECT_FALSE(IsCudaArch("bmg"));
  EXPECT_FALSE(IsCudaArch("cpu"));
}

TEST(ProfileSettings, ReadsTheTaskSettingsAndNamesBadKeys) {
  ProfilerSettings s = ProfilerSettings::FromConfig(Config(
      R"({"profiler_settings": {"ncu": {"set": "full", "metrics": ["dram__bytes.sum"], "kernel_name": "regex:softmax",
          "launch_skip": 2, "launch_count": 1}, "nsys": {"trace": "cuda"}, "perf": {"events": ["task-clock"]}}})"));
  EXPECT_EQ(s.ncu.set, "full");
  EXPECT_EQ(s.ncu.kernel_name, "regex:softmax");
  EXPECT_EQ(s.ncu.launch_skip, 2);
  EXPECT_EQ(s.nsys.trace, "cuda");
  EXPECT_EQ(s.perf.events, (std::vector<std::string>{"task-clock"}));
  EXPECT_EQ(ProfilerSettings::FromConfig(Json::object()).ncu.set, "detailed");
  Error e = testing::ExpectError(ErrorKind::kInvalidArgument, [] {
    ProfilerSettings::FromConfig(Config(R"({"profiler_settings": {"ncu": {"sett": "full"}}})"));
  });
  EXPECT_EQ(e.field(), "profiler_settings.ncu.sett");
  e = testing::ExpectError(ErrorKind::kInvalidArgument, [] {
    ProfilerSettings::FromConfig(Config(R"({"profiler_settings": {"ncu": {"metrics": "dram"}}})"));
  });
  EXPECT_EQ(e.field(), "profiler_settings.ncu.metrics");
}

// ---- command lines (argv: B7 — nothing is joined into a shell string) ----

TEST(ProfileCommands, PerfStatAroundTheTestArgv) {
  const std::vector<std::string> argv = {"/usr/bin/python3", "-m", "pytest", "--template_params=[16, 32]",
                                         "--runtime_params={\"a\": 1}", "task.py"};
  std::vector<std::string> cmd = PerfStatCommand("/usr/bin/perf", DefaultPerfEvents(false), "/w/perf_stat.csv",
                                                 "/w/ctl", "/w/ack", {"--all-user"}, argv);
  std::vector<std::string> want = {"/usr/bin/perf", "stat", "-x", ",", "--no-big-num", "-e",
                                   "task-clock,page-faults,major-faults,context-switches,cpu-migrations", "-D", "-1",
                                   "--control", "fifo:/w/ctl,/w/ack", "-o", "/w/perf_stat.csv", "--all-user", "--"};
  want.insert(want.end(), argv.begin(), argv.end());
  EXPECT_EQ(cmd, want);
  EXPECT_EQ(DefaultPerfEvents(true).front(), "cycles");
  EXPECT_EQ(DefaultPerfEvents(true).size(), 11u);
}

TEST(ProfileCommands, NcuAndNsysFromTheTaskSettings) {
  ProfilerSettings::Ncu ncu;
  ncu.metrics = {"dram__bytes.sum", "sm__cycles_elapsed.avg"};
  ncu.kernel_name = "regex:softmax";
  ncu.launch_count = 1;
  EXPECT_EQ(NcuCommand("/usr/local/cuda/bin/ncu", ncu, "/w/ncu_report.csv", {"./build/test_kernel", "--kf-run"}),
            (std::vector<std::string>{"/usr/local/cuda/bin/ncu", "--csv", "--log-file", "/w/ncu_report.csv", "--set",
                                      "detailed", "--metrics", "dram__bytes.sum,sm__cycles_elapsed.avg", "--kernel-name",
                                      "regex:softmax", "--launch-count", "1", "--target-processes", "all",
                                      "./build/test_kernel", "--kf-run"}));
  ProfilerSettings::Nsys nsys;
  EXPECT_EQ(NsysProfileCommand("nsys", nsys, "/w/nsys_report", {"prog"}),
            (std::vector<std::string>{"nsys", "profile", "--output", "/w/nsys_report", "--force-overwrite", "true",
                                      "--trace", "cuda,nvtx", "--sample", "none", "--cpuctxsw", "none", "--stats",
                                      "false", "prog"}));
  EXPECT_EQ(NsysStatsCommand("nsys", "/w/nsys_report.nsys-rep", "/w/nsys"),
            (std::vector<std::string>{"nsys", "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv",
                                      "--force-export", "true", "--output", "/w/nsys", "/w/nsys_report.nsys-rep"}));
}

// ---- parsers ----

// Recorded on this VM: a real perf pass of bias_relu's candidate (software events; no hardware PMU here).
TEST(PerfStatParser, RecordedSoftwareEventsOfThisVm) {
  const std::string text = Data("perf_stat_vm_software.csv");
  Json j = ParsePerfStat(text, 2000);
  EXPECT_EQ(j["tool"], "perf stat");
  EXPECT_EQ(j["timed_calls"], 2000);
  const Json& c = j["counters"];
  ASSERT_TRUE(c.contains("task-clock")) << j.dump(2);
  EXPECT_EQ(c["task-clock"]["unit"], "ms");
  EXPECT_EQ(c["task-clock"]["status"], "counted");
  EXPECT_GT(c["task-clock"]["value"].get<double>(), 0);
  EXPECT_EQ(c["page-faults"]["unit"], "count");
  EXPECT_DOUBLE_EQ(c["page-faults"]["per_call"].get<double>(), c["page-faults"]["value"].get<double>() / 2000);
  EXPECT_DOUBLE_EQ(j["derived"]["task_clock_ms_per_call"]["value"].get<double>(),
                   c["task-clock"]["value"].get<double>() / 2000);
  EXPECT_EQ(j["derived"]["page_faults_per_call"]["unit"], "faults/call");
  EXPECT_FALSE(j["derived"].contains("ipc"));  // no cycles/instructions counted on this VM
}

TEST(PerfStatParser, ProbeOfThisVmSaysNotSupported) {
  Json j = ParsePerfStat(Data("perf_stat_probe_hw_vm.txt"), std::nullopt);
  EXPECT_EQ(j["counters"]["instructions"]["status"], "not supported");
  EXPECT_TRUE(j["counters"]["instructions"]["value"].is_null());
  EXPECT_EQ(j["counters"]["cycles"]["status"], "not supported");
  EXPECT_TRUE(j["derived"].empty());
  EXPECT_TRUE(j["timed_calls"].is_null());
}

TEST(PerfStatParser, HardwareCountersHybridPmuAndModifiers) {
  Json j = ParsePerfStat(Data("perf_stat_hw_handwritten.csv"), 1000);
  const Json& c = j["counters"];
  EXPECT_DOUBLE_EQ(c["cycles"]["value"].get<double>(), 1398211907.0 + 102331877.0);  // cpu_core + cpu_atom
  EXPECT_DOUBLE_EQ(c["instructions"]["value"].get<double>(), 2103722911.0 + 98112233.0);
  EXPECT_DOUBLE_EQ(c["branch-misses"]["value"].get<double>(), 1504388.0);  // ":u" folded
  EXPECT_FALSE(j["derived"].contains("cpus_utilized"));  // perf's divides by the whole (mostly disabled) run
  const Json& d = j["derived"];
  EXPECT_NEAR(d["ipc"]["value"].get<double>(), 2201835144.0 / 1500543784.0, 1e-12);
  EXPECT_NEAR(d["cache_misses_per_kinstr"]["value"].get<double>(), 6180035.0 / 2201835144.0 * 1000, 1e-12);
  EXPECT_NEAR(d["branch_misses_per_kinstr"]["value"].get<double>(), 1504388.0 / 2201835144.0 * 1000, 1e-12);
  EXPECT_NEAR(d["cache_miss_pct"]["value"].get<double>(), 15.0, 0.001);
  EXPECT_DOUBLE_EQ(d["page_faults_per_call"]["value"].get<double>(), 1.206);
  EXPECT_DOUBLE_EQ(d["task_clock_ms_per_call"]["value"].get<double>(), 0.41273);
  EXPECT_EQ(d["ipc"]["unit"], "instructions/cycle");
}

TEST(PerfStatParser, MalformedLineIsAParseError) {
  Error e = testing::ExpectError(ErrorKind::kParse, [] { ParsePerfStat("12345\n", 1); });
  EXPECT_EQ(e.file(), "perf stat output");
  // Comments, blank lines and perf's control messages are not data.
  EXPECT_TRUE(ParsePerfStat("# started on x\n\nEvents enabled\nEvents disabled\n", 1)["counters"].empty());
}

TEST(NcuParser, DetailsPageLongestKernelAndSummary) {
  Json j = ParseNcuCsv(Data("ncu_details_handwritten.csv"));
  ASSERT_EQ(j["kernels"].size(), 2u) << j.dump(2);
  EXPECT_EQ(j["longest"], 0);
  const Json& k = j["kernels"][0];
  EXPECT_EQ(k["name"], "softmax_rows(const float *, float *, int, int)");
  EXPECT_EQ(k["grid_size"], "(4096, 1, 1)");
  EXPECT_EQ(k["cc"], "9.0");
  EXPECT_DOUBLE_EQ(k["metrics"]["Elapsed Cycles"]["value"].get<double>(), 31412);  // "31,412"
  // "Memory Throughput" twice: the SOL percentage, and the Memory Workload Analysis bandwidth.
  EXPECT_EQ(k["metrics"]["Memory Throughput"]["unit"], "%");
  EXPECT_EQ(k["metrics"]["Memory Throughput (Memory Workload Analysis)"]["unit"], "Tbyte/second");
  const Json& s = k["summary"];
  EXPECT_DOUBLE_EQ(s["duration_us"].get<double>(), 17.95);
  EXPECT_DOUBLE_EQ(s["achieved_occupancy_pct"].get<double>(), 85.37);
  EXPECT_DOUBLE_EQ(s["dram_throughput_pct"].get<double>(), 71.84);
  EXPECT_DOUBLE_EQ(s["l2_throughput_pct"].get<double>(), 40.26);
  EXPECT_DOUBLE_EQ(s["memory_throughput_pct"].get<double>(), 71.84);
  EXPECT_DOUBLE_EQ(s["sm_throughput_pct"].get<double>(), 30.12);
  EXPECT_DOUBLE_EQ(j["kernels"][1]["summary"]["duration_us"].get<double>(), 9.28);
}

TEST(NcuParser, RawPageWithUnitsRow) {
  Json j = ParseNcuCsv(Data("ncu_raw_handwritten.csv"));
  ASSERT_EQ(j["kernels"].size(), 1u) << j.dump(2);
  const Json& s = j["kernels"][0]["summary"];
  EXPECT_DOUBLE_EQ(s["duration_us"].get<double>(), 6.112);  // 6,112 nsecond
  EXPECT_DOUBLE_EQ(s["dram_throughput_pct"].get<double>(), 88.41);
  EXPECT_DOUBLE_EQ(s["l2_throughput_pct"].get<double>(), 47.90);
  EXPECT_DOUBLE_EQ(s["sm_throughput_pct"].get<double>(), 21.35);
  EXPECT_DOUBLE_EQ(s["achieved_occupancy_pct"].get<double>(), 79.66);
  testing::ExpectError(ErrorKind::kParse, [] { ParseNcuCsv("==PROF== nothing profiled\n"); });
}

TEST(NsysParser, KernelSummary) {
  Json j = ParseNsysKernelSummary(Data("nsys_cuda_gpu_kern_sum_handwritten.csv"));
  ASSERT_EQ(j["kernels"].size(), 2u);
  EXPECT_EQ(j["kernels"][0]["name"], "softmax_rows(const float *, float *, int, int)");
  EXPECT_EQ(j["kernels"][0]["instances"], 100);
  EXPECT_DOUBLE_EQ(j["kernels"][0]["avg_ns"].get<double>(), 17950.4);
  EXPECT_DOUBLE_EQ(j["kernels"][1]["time_pct"].get<double>(), 8.7);
  testing::ExpectError(ErrorKind::kParse, [] { ParseNsysKernelSummary("Name\nx\n"); });
}

// ---- the verdict table's profile line, profiler_data, unavailable entries ----

TEST(ProfileSummary, OneCompactLinePerSide) {
  ProcessResult hw;
  hw.output_data = ParsePerfStat(Data("perf_stat_hw_handwritten.csv"), 1000);
  (*hw.output_data)["hardware_counters"] = true;
  EXPECT_EQ(ProfileSummaryLine({{"perf.000", hw}}),
            "perf: IPC 1.47, cache-misses 2.81/kinstr, branch-misses 0.68/kinstr, page-faults 1.21/call, "
            "task-clock 0.413 ms/call, context-switches 0.037/call, 1000 calls");
  ProcessResult sw;
  sw.output_data = ParsePerfStat(Data("perf_stat_vm_software.csv"), 2000);
  (*sw.output_data)["hardware_counters"] = false;
  EXPECT_EQ(ProfileSummaryLine({{"perf.000", sw}}).rfind("perf (software events only): page-faults ", 0), 0u);
  ProcessResult ncu;
  ncu.output_data = ParseNcuCsv(Data("ncu_details_handwritten.csv"));
  ProcessResult gone = UnavailableTrace("nsys", "no CUDA device (x)");
  EXPECT_EQ(ProfileSummaryLine({{"ncu.000", ncu}, {"nsys.001", gone}}),
            "ncu: softmax_rows 17.9 us, occupancy 85%, DRAM 72%, L2 40%, SM 30% (longest of 2 kernels); "
            "nsys: not run (no CUDA device (x))");
  TestResult candidate;
  candidate.trace_results = {{"perf.000", hw}};
  EXPECT_EQ(ProfileTableLines(candidate, std::nullopt),
            (std::vector<std::string>{"profile candidate: " + ProfileSummaryLine({{"perf.000", hw}})}));
  EXPECT_TRUE(ProfileTableLines(TestResult{}, TestResult{}).empty());
}

TEST(ProfileSummary, ProfilerDataDropsRawReportsAndUnavailableEntriesHaveFiveKeys) {
  ProcessResult r;
  r.output_data = Json{{"tool", "ncu"}, {"kernels", Json::array()}, {"ncu_report.csv", "big"}};
  Json d = ProfilerDataFromTraces({{"ncu.000", r}, {"ncu.001", UnavailableTrace("ncu", "x")}});
  EXPECT_EQ(d, (Json{{"ncu", Json{{"tool", "ncu"}, {"kernels", Json::array()}}}}));
  Json encoded = UnavailableTrace("ncu", "no CUDA device (y)").Encode();
  EXPECT_EQ(encoded, Json::parse(R"J({"returncode": -1, "stdout": "", "stderr": "", "message":
      "profiler unavailable: no CUDA device (y)", "output_data": {"profiler": "ncu", "available": false, "reason": "no CUDA device (y)"}})J"));
}

TEST(ProfileAvailability, WhyAProfilerCannotRunHere) {
  EXPECT_EQ(*ProfilerUnavailableReason("gprof"), "unknown profiler 'gprof' (known: perf, ncu, nsys, unitrace, vtune)");
  EXPECT_TRUE(ProfilerUnavailableReason("vtune").has_value());
  if (!fs::exists("/dev/nvidia0") && !fs::exists("/proc/driver/nvidia/gpus")) {
    ASSERT_TRUE(NoCudaDeviceReason().has_value());
    EXPECT_EQ(ProfilerUnavailableReason("ncu")->rfind("no CUDA device", 0), 0u);
    EXPECT_EQ(ProfilerUnavailableReason("nsys")->rfind("no CUDA device", 0), 0u);
  }
}

// ---- perf's control FIFOs driven by kf::PerfControl, against a real perf stat ----

class PerfControlReal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = ProfilerUnavailableReason("perf")) GTEST_SKIP() << *why;
    ASSERT_EQ(::mkfifo((tmp_.path() / "ctl").c_str(), 0600), 0);
    ASSERT_EQ(::mkfifo((tmp_.path() / "ack").c_str(), 0600), 0);
  }
  // perf stat -D -1 over 1.5 s of a busy shell loop; `during` runs from here while perf waits for it.
  Json RunPerf(const std::function<void(PerfControl&)>& during) {
    ProcessOptions o;
    o.argv = PerfStatCommand("perf", {"task-clock", "page-faults"}, tmp_.path() / "out.csv", tmp_.path() / "ctl",
                             tmp_.path() / "ack", {}, {"timeout", "1.5", "sh", "-c", "while :; do :; done"});
    o.wall_timeout = std::chrono::milliseconds{20'000};
    std::thread t([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // perf has opened its FIFOs by then
      PerfControl c((tmp_.path() / "ctl").string(), (tmp_.path() / "ack").string(), 5000);
      during(c);
    });
    ProcessRun run = RunProcess(o);
    t.join();
    EXPECT_EQ(run.result.returncode, 124) << run.result.stderr_text;  // timeout's code: the loop ran 1.5 s
    return ParsePerfStat(ReadFile(tmp_.path() / "out.csv"), 1);
  }
  TempDir tmp_;
};

TEST_F(PerfControlReal, CountsOnlyBetweenEnableAndDisable) {
  bool enabled = false, disabled = false;
  Json j = RunPerf([&](PerfControl& c) {
    enabled = c.Enable();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    disabled = c.Disable();
  });
  EXPECT_TRUE(enabled);
  EXPECT_TRUE(disabled);
  ASSERT_EQ(j["counters"]["task-clock"]["status"], "counted") << j.dump();
  // One busy thread counted for ~0.2 s of its 1.5 s: at most the window (plus scheduling slack), not 1.5 s.
  const double ms = j["counters"]["task-clock"]["value"].get<double>();
  EXPECT_GT(ms, 0.0);
  EXPECT_LT(ms, 450.0) << j.dump();
}

TEST_F(PerfControlReal, NeverEnabledCountsNothing) {
  Json j = RunPerf([](PerfControl&) {});
  EXPECT_EQ(j["counters"]["task-clock"]["status"], "not counted") << j.dump();
}

TEST(PerfControl, InactiveWithoutFifosAndNeverBlocksWithoutPerf) {
  PerfControl none("", "");
  EXPECT_FALSE(none.active());
  EXPECT_FALSE(none.Enable());
  EXPECT_FALSE(static_cast<bool>(none.Hooks().timed_begin));
  TempDir tmp;
  ASSERT_EQ(::mkfifo((tmp.path() / "ctl").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((tmp.path() / "ack").c_str(), 0600), 0);
  PerfControl orphan((tmp.path() / "ctl").string(), (tmp.path() / "ack").string(), 200);
  EXPECT_TRUE(orphan.active());
  EXPECT_FALSE(orphan.Enable());  // no reader on the FIFO: ENXIO at once, no hang
  EXPECT_FALSE(orphan.active());
}

}  // namespace
}  // namespace kf
