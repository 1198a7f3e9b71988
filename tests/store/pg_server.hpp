// PgServer — one throwaway PostgreSQL server per process, for tests and benchmarks: initdb + postgres (run
// as user `postgres` when this process is root), state in a temp dir, a random free port on 127.0.0.1,
// password authentication (scram-sha-256), fsync off, killed with this process (PR_SET_PDEATHSIG) and
// stopped by pid (fast shutdown) at exit. Header-only; needs libpq. No GoogleTest dependency.
#pragma once

#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kf::testing {

/// Text cells of a query result ("NULL" for SQL NULL).
using SqlRows = std::vector<std::vector<std::string>>;

/// One throwaway PostgreSQL server for the whole test process.
class PgServer {
 public:
  /// The server, started on the first call (from the main thread: the server dies with that thread's
  /// process via PR_SET_PDEATHSIG), or nullptr with *why_not set when it cannot run here.
  static PgServer* Shared(std::string* why_not);

  ~PgServer();
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  /// postgresql://postgres:<password>@127.0.0.1:<port>/<database>
  std::string Url(const std::string& database) const;
  /// The password of the `postgres` role (to check that it never appears in messages).
  const std::string& password() const { return password_; }
  int port() const { return port_; }
  /// Creates a fresh database and returns its name.
  std::string NewDatabase();
  /// Runs `sql` in `database` through libpq; throws std::runtime_error on failure.
  SqlRows Sql(const std::string& database, const std::string& sql) const;

 private:
  PgServer() = default;
  /// Starts the server; returns "" on success, else why not.
  std::string Start();

  std::string base_;  // temp dir: data/, socket, logs
  std::string bin_;   // directory of initdb and postgres
  std::string password_;
  int port_ = 0;
  int pid_ = -1;
  int databases_ = 0;
};

// ------------------------------------------------------------------------------------------ PgServer

namespace pg_detail {

/// Directory holding initdb and postgres: $KF_PG_BIN, else the newest /usr/lib/postgresql/<v>/bin, else the
/// directory of `initdb` on PATH (symlinks resolved). "" when none has both.
inline std::string FindBinDir() {
  namespace fs = std::filesystem;
  auto complete = [](const fs::path& dir) {
    std::error_code ec;
    return fs::exists(dir / "initdb", ec) && fs::exists(dir / "postgres", ec);
  };
  if (const char* env = std::getenv("KF_PG_BIN"); env != nullptr && *env != '\0') {
    return complete(env) ? env : "";
  }
  std::error_code ec;
  fs::path best;
  int best_version = -1;
  for (auto it = fs::directory_iterator("/usr/lib/postgresql", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    int version = std::atoi(it->path().filename().c_str());
    if (version > best_version && complete(it->path() / "bin")) {
      best_version = version;
      best = it->path() / "bin";
    }
  }
  if (!best.empty()) return best.string();
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  for (size_t pos = 0; pos <= dirs.size();) {
    size_t colon = dirs.find(':', pos);
    fs::path dir = dirs.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    if (fs::exists(dir / "initdb", ec)) {
      fs::path real = fs::canonical(dir / "initdb", ec).parent_path();
      if (!ec && complete(real)) return real.string();
    }
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return "";
}

inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

/// fork + exec `argv` as user `pw` (when not null), output appended to `log`; returns the pid.
/// `die_with_parent`: the child gets SIGQUIT (PostgreSQL's immediate shutdown) when this process dies.
inline pid_t Spawn(const std::vector<std::string>& argv, const passwd* pw, const std::string& log,
                   bool die_with_parent) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  if (pw != nullptr && (::setgid(pw->pw_gid) != 0 || ::setuid(pw->pw_uid) != 0)) ::_exit(126);
  if (die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGQUIT);  // after setuid, which clears it
    if (::getppid() != parent) ::_exit(125);
  }
  ::execv(args[0], args.data());
  ::_exit(127);
}

inline std::string Tail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

}  // namespace pg_detail

