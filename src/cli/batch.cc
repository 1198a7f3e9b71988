// Many candidates of one task (batch.hpp).
#include "cli/batch.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"
#include "cli/run_common.hpp"
#include "cli/text_table.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/store.hpp"
#include "kernelfoundry/verdict.hpp"

namespace kf::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Outcome {
  std::string candidate;
  bool evaluated = false;
  std::string status;  // EvalStatusName, or "error"
  int perf_score = -1;
  double speedup = -1;  // runtime_improvement (geometric mean over benchmarks)
  double ci_low = -1, ci_high = -1;  // the first benchmark's paired interval, when there is one benchmark
  double runtime_ms = -1;
  bool correct = false;
  std::optional<RecordedRun> recorded;
  bool cached = false;  // the verdict came from the verdict cache
  std::string error;
  double seconds = 0;
};

std::string Duration(double s) {
  if (s < 0) return "?";
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return fmt::format("{}h{:02d}m", static_cast<int>(s) / 3600, (static_cast<int>(s) % 3600) / 60);
}

// The progress line: one updating line on a terminal, one line per change otherwise.
class Progress {
 public:
  Progress(std::string verb, size_t total)
      : verb_(std::move(verb)), total_(total), t0_(Clock::now()), tty_(::isatty(2) != 0) {}
  void Start() {
    std::lock_guard<std::mutex> lock(mu_);
    ++running_;
    PrintLocked();
  }
  void Done(bool evaluated) {
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
    ++done_;
    if (!evaluated) ++failed_;
    PrintLocked();
  }
  void Finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  void PrintLocked() {
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0_).count();
    const size_t queued = total_ - done_ - running_;
    const double eta = done_ > 0 ? elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_) : -1;
    const std::string line =
        fmt::format("{}: done {}/{}, running {}, queued {}, failed {}, elapsed {}, ETA {}", verb_, done_, total_,
                    running_, queued, failed_, Duration(elapsed), done_ == total_ ? "0s" : Duration(eta));
    std::fprintf(stderr, tty_ ? "\r%s\033[K" : "%s\n", line.c_str());
    std::fflush(stderr);
  }

  std::mutex mu_;
  std::string verb_;
  size_t total_, done_ = 0, running_ = 0, failed_ = 0;
  Clock::time_point t0_;
  bool tty_;
};

void Fill(Outcome& out, const Evaluation& ev) {
  out.evaluated = true;
  out.status = std::string(EvalStatusName(ev.result.status));
  out.perf_score = ev.result.perf_score;
  out.speedup = ev.result.runtime_improvement;
  out.runtime_ms = ev.result.runtime;
  out.correct = IsCorrectVerdict(ev.result);
  out.cached = !ev.cached.is_null();
  if (ev.result.benchmarks.size() == 1 && ev.result.benchmarks.front().paired) {
    out.ci_low = ev.result.benchmarks.front().speedup_ci_low;
    out.ci_high = ev.result.benchmarks.front().speedup_ci_high;
  }
}

// The verdict of a copy of a candidate evaluated earlier in this batch: `first`'s evaluation, whose `cached`
// already names its job and time, without the first's kept work dirs.
Evaluation BatchReuse(const Evaluation& first) {
  Evaluation ev = first;
  ev.kept_dirs.clear();
  return ev;
}

// Fastest correct first, then the other verdicts (by speedup where there is one), then candidates with no
// verdict; ties keep the input order.
void SortBySpeedup(std::vector<Outcome>& outcomes) {
  auto rank = [](const Outcome& o) { return o.correct ? 0 : o.evaluated ? 1 : 2; };
  std::stable_sort(outcomes.begin(), outcomes.end(), [&](const Outcome& a, const Outcome& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return a.speedup > b.speedup;
  });
}

std::string SpeedupCell(const Outcome& o) {
  if (o.speedup <= 0) return "-";
  if (o.ci_low > 0 && o.ci_high > 0) return fmt::format("{:.3f}x [{:.3f}, {:.3f}]", o.speedup, o.ci_low, o.ci_high);
  return fmt::format("{:.3f}x", o.speedup);
}

}  // namespace

std::vector<std::string> ExpandCandidates(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    std::error_code ec;
    if (fs::is_directory(a, ec)) {
      std::vector<std::string> files;
      for (const auto& entry : fs::directory_iterator(a, ec)) {
        if (entry.is_regular_file()) files.push_back(entry.path().string());
      }
      std::sort(files.begin(), files.end());
      out.insert(out.end(), files.begin(), files.end());
    } else if (fs::is_regular_file(a, ec)) {
      out.push_back(a);
    } else {
      throw Error(ErrorKind::kNotFound, "no such candidate file or directory", a, "--candidates");
    }
  }
  if (out.empty()) throw Error(ErrorKind::kInvalidArgument, "no candidate files", "", "--candidates");
  return out;
}

