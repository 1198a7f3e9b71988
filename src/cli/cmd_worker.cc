// kf worker — a Celery worker for the reference's build and test tasks on RabbitMQ (worker.hpp).
//
//   kf worker [--broker URL] -Q QUEUES [-n NAME] [-c N] [--db DB] [--max-deliveries N] [--stop-grace S]
//             [--cancel-grace S] [--work-root DIR] [--heartbeat S] [--verdict-cache]
//
// --broker defaults to $KF_BROKER_URL, else the reference's RABBITMQ_USERNAME/PASSWORD/IP at port 5672.
// -Q takes Celery's comma list (repeatable): build_custom_task_<language>, test_custom_task_<arch>, ….
// SIGTERM/SIGINT: stop consuming, let the running job finish (--stop-grace, default 30 s; then it is killed
// and put back), exit 0. A second SIGTERM/SIGINT, or SIGQUIT: kill the running jobs, put them back, exit 0.
// -c N: N slots; their builds, correctness runs and timed runs share the devices through one DeviceSlots
// (a timed run holds its device alone). A soft time limit or a revoke with terminate asks the job to stop;
// after --cancel-grace (default 10 s) it is killed.
// --verdict-cache: a test body identical to an earlier one on this machine returns the stored value without
// running (the record module's verdict cache, kernelfoundry/verdict_cache.hpp; only candidate properties).
// Also here: `kf worker-child` (hidden; the job process of a worker slot).
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/termination.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/queue.hpp"
#include "kernelfoundry/worker.hpp"

namespace kf::cli {
namespace {

struct WorkerCliOptions {
  std::string broker;
  std::vector<std::string> queues;
  std::string node;
  int concurrency = 1;
  std::string db;
  int max_deliveries = 3;
  double stop_grace_s = 30;
  double cancel_grace_s = 10;
  std::string work_root;
  int heartbeat_s = 60;
  bool verdict_cache = false;
};

std::vector<std::string> SplitQueues(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    size_t start = 0;
    while (start <= a.size()) {
      size_t comma = a.find(',', start);
      std::string q = a.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      while (!q.empty() && q.front() == ' ') q.erase(q.begin());
      while (!q.empty() && q.back() == ' ') q.pop_back();
      if (!q.empty()) out.push_back(q);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

int RunWorkerVerb(const WorkerCliOptions& o) {
  const BrokerUrl url = ParseBrokerUrl(o.broker.empty() ? DefaultBrokerUrl() : o.broker);
  std::unique_ptr<Store> store = OpenWorkerStore(o.db);
  WorkerOptions wo;
  AmqpOptions amqp;
  amqp.heartbeat_s = o.heartbeat_s;
  wo.node_name = o.node;
  const std::string node = ExpandNodeName(o.node);
  amqp.connection_name = "kf worker " + node;
  wo.connect = [url, amqp] { return ConnectAmqp(url, amqp); };
  wo.broker_display = url.Redacted();
  wo.queues = SplitQueues(o.queues);
  wo.concurrency = o.concurrency;
  wo.max_deliveries = o.max_deliveries;
  wo.stop_grace = std::chrono::milliseconds(static_cast<int64_t>(o.stop_grace_s * 1000));
  wo.cancel_grace = std::chrono::milliseconds(static_cast<int64_t>(o.cancel_grace_s * 1000));
  wo.work_root = o.work_root;
  wo.store = store.get();
  wo.verdict_cache = o.verdict_cache;

  Worker worker(std::move(wo));
  // kf's signal thread hands the signals to the worker instead of its cleanup (termination.hpp).
  int signals_seen = 0;
  TerminationHandlerScope on_signal([&worker, &signals_seen](int sig) {
    const bool immediate = sig == SIGQUIT || ++signals_seen >= 2;
    std::fprintf(stderr, "kf worker: %s: %s\n", sigabbrev_np(sig) ? sigabbrev_np(sig) : "signal",
                 immediate ? "stopping now (running jobs are put back)" : "stopping after the running jobs");
    worker.RequestStop(immediate);
  });
  worker.Run();
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("worker", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<WorkerCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "worker", "Serve the reference's Celery build/test queues on RabbitMQ (interoperable with its clients)");
  cmd->add_option("--broker,-b", o->broker,
                  "amqp://user:password@host:port/vhost (default $KF_BROKER_URL, else RABBITMQ_USERNAME/PASSWORD/IP)");
  cmd->add_option("-Q,--queues", o->queues, "Queues to consume, comma-separated (e.g. build_custom_task_cuda,test_custom_task_Ampere)")
      ->required();
  cmd->add_option("-n,--hostname", o->node, "Node name (default kf@%h; %h host, %n short host, %d domain)");
  cmd->add_option("-c,--concurrency", o->concurrency, "Job slots (each runs one job at a time; timed phases of different slots never share a device; default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--db", o->db, "Record every job in this SQLite database (path or sqlite:///path)");
  cmd->add_option("--max-deliveries", o->max_deliveries,
                  "Poison limit: fail a message with WorkerLostError after this many deliveries whose worker was lost")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--stop-grace", o->stop_grace_s, "Seconds a running job may finish after SIGTERM (default 30)");
  cmd->add_option("--cancel-grace", o->cancel_grace_s,
                  "Seconds a job asked to stop (soft time limit, revoke --terminate) may take before it is killed "
                  "(default 10)");
  cmd->add_option("--work-root", o->work_root, "Parent directory of the jobs' work directories (default: temp dir)");
  cmd->add_option("--heartbeat", o->heartbeat_s, "AMQP heartbeat interval asked for, seconds (0 = off; default 60)");
  cmd->add_flag("--verdict-cache", o->verdict_cache,
                "Reuse the stored value of a test job identical to an earlier one on this machine (never timeouts, "
                "limits, crashes, noisy timing)");
  cmd->callback([o, exit_code]() { *exit_code = RunWorkerVerb(*o); });

  CLI::App* child = app.add_subcommand("worker-child", "");
  child->group("");  // hidden: the job process of a worker slot
  child->callback([exit_code]() { *exit_code = RunWorkerChild(); });
});

}  // namespace kf::cli