inline PgServer* PgServer::Shared(std::string* why_not) {
  static std::unique_ptr<PgServer> server;
  static std::string failure;
  static bool tried = false;
  if (!tried) {
    tried = true;
    std::unique_ptr<PgServer> s(new PgServer());
    failure = s->Start();
    if (failure.empty()) server = std::move(s);
  }
  if (!server && why_not != nullptr) *why_not = failure;
  return server.get();
}

inline std::string PgServer::Start() {
  namespace fs = std::filesystem;
  bin_ = pg_detail::FindBinDir();
  if (bin_.empty()) {
    return "PostgreSQL server binaries (initdb, postgres) not found; install them (Debian: apt-get install "
           "postgresql) or set KF_PG_BIN";
  }
  const passwd* pw = nullptr;
  if (::geteuid() == 0) {
    pw = ::getpwnam("postgres");
    if (pw == nullptr) return "running as root and there is no 'postgres' user to run the server as";
  }
  std::string tmpl = (fs::temp_directory_path() / "kf_pg_XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return "mkdtemp failed";
  base_ = tmpl;
  if (pw != nullptr && ::chown(base_.c_str(), pw->pw_uid, pw->pw_gid) != 0) return "cannot chown " + base_;
  std::mt19937_64 rng{std::random_device{}()};
  password_ = "pw" + std::to_string(rng());
  std::ofstream(base_ + "/pwfile") << password_ << "\n";
  if (pw != nullptr && ::chown((base_ + "/pwfile").c_str(), pw->pw_uid, pw->pw_gid) != 0) return "cannot chown pwfile";
  std::string log = base_ + "/initdb.log";
  pid_t init = pg_detail::Spawn({bin_ + "/initdb", "-D", base_ + "/data", "-U", "postgres", "-A", "scram-sha-256",
                                 "--pwfile=" + base_ + "/pwfile", "-E", "UTF8", "--no-locale", "--no-sync"},
                                pw, log, false);
  int status = 0;
  ::waitpid(init, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "initdb failed: " + pg_detail::Tail(log);
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = pg_detail::FreePort();
    std::string server_log = base_ + "/server.log";
    pid_ = pg_detail::Spawn({bin_ + "/postgres", "-D", base_ + "/data", "-p", std::to_string(port_), "-k", base_,
                             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
                             "-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=64MB"},
                            pw, server_log, true);
    std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port_) +
                           " dbname=postgres user=postgres connect_timeout=2 password=" + password_;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (PQping(conninfo.c_str()) == PQPING_OK) return "";
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;  // exited (e.g. the port was taken meanwhile): try another port
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    if (attempt == 2) return "the server did not start: " + pg_detail::Tail(server_log);
  }
  return "the server did not start";
}

inline PgServer::~PgServer() {
  if (pid_ > 0) {
    ::kill(pid_, SIGINT);  // fast shutdown
    int status = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (!base_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(base_, ec);
  }
}

inline std::string PgServer::Url(const std::string& database) const {
  return "postgresql://postgres:" + password_ + "@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

inline std::string PgServer::NewDatabase() {
  std::string name = "kf_test_" + std::to_string(++databases_);
  Sql("postgres", "CREATE DATABASE " + name);
  return name;
}

inline SqlRows PgServer::Sql(const std::string& database, const std::string& sql) const {
  std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=" + database +
                         " user=postgres password=" + password_;
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    throw std::runtime_error("cannot connect: " + msg);
  }
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  PGresult* res = PQexec(conn, sql.c_str());
  ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    std::string msg = PQresultErrorMessage(res);
    PQclear(res);
    PQfinish(conn);
    throw std::runtime_error("SQL failed: " + msg + " in: " + sql);
  }
  SqlRows rows;
  for (int r = 0; r < PQntuples(res); ++r) {
    rows.emplace_back();
    for (int c = 0; c < PQnfields(res); ++c) {
      rows.back().emplace_back(PQgetisnull(res, r, c) ? "NULL" : PQgetvalue(res, r, c));
    }
  }
  PQclear(res);
  PQfinish(conn);
  return rows;
}

}  // namespace kf::testing
