// native_bench — the pipeline overhead of a native evaluation beside the same for the equivalent pytest task,
// in one run, as a ratio.
//
// The two tasks are the same problem with the same EVOLVE code: examples/tasks/omp_reduction (harness: native,
// a C++ test program built with the task SDK) and examples/tasks/omp_reduction_pytest (a torch C++ extension
// tested by pytest). Each is evaluated `--runs` times (default 3) with its starting code, candidate variant
// only, after one untimed warm-up evaluation (which fills the torch-extension build cache, so the pytest
// build is not a 30 s compile in the timed runs).
//
// Overhead of an evaluation = wall time of its test phases (correctness + performance, measured by the
// pipeline around each test process) minus the time the test program itself reports for those phases
// (pytest's "N passed in X.XXs"; the SDK's elapsed_ms, shown the same way). It is what the harness costs
// beyond running the tests: process start, interpreter and imports, plugin and collection, result transport.
// Medians over the runs are printed; ratio = pytest / native (higher = the native harness saves more).
//
// Usage: native_bench [--runs N]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/task.hpp"
#include "bench_paths.hpp"

namespace fs = std::filesystem;

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The "in X.XXs" of the last pytest-style summary line of a test log; -1 when there is none.
double ReportedSeconds(const std::string& out) {
  static const std::regex kSummary(R"(=+ .* in ([0-9]+(?:\.[0-9]+)?)s(?: \([^)]*\))? =+)");
  double s = -1;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), kSummary); it != std::sregex_iterator(); ++it) {
    s = std::stod((*it)[1].str());
  }
  return s;
}

struct Sample {
  double eval_s = 0, build_s = 0, tests_wall_s = 0, reported_s = 0;
  double overhead() const { return tests_wall_s - reported_s; }
};

struct Summary {
  std::string label;
  std::vector<Sample> samples;
  double Med(double Sample::*field) const {
    std::vector<double> v;
    for (const auto& s : samples) v.push_back(s.*field);
    return Median(v);
  }
  double MedOverhead() const {
    std::vector<double> v;
    for (const auto& s : samples) v.push_back(s.overhead());
    return Median(v);
  }
};

// Evaluates `task_dir`'s starting code `runs` times (+1 warm-up); throws std::runtime_error on a verdict other
// than correct (a broken bench must not print numbers).
Summary Measure(const std::string& label, const fs::path& task_dir, int runs) {
  kf::TaskCreateOptions co;
  co.kinds = kf::HarnessTaskKinds();  // native or pytest, as the package's config says (as kf run loads it)
  kf::Task task = kf::Task::Create(task_dir, co).first;
  kf::BlockUpdate candidate = kf::BlockUpdateShort{{"EVOLVE", task.blocks.at("EVOLVE").begin()->second.at(0)}};
  kf::EvaluateOptions eo;
  eo.test_reference = false;
  Summary out{label, {}};
  for (int i = 0; i <= runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    kf::Evaluation ev = kf::Evaluate(task, candidate, eo);
    double eval_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!ev.result.correctness) {  // no reference run, so the status is "no_reference"
      throw std::runtime_error(label + ": the starting code was not judged correct (" +
                               std::string(kf::EvalStatusName(ev.result.status)) + " " + ev.result.status_detail + ")");
    }
    if (i == 0) continue;  // warm-up
    Sample s;
    s.eval_s = eval_s;
    s.build_s = ev.build_s;
    for (const auto& t : ev.timings) {
      if (t.name.rfind("correctness ", 0) == 0 || t.name.rfind("performance ", 0) == 0) s.tests_wall_s += t.seconds;
    }
    for (const auto& log : ev.logs) {
      // Test runs only: a profiler pass ("test custom cpu profile perf.000") reports no time of its own.
      if (log.name.rfind("test ", 0) != 0 || log.name.find(" profile ") != std::string::npos) continue;
      double r = ReportedSeconds(log.result.stdout_text);
      if (r < 0) throw std::runtime_error(label + ": no self-reported time in the log of " + log.name);
      s.reported_s += r;
    }
    out.samples.push_back(s);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--runs N]\n", argv[0]);
      return 2;
    }
  }
  const fs::path examples = kf::bench::SourceDir() / "examples" / "tasks";
  try {
    Summary native = Measure("native (omp_reduction)", examples / "omp_reduction", runs);
    Summary pytest = Measure("pytest (omp_reduction_pytest)", examples / "omp_reduction_pytest", runs);
    std::printf("native vs pytest harness: the same reduction, starting code, candidate variant only; medians of %d "
                "run(s) after a warm-up\n", runs);
    std::printf("%-32s %10s %10s %12s %12s %12s\n", "harness", "eval s", "build s", "tests wall s", "reported s",
                "overhead s");
    for (const Summary* s : {&native, &pytest}) {
      std::printf("%-32s %10.3f %10.3f %12.3f %12.3f %12.3f\n", s->label.c_str(), s->Med(&Sample::eval_s),
                  s->Med(&Sample::build_s), s->Med(&Sample::tests_wall_s), s->Med(&Sample::reported_s),
                  s->MedOverhead());
    }
    const double n = native.MedOverhead(), p = pytest.MedOverhead();
    std::printf("pipeline overhead (tests wall - self-reported): pytest / native = %.1fx (%.3f s vs %.3f s)\n",
                n > 0 ? p / n : 0.0, p, n);
    std::printf("test phases wall time: pytest / native = %.1fx\n",
                pytest.Med(&Sample::tests_wall_s) / native.Med(&Sample::tests_wall_s));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "native_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
