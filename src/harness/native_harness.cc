// The native harness (`harness: native`): C++/OpenMP, OpenCL and CUDA tasks whose test program is built by
// the task's own commands and speaks the SDK protocol (include/kernelfoundry/sdk/task_sdk.hpp) — no Python in
// the loop. Build: config `build: [cmd, ...]` (each through /bin/sh -x, `set -e`) or `cmake: true`, with
// KF_DEFINES / KF_GPU_ARCH / KF_NVCC / KF_NVCC_ARCH / KF_INCLUDE_DIR / KF_SDK_SOURCES (the SDK's .cc files) /
// KF_SDK_LINK (the SDK compiled once, else those sources) / KF_BUILD_TARGET in the
// environment; the expanded command lines are recorded in output_data {"commands": [...]}. Artifacts: config
// `test_executable` (and `executor_executable`, the candidate's own program when the task declares its kernels
// with KF_REMOTE, kernelfoundry/sdk/remote.hpp) plus `artifacts: [...]`. Test: the program runs twice (correctness, then performance) and
// hands back one JSON document through a result pipe (ProcessOptions::result_pipe), never a file.
#include "harness/native_harness.hpp"

#include <fmt/format.h>

#include "harness/harness_internal.hpp"
#include "harness/native_protocol.hpp"
#include "harness/test_report.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/resources.hpp"

namespace kf {
namespace fs = std::filesystem;
using namespace harness_internal;

namespace {

class NativeHarness final : public Harness {
 public:
  explicit NativeHarness(Json config) : config_(std::move(config)) {}
  std::string_view Name() const override { return "native"; }
  BuildRun Build(const BuildRequest& req) const override {
    BuildRun out;
    std::vector<std::string> commands;
    std::vector<std::string> defines;
    TaskSdk sdk;
    try {
      sdk = FindTaskSdk();
      defines = native::BuildtimeDefines(req.hyperparameters);
      commands = BuildCommands(defines);
    } catch (const Error& e) {
      ProcessResult r;
      r.returncode = -1;
      r.message = std::string("Build failed with error: ") + e.what();
      out.result.result = r;
      return out;
    }
    std::string script = "set -e\n";
    for (const auto& c : commands) script += c + "\n";
    ProcessOptions o = BuildProcessOptions(req);
    o.argv = {"/bin/sh", "-xc", script};
    std::string joined;
    for (const auto& d : defines) joined += (joined.empty() ? "" : " ") + d;
    o.env_add["KF_DEFINES"] = joined;
    o.env_add["KF_GPU_ARCH"] = req.gpu_arch;
    o.env_add["KF_NVCC_ARCH"] = native::NvccArchFlag(req.gpu_arch);
    o.env_add["KF_NVCC"] = native::FindNvcc();
    o.env_add["KF_INCLUDE_DIR"] = sdk.include_dir.string();
    o.env_add["KF_SDK_SOURCES"] = sdk.SourceFiles();  // as documented since the SDK existed: compile these
    o.env_add["KF_SDK_LINK"] = sdk.LinkInputs();      // or link this: the same code, compiled once
    o.env_add["KF_BUILD_TARGET"] = BuildTargetName(req.target);
    ProcessRun run = RunProcess(o);
    out.reason = run.reason;
    out.wall_s = run.wall_seconds;
    ProcessResult r = run.result;
    // The expanded command lines (sh -x traces them to stderr as "+ cmd").
    Json executed = Json::array();
    size_t pos = 0;
    const std::string& err = r.stderr_text;
    while (pos < err.size()) {
      size_t nl = err.find('\n', pos);
      std::string line = err.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      if (line.rfind("+ ", 0) == 0 && line != "+ set -e") executed.push_back(line.substr(2));
      pos = nl == std::string::npos ? err.size() : nl + 1;
    }
    r.output_data = Json{{"commands", executed}};
    if (run.reason != TerminationReason::kExited || r.returncode != 0) {
      r.message = JoinNotes(r.message, "Build failed with non-zero return code");
      out.result.result = std::move(r);
      return out;
    }
    std::vector<std::string> paths = {TestExecutable()};
    if (auto executor = ExecutorExecutable()) paths.push_back(*executor);
    if (config_.contains("artifacts") && config_["artifacts"].is_array()) {
      for (const Json& a : config_["artifacts"]) {
        if (a.is_string()) paths.push_back(a.get<std::string>());
      }
    }
    try {
      out.result.artifacts = CollectArtifacts(req.task_dir, paths);
    } catch (const Error& e) {
      r.returncode = -1;
      r.message = std::string("Build failed with error: ") + e.what();
      out.result.result = std::move(r);
      return out;
    }
    r.message = "Build completed successfully";
    out.result.result = std::move(r);
    return out;
  }

  PhaseRun Correctness(const TestRequest& req) const override { return RunPhase(req, "correctness"); }

  PhaseRun Performance(const TestRequest& req) const override { return RunPhase(req, "performance"); }

