// The HTTP side of kf serve's submission API (see submit_api.hpp; contract in include/kernelfoundry/serve.hpp):
// the reference server's endpoints that its MCP server calls, behind bearer tokens.
#include "serve/submit_api.hpp"

#include <fmt/format.h>

#include <charconv>
#include <functional>
#include <variant>

#include "kernelfoundry/error.hpp"

namespace kf::serve {
namespace {

using Handler = std::function<void(const ApiToken&, const httplib::Request&, httplib::Response&)>;

void Answer(httplib::Response& res, int status, const Json& body) {
  SecurityHeaders(res);
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), kJsonType);
}

void Refuse(httplib::Response& res, const ApiRefusal& r) {
  if (r.status == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"kf\"");
  if (r.retry_after_s > 0) res.set_header("Retry-After", std::to_string(r.retry_after_s));
  Answer(res, r.status, {{"error", r.message}});
}

/// The token of the request and one request of its user's rate, or a refusal.
std::variant<ApiToken, ApiRefusal> Admit(SubmitService& svc, const httplib::Request& req) {
  const std::string auth = req.get_header_value("Authorization");
  if (auth.empty()) return ApiRefusal{401, "missing \"Authorization: Bearer <token>\" (kf token add USER)"};
  auto who = svc.Authenticate(auth);
  if (!who) return ApiRefusal{401, "invalid or revoked token"};
  if (auto r = svc.TakeRequest(who->user)) return *r;
  return *who;
}

/// Wraps a handler: authentication, rate limit, refusals and errors as JSON answers.
httplib::Server::Handler Guarded(SubmitService& svc, Handler h) {
  return [&svc, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    try {
      auto admitted = Admit(svc, req);
      if (auto* r = std::get_if<ApiRefusal>(&admitted)) return Refuse(res, *r);
      h(std::get<ApiToken>(admitted), req, res);
    } catch (const ApiRefusal& r) {
      Refuse(res, r);
    } catch (const Error& e) {
      const int status = e.kind() == ErrorKind::kNotFound ? 404 : e.kind() == ErrorKind::kInvalidArgument ? 400 : 500;
      Answer(res, status, {{"error", e.what()}});
    } catch (const std::exception& e) {
      Answer(res, 500, {{"error", e.what()}});
    }
  };
}

int64_t IntOf(std::string_view text, const char* what, int64_t min) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min) {
    throw ApiRefusal{400, fmt::format("{}: expected an integer >= {}, got \"{}\"", what, min, text)};
  }
  return v;
}

int64_t IdOf(std::string_view text, const char* what) { return IntOf(text, what, 1); }

/// The job id of query parameter job_id, checked to be visible to `who` (404 otherwise).
int64_t VisibleJob(SubmitService& svc, const ApiToken& who, int64_t id) {
  if (!svc.MaySee(who, id)) throw ApiRefusal{404, fmt::format("no job with id {}", id)};
  return id;
}

int64_t JobParam(SubmitService& svc, const ApiToken& who, const httplib::Request& req) {
  if (!req.has_param("job_id")) throw ApiRefusal{400, "job_id: required"};
  return VisibleJob(svc, who, IdOf(req.get_param_value("job_id"), "job_id"));
}

