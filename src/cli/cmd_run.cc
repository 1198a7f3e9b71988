// kf run — evaluates one candidate end to end: its EVOLVE code is put into the task, the candidate and the
// reference are built and tested (correctness, then performance), the result is scored and stored.
//
//   kf run TASK [--candidate FILE | --blocks F.json] [--gpu-arch ARCH] [--no-reference] [--db PATH]
//               [--no-store] [--json OUT] [--keep-workdir] [--profile] [-v]
//
// TASK is a package directory, an archive or an encoded task (*.json). --candidate FILE holds the new
// EVOLVE content (the shorthand update, needs exactly one EVOLVE block); --blocks holds the full update
// {KEY: {path: [content]}} (or {KEY: content}); with neither, the task's own EVOLVE code is evaluated.
// Progress lines go to stderr; the verdict table to stdout. A job row (INIT -> RUN -> COMPLETE/FAIL), the
// tasks row, one kernels row and the process logs are written to --db (default $KF_DB, else
// runs/kernels.sqlite3) unless --no-store. --json OUT ("-" = stdout) writes the whole evaluation.
// Exit 0 when the candidate is correct (perf_score 5), 1 when the verdict is negative, other codes
// (exit_codes.hpp) when the input is unusable.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/load_task.hpp"
#include "cli/run_common.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/profile.hpp"

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
  bool profile = false;  // issue 14: force the profiler passes (EvaluateOptions::profile)
};

std::optional<BlockUpdate> ReadCandidate(const RunOptions& o) {
  if (!o.candidate.empty()) return BlockUpdate{BlockUpdateShort{{"EVOLVE", ReadInput(o.candidate)}}};
  if (!o.blocks.empty()) return BlockUpdateFromJson(ParseJson(ReadInput(o.blocks), o.blocks), o.blocks);
  return std::nullopt;
}

int RunRun(const RunOptions& o) {
  LoadedTask loaded = LoadTask(o.task, /*discover_tests=*/true);
  loaded.task.Validate(HarnessTaskKinds());
  // Merge precedence of the reference's driver: task config < overrides.yml (spec §1.5).
  const Json& meta = loaded.metadata;
  if (meta.is_object() && meta.contains("overrides") && meta["overrides"].is_object()) {
    loaded.task.ApplyConfig(MergeConfig(loaded.task.config, meta["overrides"]));
  }
  std::optional<BlockUpdate> candidate = ReadCandidate(o);

  EvaluateOptions eo;
  if (!o.gpu_arch.empty()) eo.gpu_arch = o.gpu_arch;
  eo.test_reference = !o.no_reference;
  eo.keep_workdir = o.keep_workdir;
  eo.progress = StderrProgress();
  if (o.profile) eo.profile = true;
  if (o.verbose) {
    eo.on_output_line = [](bool is_stderr, const std::string& line) {
      std::fprintf(stderr, "  %s %s\n", is_stderr ? "!" : "|", line.c_str());
    };
  }
  auto run = [&] { return Evaluate(loaded.task, candidate, eo); };

  Evaluation ev;
  std::optional<RecordedRun> recorded;
  std::string db = o.db.empty() ? DefaultDbPath().string() : o.db;
  if (o.no_store) {
    ev = run();
  } else {
    std::unique_ptr<SqliteStore> store = SqliteStore::Open(db);
    recorded = RecordRun(*store, loaded.task, /*validate=*/false, run, &ev);
  }

  // With --json - stdout carries only the JSON document; the human summary goes to stderr.
  std::FILE* human = o.json == "-" ? stderr : stdout;
  PrintVerdict(ev, human);
  for (const std::string& line : ProfileTableLines(ev.task.test_result, ev.task.test_result_reference)) {
    std::fprintf(human, "%s\n", line.c_str());  // issue 14: one profile line per side
  }
  if (recorded) {
    std::fprintf(human, "stored: job %lld, kernel %s in %s\n", static_cast<long long>(recorded->job_id),
                recorded->kernel_uuid.c_str(), db.c_str());
  }
  for (const auto& dir : ev.kept_dirs) std::fprintf(stderr, "kf: kept work dir %s\n", dir.c_str());
  if (!o.json.empty()) {
    std::string text = DumpJson(EvaluationJson(ev, recorded, db), 2) + "\n";
    if (o.json == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      WriteFileAtomic(o.json, text);
    }
  }
  return IsCorrectVerdict(ev.result) ? kExitOk : kExitVerdictFailed;
}

}  // namespace

KF_REGISTER_COMMAND("run", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Build, test, time, score and store one candidate (exit 0 if correct)");
  cmd->add_option("TASK", o->task, "Task package (directory or archive) or encoded task (.json)")->required();
  auto* cand = cmd->add_option("--candidate", o->candidate, "File with the new EVOLVE block content");
  auto* blocks =
      cmd->add_option("--blocks", o->blocks, "JSON block update {KEY: {path: [content]}} or {KEY: content}");
  cand->excludes(blocks);
  cmd->add_option("--gpu-arch", o->gpu_arch, "Override config gpu_arch (comma list = several archs)");
  cmd->add_flag("--no-reference", o->no_reference, "Do not build/test the reference (no speedup)");
  cmd->add_option("--db", o->db, "SQLite results database (default $KF_DB, else runs/kernels.sqlite3)");
  cmd->add_flag("--no-store", o->no_store, "Do not write to the database");
  cmd->add_option("--json", o->json, "Write the whole evaluation as JSON to this file (- = stdout)");
  cmd->add_flag("--keep-workdir", o->keep_workdir, "Keep the kf_build_* / kf_test_* work directories");
  cmd->add_flag("-v,--verbose", o->verbose, "Stream every build/test output line to stderr");
  cmd->add_flag("--profile", o->profile,
                "Run the profiler passes for the candidate and the reference (perf on CPUs, ncu on NVIDIA)");
  cmd->callback([o, exit_code]() { *exit_code = RunRun(*o); });
});

}  // namespace kf::cli
