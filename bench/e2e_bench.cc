// e2e_bench — wall time of one evaluation of relu_cpu (the `kf run` pipeline: create, build, tests) per
// phase, beside the reference's times on a machine like ours (golden e2e_relu_cpu.json, timings_s medians:
// create 3.4 s, build 26 s, tests 48.6 s), and a second run of the identical candidate (the compiled
// extension comes from the build cache) as a ratio of the first.
//
// The first run uses a fresh, empty cache (KF_CACHE_DIR in a temp dir), so it compiles like the reference.
// Usage: e2e_bench [--keep-cache]      (KF_SHARED_DIR overrides the fixtures location)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "core/files.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/pytest_collect.hpp"
#include "kernelfoundry/task.hpp"
#include "bench_paths.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

fs::path SharedDir() {
  if (const char* env = std::getenv("KF_SHARED_DIR")) return env;
  return fs::weakly_canonical(kf::bench::SharedDir());
}

kf::Json ReadJson(const fs::path& p) {
  return kf::ParseJson(kf::ReadFileBytes(p).value_or(""), p.string());
}

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double PhaseSum(const kf::Evaluation& ev, const std::string& prefix) {
  double s = 0;
  for (const auto& t : ev.timings) {
    if (t.name.rfind(prefix, 0) == 0) s += t.seconds;
  }
  return s;
}

void Row(const char* name, double reference, double ours) {
  if (reference > 0) {
    std::printf("  %-26s %10.2f %10.2f %9.3f\n", name, reference, ours, ours / reference);
  } else {
    std::printf("  %-26s %10s %10.2f %9s\n", name, "-", ours, "-");
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool keep_cache = argc > 1 && std::string(argv[1]) == "--keep-cache";
  fs::path tmp = fs::temp_directory_path() / ("kf_e2e_bench_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  fs::path task_dir = tmp / "relu_cpu";
  fs::copy(SharedDir() / "fixtures" / "tasks" / "relu_cpu", task_dir, fs::copy_options::recursive);
  for (auto& e : fs::recursive_directory_iterator(task_dir)) {
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  ::setenv("KF_CACHE_DIR", (tmp / "cache").c_str(), 1);

  kf::Json golden = ReadJson(SharedDir() / "fixtures" / "golden" / "e2e_relu_cpu.json")["timings_s"];
  auto ref = [&](const char* key) { return golden[key]["median"].get<double>(); };

  int rc = 0;
  try {
    Clock::time_point t0 = Clock::now();
    kf::TaskCreateOptions co;
    co.collector = kf::PytestCollector();
    co.use_cache = false;  // the reference collects every time
    kf::Task task = kf::Task::Create(task_dir, co).first;
    double create_s = Seconds(t0);

    std::string code = task.blocks.at("EVOLVE").begin()->second.at(0);
    kf::BlockUpdate candidate = kf::BlockUpdateShort{{"EVOLVE", code}};
    kf::EvaluateOptions eo;
    Clock::time_point t1 = Clock::now();
    kf::Evaluation first = kf::Evaluate(task, candidate, eo);
    double first_s = Seconds(t1);
    Clock::time_point t2 = Clock::now();
    kf::Evaluation second = kf::Evaluate(task, candidate, eo);
    double second_s = Seconds(t2);

    double ref_total = ref("create") + ref("build_total") + ref("test_total");
    std::printf("e2e relu_cpu: first run with an empty build cache; ratio = ours / reference (lower is better)\n");
    std::printf("  %-26s %10s %10s %9s\n", "phase", "ref s", "ours s", "ratio");
    Row("create (collect tests)", ref("create"), create_s);
    Row("build (candidate)", ref("build_total"), first.build_s);
    Row("tests (all)", ref("test_total"), first.test_s);
    Row("  correctness custom", ref("correctness_custom"), PhaseSum(first, "correctness custom"));
    Row("  performance custom", ref("performance_custom"), PhaseSum(first, "performance custom"));
    Row("  correctness reference", ref("correctness_reference"), PhaseSum(first, "correctness reference"));
    Row("  performance reference", ref("performance_reference"), PhaseSum(first, "performance reference"));
    Row("total", ref_total, create_s + first_s);
    std::printf("second run of the identical candidate (build cache warm), ratio = second / first run:\n");
    std::printf("  %-26s %10s %10s %9s\n", "phase", "first s", "second s", "ratio");
    Row("build (candidate)", first.build_s, second.build_s);
    Row("tests (all)", first.test_s, second.test_s);
    Row("evaluation total", first_s, second_s);
    std::printf("second run vs the reference's full run: %.3f\n", second_s / ref_total);
    std::printf("verdicts: first %s perf %d speedup %.3f; second %s perf %d speedup %.3f\n",
                std::string(kf::EvalStatusName(first.result.status)).c_str(), first.result.perf_score,
                first.result.runtime_improvement, std::string(kf::EvalStatusName(second.result.status)).c_str(),
                second.result.perf_score, second.result.runtime_improvement);
    if (first.result.perf_score != 5 || second.result.perf_score != 5) rc = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "e2e_bench: %s\n", e.what());
    rc = 1;
  }
  std::error_code ec;
  if (!keep_cache) fs::remove_all(tmp, ec);
  return rc;
}
