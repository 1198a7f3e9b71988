// batch_bench — many candidates of one task: `kf run --candidates DIR -j N` (batch mode: verdict cache, copies
// run once, builds and correctness runs overlap, timed phases one at a time) against the same candidates
// through one `kf run --candidate F --no-verdict-cache` after another, each with an empty KF_CACHE_DIR and
// KF_TORCH_PCH=off (caches off: every run compiles, without a precompiled torch header). The batch starts from an
// empty cache too: its first builds request the precompiled header, which it builds once (counted in its time). Both store every verdict. Prints both wall times, their ratio, and each candidate's
// status on both sides (verdicts must agree; "correct" and "noisy" are both a correct, timed candidate).
//
// Candidates: `--distinct D` variants of examples/candidates/bias_relu (fast, identical, slow,
// three_temporaries, wrong_values, compile_error in turn; variant k is its base plus a comment naming k, so
// each one is a distinct build), each written `--copies C` times. Defaults 20 x 3 (issue 15); a full run takes
// hours on 2 cores (60 cold builds in the baseline), `--distinct 4 --copies 3` about half an hour.
//
// Usage: batch_bench [--distinct D] [--copies C] [-j N]      (defaults 20, 3, 2)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/files.hpp"
#include "kernelfoundry/json.hpp"
#include "bench_paths.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string ReadFile(const fs::path& p) { return kf::ReadFileBytes(p).value_or(""); }

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command with its output to `log`; returns the wall seconds it took.
double Timed(const std::string& cmd, const fs::path& log) {
  const Clock::time_point t0 = Clock::now();
  const int rc = std::system((cmd + " >>" + Quote(log.string()) + " 2>&1").c_str());
  (void)rc;  // a negative verdict exits 1: the statuses are compared from the JSON
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "correct" and "noisy" are one class here: a correct, timed candidate (the interval's width is noise).
std::string Class(const std::string& status) { return status == "noisy" ? "correct" : status; }

}  // namespace

int main(int argc, char** argv) {
  int distinct = 20, copies = 3, parallel = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--distinct") distinct = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--copies") copies = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "-j") parallel = std::max(1, std::atoi(argv[i + 1]));
  }
  const fs::path source = kf::bench::SourceDir();
  const fs::path kf = fs::canonical("/proc/self/exe").parent_path().parent_path() / "kf";
  const fs::path task = source / "examples" / "tasks" / "bias_relu";
  const fs::path work = fs::temp_directory_path() / ("kf_batch_bench_" + std::to_string(getpid()));
  const fs::path cands = work / "candidates";
  fs::create_directories(cands);
  const std::vector<std::string> bases = {"fast.cpp",          "identical.cpp",    "slow.cpp",
                                          "three_temporaries.cpp", "wrong_values.cpp", "compile_error.cpp"};
  std::vector<std::string> names;
  for (int k = 0; k < distinct; ++k) {
    const std::string& base = bases[static_cast<size_t>(k) % bases.size()];
    const std::string code = ReadFile(source / "examples" / "candidates" / "bias_relu" / base) +
                             "\n// batch_bench variant " + std::to_string(k) + "\n";
    for (int c = 0; c < copies; ++c) {
      char name[96];
      std::snprintf(name, sizeof name, "v%02d_copy%d_%s", k, c, base.c_str());
      std::ofstream(cands / name) << code;
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  std::printf("batch_bench: %zu candidates of bias_relu (%d distinct x %d copies), kf at %s\n", names.size(),
              distinct, copies, kf.c_str());
  std::fflush(stdout);
  const fs::path log = work / "kf.log";

  // Baseline: one kf run after another, caches off (an empty cache directory per run, no verdict cache).
  std::map<std::string, std::string> baseline;
  double baseline_s = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const fs::path json = work / ("one_" + std::to_string(i) + ".json");
    const fs::path cache = work / ("cache_one_" + std::to_string(i));
    baseline_s += Timed("KF_TORCH_PCH=off KF_CACHE_DIR=" + Quote(cache.string()) + " " + Quote(kf.string()) + " run " +
                            Quote(task.string()) + " --candidate " + Quote((cands / names[i]).string()) +
                            " --no-verdict-cache --db " + Quote((work / "one.sqlite3").string()) + " --json " +
                            Quote(json.string()),
                        log);
    std::error_code ec;
    fs::remove_all(cache, ec);
    const std::string text = fs::exists(json) ? ReadFile(json) : "";
    baseline[names[i]] = text.empty() ? "no verdict" : kf::ParseJson(text, json.string())["status"].get<std::string>();
    std::printf("  one by one %zu/%zu: %s %s (%.0f s so far)\n", i + 1, names.size(), names[i].c_str(),
                baseline[names[i]].c_str(), baseline_s);
    std::fflush(stdout);
  }

  // Batch mode from an empty cache directory.
  const fs::path batch_json = work / "batch.json";
  const double batch_s =
      Timed("KF_CACHE_DIR=" + Quote((work / "cache_batch").string()) + " " + Quote(kf.string()) + " run " +
                Quote(task.string()) + " --candidates " + Quote(cands.string()) + " -j " + std::to_string(parallel) +
                " --db " + Quote((work / "batch.sqlite3").string()) + " --json " + Quote(batch_json.string()),
            log);
  std::error_code ec;
  fs::remove_all(work / "cache_batch", ec);
  std::map<std::string, std::string> batch;
  if (fs::exists(batch_json)) {
    for (const kf::Json& e : kf::ParseJson(ReadFile(batch_json), batch_json.string())) {
      batch[fs::path(e["candidate"].get<std::string>()).filename().string()] = e["status"].get<std::string>();
    }
  }

  int agree = 0;
  std::printf("\n  %-40s %-22s %-22s\n", "candidate", "one by one", "batch");
  for (const std::string& n : names) {
    const std::string b = batch.count(n) ? batch[n] : "no verdict";
    const bool same = Class(baseline[n]) == Class(b);
    agree += same ? 1 : 0;
    std::printf("  %-40s %-22s %-22s%s\n", n.c_str(), baseline[n].c_str(), b.c_str(), same ? "" : "  DIFFERENT");
  }
  std::printf("\n  one kf run after another (caches off): %8.1f s\n", baseline_s);
  std::printf("  batch mode (-j %d, cold cache):        %8.1f s\n", parallel, batch_s);
  std::printf("  speedup of batch mode: %.2fx   verdicts agreeing: %d/%zu   (kf's output: %s)\n",
              baseline_s / batch_s, agree, names.size(), log.c_str());
  return 0;
}
