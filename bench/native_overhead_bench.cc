// native_overhead_bench — what kf itself adds to a native evaluation (issue 15: "a native evaluation adds
// <= 50 ms beyond compiler and test-program time, and starts no Python process").
//
// Runs the real `kf run examples/tasks/omp_reduction --candidate examples/candidates/omp_reduction/fast.cpp
// --json OUT` as a process, `--runs` times (default 5, after one untimed warm-up), with the work dirs on the
// same disk. For each run:
//   kf overhead = the process's wall time - the sum of the evaluation's phase times (OUT's timings.phases:
//                 the candidate build = the compiler, every correctness/performance run = the test program),
// i.e. process start, loading the task, worker_info, materialising work dirs, scoring, writing the verdict.
// Both with --no-store and with a fresh SQLite database (--db). Every run goes through a KF_PYTHON shim that
// records each Python start; the count is printed (goal 0). Medians are printed with the goal line.
//
// Usage: native_overhead_bench [--runs N]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/files.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"
#include "bench_paths.hpp"

namespace fs = std::filesystem;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string ReadAll(const fs::path& p) { return kf::ReadFileBytes(p).value_or(""); }

fs::path KfBinary() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path("kf") : self.parent_path().parent_path() / "kf";
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Sample {
  double wall_s = 0, phases_s = 0;
  std::string status;
  double overhead() const { return wall_s - phases_s; }
};

// One `kf run`; wall measured around the process, phases read from its --json output.
Sample RunOnce(const std::string& env, const fs::path& task, const fs::path& candidate, const fs::path& out,
               const std::string& store) {
  std::error_code ec;
  fs::remove(out, ec);
  const std::string cmd = env + Quote(KfBinary().string()) + " run " + Quote(task.string()) + " --candidate " +
                          Quote(candidate.string()) + " --no-verdict-cache --json " + Quote(out.string()) + " " + store +
                          " >/dev/null 2>&1";
  const double t0 = Now();
  const int rc = std::system(cmd.c_str());
  Sample s;
  s.wall_s = Now() - t0;
  try {
    const kf::Json j = kf::ParseJson(ReadAll(out), out.string());
    s.status = j.value("status", std::string("?"));
    // A paired performance phase times both sides in one run and is listed twice ("performance custom …" and
    // "performance reference …", the same seconds): counted once.
    std::vector<double> custom_performance;
    for (const kf::Json& p : j.at("timings").at("phases")) {
      const std::string name = p.at("phase").get<std::string>();
      const double seconds = p.at("seconds").get<double>();
      if (name.rfind("performance custom", 0) == 0) custom_performance.push_back(seconds);
      const bool same_run = name.rfind("performance reference", 0) == 0 &&
                            std::find(custom_performance.begin(), custom_performance.end(), seconds) !=
                                custom_performance.end();
      if (!same_run) s.phases_s += seconds;
    }
  } catch (const std::exception& e) {
    s.status = std::string("no result (rc ") + std::to_string(rc) + "): " + e.what();
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
  const fs::path source = kf::bench::SourceDir();
  char tmpl[] = "/tmp/kf_overhead_bench_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const fs::path scratch = tmpl;
  fs::permissions(scratch, fs::perms(0711));  // the sandbox user (kf as root, issue 25) reaches the work dirs
  const fs::path task = scratch / "omp_reduction";
  fs::copy(source / "examples/tasks/omp_reduction", task, fs::copy_options::recursive);
  const fs::path candidate = source / "examples/candidates/omp_reduction/fast.cpp";
  const fs::path python_log = scratch / "python_starts.log";
  const fs::path shim = scratch / "python_shim.sh";
  std::ofstream(shim) << "#!/bin/sh\necho \"$@\" >> " << Quote(python_log.string()) << "\nexec /usr/bin/python3 \"$@\"\n";
  fs::permissions(shim, fs::perms(0755));
  fs::create_directories(scratch / "tmp");
  const std::string env = "TMPDIR=" + Quote((scratch / "tmp").string()) + " KF_CACHE_DIR=" +
                          Quote((scratch / "cache").string()) + " KF_PYTHON=" + Quote(shim.string()) + " ";

  std::printf("native_overhead_bench: kf run examples/tasks/omp_reduction + fast.cpp, %d runs (+1 warm-up)\n", runs);
  int rc = 0;
  for (const auto& [label, store_fn] :
       std::vector<std::pair<std::string, std::string>>{{"--no-store", "--no-store"}, {"--db (SQLite)", "db"}}) {
    std::vector<Sample> samples;
    for (int i = 0; i <= runs; ++i) {
      const std::string store =
          store_fn == "db" ? "--db " + Quote((scratch / ("kernels" + std::to_string(i) + ".sqlite3")).string())
                           : store_fn;
      Sample s = RunOnce(env, task, candidate, scratch / "out.json", store);
      if (s.status != "correct") {
        std::printf("  run %d: unexpected status %s\n", i, s.status.c_str());
        rc = 1;
      }
      if (i > 0) samples.push_back(s);  // run 0 is the warm-up
    }
    std::vector<double> wall, phases, overhead;
    std::printf("\n%s:\n  %-6s %10s %12s %14s\n", label.c_str(), "run", "wall", "phases", "kf overhead");
    for (size_t i = 0; i < samples.size(); ++i) {
      wall.push_back(samples[i].wall_s);
      phases.push_back(samples[i].phases_s);
      overhead.push_back(samples[i].overhead());
      std::printf("  %-6zu %8.1f ms %10.1f ms %12.1f ms\n", i + 1, samples[i].wall_s * 1e3, samples[i].phases_s * 1e3,
                  samples[i].overhead() * 1e3);
    }
    const double med = Median(overhead);
    std::printf("  median: wall %.1f ms, phases (compiler + test program) %.1f ms, kf overhead %.1f ms\n",
                Median(wall) * 1e3, Median(phases) * 1e3, med * 1e3);
    std::printf("  GOAL a native evaluation adds <= 50 ms beyond compiler and test-program time (%s): %.1f ms: %s\n",
                label.c_str(), med * 1e3, med <= 0.050 ? "met" : "NOT MET");
  }
  std::error_code ec;
  const bool any_python = fs::exists(python_log, ec);
  std::printf("\nPython processes started by %d native evaluations: %s (goal: none)\n", 2 * (runs + 1),
              any_python ? ReadAll(python_log).c_str() : "0");
  if (any_python) rc = 1;
  fs::remove_all(scratch, ec);
  return rc;
}
