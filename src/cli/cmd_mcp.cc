// kf mcp — an MCP server over stdio for coding agents (kf::mcp, include/kernelfoundry/mcp.hpp): tools
// build_and_test, evaluate_candidate, get_result, list_results, validate_task; local mode (the results
// database of --db) unless a server is configured (KERNELFOUNDRY_SERVER_URL, _USER, _TOKEN, … or
// ~/.config/kernelfoundry/config.yml, as the reference reads them).
//
//   kf mcp [--root DIR]… [--db PATH|URL] [--gpu-arch A] [--no-verdict-cache]
//   kf mcp create-config [--server-url URL --user U [--token T]] [--root DIR] [--vscode-only|--mcp-json-only]
//                        [--print] [--force]
//
// stdout carries only the protocol; logs go to stderr. The tools read only folders inside a --root (default:
// the current directory). create-config writes .vscode/mcp.json (VS Code) and .mcp.json (Claude Code, Cursor,
// other clients) in the current directory: the command is this kf, the args `mcp --root <folder>`; --print
// prints them instead. The token is taken from --token or $KERNELFOUNDRY_TOKEN.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/record_job.hpp"
#include "cli/run_common.hpp"
#include "cli/validate_json.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/mcp.hpp"

namespace kf::cli {
namespace {
namespace fs = std::filesystem;

struct McpCliOptions {
  std::vector<std::string> roots;
  std::string db;
  std::string gpu_arch;
  bool no_verdict_cache = false;
  // create-config
  std::string server_url, user, token;
  bool vscode_only = false, mcp_only = false, print = false, force = false;
};

int RunMcp(const McpCliOptions& o) {
  mcp::McpOptions options;
  for (const std::string& r : o.roots) options.roots.emplace_back(r);
  options.db = o.db;
  if (!o.gpu_arch.empty()) options.evaluate.gpu_arch = o.gpu_arch;
  options.record = VerdictCachedRecord(!o.no_verdict_cache);
  options.validate = [](const std::string& folder, bool run) { return ValidateTaskJson(folder, run); };
  options.version = KF_VERSION;
  std::fprintf(stderr, "kf mcp: serving on stdio (protocol %s … %s)\n", mcp::kProtocolVersions[0],
               mcp::kProtocolVersions[std::size(mcp::kProtocolVersions) - 1]);
  return mcp::ServeStdio(std::move(options), stdin, stdout);
}

void WriteConfig(const fs::path& path, const Json& config, bool force) {
  std::error_code ec;
  if (fs::exists(path, ec) && !force) {
    throw Error(ErrorKind::kInvalidArgument, "exists (use --force to replace it, or --print)", path.string());
  }
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::trunc);
  out << DumpJson(config, 2) << "\n";
  if (!out) throw Error(ErrorKind::kIO, "cannot write", path.string());
  std::fprintf(stderr, "kf mcp: wrote %s\n", path.string().c_str());
}

int CreateConfig(const McpCliOptions& o) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const std::string kf = ec ? "kf" : self.string();
  std::map<std::string, std::string> env = {{"KERNELFOUNDRY_SERVER_URL", o.server_url}};
  if (!o.server_url.empty()) {
    const char* from_env = std::getenv("KERNELFOUNDRY_TOKEN");
    const std::string token = !o.token.empty() ? o.token : from_env != nullptr ? from_env : "";
    if (o.user.empty() || token.empty()) {
      throw Error(ErrorKind::kInvalidArgument, "a server needs --user and a token (--token or $KERNELFOUNDRY_TOKEN)",
                  o.server_url, "server_url");
    }
    env["KERNELFOUNDRY_USER"] = o.user;
    env["KERNELFOUNDRY_TOKEN"] = token;
  }
  const std::string root = o.roots.empty() ? fs::current_path().string() : fs::absolute(o.roots[0]).string();
  const Json vscode = mcp::ClientConfigFile("vscode", kf, {"mcp", "--root", o.roots.empty() ? "${workspaceFolder}" : root}, env);
  const Json generic = mcp::ClientConfigFile("mcp", kf, {"mcp", "--root", root}, env);
  if (o.print) {
    if (!o.mcp_only) std::printf("// .vscode/mcp.json\n%s\n", DumpJson(vscode, 2).c_str());
    if (!o.vscode_only) std::printf("// .mcp.json\n%s\n", DumpJson(generic, 2).c_str());
    return kExitOk;
  }
  if (!o.mcp_only) WriteConfig(fs::path(".vscode") / "mcp.json", vscode, o.force);
  if (!o.vscode_only) WriteConfig(".mcp.json", generic, o.force);
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("mcp", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<McpCliOptions>();
  CLI::App* cmd = app.add_subcommand("mcp", "MCP server on stdio for coding agents (build_and_test and more)");
  cmd->add_option("--root", o->roots, "A folder the tools may read (repeatable; default: the current directory)");
  cmd->add_option("--db", o->db, kDbOptionHelp);
  cmd->add_option("--gpu-arch", o->gpu_arch, "Override config gpu_arch of every evaluation");
  cmd->add_flag("--no-verdict-cache", o->no_verdict_cache, "Always build and test");
  CLI::App* cc = cmd->add_subcommand("create-config", "Write .vscode/mcp.json and .mcp.json that start kf mcp");
  cc->add_option("--server-url", o->server_url, "Submit to this kf serve --submit (empty: evaluate locally)");
  cc->add_option("--user", o->user, "User of the token (with --server-url)");
  cc->add_option("--token", o->token, "Bearer token (kf token add USER); default $KERNELFOUNDRY_TOKEN");
  cc->add_option("--root", o->roots, "Folder the agent's tasks live in (default: the workspace / current directory)");
  auto* v = cc->add_flag("--vscode-only", o->vscode_only, "Only .vscode/mcp.json");
  cc->add_flag("--mcp-json-only", o->mcp_only, "Only .mcp.json")->excludes(v);
  cc->add_flag("--print", o->print, "Print instead of writing files");
  cc->add_flag("--force", o->force, "Replace existing files");
  cc->callback([o, exit_code]() { *exit_code = CreateConfig(*o); });
  cmd->callback([o, exit_code, cc]() {
    if (cc->parsed()) return;
    *exit_code = RunMcp(*o);
  });
});

}  // namespace kf::cli
