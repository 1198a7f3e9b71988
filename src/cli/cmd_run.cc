// kf run — evaluates one candidate end to end: its EVOLVE code is put into the task, the candidate and the
// reference are built and tested (correctness, then performance), the result is scored and stored.
//
//   kf run TASK [--candidate FILE | --blocks F.json] [--gpu-arch ARCH] [--no-reference] [--db PATH|URL]
//               [--no-store] [--json OUT] [--keep-workdir] [--profile] [--no-verdict-cache] [-v] [--broker URL]
//               [--parent UUID] [--lineage JSON|F.json] [--require-isolation]
//   kf run TASK --candidates FILE…|DIR [-j N] [--gpu-arch ARCH] [--no-reference] [--db …] [--no-store] [--json OUT]
//               [--broker URL] [--parent UUID] [--lineage JSON|F.json]
//
// TASK is a package directory, an archive or an encoded task (*.json), loaded by kf::LoadTaskForRun (its
// overrides.yml wins over config.yaml). --candidate FILE holds the new
// EVOLVE content (the shorthand update, needs exactly one EVOLVE block); --blocks holds the full update
// {KEY: {path: [content]}} (or {KEY: content}); with neither, the task's own EVOLVE code is evaluated.
// Progress lines go to stderr; the verdict table to stdout. A job row (INIT -> RUN -> COMPLETE/FAIL), the
// tasks row, one kernels row and the process logs are written to --db (kf::OpenStore: a SQLite path or a
// postgresql:// URL; default $KF_DB, else runs/kernels.sqlite3) unless --no-store; a job CANCELED meanwhile
// stops the evaluation. --json OUT ("-" = stdout) writes the whole evaluation (kf::EvaluationDocument).
// Lineage (kf::Lineage, the kernels columns an optimisation loop fills): --parent UUID sets parent_uuid (the
// kernels.uuid this candidate was derived from); --lineage takes a JSON object (inline, or a file) with any
// of parent_uuid, trial, version, prompt, answer, language_model, agent_session_id, db_user (--parent wins
// over its parent_uuid); db_user defaults to the OS user. Both need a store (not with --no-store).
// --broker URL sends the build and the tests to a Celery/RabbitMQ farm (build_custom_task_<language>,
// test_custom_task_<arch>; kf workers or the reference's) instead of running them here (Evaluate with a
// QueueStageRunner); scoring and storing are the same. Ctrl-C (or SIGTERM) then cancels: the farm's tasks
// are revoked with terminate and the verdict is "canceled" (exit 1); a second Ctrl-C exits at once (130).
// Verdict cache (kernelfoundry/verdict_cache.hpp): an evaluation identical to an earlier one (task, candidate,
// merged config, archs, worker fingerprint, kf build) reuses the earlier verdict — timings included — without
// building or testing; the output says "cached: verdict of job N from <time>" and the JSON has "cached": true.
// Only candidate properties are cached (never timeouts, resource limits, noisy timing); --no-verdict-cache
// (alias --no-cache) always runs; so does --profile (a cached verdict has no new profiler passes).
// Exit 0 when the candidate is correct (perf_score 5), 1 when the verdict is negative, other codes
// (exit_codes.hpp) when the input is unusable.
// Batch mode (--candidates, batch.hpp): every file (a DIR gives its files, sorted) is one candidate; -j N
// evaluations run at once (default 2): builds and correctness runs overlap, every timed phase holds the device
// alone. A progress line (done / running / queued / failed, ETA) on stderr, a summary table sorted by speedup,
// every verdict stored; --json writes one entry per candidate. Exit 0 when every candidate got a verdict.
// With --broker the batch runs on the farm (as kf submit).
#include <string.h>  // sigabbrev_np

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stop_token>
#include <optional>
#include <string>
#include <vector>

#include "cli/batch.hpp"
#include "cli/command.hpp"
#include "cli/console_reporter.hpp"
#include "cli/json_reporter.hpp"
#include "cli/load_task.hpp"
#include "cli/run_common.hpp"
#include "cli/termination.hpp"
#include "harness/isolation.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/store.hpp"

