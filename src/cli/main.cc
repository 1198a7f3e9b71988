// kf — the KernelFoundry command line. Thin: parses arguments and calls the library. Each verb lives in its
// own cmd_<verb>.cc. Errors (kf::Error) are printed as one line "kf: error: <file>: <field>: <message>" and
// mapped to exit codes in exit_codes.hpp.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/termination.hpp"
#include "kernelfoundry/error.hpp"

namespace kf::cli {
std::vector<CommandEntry>& CommandRegistry() {
  static std::vector<CommandEntry> registry;
  return registry;
}
}  // namespace kf::cli

int main(int argc, char** argv) {
  // First: every later thread inherits the blocked signals. `kf serve` runs no candidate and has its own
  // SIGINT/SIGTERM handling (a clean stop, exit 0); two sigwait threads would race for the signal.
  if (!(argc > 1 && std::string_view(argv[1]) == "serve")) kf::cli::InstallTerminationCleanup();
  CLI::App app{"kf — KernelFoundry: build, test, time and score kernel candidates"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kf ") + KF_VERSION);
  int exit_code = kf::cli::kExitOk;
  auto& registry = kf::cli::CommandRegistry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& entry : registry) entry.setup(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help / --version are "errors" that succeed; CLI11 prints them itself.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    // Everything else in kf's one-line form: "kf: error: <message>", exit 2.
    std::string message = e.what();
    for (char& c : message) {
      if (c == '\n') c = ' ';
    }
    while (!message.empty() && message.back() == ' ') message.pop_back();
    std::fprintf(stderr, "kf: error: %s (see kf --help)\n", message.c_str());
    return kf::cli::kExitUsage;
  } catch (const kf::Error& e) {
    std::fprintf(stderr, "kf: error: %s\n", e.what());
    return kf::cli::ExitCodeFor(e.kind());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kf: internal error: %s\n", e.what());
    return kf::cli::kExitInternal;
  }
  return exit_code;
}
