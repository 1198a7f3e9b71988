// kf mcp's configuration as the reference reads it, the task folder's lineage file, the client config files
// of create-config, and version negotiation (include/kernelfoundry/mcp.hpp).
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/files.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/mcp.hpp"

extern char** environ;

namespace kf::mcp {
namespace {

/// The reference's keys and the variables that override them.
const std::pair<const char*, const char*> kKeys[] = {
    {"server_url", "KERNELFOUNDRY_SERVER_URL"}, {"user", "KERNELFOUNDRY_USER"},
    {"token", "KERNELFOUNDRY_TOKEN"},           {"timeout", "KERNELFOUNDRY_TIMEOUT"},
    {"poll_interval", "KERNELFOUNDRY_POLL_INTERVAL"}, {"max_wait", "KERNELFOUNDRY_MAX_WAIT"}};

std::string Scalar(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}

double Seconds(const std::string& text, const std::string& source, const char* key) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(v > 0)) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("expected a positive number of seconds, got \"{}\"", text),
                source, key);
  }
  return v;
}

std::filesystem::path LineageFile(const std::filesystem::path& folder) {
  return folder / ".kernelfoundry" / "kernels.json";
}

std::vector<std::string> ReadUuids(const std::filesystem::path& file) {
  auto bytes = ReadFileBytes(file);
  if (!bytes) return {};
  const Json list = ParseJson(*bytes, file.string());
  if (!list.is_array()) throw Error(ErrorKind::kParse, "expected a JSON list of kernel uuids", file.string());
  std::vector<std::string> out;
  for (const Json& v : list) out.push_back(v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

}  // namespace

std::string NegotiateVersion(std::string_view requested) {
  for (const char* v : kProtocolVersions) {
    if (requested == v) return v;
  }
  return kProtocolVersions[0];
}

ClientConfig ReadClientConfig(const std::filesystem::path& config_file, const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> values;
  std::map<std::string, std::string> source;
  if (auto bytes = ReadFileBytes(config_file)) {
    const Json file = ParseYaml(*bytes, config_file.string());
    if (!file.is_null() && !file.is_object()) {
      throw Error(ErrorKind::kInvalidArgument, "expected a YAML mapping (server_url, user, token, …)",
                  config_file.string());
    }
    if (file.is_object()) {
      for (const auto& [key, var] : kKeys) {
        if (file.contains(key)) {
          values[key] = Scalar(file[key]);
          source[key] = config_file.string();
        }
      }
    }
  }
  for (const auto& [key, var] : kKeys) {
    if (auto it = env.find(var); it != env.end()) {
      values[key] = it->second;
      source[key] = var;
    }
  }
  ClientConfig c;
  c.server_url = values["server_url"];
  while (!c.server_url.empty() && (c.server_url.back() == '/' || c.server_url.back() == ' ')) c.server_url.pop_back();
  while (!c.server_url.empty() && c.server_url.front() == ' ') c.server_url.erase(0, 1);
  if (c.server_url.empty()) return c;  // local mode needs no credentials
  c.user = values["user"];
  c.token = values["token"];
  for (const auto& [key, var] : {std::pair{"user", "KERNELFOUNDRY_USER"}, std::pair{"token", "KERNELFOUNDRY_TOKEN"}}) {
    if (values[key].empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("a server_url ({}) needs {} too: set {} or add {} to {}", c.server_url, key, var, key,
                              config_file.string()),
                  source.count("server_url") ? source["server_url"] : config_file.string(), key);
    }
  }
  if (!values["timeout"].empty()) c.timeout_s = Seconds(values["timeout"], source["timeout"], "timeout");
  if (!values["poll_interval"].empty()) {
    c.poll_interval_s = Seconds(values["poll_interval"], source["poll_interval"], "poll_interval");
  }
  if (!values["max_wait"].empty()) c.max_wait_s = Seconds(values["max_wait"], source["max_wait"], "max_wait");
  return c;
}

ClientConfig LoadClientConfig() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    if (kv.rfind("KERNELFOUNDRY_", 0) != 0) continue;
    const size_t eq = kv.find('=');
    if (eq != std::string_view::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  const char* home = std::getenv("HOME");
  const std::filesystem::path file =
      std::filesystem::path(home != nullptr ? home : "") / ".config" / "kernelfoundry" / "config.yml";
  return ReadClientConfig(file, env);
}

std::optional<std::string> LastKernelUuid(const std::filesystem::path& folder) {
  std::vector<std::string> uuids = ReadUuids(LineageFile(folder));
  if (uuids.empty()) return std::nullopt;
  return uuids.back();
}

void AppendKernelUuids(const std::filesystem::path& folder, const std::vector<std::string>& uuids) {
  if (uuids.empty()) return;
  const std::filesystem::path file = LineageFile(folder);
  std::vector<std::string> all = ReadUuids(file);
  all.insert(all.end(), uuids.begin(), uuids.end());
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  if (ec) throw Error(ErrorKind::kIO, "cannot create the directory: " + ec.message(), file.parent_path().string());
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << Json(all).dump(2) << "\n";
    if (!out) throw Error(ErrorKind::kIO, "cannot write the lineage file", tmp.string());
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) throw Error(ErrorKind::kIO, "cannot replace the lineage file: " + ec.message(), file.string());
}

Json ClientConfigFile(std::string_view kind, const std::string& kf_path, const std::vector<std::string>& args,
                      const std::map<std::string, std::string>& env) {
  Json server = {{"type", "stdio"}, {"command", kf_path}, {"args", args}, {"env", Json::object()}};
  for (const auto& [k, v] : env) server["env"][k] = v;
  if (kind == "vscode") return {{"servers", {{"kernelfoundry-mcp", server}}}};
  if (kind == "mcp") return {{"mcpServers", {{"kernelfoundry-mcp", server}}}};
  throw Error(ErrorKind::kInvalidArgument, fmt::format("expected vscode or mcp, got \"{}\"", kind), {}, "kind");
}

}  // namespace kf::mcp