namespace kf::cli {
namespace {

struct RunOptions {
  std::string task;
  std::string candidate;
  std::string blocks;
  std::string gpu_arch;
  bool no_reference = false;
  std::string db;
  bool no_store = false;
  std::string json;
  bool keep_workdir = false;
  bool profile = false;
  bool verbose = false;
  bool no_verdict_cache = false;
  std::string broker;
  std::vector<std::string> candidates;  // batch mode
  int parallel = 2;
  std::string parent;   // --parent UUID
  std::string lineage;  // --lineage JSON text or file
  bool require_isolation = false;
};

/// --require-isolation (issue 25): KF_ISOLATION=required for every child, and a refusal before anything runs
/// when a part of the isolation (Landlock, the unprivileged user, seccomp) is missing on this machine.
void RequireIsolation() {
  ::setenv("KF_ISOLATION", "required", 1);
  const ChildIsolation iso = DescribeChildIsolation();
  if (!iso.Complete()) {
    throw Error(ErrorKind::kUnsupported, "--require-isolation: build and test children cannot be fully isolated "
                "here: " + iso.Summary(), "", "--require-isolation");
  }
}

/// The lineage of --lineage (inline JSON when its first non-blank character is '{', else a file) and --parent.
Lineage ReadLineage(const RunOptions& o) {
  Lineage lineage;
  if (!o.lineage.empty()) {
    const size_t first = o.lineage.find_first_not_of(" \t\r\n");
    const bool inline_json = first != std::string::npos && o.lineage[first] == '{';
    const std::string source = inline_json ? "--lineage" : o.lineage;
    lineage = LineageFromJson(ParseJson(inline_json ? o.lineage : ReadInput(o.lineage), source), source);
  }
  if (!o.parent.empty()) lineage.parent_uuid = o.parent;
  return lineage;
}

// SIGINT/SIGTERM during a farm run: the first requests the evaluation's stop (its farm tasks are revoked), the
// second exits (130). kf's signal thread hands the signals over while this object lives (termination.hpp).
class FarmInterrupt {
 public:
  FarmInterrupt()
      : on_signal_([this](int sig) {
          if (stop_.stop_requested()) std::_Exit(130);
          std::fprintf(stderr, "kf: %s: canceling the evaluation (revoking its farm tasks); again to exit now\n",
                       sigabbrev_np(sig) ? sigabbrev_np(sig) : "signal");
          stop_.request_stop();
        }) {}
  FarmInterrupt(const FarmInterrupt&) = delete;
  FarmInterrupt& operator=(const FarmInterrupt&) = delete;
  std::stop_token token() const { return stop_.get_token(); }

