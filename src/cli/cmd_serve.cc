// kf serve — the results in the browser: a local HTTP server with a JSON API and a web page over the results
// database (kf::Server, include/kernelfoundry/serve.hpp).
//
//   kf serve [--db PATH|URL] [--host 127.0.0.1] [--port 8080]
//
// The database (--db, else $KF_DB, else runs/kernels.sqlite3) is opened read-only. The first line on stdout is
// "kf serve: http://HOST:PORT/ (DATABASE)" once the port is bound (--port 0 picks a free one). SIGINT or
// SIGTERM stops the server (exit 0).
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <pthread.h>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/run_common.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/serve.hpp"
#include "kernelfoundry/store.hpp"

namespace kf::cli {
namespace {

struct ServeCliOptions {
  std::string db;
  std::string host = "127.0.0.1";
  int port = 8080;
};

int RunServe(const ServeCliOptions& opts) {
  std::string url = StoreUrlOf(opts.db);
  std::unique_ptr<Store> store;
  try {
    store = OpenStore(url, StoreOptions{.read_only = true});
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotFound) throw;
    throw Error(ErrorKind::kNotFound,
                "no results database (run `kf run` first, or pass --db PATH or set KF_DB): " + e.message(), e.file());
  }
  const std::string where = store->Describe();
  // SIGINT/SIGTERM are taken by a waiting thread (blocked here before the server starts its threads).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  Server server(std::move(store), ServeOptions{.host = opts.host, .port = opts.port});
  server.Bind();
  const std::string host = opts.host.find(':') != std::string::npos ? "[" + opts.host + "]" : opts.host;
  std::printf("kf serve: http://%s:%d/ (%s)\n", host.c_str(), server.port(), where.c_str());
  std::fflush(stdout);
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    server.Stop();
  });
  server.Run();
  // Run() also returns when listening fails; wake the watcher so it can be joined.
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("serve", [](CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<ServeCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve the stored results as a web page and JSON API (read-only; local unless --host says otherwise)");
  cmd->add_option("--db", opts->db, kDbOptionHelp);
  cmd->add_option("--host", opts->host, "Address to listen on (0.0.0.0 exposes the results to the network)")
      ->default_val("127.0.0.1");
  cmd->add_option("--port", opts->port, "TCP port; 0 = any free port (printed on the first line)")
      ->default_val(8080)
      ->check(CLI::Range(0, 65535));
  cmd->callback([opts, exit_code]() { *exit_code = RunServe(*opts); });
});

}  // namespace kf::cli