std::string RowText(const Json& row, const char* key) {
  auto it = row.find(key);
  return it != row.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// A real speedup (the reference's -1 "not measured" and 9.999e-10 "no reference" are none), else "N/A".
Json SpeedupOrNa(const Json& v) { return v.is_number() && v.get<double>() > 1e-9 ? v : Json("N/A"); }

/// The multipart text field `name`, or "".
std::string Field(const httplib::Request& req, const char* name) {
  return req.has_file(name) ? req.get_file_value(name).content : std::string();
}

/// The lineage fields of a submission form (parent_uuid, trial, version, prompt, answer, language_model,
/// agent_session_id), checked as kf run --lineage checks them.
Lineage FormLineage(const httplib::Request& req) {
  Json j = Json::object();
  for (const char* key : {"parent_uuid", "prompt", "answer", "language_model", "agent_session_id"}) {
    if (std::string v = Field(req, key); !v.empty()) j[key] = v;
  }
  for (const char* key : {"trial", "version"}) {
    if (std::string v = Field(req, key); !v.empty()) j[key] = IntOf(v, key, 0);
  }
  try {
    return LineageFromJson(j, "form");
  } catch (const Error& e) {
    throw ApiRefusal{400, e.what()};
  }
}

void ValidateJob(SubmitService& svc, const ApiToken& who, const httplib::Request& req, httplib::Response& res) {
  if (!req.is_multipart_form_data() || !req.has_file("file")) {
    throw ApiRefusal{400, "expected multipart/form-data with the task archive in field \"file\""};
  }
  const std::string idsid = Field(req, "idsid");
  if (!idsid.empty() && idsid != who.user && !who.admin) {
    throw ApiRefusal{403, fmt::format("idsid \"{}\" is not the token's user \"{}\"", idsid, who.user)};
  }
  const std::string user = idsid.empty() ? who.user : idsid;
  const auto& file = req.get_file_value("file");
  const std::string name = file.filename.empty() ? "file" : file.filename;
  const Lineage lineage = FormLineage(req);
  if (lineage.parent_uuid && !lineage.parent_uuid->empty() && !who.admin) {
    // A parent must be one of the user's own kernels: a foreign parent would show its row in the child's lineage
    // (and the child in the parent owner's), across users (found by a stranger test).
    KernelQuery q;
    q.uuid = *lineage.parent_uuid;
    q.db_user = user;
    q.columns = {"id"};
    if (svc.GetStore().CountKernels(q) == 0) {
      throw ApiRefusal{400, fmt::format("parent_uuid: {} is not a kernel of {}", *lineage.parent_uuid, user)};
    }
  }
  const int64_t id = svc.Submit(user, file.content, name, lineage);
  Answer(res, 200, {{"job_id", id}, {"status", "INIT"}});
}

void JobStatusAnswer(Store& store, int64_t id, httplib::Response& res) {
  Json job = store.GetJob(id);
  auto sub = store.GetSubmission(id, false);
  Answer(res, 200,
         {{"id", id},
          {"job_id", id},
          {"status", job["status"]},
          {"progress", job["progress"]},
          {"created_at", job["created_at"]},
          {"started_at", job["started_at"]},
          {"finished_at", job["finished_at"]},
          {"task_id", job["task_id"]},
          {"user", sub ? Json(sub->user) : Json(nullptr)}});
}

void KernelsByJob(Store& store, int64_t id, httplib::Response& res) {
  KernelQuery q;
  q.job_id = id;
  q.columns = {"id",     "uuid",  "parent_uuid", "task_name", "status",    "kf_status", "score", "runtime",
               "improve_over_native", "trial", "version", "timestamp", "output_code", "runtime_stats", "db_user"};
  Json kernels = Json::array();
  for (Json& k : store.ListKernels(q)) {
    k["speedup"] = SpeedupOrNa(k["improve_over_native"]);
    k.erase("job_status");
    kernels.push_back(std::move(k));
  }
  Answer(res, 200, {{"job_id", id}, {"kernels", std::move(kernels)}});
}

void EvalLog(SubmitService& svc, Store& store, const ApiToken& who, int64_t kernel_id, httplib::Response& res) {
  auto k = KernelEvalLog(store, kernel_id);
  const bool visible = k && (who.admin || ((*k)["job_id"].is_number_integer() &&
                                           svc.MaySee(who, (*k)["job_id"].get<int64_t>())));
  if (!visible) throw ApiRefusal{404, fmt::format("no kernel with id {}", kernel_id)};
  if ((*k)["job_id"].is_number_integer()) {
    if (auto s = store.GetSubmission((*k)["job_id"].get<int64_t>(), false)) MergeVerdictExtras(*k, s->result);
  }
  Answer(res, 200, *k);
}

void JobLogs(Store& store, int64_t id, httplib::Response& res) {
  Json logs = Json::array();
  for (const Json& l : store.ListJobLogs(id)) {
    const Json& extra = l["extra"];
    // The reference's RAW rows hold the process output in extra["log"]; other rows are their message.
    std::string raw = extra.is_object() && extra.contains("log") && extra["log"].is_string()
                          ? extra["log"].get<std::string>()
                          : RowText(l, "message");
    logs.push_back({{"id", l["id"]},
                    {"level", l["level"]},
                    {"message", l["message"]},
                    {"timestamp", l["timestamp"]},
                    {"kernel_uuid", l["kernel_uuid"]},
                    {"raw_log", raw}});
  }
  Answer(res, 200, {{"job_id", id}, {"logs", std::move(logs)}});
}

}  // namespace

