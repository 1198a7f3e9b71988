// kf serve — the results in the browser: a local HTTP server with a JSON API and a web page over the results
// database (kf::Server, include/kernelfoundry/serve.hpp); with --submit also the submission API that coding
// agents and teams evaluate through (bearer tokens: kf token).
//
//   kf serve [--db PATH|URL] [--host 127.0.0.1] [--port 8080]
//            [--submit [-j N] [--broker URL] [--max-archive-mb 32] [--max-active 20] [--max-running 2]
//             [--rpm 600] [--no-verdict-cache]] [--tls-cert PEM --tls-key PEM | --insecure]
//
// The database (--db, else $KF_DB, else runs/kernels.sqlite3) is opened read-only, or read-write with --submit.
// The first line on stdout is "kf serve: http[s]://HOST:PORT/ (DATABASE)" once the port is bound (--port 0 picks
// a free one). Without --submit, SIGINT or SIGTERM stops the server (exit 0). With --submit, a signal stops kf
// as it stops kf run (the evaluations' process trees are killed); jobs left queued or running are run again by
// the next kf serve --submit on that database. --submit on an address beyond loopback needs HTTPS (--tls-cert
// and --tls-key) or --insecure (tokens then cross the network in clear text).
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/record_job.hpp"
#include "cli/run_common.hpp"
#include "cli/termination.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/serve.hpp"
#include "kernelfoundry/store.hpp"

namespace kf::cli {
namespace {

struct ServeCliOptions {
  std::string db;
  std::string host = "127.0.0.1";
  int port = 8080;
  bool submit = false;
  int workers = 2;
  std::string broker;
  double max_archive_mb = 32;
  int max_active = 20;
  int max_running = 2;
  int rpm = 600;
  bool no_verdict_cache = false;
  std::string tls_cert, tls_key;
  bool insecure = false;
};

bool IsLoopbackHost(const std::string& h) {
  return h == "localhost" || h == "::1" || h.rfind("127.", 0) == 0;
}

/// The submission API's options: limits, pool size, the farm (--broker), the verdict cache.
SubmitOptions MakeSubmitOptions(const ServeCliOptions& o, std::unique_ptr<QueueStageRunner>& farm) {
  SubmitOptions s;
  s.limits.max_archive_bytes = static_cast<int64_t>(o.max_archive_mb * 1024 * 1024);
  s.limits.max_active_jobs = o.max_active;
  s.limits.max_running_jobs = o.max_running;
  s.limits.requests_per_minute = o.rpm;
  s.workers = o.workers;
  if (!o.broker.empty()) {
    const BrokerUrl url = ParseBrokerUrl(o.broker);
    farm = std::make_unique<QueueStageRunner>([url] { return ConnectAmqp(url); });
    s.evaluate.runner = farm.get();
  }
  // kf run's path: the verdict cache serves a candidate evaluated before.
  s.record = VerdictCachedRecord(!o.no_verdict_cache);
  return s;
}

int RunServe(const ServeCliOptions& opts) {
  const bool tls = !opts.tls_cert.empty() || !opts.tls_key.empty();
  if (opts.submit && !IsLoopbackHost(opts.host) && !tls && !opts.insecure) {
    throw Error(ErrorKind::kInvalidArgument,
                "--submit beyond loopback sends bearer tokens over the network: give --tls-cert and --tls-key "
                "(HTTPS), or --insecure to accept clear text",
                opts.host, "host");
  }
  std::string url = StoreUrlOf(opts.db);
  std::unique_ptr<Store> store;
  try {
    store = OpenStore(url, StoreOptions{.read_only = !opts.submit});
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotFound) throw;
    throw Error(ErrorKind::kNotFound,
                "no results database (run `kf run` first, or pass --db PATH or set KF_DB): " + e.message(), e.file());
  }
  const std::string where = store->Describe();
  std::unique_ptr<QueueStageRunner> farm;
  ServeOptions so{.host = opts.host, .port = opts.port};
  if (opts.submit) so.submit = MakeSubmitOptions(opts, farm);
  so.tls_cert = opts.tls_cert;
  so.tls_key = opts.tls_key;
  Server server(std::move(store), so);
  server.Bind();
  const std::string host = opts.host.find(':') != std::string::npos ? "[" + opts.host + "]" : opts.host;
  std::printf("kf serve: %s://%s:%d/ (%s)%s\n", tls ? "https" : "http", host.c_str(), server.port(), where.c_str(),
              opts.submit ? " submit API on" : "");
  std::fflush(stdout);
  if (opts.submit) {
    server.Run();  // a signal stops kf as it stops kf run (the evaluations' trees are killed)
    return kExitOk;
  }
  // A signal stops the server (kf's signal thread calls this instead of its cleanup: serve runs no child).
  TerminationHandlerScope on_signal([&server](int) { server.Stop(); });
  server.Run();
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("serve", [](CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<ServeCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve the stored results as a web page and JSON API (read-only unless --submit; local unless --host)");
  cmd->add_option("--db", opts->db, kDbOptionHelp);
  cmd->add_option("--host", opts->host, "Address to listen on (0.0.0.0 exposes the results to the network)")
      ->default_val("127.0.0.1");
  cmd->add_option("--port", opts->port, "TCP port; 0 = any free port (printed on the first line)")
      ->default_val(8080)
      ->check(CLI::Range(0, 65535));
  cmd->add_flag("--submit", opts->submit,
                "Accept evaluation jobs (POST /api/validate_job …) from users with a token (kf token add USER)");
  cmd->add_option("-j,--jobs", opts->workers, "--submit: evaluations at once (default 2; timed phases run alone)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--broker", opts->broker, "--submit: run the jobs' builds and tests on a Celery/RabbitMQ farm");
  cmd->add_option("--max-archive-mb", opts->max_archive_mb, "--submit: largest archive accepted (413 beyond)")
      ->check(CLI::Range(0.001, 4096.0));
  cmd->add_option("--max-active", opts->max_active, "--submit: queued + running jobs per user (429 beyond)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-running", opts->max_running, "--submit: running jobs per user (more wait)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--rpm", opts->rpm, "--submit: API requests per minute per user (429 beyond)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_flag("--no-verdict-cache", opts->no_verdict_cache, "--submit: always build and test");
  cmd->add_option("--tls-cert", opts->tls_cert, "HTTPS: PEM certificate (chain) file");
  cmd->add_option("--tls-key", opts->tls_key, "HTTPS: PEM private key file");
  cmd->add_flag("--insecure", opts->insecure, "--submit beyond loopback without HTTPS (tokens in clear text)");
  cmd->callback([opts, exit_code]() { *exit_code = RunServe(*opts); });
});

}  // namespace kf::cli
