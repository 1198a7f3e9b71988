// kf exec — runs one command under the process runner (kf::RunProcess) and prints the ProcessRun.
//
//   kf exec [options] -- CMD ARGS...
// --sandbox isolates the command as a candidate's test process is isolated (harness/isolation.hpp: Landlock, the
// unprivileged sandbox user, the seccomp filter, HOME and the temp variables in a private directory that is also
// its working directory and the only place it may write; --read DIR adds readable directories).
// Exit code: the child's exit code when it exited on its own, 128+N when a signal N killed it, 124 when a
// timeout or limit ended it (wall, inactivity, end marker, memory, processes, output, CPU, file size),
// 127 when it could not be started.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/process.hpp"
#include "core/temp_dir.hpp"
#include "harness/isolation.hpp"

namespace kf::cli {
namespace {

/// "512M", "1.5G", "100k", "4096" -> bytes (ParseByteSize: binary units, k = 1024).
uint64_t ParseSize(const std::string& text, const std::string& option) {
  const std::optional<uint64_t> bytes = ParseByteSize(text);
  if (!bytes) throw Error(ErrorKind::kInvalidArgument, "expected a size like 512M, got '" + text + "'", "", option);
  return *bytes;
}

/// Seconds -> ms. At most a year: larger values (inf, 1e300) overflowed into a negative limit that fired at once
/// (stranger test, 2026-12-07).
std::chrono::milliseconds Seconds(double s, const std::string& option) {
  constexpr double kMaxSeconds = 365.0 * 24 * 3600;
  if (!(s >= 0) || s > kMaxSeconds) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("expected seconds from 0 to {:.0f} (a year), got {}",
                                                         kMaxSeconds, s), "", option);
  }
  return std::chrono::milliseconds(std::llround(s * 1000.0));
}

std::string HumanBytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ull << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

/// The exit code of `kf exec` for a finished run (see the file comment).
int ExitCodeOf(const ProcessRun& run) {
  switch (run.reason) {
    case TerminationReason::kExited: return run.result.returncode;
    case TerminationReason::kSignaled: return 128 - run.result.returncode;
    case TerminationReason::kSpawnFailed: return 127;
    default: return 124;
  }
}

void PrintSummary(const std::vector<std::string>& cmd, const ProcessRun& run) {
  std::string joined;
  for (const auto& a : cmd) joined += (joined.empty() ? "" : " ") + a;
  std::printf("command:     %s\n", joined.c_str());
  std::printf("reason:      %s%s%s\n", TerminationReasonName(run.reason),
              run.result.message && !run.result.message->empty() ? " — " : "",
              run.result.message ? run.result.message->c_str() : "");
  std::printf("returncode:  %d\n", run.result.returncode);
  std::printf("wall:        %.3f s   cpu: %.3f s   peak rss: %s\n", run.wall_seconds, run.cpu_seconds,
              run.peak_rss_bytes ? HumanBytes(*run.peak_rss_bytes).c_str() : "unknown");
  std::printf("containment: %s\n", ContainmentMethodName(run.containment));
  for (const auto& [name, how] : run.limits) std::printf("limit:       %s: %s\n", name.c_str(), how.c_str());
  if (!run.network_note.empty()) std::printf("network:     %s\n", run.network_note.c_str());
  for (const auto& note : run.notes) std::printf("note:        %s\n", note.c_str());
  if (run.end_marker_line) std::printf("end marker:  %s\n", run.end_marker_line->c_str());
  std::printf("--- stdout (%llu bytes) ---\n%s", static_cast<unsigned long long>(run.stdout_bytes),
              run.result.stdout_text.c_str());
  if (!run.result.stdout_text.empty() && run.result.stdout_text.back() != '\n') std::printf("\n");
  std::printf("--- stderr (%llu bytes) ---\n%s", static_cast<unsigned long long>(run.stderr_bytes),
              run.result.stderr_text.c_str());
  if (!run.result.stderr_text.empty() && run.result.stderr_text.back() != '\n') std::printf("\n");
}