 private:
  std::stop_source stop_;
  TerminationHandlerScope on_signal_;  // last: cleared first, before stop_ goes
};

int RunBatchRun(const RunOptions& o) {
  TaskForRun loaded = LoadTaskForRunArg(o.task);
  const std::vector<std::string> files = ExpandCandidates(o.candidates);
  std::unique_ptr<Store> store;
  if (!o.no_store) store = OpenStore(StoreUrlOf(o.db));  // before anything runs: a bad --db fails fast
  BatchOptions b;
  b.parallel = o.parallel;
  if (!o.gpu_arch.empty()) b.evaluate.gpu_arch = o.gpu_arch;
  b.evaluate.test_reference = !o.no_reference;
  b.evaluate.keep_workdir = o.keep_workdir;
  if (o.profile) b.evaluate.profile = true;
  b.store = store.get();
  b.json = o.json;
  b.verdict_cache = !o.no_verdict_cache && !o.profile;
  std::unique_ptr<QueueStageRunner> farm;  // --broker: the stages run on the farm, as with kf submit
  if (!o.broker.empty()) {
    const BrokerUrl url = ParseBrokerUrl(o.broker);
    farm = std::make_unique<QueueStageRunner>([url] { return ConnectAmqp(url); });
    b.evaluate.runner = farm.get();
  }
  b.lineage = ReadLineage(o);
  return RunBatch(loaded.task, files, b);
}

std::optional<BlockUpdate> ReadCandidate(const RunOptions& o) {
  if (!o.candidate.empty()) return BlockUpdate{BlockUpdateShort{{"EVOLVE", ReadInput(o.candidate)}}};
  if (!o.blocks.empty()) return BlockUpdateFromJson(ParseJson(ReadInput(o.blocks), o.blocks), o.blocks);
  return std::nullopt;
}

int RunRun(const RunOptions& o) {
  // Ctrl-C / SIGTERM cancel a farm evaluation: the farm's tasks are revoked (terminate) and the canceled
  // verdict is printed; a second signal exits at once. Set up before anything starts a thread.
  std::unique_ptr<FarmInterrupt> interrupt;
  if (!o.broker.empty()) interrupt = std::make_unique<FarmInterrupt>();
  TaskForRun loaded = LoadTaskForRunArg(o.task);
  RunRequest request;
  request.candidate = ReadCandidate(o);
  if (!o.gpu_arch.empty()) request.options.gpu_arch = o.gpu_arch;
  request.options.test_reference = !o.no_reference;
  request.options.keep_workdir = o.keep_workdir;
  if (o.profile) request.options.profile = true;
  request.output_lines = o.verbose;
  request.store = !o.no_store;
  request.db = o.db;
  request.lineage = ReadLineage(o);
  std::unique_ptr<CeleryClient> client;
  std::unique_ptr<QueueStageRunner> farm;
  if (!o.broker.empty()) {
    client = std::make_unique<CeleryClient>(ConnectAmqp(ParseBrokerUrl(o.broker)));
    FarmOptions fo;
    fo.on_event = [](const std::string& e) { std::fprintf(stderr, "kf: farm: %s\n", e.c_str()); };
    farm = std::make_unique<QueueStageRunner>(*client, fo);
    request.options.runner = farm.get();
    request.options.stop = interrupt->token();
  }
  request.verdict_cache = !o.no_verdict_cache && !o.profile;

  // With --json - stdout carries only the JSON document; the human summary goes to stderr.
  ConsoleReporter console({.progress = stderr, .verdict = o.json == "-" ? stderr : stdout});
  std::optional<JsonReporter> json;
  if (!o.json.empty()) json.emplace(o.json);
  ReporterList reporters({&console, json ? &*json : nullptr});
  return RunAndReport(loaded.task, std::move(request), reporters);
}

}  // namespace

KF_REGISTER_COMMAND("run", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Build, test, time, score and store one candidate (exit 0 if correct)");
  cmd->add_option("TASK", o->task, "Task package (directory or archive) or encoded task (.json)")->required();
  auto* cand = cmd->add_option("--candidate", o->candidate, "File with the new EVOLVE block content");
  auto* blocks =
      cmd->add_option("--blocks", o->blocks, "JSON block update {KEY: {path: [content]}} or {KEY: content}");
  auto* many = cmd->add_option("--candidates", o->candidates,
                               "Batch mode: candidate files (new EVOLVE content) or directories of them");
  cand->excludes(blocks);
  many->excludes(cand)->excludes(blocks);
  cmd->add_option("-j,--parallel", o->parallel, "Batch mode: evaluations in flight at once (default 2)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpu-arch", o->gpu_arch, "Override config gpu_arch (comma list = several archs)");
  cmd->add_flag("--no-reference", o->no_reference, "Do not build/test the reference (no speedup)");
  cmd->add_option("--db", o->db, kDbOptionHelp);
  auto* no_store = cmd->add_flag("--no-store", o->no_store, "Do not write to the database");
  cmd->add_option("--json", o->json, "Write the whole evaluation as JSON to this file (- = stdout)");
  cmd->add_flag("--keep-workdir", o->keep_workdir, "Keep the kf_build_* / kf_test_* work directories");
  cmd->add_flag("--profile", o->profile,
                "Run the profiler passes (trace_results) for candidate and reference, whatever eval_config says");
  cmd->add_flag("--no-verdict-cache,--no-cache", o->no_verdict_cache,
                "Always build and test: do not reuse the verdict of an identical earlier evaluation");
  cmd->add_flag("-v,--verbose", o->verbose, "Stream every build/test output line to stderr");
  cmd->add_option("--broker", o->broker,
                  "Run the build and tests on a Celery/RabbitMQ farm: amqp://user:password@host:port/vhost");
  cmd->add_option("--parent", o->parent, "Lineage: kernels.parent_uuid, the uuid of the kernel this candidate came from")
      ->excludes(no_store);
  cmd->add_option("--lineage", o->lineage,
                  "Lineage columns as a JSON object (inline or a file): parent_uuid, trial, version, prompt, answer, "
                  "language_model, agent_session_id, db_user")
      ->excludes(no_store);
  cmd->add_flag("--require-isolation", o->require_isolation,
                "Refuse to run unless build and test children are fully isolated (Landlock, unprivileged user, "
                "seccomp); same as KF_ISOLATION=required");
  cmd->callback([o, exit_code]() {
    if (o->require_isolation) RequireIsolation();
    // A --json path that cannot be written is refused before any evaluation (stranger test, 2026-12-04: a
    // directory ran the whole evaluation, then failed and lost its verdict).
    if (!o->json.empty() && o->json != "-") CheckOutputFile(o->json);
    *exit_code = o->candidates.empty() ? RunRun(*o) : RunBatchRun(*o);
  });
});

}  // namespace kf::cli
