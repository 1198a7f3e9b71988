// kf mcp in server mode: the reference MCP server's HTTP flow (see tools.hpp) over cpp-httplib (HTTPS through
// OpenSSL when the URL says https://).
#include <httplib.h>

#include <fmt/format.h>

#include <chrono>
#include <set>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "mcp/tools.hpp"

namespace kf::mcp {
namespace {

/// The statuses after which a job does not change any more, and the ones that count as success (the
/// reference's TERMINAL_STATUSES / SUCCESS_STATUSES).
const std::set<std::string> kTerminal = {"COMPLETE", "FAIL", "CANCELED", "VALIDATED"};
const std::set<std::string> kSuccess = {"COMPLETE", "VALIDATED"};

/// A client for the server of `c` and the path prefix of its URL ("" or "/prefix").
struct Endpoint {
  std::unique_ptr<httplib::Client> client;
  std::string prefix;
};

Endpoint Connect(const ClientConfig& c) {
  const size_t scheme = c.server_url.find("://");
  if (scheme == std::string::npos || (c.server_url.rfind("http://", 0) != 0 && c.server_url.rfind("https://", 0) != 0)) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("expected http://… or https://…, got \"{}\"", c.server_url),
                "KERNELFOUNDRY_SERVER_URL", "server_url");
  }
  const size_t path = c.server_url.find('/', scheme + 3);
  Endpoint e;
  e.client = std::make_unique<httplib::Client>(c.server_url.substr(0, path));
  if (path != std::string::npos) e.prefix = c.server_url.substr(path);
  const auto secs = std::chrono::duration<double>(c.timeout_s);
  e.client->set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(secs));
  e.client->set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(secs));
  e.client->set_connection_timeout(std::chrono::seconds(std::min(30, std::max(1, static_cast<int>(c.timeout_s)))));
  e.client->set_bearer_token_auth(c.token);
  return e;
}

