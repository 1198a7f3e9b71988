// ChildContainmentRequest / ParseChildContainmentRequest (process.hpp): what a run's child-side containment asks for,
// as data, for a process that contains itself the same way (a warm-started worker; harness/warm_start.cc registers
// it with kf's zygote, python/src/contain_module.cc reads it back and contains the worker with ChildPolicy and
// ContainSelf, src/exec/contain.hpp).
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/process.hpp"

namespace kf {
namespace {

[[noreturn]] void Malformed(const std::string& field, const std::string& expected) {
  throw Error(ErrorKind::kInvalidArgument, "malformed containment request: expected " + expected, "", field);
}

const Json& Member(const Json& object, const char* name, const std::string& field) {
  if (!object.is_object() || !object.contains(name)) {
    Malformed(field + "." + name, "a member '" + std::string(name) + "'");
  }
  return object[name];
}

bool Bool(const Json& object, const char* name, const std::string& field) {
  const Json& v = Member(object, name, field);
  if (!v.is_boolean()) Malformed(field + "." + name, "true or false");
  return v.get<bool>();
}

std::vector<std::filesystem::path> Paths(const Json& list, const std::string& field) {
  if (!list.is_array()) Malformed(field, "a list of paths");
  std::vector<std::filesystem::path> out;
  for (const Json& p : list) {
    if (!p.is_string()) Malformed(field, "a list of paths");
    out.emplace_back(p.get<std::string>());
  }
  return out;
}

uint32_t Id(const Json& v, const std::string& field) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() > 0xffffffffULL) Malformed(field, "a uid/gid (0..2^32-1)");
  return static_cast<uint32_t>(v.get<uint64_t>());
}

}  // namespace

Json ChildContainmentRequest(const ProcessOptions& options) {
  Json request = {{"filesystem_isolation", nullptr}, {"sandbox", nullptr}};
  if (const auto& iso = options.filesystem_isolation) {
    Json writable = Json::array();
    for (const auto& p : iso->writable_paths) writable.push_back(p.string());
    Json readable = nullptr;
    if (iso->readable_paths) {
      readable = Json::array();
      for (const auto& p : *iso->readable_paths) readable.push_back(p.string());
    }
    request["filesystem_isolation"] = {{"writable_paths", std::move(writable)},
                                       {"readable_paths", std::move(readable)},
                                       {"required", iso->required}};
  }
  if (const auto& sb = options.sandbox) {
    Json user = nullptr;
    if (sb->user) {
      user = {{"uid", sb->user->uid}, {"gid", sb->user->gid}, {"groups", sb->user->groups}, {"name", sb->user->name}};
    }
    request["sandbox"] = {{"user", std::move(user)}, {"allow_perf_events", sb->allow_perf_events},
                          {"allow_loopback_sockets", sb->allow_loopback_sockets}, {"required", sb->required}};
  }
  return request;
}

void ParseChildContainmentRequest(const Json& request, ProcessOptions* options) {
  if (!request.is_object()) Malformed("request", "an object");
  options->filesystem_isolation.reset();
  options->sandbox.reset();
  if (request.contains("filesystem_isolation") && !request["filesystem_isolation"].is_null()) {
    const std::string f = "filesystem_isolation";
    const Json& j = request[f];
    FilesystemIsolation iso;
    iso.writable_paths = Paths(Member(j, "writable_paths", f), f + ".writable_paths");
    iso.required = Bool(j, "required", f);
    if (j.contains("readable_paths") && !j["readable_paths"].is_null()) {
      iso.readable_paths = Paths(j["readable_paths"], f + ".readable_paths");
    }
    options->filesystem_isolation = std::move(iso);
  }
  if (request.contains("sandbox") && !request["sandbox"].is_null()) {
    const std::string f = "sandbox";
    const Json& j = request[f];
    ProcessSandbox sb;
    sb.allow_perf_events = Bool(j, "allow_perf_events", f);
    sb.allow_loopback_sockets = j.contains("allow_loopback_sockets") && Bool(j, "allow_loopback_sockets", f);
    sb.required = Bool(j, "required", f);
    if (j.contains("user") && !j["user"].is_null()) {
      const Json& u = j["user"];
      SandboxUser user;
      user.uid = Id(Member(u, "uid", "sandbox.user"), "sandbox.user.uid");
      user.gid = Id(Member(u, "gid", "sandbox.user"), "sandbox.user.gid");
      const Json& groups = Member(u, "groups", "sandbox.user");
      if (!groups.is_array()) Malformed("sandbox.user.groups", "a list of gids");
      for (const Json& g : groups) user.groups.push_back(Id(g, "sandbox.user.groups"));
      if (u.contains("name") && u["name"].is_string()) user.name = u["name"].get<std::string>();
      sb.user = std::move(user);
    }
    options->sandbox = std::move(sb);
  }
}

}  // namespace kf
