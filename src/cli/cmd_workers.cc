// kf workers — lists the live workers of a farm and their queues through Celery remote control (ours and the
// reference's Python workers alike).
//
//   kf workers [--broker URL] [--timeout S] [--json]
//
// Prints one block per node: its queues, the tasks it is running (name, id, seconds), and its totals. Exit
// 0 when at least one worker answered, 1 when none did.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "core/clock.hpp"
#include "kernelfoundry/farm.hpp"

namespace kf::cli {
namespace {

struct WorkersOptions {
  std::string broker;
  double timeout_s = 1.0;
  bool json = false;
};

int RunWorkers(const WorkersOptions& o) {
  const BrokerUrl url = ParseBrokerUrl(o.broker.empty() ? DefaultBrokerUrl() : o.broker);
  CeleryClient client(ConnectAmqp(url));
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  std::vector<LiveWorker> workers = InspectWorkers(client, timeout);
  if (o.json) {
    Json out = Json::array();
    for (const LiveWorker& w : workers) {
      out.push_back(Json{{"node", w.node}, {"queues", w.queues}, {"active", w.active}, {"stats", w.stats}});
    }
    std::printf("%s\n", DumpJson(out, 2).c_str());
    return workers.empty() ? kExitVerdictFailed : kExitOk;
  }
  const double now = UnixTimeNow();
  if (workers.empty()) std::printf("no worker answered on %s within %.1f s\n", url.Redacted().c_str(), o.timeout_s);
  for (const LiveWorker& w : workers) {
    std::string queues;
    for (const std::string& q : w.queues) queues += (queues.empty() ? "" : ", ") + q;
    std::printf("%s\n  queues:  %s\n", w.node.c_str(), queues.empty() ? "-" : queues.c_str());
    if (w.active.empty()) {
      std::printf("  running: -\n");
    } else {
      for (const Json& job : w.active) {
        const double start = job.value("time_start", 0.0);
        std::printf("  running: %s %s (%s)\n", celery::TaskShortName(job.value("name", std::string("?"))).c_str(),
                    job.value("id", std::string("?")).c_str(),
                    start > 0 ? fmt::format("{:.0f} s", now - start).c_str() : "?");
      }
    }
    if (w.stats.is_object() && w.stats.contains("total") && w.stats["total"].is_object()) {
      std::string totals;
      for (auto it = w.stats["total"].begin(); it != w.stats["total"].end(); ++it) {
        totals += fmt::format("{}{} {}", totals.empty() ? "" : ", ", celery::TaskShortName(it.key()), DumpJson(it.value()));
      }
      std::printf("  done:    %s\n", totals.empty() ? "-" : totals.c_str());
    }
  }
  return workers.empty() ? kExitVerdictFailed : kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("workers", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<WorkersOptions>();
  CLI::App* cmd = app.add_subcommand("workers", "List the farm's live workers and their queues (remote control)");
  cmd->add_option("--broker,-b", o->broker, "amqp://user:password@host:port/vhost (default $KF_BROKER_URL)");
  cmd->add_option("--timeout", o->timeout_s, "Seconds to collect answers per question (default 1)");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o, exit_code]() { *exit_code = RunWorkers(*o); });
});

}  // namespace kf::cli
