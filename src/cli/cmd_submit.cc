// kf submit — evaluates many candidates of one task on a farm: each candidate is built and tested by Celery
// workers (kf workers or the reference's), scored and stored here exactly as `kf run --broker` does.
//
//   kf submit TASK --candidates FILE…|DIR [--broker URL] [--parallel N] [--gpu-arch ARCH] [--no-reference]
//             [--db PATH|URL] [--no-store] [--json OUT]
//
// A DIR contributes its regular files (sorted by name). --parallel candidates are in flight at once (default
// 4; each has its own broker connection). Progress, summary and JSON as `kf run --candidates` (batch.hpp):
// "failed" counts candidates that got no verdict (broker trouble, no worker for a queue); a negative verdict
// is still a verdict. Exit 0 when every candidate has a verdict, 1 otherwise. (`kf run --candidates …
// --broker URL` is the same batch.)
#include <memory>
#include <string>
#include <vector>

#include "cli/batch.hpp"
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

int RunSubmit(const SubmitOptions& o) {
  TaskForRun loaded = LoadTaskForRunArg(o.task);
  const std::vector<std::string> files = ExpandCandidates(o.candidates);
  const BrokerUrl url = ParseBrokerUrl(o.broker.empty() ? DefaultBrokerUrl() : o.broker);
  std::unique_ptr<Store> store;
  if (!o.no_store) store = OpenStore(StoreUrlOf(o.db));
  // One runner for every thread: each call takes an idle client of its pool or connects a new one.
  QueueStageRunner runner([url] { return ConnectAmqp(url); });
  BatchOptions b;
  b.verb = "kf submit";
  b.parallel = o.parallel;
  if (!o.gpu_arch.empty()) b.evaluate.gpu_arch = o.gpu_arch;
  b.evaluate.test_reference = !o.no_reference;
  b.evaluate.runner = &runner;
  b.store = store.get();
  b.json = o.json;
  return RunBatch(loaded.task, files, b);
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
