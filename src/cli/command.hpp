// Verb registry of the `kf` CLI. Each src/cli/cmd_<verb>.cc defines one verb and registers it with
// KF_REGISTER_COMMAND; main.cc builds the CLI11 app from the registry. Adding a verb = adding one file.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace kf::cli {

/// Sets up one verb: adds a subcommand to `app`, and a callback that runs it. The callback returns the
/// process exit code (see exit_codes.hpp) through `*exit_code`.
using CommandSetup = std::function<void(CLI::App& app, int* exit_code)>;

struct CommandEntry {
  std::string name;
  CommandSetup setup;
};

/// All registered verbs, in registration order (static-initialisation order across files is unspecified;
/// main.cc sorts them by name for --help).
std::vector<CommandEntry>& CommandRegistry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, CommandSetup setup) {
    CommandRegistry().push_back({std::move(name), std::move(setup)});
  }
};

}  // namespace kf::cli

#define KF_CONCAT_INNER(a, b) a##b
#define KF_CONCAT(a, b) KF_CONCAT_INNER(a, b)
/// Registers a verb: KF_REGISTER_COMMAND("info", [](CLI::App& app, int* rc) { ... }); the registrar is named
/// by __COUNTER__, unique within a translation unit also when a unity build puts several verbs in one.
#define KF_REGISTER_COMMAND(name, setup) \
  static ::kf::cli::CommandRegistrar KF_CONCAT(kf_command_registrar_, __COUNTER__)(name, setup)
