#include "serve/demo_db.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "kernelfoundry/error.hpp"

namespace kf::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kNotFound, "cannot read", path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The text between the EVOLVE markers' lines of an example kernel file (the whole file when it has none).
std::string EvolveBlock(const std::string& text) {
  auto start = text.find("[EVOLVE_START]");
  auto end = text.find("[EVOLVE_END]");
  if (start == std::string::npos || end == std::string::npos) return text;
  start = text.find('\n', start) + 1;
  end = text.rfind('\n', end) + 1;
  return text.substr(start, end - start);
}

struct DemoTask {
  std::string name;
  std::string input;                    // the task's EVOLVE block
  std::vector<std::string> candidates;  // candidate EVOLVE contents
};

const char* const kStatuses[] = {"correct", "value_mismatch", "correct", "build_error", "correct", "crash",
                                 "correct", "timeout", "correct", "correct"};

std::string ReferenceStatus(const std::string& s) {
  if (s == "correct") return "correct";
  if (s == "build_error") return "error";
  return "compiled";
}

int Score(const std::string& s) {
  if (s == "correct") return 5;
  if (s == "build_error") return 1;
  if (s == "value_mismatch") return 4;
  return 2;
}

int64_t AddKernel(Store& store, const DemoTask& t, const std::string& task_id, const std::string& status,
                  const std::string& code, double speedup, int n, const std::string& extra_log) {
  int64_t job = store.CreateJob("custom", Json{{"task", t.name}});
  (void)store.UpdateJob(job, {.status = JobStatus::kRun, .task_id = task_id, .started = true});
  const std::string uuid = fmt::format("00000000-0000-4000-8000-{:012d}", n);
  const bool ok = status == "correct";
  Json stats = nullptr;
  double runtime = -1;
  if (ok) {
    const double ref_ms = 2.0 + 0.01 * (n % 7);
    runtime = ref_ms / speedup;
    stats = Json{{"bench_sum", {{"mean", runtime}, {"std", runtime * 0.02}, {"min", runtime * 0.97},
                                {"max", runtime * 1.05}, {"median", runtime}, {"speedup", speedup},
                                {"ref_speed", ref_ms}, {"num_trials", 20}}}};
  }
  const std::string detail = ok ? "" : fmt::format(" (demo {} #{})", status, n);
  const std::string log = "kf status: " + status + detail + "\n" +
                          (ok ? "all tests passed\n" : "\x1b[31mFAILED\x1b[0m test_correctness\n") + extra_log;
  int64_t id = store.InsertKernel({{"uuid", uuid},
                                   {"task_name", t.name},
                                   {"job_name", "demo"},
                                   {"input_code", t.input},
                                   {"input_language", "cpp"},
                                   {"output_code", code},
                                   {"output_language", "cpp"},
                                   {"status", ReferenceStatus(status)},
                                   {"runtime", runtime},
                                   {"runtime_stats", stats},
                                   {"improve_over_native", ok ? speedup : -1.0},
                                   {"improve_over_compile", -1.0},
                                   {"score", Score(status)},
                                   {"eval_log", log},
                                   {"kf_status", status},
                                   {"gpu_arch", "cpu"},
                                   {"task_id", task_id},
                                   {"job_id", job}});
  std::string build = "\x1b[1m[1/2]\x1b[0m Building CXX object kernel.o\n";
  if (status == "build_error") build += "kernel.cpp:3:1: \x1b[1;31merror:\x1b[0m expected ';'\n";
  for (int i = 0; i < 300 && n % 25 == 0; ++i) build += fmt::format("warning line {}\n", i);  // long, folded
  // job_logs rows as the reference writes them (kf::RawProcessLog): the name in message, the text in extra.
  auto raw = [&](const std::string& name, int returncode, const std::string& out, const Json& output_data) {
    return JobLog{.job_id = job, .hostname = "demo-host", .kernel_uuid = uuid, .level = "RAW", .message = name,
                  .extra = Json{{"log", fmt::format("Return code: {}\n------ Standard Output ------\n{}\n", returncode,
                                                    out)},
                                {"output_data", output_data},
                                {"worker_info", {{"hostname", "demo-host"}}},
                                {"trial", 0},
                                {"version", 0}}};
  };
  std::vector<JobLog> logs = {raw("build", status == "build_error" ? 1 : 0, build + extra_log, nullptr)};
  if (status != "build_error") {
    logs.push_back(raw("test_custom_correctness", ok ? 0 : 1,
                       ok ? "\x1b[32m2 passed\x1b[0m in 0.4s\n" : "\x1b[31m1 failed\x1b[0m, 1 passed\n",
                       ok ? Json{{"runtimes", {{"bench_sum", {runtime, runtime * 1.01}}}}} : Json(nullptr)));
  }
  store.InsertJobLogs(logs);
  (void)store.UpdateJob(job, {.status = JobStatus::kComplete});
  return id;
}

}  // namespace

DemoDb FillDemoDb(Store& store, const std::string& source_dir, int evaluations, bool hostile) {
  const std::string ex = source_dir + "/examples";
  std::vector<DemoTask> tasks = {
      {"omp_reduction", EvolveBlock(ReadFile(ex + "/tasks/omp_reduction/reduce_kernel.cpp")),
       {ReadFile(ex + "/candidates/omp_reduction/fast.cpp"), ReadFile(ex + "/candidates/omp_reduction/wrong.cpp")}},
      {"row_softmax", EvolveBlock(ReadFile(ex + "/tasks/row_softmax/softmax_kernel.cpp")),
       {ReadFile(ex + "/candidates/row_softmax/fast.cpp"), ReadFile(ex + "/candidates/row_softmax/unstable.cpp")}}};
  DemoDb db;
  for (const auto& t : tasks) {
    store.InsertTask({{"id", "demo-" + t.name}, {"task_name", t.name}, {"task_origin", "custom"},
                      {"has_build_step", true}, {"evolve_block", t.input}});
    db.tasks.push_back(t.name);
  }
  for (int n = 0; n < evaluations; ++n) {
    const DemoTask& t = tasks[n % 3 == 2 ? 1 : 0];
    const std::string status = kStatuses[n % 10];
    // A noisy upward trend: 0.8x at the start to about 4x at the end.
    const double speedup = 0.8 * std::pow(5.0, static_cast<double>(n) / std::max(1, evaluations - 1)) *
                           (1.0 + 0.15 * std::sin(n * 1.7));
    std::string code = t.candidates[n % 2] + fmt::format("// variant {}\n", n);
    db.kernel_ids.push_back(AddKernel(store, t, "demo-" + t.name, status, code, speedup, n, ""));
    ++db.per_status[status];
  }
  if (hostile) {
    DemoTask t{"hostile " + kHostile, "int x;\n", {}};
    store.InsertTask({{"id", "demo-hostile"}, {"task_name", t.name}, {"task_origin", "custom"}, {"has_build_step", true}});
    db.hostile_task = t.name;
    db.hostile_id = AddKernel(store, t, "demo-hostile", "correct", "// " + kHostile + "\nint x = 1;\n", 1.5,
                              evaluations, kHostile + "\n");
    db.kernel_ids.push_back(db.hostile_id);
    db.tasks.push_back(t.name);
  }
  return db;
}

}  // namespace kf::testing
