// ChildSandboxPlan (process.hpp): the child-side sandbox of RunProcess as data, for a process that contains
// itself the same way (a warm-started test worker; harness/warm_start.cc hands it to kf's zygote).
#include <unistd.h>

#include <string>
#include <vector>

#include "exec/landlock.hpp"
#include "exec/seccomp.hpp"
#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/process.hpp"

namespace kf {

Json ChildSandboxPlan(const ProcessOptions& options) {
  using namespace exec_internal;
  Json plan = Json::object();
  plan["landlock"] = nullptr;
  plan["user"] = nullptr;
  plan["seccomp"] = nullptr;
  plan["drop_privileges"] = options.sandbox.has_value();
  if (options.filesystem_isolation && LandlockAbi() >= 1) {
    std::vector<std::string> writable, readable;
    for (const auto& p : options.filesystem_isolation->writable_paths) writable.push_back(p.string());
    const auto& allowed = options.filesystem_isolation->readable_paths;
    if (allowed) {
      for (const auto& p : *allowed) readable.push_back(p.string());
    }
    LandlockPlan ll;
    if (!MakeLandlockPlan(LandlockAbi(), writable, allowed ? &readable : nullptr, &ll)) {
      throw Error(ErrorKind::kInvalidArgument, "too many paths for filesystem isolation", "",
                  "filesystem_isolation");
    }
    Json rules = Json::array();
    for (int i = 0; i < ll.n_rules; ++i) rules.push_back(Json::array({ll.rules[i].path, ll.rules[i].access}));
    plan["landlock"] = {{"abi", ll.abi}, {"handled_fs", ll.handled_fs}, {"scoped", ll.scoped},
                        {"file_rights", LandlockFileRights()}, {"rules", std::move(rules)}};
  }
  if (options.sandbox) {
    if (options.sandbox->user) {
      const SandboxUser& u = *options.sandbox->user;
      plan["user"] = {{"uid", u.uid}, {"gid", u.gid}, {"groups", u.groups}, {"name", u.name}};
    }
    if (SeccompAvailable()) {
      const std::vector<sock_filter> program = BuildSeccompFilter(options.sandbox->allow_perf_events);
      plan["seccomp"] = Base64Encode(std::string_view(reinterpret_cast<const char*>(program.data()),
                                                      program.size() * sizeof(sock_filter)));
    }
  }
  return plan;
}

}  // namespace kf