struct ExecArgs {
  std::vector<std::string> command;
  std::optional<double> timeout, inactivity, grace;
  double kill_grace = 2.0;
  std::string end_marker, memory, fsize, output_cap, output_kill, cwd;
  std::optional<uint64_t> cpu, nofile, nproc;
  std::vector<std::string> env, allow_secret, read;
  bool sandbox = false, no_network = false, shell = false, force_subreaper = false, print_env = false, summary = false,
       json = false, live = false, no_inherit = false;
};

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ExecArgs>();
  CLI::App* sub = app.add_subcommand(
      "exec",
      "Run a command under the process runner and print the result as JSON.\n"
      "Exit code: the child's exit code; 128+N if signal N killed it; 124 if a timeout or limit ended it;\n"
      "127 if it could not be started.");
  sub->add_option("command", args->command, "The command and its arguments (after --)");
  sub->add_option("--timeout", args->timeout, "Wall-clock timeout, seconds");
  sub->add_option("--inactivity", args->inactivity, "Kill after this many seconds without output");
  sub->add_option("--end-marker", args->end_marker, "'pytest' (summary line) or a literal line substring");
  sub->add_option("--grace", args->grace, "Seconds to wait after the end marker (default 10 pytest, 2 literal)");
  sub->add_option("--kill-grace", args->kill_grace, "Seconds between SIGTERM and SIGKILL (default 2)");
  sub->add_option("--memory", args->memory, "Memory limit, e.g. 512M (cgroup, else RLIMIT_AS)");
  sub->add_option("--cpu", args->cpu, "CPU time limit per process, seconds");
  sub->add_option("--fsize", args->fsize, "Largest file the child may write, e.g. 100M");
  sub->add_option("--nofile", args->nofile, "Open files limit");
  sub->add_option("--nproc", args->nproc, "Process/thread limit of the whole tree (cgroup pids.max)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{4194304}));  // 0 would refuse the command; 2^22: the kernel's pid_max
  sub->add_flag("--no-network", args->no_network, "Run in a fresh network namespace (loopback only)");
  CLI::Option* sandbox = sub->add_flag("--sandbox", args->sandbox,
                "Isolate it as candidates' test processes are: Landlock, the unprivileged sandbox user, seccomp; "
                "it works and writes only in a private temp directory and a /dev/shm of its own (when kf is root)");
  // One value per occurrence: a repeatable option that took several would swallow the `--` before the command
  // (CLI11 ends the values there and goes on parsing options: `kf exec --read D -- ls -la` failed on -la).
  sub->add_option("--read", args->read, "With --sandbox: an absolute path it may also read (repeatable)")
      ->allow_extra_args(false)
      ->needs(sandbox);
  sub->add_option("--output-cap", args->output_cap, "Bytes kept per stream (default 1M)");
  sub->add_option("--output-kill", args->output_kill, "Kill when a stream produced more than this");
  sub->add_option("--env", args->env, "Set K=V in the child (repeatable)")->allow_extra_args(false);
  sub->add_option("--allow-secret", args->allow_secret, "Let this secret-looking variable pass (repeatable)")
      ->allow_extra_args(false);
  sub->add_flag("--no-inherit-env", args->no_inherit, "Do not pass the allow-listed part of our environment");
  // --sandbox runs the command in a private directory of its own (what it reads comes with --read DIR).
  sub->add_option("--cwd", args->cwd, "Working directory of the child (not with --sandbox)")->excludes(sandbox);
  sub->add_flag("--shell", args->shell, "Run the command string through /bin/sh -c");
  sub->add_flag("--force-subreaper", args->force_subreaper, "Use no cgroup (subreaper containment, rlimits)");
  sub->add_flag("--print-env", args->print_env, "Print the environment the child would get and exit");
  sub->add_flag("--live", args->live, "Echo output lines to stderr while the command runs");
  auto* json_flag = sub->add_flag("--json", args->json, "Print the ProcessRun as JSON (default)");
  sub->add_flag("--summary", args->summary, "Print a readable summary instead of JSON")->excludes(json_flag);

  sub->callback([args, exit_code] {
    ProcessOptions o;
    o.argv = args->command;
    o.use_shell = args->shell;
    o.cwd = args->cwd;
    o.inherit_allowed_env = !args->no_inherit;
    o.allow_secret_names = args->allow_secret;
    for (const auto& kv : args->env) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw Error(ErrorKind::kInvalidArgument, "expected K=V, got '" + kv + "'", "", "--env");
      }
      o.env_add[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    std::optional<TempDir> private_dir;
    if (args->sandbox) {
      for (const std::string& r : args->read) {
        std::error_code ec;
        if (r.empty() || r.front() != '/' || !std::filesystem::exists(r, ec)) {
          throw Error(ErrorKind::kInvalidArgument, "expected an absolute path that exists, got '" + r + "'", "",
                      "--read");
        }
        if (std::filesystem::weakly_canonical(r, ec) == "/") {
          throw Error(ErrorKind::kInvalidArgument, "'" + r + "' is the whole file system, which the sandbox exists "
                      "to keep from the command; name the directories it reads", "", "--read");
        }
      }
      private_dir.emplace(std::filesystem::path{}, "kf-exec-");
      OpenToChildren(private_dir->path());
      const std::filesystem::path work = private_dir->path() / "work";
      IsolateChild(o, {}, work, std::vector<std::filesystem::path>(args->read.begin(), args->read.end()));
      o.cwd = work;
    }
    if (args->print_env) {  // after the sandbox's changes (its HOME, TMPDIR, USER), as the child gets them
      for (const auto& [k, v] : BuildChildEnvironment(o)) std::printf("%s=%s\n", k.c_str(), v.c_str());
      *exit_code = kExitOk;
      return;
    }
    if (args->command.empty()) {
      throw Error(ErrorKind::kInvalidArgument, "no command given (kf exec [options] -- CMD ARGS...)", "",
                  "command");
    }
    if (args->timeout) o.wall_timeout = Seconds(*args->timeout, "--timeout");
    if (args->inactivity) o.inactivity_timeout = Seconds(*args->inactivity, "--inactivity");
    if (!args->end_marker.empty()) {
      double grace = args->grace.value_or(args->end_marker == "pytest" ? 10.0 : 2.0);
      o.end_marker = args->end_marker == "pytest" ? PytestEndMarker(Seconds(grace, "--grace"))
                                                  : EndMarker::Literal(args->end_marker, Seconds(grace, "--grace"));
    }
    o.kill_grace = Seconds(args->kill_grace, "--kill-grace");
    if (!args->memory.empty()) o.memory_limit_bytes = ParseSize(args->memory, "--memory");
    o.cpu_limit_seconds = args->cpu;
    if (!args->fsize.empty()) o.file_size_limit_bytes = ParseSize(args->fsize, "--fsize");
    o.open_files_limit = args->nofile;
    o.process_limit = args->nproc;
    o.no_network = args->no_network;
    o.force_subreaper = args->force_subreaper;
    if (!args->output_cap.empty()) o.output_cap_bytes = ParseSize(args->output_cap, "--output-cap");
    if (!args->output_kill.empty()) o.output_kill_bytes = ParseSize(args->output_kill, "--output-kill");
    if (args->live) {
      o.on_line = [](bool is_stderr, const std::string& line) {
        std::fprintf(stderr, "%s %s\n", is_stderr ? "[err]" : "[out]", line.c_str());
      };
    }
    ProcessRun run = RunProcess(o);
    if (args->summary) {
      PrintSummary(args->command, run);
    } else {
      std::printf("%s\n", DumpJson(run.ToJson(), 2).c_str());
    }
    std::fflush(stdout);
    *exit_code = ExitCodeOf(run);
  });
}

}  // namespace

KF_REGISTER_COMMAND("exec", Setup);

}  // namespace kf::cli
