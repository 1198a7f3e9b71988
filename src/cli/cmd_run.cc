// kf run — evaluates one candidate end to end: its EVOLVE code is put into the task, the candidate and the
// reference are built and tested (correctness, then performance), the result is scored and stored.
//
//   kf run TASK [--candidate FILE | --blocks F.json] [--gpu-arch ARCH] [--no-reference] [--db PATH|URL]
//               [--no-store] [--json OUT] [--keep-workdir] [-v]
//   kf run TASK --candidates FILE…|DIR [-j N] [--gpu-arch ARCH] [--no-reference] [--db …] [--no-store] [--json OUT]
//
// TASK is a package directory, an archive or an encoded task (*.json), loaded by kf::LoadTaskForRun (its
// overrides.yml wins over config.yaml). --candidate FILE holds the new
// EVOLVE content (the shorthand update, needs exactly one EVOLVE block); --blocks holds the full update
// {KEY: {path: [content]}} (or {KEY: content}); with neither, the task's own EVOLVE code is evaluated.
// Progress lines go to stderr; the verdict table to stdout. A job row (INIT -> RUN -> COMPLETE/FAIL), the
// tasks row, one kernels row and the process logs are written to --db (kf::OpenStore: a SQLite path or a
// postgresql:// URL; default $KF_DB, else runs/kernels.sqlite3) unless --no-store; a job CANCELED meanwhile
// stops the evaluation. --json OUT ("-" = stdout) writes the whole evaluation (kf::EvaluationDocument).
// Exit 0 when the candidate is correct (perf_score 5), 1 when the verdict is negative, other codes
// (exit_codes.hpp) when the input is unusable.
// Batch mode (--candidates, batch.hpp): every file (a DIR gives its files, sorted) is one candidate; -j N
// evaluations run at once (default 2): builds and correctness runs overlap, every timed phase holds the device
// alone. A progress line (done / running / queued / failed, ETA) on stderr, a summary table sorted by speedup,
// every verdict stored; --json writes one entry per candidate. Exit 0 when every candidate got a verdict.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/batch.hpp"
#include "cli/command.hpp"
#include "cli/console_reporter.hpp"
#include "cli/json_reporter.hpp"
#include "cli/load_task.hpp"
#include "cli/run_common.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
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
  bool verbose = false;
  std::vector<std::string> candidates;  // batch mode
  int parallel = 2;
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
  b.store = store.get();
  b.json = o.json;
  return RunBatch(loaded.task, files, b);
}

std::optional<BlockUpdate> ReadCandidate(const RunOptions& o) {
  if (!o.candidate.empty()) return BlockUpdate{BlockUpdateShort{{"EVOLVE", ReadInput(o.candidate)}}};
  if (!o.blocks.empty()) return BlockUpdateFromJson(ParseJson(ReadInput(o.blocks), o.blocks), o.blocks);
  return std::nullopt;
}

int RunRun(const RunOptions& o) {
  TaskForRun loaded = LoadTaskForRunArg(o.task);
  RunRequest request;
  request.candidate = ReadCandidate(o);
  if (!o.gpu_arch.empty()) request.options.gpu_arch = o.gpu_arch;
  request.options.test_reference = !o.no_reference;
  request.options.keep_workdir = o.keep_workdir;
  request.output_lines = o.verbose;
  request.store = !o.no_store;
  request.db = o.db;

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
  cmd->add_flag("--no-store", o->no_store, "Do not write to the database");
  cmd->add_option("--json", o->json, "Write the whole evaluation as JSON to this file (- = stdout)");
  cmd->add_flag("--keep-workdir", o->keep_workdir, "Keep the kf_build_* / kf_test_* work directories");
  cmd->add_flag("-v,--verbose", o->verbose, "Stream every build/test output line to stderr");
  cmd->callback([o, exit_code]() { *exit_code = o->candidates.empty() ? RunRun(*o) : RunBatchRun(*o); });
});

}  // namespace kf::cli