  // Profiler passes (kernelfoundry/profile.hpp): the test program's performance selection for one variant.
  std::optional<ProcessOptions> ProfileCommand(const TestRequest& req) const override {
    return TestCommand(req, "performance", /*paired=*/false);
  }

 private:
  std::string TestExecutable() const {
    if (config_.contains("test_executable") && config_["test_executable"].is_string()) {
      return config_["test_executable"].get<std::string>();
    }
    return "build/test_kernel";
  }

  // config `executor_executable`: the program that runs the candidate's KF_REMOTE functions
  // (kernelfoundry/sdk/remote.hpp), given to the test program as --kf-executor; none for a single-program task.
  std::optional<std::string> ExecutorExecutable() const {
    if (config_.contains("executor_executable") && config_["executor_executable"].is_string()) {
      return config_["executor_executable"].get<std::string>();
    }
    return std::nullopt;
  }

  std::vector<std::string> BuildCommands(const std::vector<std::string>& defines) const {
    std::vector<std::string> cmds;
    if (config_.contains("cmake") && config_["cmake"].is_boolean() && config_["cmake"].get<bool>()) {
      std::string configure = "cmake -S . -B build -DKF_GPU_ARCH=\"$KF_GPU_ARCH\"";
      for (const auto& d : defines) configure += " " + d;
      cmds.push_back(configure);
      cmds.push_back("cmake --build build");
    }
    if (config_.contains("build")) {
      const Json& b = config_["build"];
      if (b.is_string()) {
        cmds.push_back(b.get<std::string>());
      } else if (b.is_array()) {
        for (const Json& c : b) {
          if (!c.is_string()) {
            throw Error(ErrorKind::kInvalidArgument, "expected a list of shell commands", "config.yaml", "build");
          }
          cmds.push_back(c.get<std::string>());
        }
      } else {
        throw Error(ErrorKind::kInvalidArgument, "expected a list of shell commands", "config.yaml", "build");
      }
    }
    if (cmds.empty()) {
      throw Error(ErrorKind::kInvalidArgument, "a native task needs `build: [commands]` or `cmake: true`",
                  "config.yaml", "build");
    }
    return cmds;
  }

  // The test program's command for `select` (correctness | performance) of req's variant (paired: both
  // sides in one process, --kf-paired with req.timing_options).
  ProcessOptions TestCommand(const TestRequest& req, const char* select, bool paired) const {
    ProcessOptions o = TestProcessOptions(req);
    o.argv = {(req.task_dir / TestExecutable()).string(), "--kf-run", std::string("--kf-select=") + select};
    if (paired) {
      o.argv.push_back("--kf-paired");
      o.argv.push_back("--kf-paired-options=" + DumpJson(req.timing_options));
    } else if (req.variant.reference) {
      o.argv.push_back("--kf-ref");
    }
    if (req.runtime_params.is_object() && !req.runtime_params.empty()) {
      o.argv.push_back("--kf-runtime-params=" + DumpJson(req.runtime_params));
    }
    if (auto executor = ExecutorExecutable()) o.argv.push_back("--kf-executor=" + (req.task_dir / *executor).string());
    o.argv.push_back("--kf-result-fd=" + std::to_string(ProcessOptions::kResultFd));
    return o;
  }

  // Runs the test program for `select` (correctness | performance) and judges it from its result document.
  PhaseRun RunPhase(const TestRequest& req, const char* select) const {
    const std::string exe = TestExecutable();
    const bool paired = std::string_view(select) == "performance" && req.paired_with.has_value();
    ProcessOptions o = TestCommand(req, select, paired);
    ProcessRun run = RunProcess(o);
    PhaseRun out;
    out.result = run.result;
    out.reason = run.reason;
    out.wall_s = run.wall_seconds;
    std::string problem;
    std::optional<TestReport> report = ReadTestReport(run, &problem);
    out.verdict = JudgeTestRun(run, report, problem, req.expected_tests, ExitCodes::kNative);
    if (report) {
      // For the wire: the pytest-shaped lines the reference's scoring reads, and the failures' messages.
      out.result.stdout_text +=
          native::PytestStyleReport(*report, fs::path(exe).filename().string(), run.wall_seconds);
      for (const auto& t : report->tests) {
        if ((t.status == "failed" || t.status == "error") && !t.message.empty()) {
          out.result.stderr_text += t.name + ": " + t.message + "\n";
        }
      }
      if (report->skipped_reason) out.result.message = JoinNotes(out.result.message, "skipped: " + *report->skipped_reason);
      if (std::string_view(select) == "performance") {
        JudgePerformanceRun(*report, req.expected_tests, paired, [](const std::string& n) { return n; }, &out);
      }
    }
    if (report) AttachBuildError(*report, &out.result);
    MarkFailureForWire(out.verdict, &out.result);
    return out;
  }

  Json config_;
};

}  // namespace

std::unique_ptr<Harness> MakeNativeHarness(const Json& config) { return std::make_unique<NativeHarness>(config); }

}  // namespace kf
