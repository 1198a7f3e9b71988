// The HTTP side of kf serve's submission API (routes and contract: include/kernelfoundry/serve.hpp). Internal
// to the serve module.
#pragma once

#include <httplib.h>

#include "kernelfoundry/serve.hpp"
#include "serve/submit_service.hpp"
#include "serve/summary_cache.hpp"

namespace kf::serve {

/// Sets the security headers every answer of kf serve carries (Content-Security-Policy, nosniff, …).
void SecurityHeaders(httplib::Response& res);

/// Registers POST /api/validate_job, GET /api/job/<id>, POST /api/job/<id>/cancel, GET /api/kernels_by_job,
/// GET /api/kernels/<id>/eval_log, GET /api/jobs/logs and GET /api/whoami on `http` (before the browse
/// API's catch-all route), and limits request bodies to the archive limit.
void RegisterSubmitRoutes(httplib::Server& http, SubmitService& service, Store& store);

/// The browse API (HandleApiRequest) behind a token: 401 without a valid one, 429 beyond the request rate;
/// admins see everything; users only /api/kernels (their own rows), /api/kernels/<id> and /api/lineage of
/// their own kernels (404 for others'), everything else 403.
void ServeScopedBrowse(SubmitService& service, Store& store, SummaryCache* summaries, const httplib::Request& req,
                       httplib::Response& res);

}  // namespace kf::serve