std::string Message(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

Json Body(const httplib::Result& r, const std::string& what) {
  if (!r) throw Error(ErrorKind::kIO, fmt::format("no answer ({})", httplib::to_string(r.error())), what);
  Json body;
  try {
    body = ParseJson(r->body, what);
  } catch (const Error&) {
    body = Json{{"raw_response", r->body.substr(0, 2000)}};
  }
  if (r->status >= 400) {
    const std::string msg = body.is_object() && body.contains("error") ? Message(body["error"]) : body.dump();
    throw Error(ErrorKind::kIO, fmt::format("HTTP {}: {}", r->status, msg), what);
  }
  return body;
}

/// The server's job status every poll interval until it is terminal; cancellation cancels the job there.
std::string Poll(const ClientConfig& c, Endpoint& e, int64_t job_id, CallContext& ctx) {
  const auto start = std::chrono::steady_clock::now();
  const std::string path = fmt::format("{}/api/job/{}", e.prefix, job_id);
  while (true) {
    const Json job = Body(e.client->Get(path), path);
    const std::string status = job.value("status", "");
    if (kTerminal.count(status)) return status;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed >= c.max_wait_s) {
      throw Error(ErrorKind::kLimit,
                  fmt::format("timed out after {:.0f} s waiting for job {}; last status: {}", c.max_wait_s, job_id,
                              status),
                  path);
    }
    ctx.Progress(10 + 70 * std::min(elapsed / c.max_wait_s, 1.0), fmt::format("job {}: {}", job_id, status));
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(c.poll_interval_s);
    while (std::chrono::steady_clock::now() < until) {
      if (ctx.stop().stop_requested()) return "CANCELED";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

}  // namespace

Json RemoteGet(const ClientConfig& c, const std::string& path, const std::multimap<std::string, std::string>& params) {
  Endpoint e = Connect(c);
  httplib::Params p(params.begin(), params.end());
  return Body(e.client->Get(e.prefix + path, p, httplib::Headers{}), path);
}

Json RemoteEvaluate(const ClientConfig& c, const std::string& zip, const std::string& name,
                    const std::map<std::string, std::string>& form, CallContext& ctx) {
  Endpoint e = Connect(c);
  httplib::MultipartFormDataItems items = {{"file", zip, name, "application/zip"}};
  for (const auto& [k, v] : form) items.push_back({k, v, "", ""});
  ctx.Progress(5, "submitting");
  const std::string submit = e.prefix + "/api/validate_job";
  const Json sub = Body(e.client->Post(submit, items), submit);
  if (!sub.contains("job_id") || !sub["job_id"].is_number_integer()) {
    throw Error(ErrorKind::kIO, fmt::format("the server did not return a job_id: {}", sub.dump()), submit);
  }
  const int64_t job_id = sub["job_id"].get<int64_t>();
  ctx.OnCancel([c, job_id] {
    try {
      Endpoint ce = Connect(c);
      (void)ce.client->Post(fmt::format("{}/api/job/{}/cancel", ce.prefix, job_id));
    } catch (const std::exception&) {
    }
  });
  ctx.Progress(10, fmt::format("job {} queued", job_id));
  const std::string status = Poll(c, e, job_id, ctx);
  Json out = {{"success", kSuccess.count(status) != 0}, {"job_id", job_id}, {"job_status", status},
              {"runtime_stats", Json::object()}, {"speedup", "N/A"}};
  if (status == "CANCELED") {
    out["error"] = "canceled";
    out["eval_log"] = "canceled";
    return out;
  }
  ctx.Progress(80, "fetching the results");
  const Json kernels = RemoteGet(c, "/api/kernels_by_job", {{"job_id", std::to_string(job_id)}}).value("kernels", Json::array());
  std::vector<std::string> uuids;
  for (const Json& k : kernels) {
    if (k.contains("uuid") && k["uuid"].is_string()) uuids.push_back(k["uuid"].get<std::string>());
  }
  out["kernel_uuids"] = uuids;
  if (!kernels.empty() && kernels[0].contains("id")) {
    const Json log = RemoteGet(c, fmt::format("/api/kernels/{}/eval_log", kernels[0]["id"].get<int64_t>()), {});
    out["eval_log"] = log.value("eval_log", "");
    out["runtime_stats"] = log.value("runtime_stats", Json::object());
    out["speedup"] = log.contains("speedup") ? log["speedup"] : Json("N/A");
    for (const char* k : {"status", "speedup_ci", "benchmarks", "uuid", "parent_uuid"}) {
      if (log.contains(k)) out[k] = log[k];
    }
    out["kernel_id"] = kernels[0]["id"];
    out["kernel_uuid"] = kernels[0].value("uuid", Json(nullptr));
    out["cached"] = log.value("cached", false);
  } else {
    std::string raw;
    for (const Json& l : RemoteGet(c, "/api/jobs/logs", {{"job_id", std::to_string(job_id)}}).value("logs", Json::array())) {
      if (l.contains("raw_log") && l["raw_log"].is_string() && !l["raw_log"].get<std::string>().empty()) {
        raw += (raw.empty() ? "" : "\n") + l["raw_log"].get<std::string>();
      }
    }
    out["eval_log"] = raw.empty() ? "Server error: Failed to retrieve evaluation log." : raw;
    if (!kSuccess.count(status)) out["error"] = fmt::format("job {} ended {}", job_id, status);
  }
  ctx.Progress(100, "done");
  return out;
}

Json RemoteBuildAndTest(const ClientConfig& c, const std::filesystem::path& folder, CallContext& ctx) {
  MemoryFileMap upload = MemoryFileMap::FromDisk(folder);
  for (const std::string& p : upload.ListFiles()) {
    if (p.rfind(".kernelfoundry/", 0) == 0) upload.Remove(p);  // the local lineage stays here
  }
  std::map<std::string, std::string> form = {{"idsid", c.user}};
  const std::optional<std::string> parent = LastKernelUuid(folder);
  if (parent) form["parent_uuid"] = *parent;
  Json out = RemoteEvaluate(c, upload.ToArchive(ArchiveFormat::kZip), folder.filename().string() + ".zip", form, ctx);
  if (out.contains("kernel_uuids")) AppendKernelUuids(folder, out["kernel_uuids"].get<std::vector<std::string>>());
  out["parent_uuid"] = parent ? Json(*parent) : Json(nullptr);
  return out;
}

}  // namespace kf::mcp