int RunBatch(const Task& task, const std::vector<std::string>& files, const BatchOptions& o) {
  // Every file is read first: an unreadable one stops the batch before anything ran.
  std::vector<std::string> codes;
  codes.reserve(files.size());
  for (const std::string& f : files) codes.push_back(ReadInput(f));

  // Copies of one candidate (same content): with the verdict cache on, the first is evaluated and the copies,
  // queued after every first occurrence, wait for it and then find its verdict in the cache, or reuse a noisy
  // one from memory (below); any other verdict that is not cacheable (a timeout, a lost worker) is measured
  // again.
  const bool use_cache = o.verdict_cache && o.evaluate.runner == nullptr;
  std::vector<size_t> first_of(files.size()), order;
  std::map<std::string, size_t> first_index;
  for (size_t i = 0; i < files.size(); ++i) first_of[i] = first_index.emplace(codes[i], i).first->second;
  for (size_t i = 0; i < files.size(); ++i) {
    if (first_of[i] == i) order.push_back(i);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (first_of[i] != i) order.push_back(i);
  }
  std::mutex finished_mu;
  std::condition_variable finished_cv;
  std::vector<char> finished(files.size(), 0);
  // A first occurrence whose verdict is `noisy` (correct and measured, its interval wider than the target) is
  // not stored in the verdict cache: a later run may be quieter. Its copies in this batch reuse it all the same,
  // as they would a cached verdict: measured at the same time, on the same machine, under the same conditions,
  // a second measurement is no better than the first (BatchReuse).
  std::vector<std::optional<Evaluation>> noisy_first(files.size());

  std::vector<Outcome> outcomes(files.size());
  std::atomic<size_t> next{0};
  Progress progress(o.verb, files.size());
  auto work = [&] {
    while (true) {
      const size_t at = next++;
      if (at >= order.size()) return;
      const size_t i = order[at];
      Outcome& out = outcomes[i];
      out.candidate = files[i];
      progress.Start();
      const Clock::time_point t0 = Clock::now();
      if (use_cache && first_of[i] != i) {
        std::unique_lock<std::mutex> lock(finished_mu);
        finished_cv.wait(lock, [&] { return finished[first_of[i]] != 0; });
      }
      try {
        const std::optional<BlockUpdate> candidate = BlockUpdate{BlockUpdateShort{{"EVOLVE", codes[i]}}};
        std::optional<Evaluation> reuse;
        if (use_cache && first_of[i] != i) {
          std::lock_guard<std::mutex> lock(finished_mu);
          if (noisy_first[first_of[i]]) reuse = BatchReuse(*noisy_first[first_of[i]]);
        }
        RecordedEvaluation run = EvaluateWithVerdictCache(task, candidate, o.evaluate, o.store,
                                                          RecordOptions{.lineage = o.lineage}, use_cache,
                                                          reuse ? &*reuse : nullptr);
        out.recorded = std::move(run.recorded);
        Fill(out, run.ev);
        if (use_cache && first_of[i] == i && run.ev.cached.is_null() && run.ev.result.status == EvalStatus::kNoisy &&
            !(out.recorded && out.recorded->canceled)) {
          run.ev.cached = Json{{"job_id", out.recorded ? Json(out.recorded->job_id) : Json(nullptr)},
                               {"created_at", NowTimestamp()},
                               {"batch_copy", true}};
          std::lock_guard<std::mutex> lock(finished_mu);
          noisy_first[i] = std::move(run.ev);
        }
      } catch (const std::exception& e) {
        out.status = "error";
        out.error = e.what();
      }
      out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      {
        std::lock_guard<std::mutex> lock(finished_mu);
        finished[i] = 1;
      }
      finished_cv.notify_all();
      progress.Done(out.evaluated);
    }
  };
  std::vector<std::thread> threads;
  const int n = std::max(1, std::min<int>(o.parallel, static_cast<int>(files.size())));
  for (int i = 0; i < n; ++i) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  progress.Finish();

  size_t evaluated = 0;
  Json doc = Json::array();
  for (const Outcome& out : outcomes) {
    if (out.evaluated) ++evaluated;
    Json j = Json{{"candidate", out.candidate}, {"evaluated", out.evaluated}, {"status", out.status},
                  {"perf_score", out.perf_score}, {"speedup", out.speedup},   {"correct", out.correct},
                  {"runtime_ms", out.runtime_ms}, {"seconds", out.seconds},  {"cached", out.cached},
                  {"error", out.error.empty() ? Json(nullptr) : Json(out.error)}};
    if (out.ci_low > 0) j["speedup_ci"] = Json::array({out.ci_low, out.ci_high});
    if (out.recorded) {
      j["job_id"] = out.recorded->job_id;
      j["kernel_uuid"] = out.recorded->kernel_uuid;
    }
    doc.push_back(std::move(j));
  }
  std::vector<Outcome> sorted = outcomes;
  SortBySpeedup(sorted);
  TextTable table({{"candidate"}, {"status"}, {"perf", TextTable::Align::kRight},
                   {"speedup [95% CI]", TextTable::Align::kRight}, {"runtime ms", TextTable::Align::kRight},
                   {"seconds", TextTable::Align::kRight}, {"stored"}});
  for (const Outcome& out : sorted) {
    table.AddRow({out.candidate, out.status + (out.error.empty() ? "" : ": " + out.error),
                  out.perf_score >= 0 ? std::to_string(out.perf_score) : "-", SpeedupCell(out),
                  out.runtime_ms > 0 ? fmt::format("{:.4g}", out.runtime_ms) : "-", fmt::format("{:.0f}", out.seconds),
                  (out.recorded ? fmt::format("job {}", out.recorded->job_id) : "") +
                      (out.cached ? (out.recorded ? " (cached)" : "cached") : "")});
  }
  std::FILE* human = o.json == "-" ? stderr : stdout;
  const std::string rendered = table.Render();
  std::fwrite(rendered.data(), 1, rendered.size(), human);
  std::fprintf(human, "%zu of %zu candidates evaluated%s\n", evaluated, outcomes.size(),
               o.store != nullptr ? (", stored in " + o.store->Describe()).c_str() : "");
  if (!o.json.empty()) {
    const std::string text = DumpJson(doc, 2) + "\n";
    if (o.json == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      WriteFileAtomic(o.json, text);
    }
  }
  return evaluated == outcomes.size() ? kExitOk : kExitVerdictFailed;
}

}  // namespace kf::cli
