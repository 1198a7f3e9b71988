// warm_start_bench — what a pytest test phase costs with warm starts (test processes forked from kf's zygote,
// harness/warm_start.hpp) against cold starts (a fresh interpreter importing torch), in one run (issue 15:
// "each pytest phase costs <= 0.3 s beyond the test's own time").
//
// Task: examples/tasks/bias_relu (torch extension, built once and then served by the build cache) with the
// example candidate fast.cpp, the reference tested too, paired timing in one process with a 1 s budget. Each
// evaluation is run cold (KF_WARM_START=off) and warm, alternately, N times (default 5); the first warm
// evaluation, which starts the zygote, is reported apart. Prints the median wall seconds of every phase and of the
// whole evaluation, cold and warm, and the ratio. The correctness tests themselves take ~10-30 ms, so a
// correctness phase is nearly all start-up cost.
// With --changed every evaluation gets a distinct candidate (fast.cpp plus a comment naming it), so each one
// builds (the precompiled torch header, when the cache has one, is used on both sides): the "build custom" row
// is then the cold build of a changed candidate, in a fresh interpreter or forked from the warm build zygote.
// With --task DIR the task is DIR instead (e.g. one `kf import-kernelbench` wrote: its tests run the function under
// test in executor processes, which a warm test process forks from its fork server, kernelfoundry.fork_server)
// and the candidate is --candidate FILE, or without it the task's own EVOLVE block (an imported task's starting
// point).
// Usage: warm_start_bench [N] [--changed] [--task DIR [--candidate FILE]]
//        (KF_SOURCE_DIR: the repository, for examples/)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/files.hpp"
#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/task.hpp"
#include "bench_paths.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

fs::path SourceDir() {
  if (const char* env = std::getenv("KF_SOURCE_DIR")) return env;
  return kf::bench::SourceDir();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// {phase name or "total": wall seconds} of one evaluation.
std::map<std::string, double> EvaluateOnce(const kf::Task& task, const std::string& candidate, const fs::path& work,
                                           bool warm, std::string* status) {
  ::setenv("KF_WARM_START", warm ? "on" : "off", 1);
  kf::EvaluateOptions o;
  o.work_root = work;
  const auto t0 = Clock::now();
  kf::Evaluation ev = kf::Evaluate(task, kf::BlockUpdate{kf::BlockUpdateShort{{"EVOLVE", candidate}}}, o);
  std::map<std::string, double> out;
  out["total"] = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const auto& t : ev.timings) out[t.name] += t.seconds;
  *status = std::string(kf::EvalStatusName(ev.result.status));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 5;
  bool changed = false;
  const fs::path examples = SourceDir() / "examples";
  fs::path task_dir = examples / "tasks" / "bias_relu";
  fs::path candidate_file = examples / "candidates" / "bias_relu" / "fast.cpp";
  bool task_given = false, candidate_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--changed") {
      changed = true;
    } else if (a == "--task" && i + 1 < argc) {
      task_dir = argv[++i];
      task_given = true;
    } else if (a == "--candidate" && i + 1 < argc) {
      candidate_file = argv[++i];
      candidate_given = true;
    } else {
      n = std::max(1, std::atoi(argv[i]));
    }
  }
  const bool own_block = task_given && !candidate_given;
  const fs::path work = fs::temp_directory_path() / ("kf_warm_start_bench_" + std::to_string(::getpid()));
  fs::create_directories(work);
  kf::TaskCreateOptions co;
  co.kinds = kf::HarnessTaskKinds();
  kf::Task task = kf::Task::Create(task_dir, co).first;
  kf::Json config = task.config;
  config["eval_config"]["timing"] = kf::Json{{"processes", 1}, {"budget_s", 1.0}};
  task.ApplyConfig(config);
  std::string candidate;
  if (own_block) {
    const kf::BlockMap& evolve = task.blocks.at("EVOLVE");
    candidate = evolve.begin()->second.at(0);
  } else {
    candidate = kf::ReadFileBytes(candidate_file).value_or("");
  }
  std::string status;
  int variant = 0;
  // The candidate of the next evaluation: always fast.cpp, or (--changed) a distinct copy that must be built.
  auto next = [&] {
    return changed ? candidate + "\n// warm_start_bench variant " + std::to_string(::getpid()) + "-" +
                         std::to_string(++variant) + "\n"
                   : candidate;
  };
  std::printf("warm_start_bench: %s, %s%s, %d cold and %d warm evaluations (alternating)\n",
              task_dir.filename().c_str(), own_block ? "its EVOLVE block" : candidate_file.filename().c_str(),
              changed ? " (a changed copy each time: every evaluation builds)" : "", n, n);
  EvaluateOnce(task, next(), work, false, &status);  // the build (then cached) and the OS file cache
  const auto first_warm = EvaluateOnce(task, next(), work, true, &status);  // starts the zygotes
  std::map<std::string, std::vector<double>> cold, warm;
  for (int i = 0; i < n; ++i) {
    for (const auto& [k, v] : EvaluateOnce(task, next(), work, false, &status)) cold[k].push_back(v);
    std::printf("  cold %d: %s\n", i + 1, status.c_str());
    for (const auto& [k, v] : EvaluateOnce(task, next(), work, true, &status)) warm[k].push_back(v);
    std::printf("  warm %d: %s\n", i + 1, status.c_str());
  }
  std::printf("\n  %-34s %9s %9s %9s %12s\n", "phase (median wall s)", "cold", "warm", "warm/cold", "first warm");
  for (const auto& [k, v] : cold) {
    const double c = Median(v), w = Median(warm[k]);
    const double f = first_warm.count(k) ? first_warm.at(k) : 0;
    std::printf("  %-34s %9.3f %9.3f %9.3f %12.3f\n", k.c_str(), c, w, c > 0 ? w / c : 0.0, f);
  }
  std::printf("\n  goal: a correctness phase (tests of ~10-30 ms) <= 0.3 s warm\n");
  ::unsetenv("KF_WARM_START");
  std::error_code ec;
  fs::remove_all(work, ec);
  return 0;
}
