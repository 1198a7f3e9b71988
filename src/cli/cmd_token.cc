// kf token — bearer tokens of kf serve's submission API (kf serve --submit), stored in the results database as
// their SHA-256 only (table kf_api_tokens; kf::ApiTokenHash).
//
//   kf token add USER [--admin] [--db PATH|URL]     prints the new token once (stdout; nothing else there)
//   kf token list [--json] [--db …]                 id, user, admin, created, revoked (never a token)
//   kf token revoke USER [--id N] [--db …]          revokes USER's tokens (or only token N); exit 4 when none
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/run_common.hpp"
#include "cli/text_table.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/serve.hpp"
#include "kernelfoundry/store.hpp"

namespace kf::cli {
namespace {

struct TokenOptions {
  std::string db;
  std::string user;
  bool admin = false;
  bool json = false;
  std::optional<int64_t> id;
};

int Add(const TokenOptions& o) {
  auto store = OpenStore(StoreUrlOf(o.db));
  const std::string token = NewApiToken();
  const int64_t id = store->AddApiToken(o.user, ApiTokenHash(token), o.admin);
  std::printf("%s\n", token.c_str());
  std::fprintf(stderr, "kf token: token %lld of %s%s stored in %s (only its hash; keep the token, it is not shown "
                       "again)\n",
               static_cast<long long>(id), o.user.c_str(), o.admin ? " (admin)" : "", store->Describe().c_str());
  return kExitOk;
}

int List(const TokenOptions& o) {
  auto store = OpenStore(StoreUrlOf(o.db));
  const std::vector<ApiToken> tokens = store->ListApiTokens();
  if (o.json) {
    Json out = Json::array();
    for (const ApiToken& t : tokens) out.push_back(t.ToJson());
    std::printf("%s\n", DumpJson(out, 2).c_str());
    return kExitOk;
  }
  TextTable table({{"id", TextTable::Align::kRight}, {"user"}, {"admin"}, {"created"}, {"revoked"}});
  for (const ApiToken& t : tokens) {
    table.AddRow({std::to_string(t.id), t.user, t.admin ? "yes" : "no", t.created_at, t.revoked_at.value_or("-")});
  }
  std::fputs(table.Render().c_str(), stdout);
  return kExitOk;
}

int Revoke(const TokenOptions& o) {
  auto store = OpenStore(StoreUrlOf(o.db));
  const int64_t n = store->RevokeApiTokens(o.user, o.id);
  std::printf("revoked %lld token(s) of %s\n", static_cast<long long>(n), o.user.c_str());
  return n > 0 ? kExitOk : kExitNotFound;
}

}  // namespace

KF_REGISTER_COMMAND("token", [](CLI::App& app, int* exit_code) {
  auto o = std::make_shared<TokenOptions>();
  CLI::App* cmd = app.add_subcommand("token", "Bearer tokens of the submission API (kf serve --submit)");
  cmd->require_subcommand(1);
  CLI::App* add = cmd->add_subcommand("add", "Create a token for USER and print it once");
  add->add_option("USER", o->user, "User name (kernels.db_user of their jobs)")->required();
  add->add_flag("--admin", o->admin, "The token sees every user's jobs");
  add->add_option("--db", o->db, kDbOptionHelp);
  add->callback([o, exit_code]() { *exit_code = Add(*o); });
  CLI::App* list = cmd->add_subcommand("list", "List the tokens (never the tokens themselves)");
  list->add_flag("--json", o->json, "As JSON");
  list->add_option("--db", o->db, kDbOptionHelp);
  list->callback([o, exit_code]() { *exit_code = List(*o); });
  CLI::App* revoke = cmd->add_subcommand("revoke", "Revoke USER's tokens");
  revoke->add_option("USER", o->user, "User name")->required();
  revoke->add_option("--id", o->id, "Only the token with this id");
  revoke->add_option("--db", o->db, kDbOptionHelp);
  revoke->callback([o, exit_code]() { *exit_code = Revoke(*o); });
});

}  // namespace kf::cli