void RegisterSubmitRoutes(httplib::Server& http, SubmitService& svc, Store& store) {
  // Bodies beyond the archive limit (plus the form's other fields) are refused by cpp-httplib with 413 before
  // they are read.
  http.set_payload_max_length(static_cast<size_t>(svc.options().limits.max_archive_bytes) + (1 << 20));
  http.Post("/api/validate_job", Guarded(svc, [&svc](const ApiToken& who, const auto& req, auto& res) {
              ValidateJob(svc, who, req, res);
            }));
  http.Get(R"(/api/job/(\d+))", Guarded(svc, [&svc, &store](const ApiToken& who, const auto& req, auto& res) {
             JobStatusAnswer(store, VisibleJob(svc, who, IdOf(req.matches[1].str(), "job id")), res);
           }));
  http.Post(R"(/api/job/(\d+)/cancel)", Guarded(svc, [&svc](const ApiToken& who, const auto& req, auto& res) {
              const int64_t id = VisibleJob(svc, who, IdOf(req.matches[1].str(), "job id"));
              const JobStatus status = svc.Cancel(id);
              Answer(res, 200, {{"job_id", id}, {"status", std::string(JobStatusName(status))}});
            }));
  http.Get("/api/kernels_by_job", Guarded(svc, [&svc, &store](const ApiToken& who, const auto& req, auto& res) {
             KernelsByJob(store, JobParam(svc, who, req), res);
           }));
  http.Get(R"(/api/kernels/(\d+)/eval_log)",
           Guarded(svc, [&svc, &store](const ApiToken& who, const auto& req, auto& res) {
             EvalLog(svc, store, who, IdOf(req.matches[1].str(), "kernel id"), res);
           }));
  http.Get("/api/jobs/logs", Guarded(svc, [&svc, &store](const ApiToken& who, const auto& req, auto& res) {
             JobLogs(store, JobParam(svc, who, req), res);
           }));
  http.Get("/api/whoami", Guarded(svc, [](const ApiToken& who, const auto&, auto& res) {
             Answer(res, 200, {{"user", who.user}, {"admin", who.admin}});
           }));
}

/// A lineage answer (KernelLineage) cut to the kernels of `user`: children of other users are dropped, and the
/// ancestors end below the nearest one that is not the user's (older kernels, had there been a foreign parent in a
/// database written before submissions checked parents, are not shown; "missing_parent" is then null).
static std::string OwnLineage(const std::string& body, const std::string& user) {
  Json doc = Json::parse(body);
  auto own = [&](const Json& node) { return node.is_object() && node.value("db_user", Json()).is_string() &&
                                            node["db_user"].get<std::string>() == user; };
  Json children = Json::array();
  for (const Json& c : doc["children"]) {
    if (own(c)) children.push_back(c);
  }
  doc["children"] = std::move(children);
  const Json& ancestors = doc["ancestors"];  // oldest first
  size_t first = ancestors.size();
  while (first > 0 && own(ancestors[first - 1])) --first;
  if (first > 0) {
    doc["ancestors"] = Json(std::vector<Json>(ancestors.begin() + static_cast<std::ptrdiff_t>(first), ancestors.end()));
    doc["missing_parent"] = nullptr;
  }
  return doc.dump();
}

void ServeScopedBrowse(SubmitService& svc, Store& store, SummaryCache* summaries, const httplib::Request& req,
                       httplib::Response& res) {
  Guarded(svc, [&](const ApiToken& who, const httplib::Request& r, httplib::Response& out) {
    std::multimap<std::string, std::string> params = r.params;
    if (!who.admin) {
      constexpr std::string_view kKernel = "/api/kernels/";
      if (r.path == "/api/kernels") {
        params.erase("user");
        params.emplace("user", who.user);
      } else if (r.path.rfind(kKernel, 0) == 0) {
        auto k = store.GetKernel(IdOf(std::string_view(r.path).substr(kKernel.size()), "kernel id"));
        if (!k || RowText(*k, "db_user") != who.user) throw ApiRefusal{404, "no such kernel"};
      } else if (r.path == "/api/lineage") {
        KernelQuery q;
        q.uuid = r.get_param_value("uuid");
        q.db_user = who.user;
        q.columns = {"id"};
        if (q.uuid->empty() || store.CountKernels(q) == 0) throw ApiRefusal{404, "no such kernel"};
      } else {
        throw ApiRefusal{403, fmt::format("{} needs an admin token; {} sees their own kernels at /api/kernels",
                                          r.path, who.user)};
      }
    }
    ApiResponse a = HandleApiRequest(store, r.path, params, summaries);
    if (!who.admin && r.path == "/api/lineage" && a.status == 200) a.body = OwnLineage(a.body, who.user);
    SecurityHeaders(out);
    out.status = a.status;
    out.set_content(a.body, a.content_type);
  })(req, res);
}

}  // namespace kf::serve
