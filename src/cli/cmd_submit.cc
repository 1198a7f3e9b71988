// kf submit — evaluates many candidates of one task on a farm: each candidate is built and tested by Celery
// workers (kf workers or the reference's), scored and stored here exactly as `kf run --broker` does.
//
//   kf submit TASK --candidates FILE…|DIR [--broker URL] [--parallel N] [--gpu-arch ARCH] [--no-reference]
//             [--db PATH|URL] [--no-store] [--json OUT]
//
// A DIR contributes its regular files (sorted by name). --parallel candidates are in flight at once (default
// 4; each has its own broker connection). A progress line on stderr says done / running / queued / failed
// and an ETA; at the end one line per candidate gives its verdict. "failed" counts candidates that got no
// verdict (broker trouble, no worker for a queue); a negative verdict is still a verdict.
// Exit 0 when every candidate has a verdict, 1 otherwise.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"
#include "cli/run_common.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/store.hpp"

namespace kf::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct SubmitOptions {
  std::string task;
  std::vector<std::string> candidates;
  std::string broker;
  int parallel = 4;
  std::string gpu_arch;
  bool no_reference = false;
  std::string db;
  bool no_store = false;
  std::string json;
};

struct Outcome {
  std::string candidate;
  bool evaluated = false;
  std::string status;          // EvalStatusName, or "error"
  int perf_score = -1;
  double speedup = -1;
  bool correct = false;
  std::optional<RecordedRun> recorded;
  std::string error;
  double seconds = 0;
};

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

std::string Duration(double s) {
  if (s < 0) return "?";
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return fmt::format("{}h{:02d}m", static_cast<int>(s) / 3600, (static_cast<int>(s) % 3600) / 60);
}

class Progress {
 public:
  explicit Progress(size_t total) : total_(total), t0_(Clock::now()), tty_(::isatty(2)) {}
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
    const std::string line = fmt::format("kf submit: done {}/{}, running {}, queued {}, failed {}, elapsed {}, ETA {}",
                                         done_, total_, running_, queued, failed_, Duration(elapsed),
                                         done_ == total_ ? "0s" : Duration(eta));
    std::fprintf(stderr, tty_ ? "\r%s\033[K" : "%s\n", line.c_str());
    std::fflush(stderr);
  }

  std::mutex mu_;
  size_t total_, done_ = 0, running_ = 0, failed_ = 0;
  Clock::time_point t0_;
  bool tty_;
};

int RunSubmit(const SubmitOptions& o) {
  TaskForRun loaded = LoadTaskForRunArg(o.task);
  const std::vector<std::string> files = ExpandCandidates(o.candidates);
  const BrokerUrl url = ParseBrokerUrl(o.broker.empty() ? DefaultBrokerUrl() : o.broker);
  std::unique_ptr<Store> store;
  if (!o.no_store) store = OpenStore(StoreUrlOf(o.db));

  EvaluateOptions eo;
  if (!o.gpu_arch.empty()) eo.gpu_arch = o.gpu_arch;
  eo.test_reference = !o.no_reference;

  std::vector<Outcome> outcomes(files.size());
  std::atomic<size_t> next{0};
  Progress progress(files.size());
  // One runner for every thread: each call takes an idle client of its pool or connects a new one.
  QueueStageRunner runner([url] { return ConnectAmqp(url); });
  eo.runner = &runner;
  auto work = [&] {
    while (true) {
      const size_t i = next++;
      if (i >= files.size()) return;
      Outcome& out = outcomes[i];
      out.candidate = files[i];
      progress.Start();
      const Clock::time_point t0 = Clock::now();
      try {
        std::optional<BlockUpdate> candidate = BlockUpdate{BlockUpdateShort{{"EVOLVE", ReadInput(files[i])}}};
        Evaluation ev;
        if (store) {
          out.recorded = EvaluateAndRecord(*store, loaded.task, candidate, eo, RecordOptions{}, &ev);
        } else {
          ev = Evaluate(loaded.task, candidate, eo);
        }
        out.evaluated = true;
        out.status = std::string(EvalStatusName(ev.result.status));
        out.perf_score = ev.result.perf_score;
        out.speedup = ev.result.runtime_improvement;
        out.correct = IsCorrectVerdict(ev.result);
      } catch (const std::exception& e) {
        out.status = "error";
        out.error = e.what();
      }
      out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      progress.Done(out.evaluated);
    }
  };
  std::vector<std::thread> threads;
  const int n = std::max(1, std::min<int>(o.parallel, static_cast<int>(files.size())));
  for (int i = 0; i < n; ++i) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  progress.Finish();

  std::FILE* human = o.json == "-" ? stderr : stdout;
  size_t evaluated = 0;
  Json doc = Json::array();
  for (const Outcome& out : outcomes) {
    if (out.evaluated) ++evaluated;
    std::string speed = out.speedup > 0 ? fmt::format("{:.3f}x", out.speedup) : "-";
    std::string where = out.recorded ? fmt::format("job {}", out.recorded->job_id) : "";
    std::fprintf(human, "%-40s %-18s perf %2d  speedup %-9s %s%s\n", out.candidate.c_str(), out.status.c_str(),
                 out.perf_score, speed.c_str(), where.c_str(), out.error.empty() ? "" : ("  " + out.error).c_str());
    Json j = Json{{"candidate", out.candidate},  {"evaluated", out.evaluated}, {"status", out.status},
                  {"perf_score", out.perf_score}, {"speedup", out.speedup},     {"correct", out.correct},
                  {"seconds", out.seconds},       {"error", out.error.empty() ? Json(nullptr) : Json(out.error)}};
    if (out.recorded) {
      j["job_id"] = out.recorded->job_id;
      j["kernel_uuid"] = out.recorded->kernel_uuid;
    }
    doc.push_back(std::move(j));
  }
  std::fprintf(human, "%zu of %zu candidates evaluated%s\n", evaluated, outcomes.size(),
               store ? (", stored in " + store->Describe()).c_str() : "");
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

}  // namespace

KF_REGISTER_COMMAND("submit", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<SubmitOptions>();
  CLI::App* cmd = app.add_subcommand("submit", "Evaluate many candidates on a Celery/RabbitMQ farm and store each verdict");
  cmd->add_option("TASK", o->task, "Task package (directory or archive) or encoded task (.json)")->required();
  cmd->add_option("--candidates", o->candidates, "Candidate files (new EVOLVE content) or directories of them")
      ->required();
  cmd->add_option("--broker,-b", o->broker, "amqp://user:password@host:port/vhost (default $KF_BROKER_URL)");
  cmd->add_option("--parallel,-j", o->parallel, "Candidates in flight at once (default 4)")->check(CLI::PositiveNumber);
  cmd->add_option("--gpu-arch", o->gpu_arch, "Override config gpu_arch (comma list = several archs)");
  cmd->add_flag("--no-reference", o->no_reference, "Do not build/test the reference (no speedup)");
  cmd->add_option("--db", o->db,
                  "Results database: a SQLite path, sqlite:///path or postgresql://user@host:port/db "
                  "(default $KF_DB, else runs/kernels.sqlite3)");
  cmd->add_flag("--no-store", o->no_store, "Do not write to the database");
  cmd->add_option("--json", o->json, "Write one JSON entry per candidate to this file (- = stdout)");
  cmd->callback([o, exit_code]() { *exit_code = RunSubmit(*o); });
});

}  // namespace kf::cli
