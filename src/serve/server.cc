// The HTTP side of kf serve (include/kernelfoundry/serve.hpp) on cpp-httplib: the embedded page, the JSON API,
// security headers, HTTPS when a certificate is given, and the submission API (submit_api.cc) when enabled.
#include <httplib.h>

#include <fmt/format.h>

#include <atomic>
#include <filesystem>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/serve.hpp"
#include "serve/assets.hpp"
#include "serve/submit_api.hpp"
#include "serve/submit_service.hpp"
#include "serve/summary_cache.hpp"

namespace kf {
namespace serve {

void SecurityHeaders(httplib::Response& res) {
  // Scripts, styles and data only from this server; no plugins, no framing, no inline script.
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                 "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-store");
}

}  // namespace serve
namespace {

using serve::SecurityHeaders;

bool IsLoopbackName(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.substr(0, 4) == "127.";
}

/// The host name of a Host header value ("name:port", "[v6]:port" or "name").
std::string_view HostName(std::string_view header) {
  if (!header.empty() && header.front() == '[') return header.substr(0, header.find(']') + 1);
  return header.substr(0, header.find(':'));
}

/// HTTPS over OpenSSL when both files are given (each must be readable), else plain HTTP.
std::unique_ptr<httplib::Server> MakeHttp(const ServeOptions& o) {
  if (o.tls_cert.empty() && o.tls_key.empty()) return std::make_unique<httplib::Server>();
  for (const auto& [path, what] : {std::pair{o.tls_cert, "tls_cert"}, std::pair{o.tls_key, "tls_key"}}) {
    std::error_code ec;
    if (path.empty() || !std::filesystem::is_regular_file(path, ec)) {
      throw Error(ErrorKind::kNotFound, "expected a PEM file (--tls-cert and --tls-key go together)", path, what);
    }
  }
  auto https = std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
  if (!https->is_valid()) {
    throw Error(ErrorKind::kInvalidArgument, "OpenSSL cannot use this certificate and key", o.tls_cert, "tls_cert");
  }
  return https;
}

}  // namespace

struct Server::Impl {
  std::unique_ptr<Store> store;
  ServeOptions options;
  std::unique_ptr<httplib::Server> server;
  serve::SummaryCache summaries;
  std::unique_ptr<serve::SubmitService> submit;  // after store: destroyed first
  int port = 0;
};

Server::Server(std::unique_ptr<Store> store, ServeOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->store = std::move(store);
  impl_->options = std::move(options);
  impl_->server = MakeHttp(impl_->options);
  httplib::Server& http = *impl_->server;
  // The script is the largest asset: a type outside cpp-httplib's compressible list keeps it uncompressed (see
  // kJsonType).
  auto asset = [](std::string_view body, const char* type) {
    return [body, type](const httplib::Request&, httplib::Response& res) {
      SecurityHeaders(res);
      res.set_content(body.data(), body.size(), type);
    };
  };
  // A server bound to loopback answers only requests addressed to a loopback name: a web page elsewhere cannot
  // read the results through DNS rebinding (its requests carry its own host name).
  if (IsLoopbackName(impl_->options.host)) {
    http.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
      if (IsLoopbackName(HostName(req.get_header_value("Host")))) return httplib::Server::HandlerResponse::Unhandled;
      SecurityHeaders(res);
      res.status = 403;
      res.set_content("{\"error\": \"Host must be a loopback name (localhost, 127.0.0.1, [::1])\"}", kJsonType);
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  http.Get("/", asset(serve::kIndexHtml, "text/html; charset=utf-8"));
  http.Get("/index.html", asset(serve::kIndexHtml, "text/html; charset=utf-8"));
  http.Get("/app.js", asset(serve::kAppJs, "application/javascript; charset=utf-8"));
  http.Get("/app.css", asset(serve::kAppCss, "text/css; charset=utf-8"));
  Impl* impl = impl_.get();
  if (impl_->options.submit) {
    impl_->submit = std::make_unique<serve::SubmitService>(*impl_->store, *impl_->options.submit);
    serve::RegisterSubmitRoutes(http, *impl_->submit, *impl_->store);
    http.Get(R"(/api/.*)", [impl](const httplib::Request& req, httplib::Response& res) {
      serve::ServeScopedBrowse(*impl->submit, *impl->store, &impl->summaries, req, res);
    });
  } else {
    http.Get(R"(/api/.*)", [impl](const httplib::Request& req, httplib::Response& res) {
      ApiResponse a = HandleApiRequest(*impl->store, req.path, req.params, &impl->summaries);
      SecurityHeaders(res);
      res.status = a.status;
      res.set_content(a.body, a.content_type);
    });
  }
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    SecurityHeaders(res);
    res.set_content(fmt::format("{{\"error\": \"HTTP {}\"}}", res.status), kJsonType);
  });
}

Server::~Server() { Stop(); }

void Server::Bind() {
  const ServeOptions& o = impl_->options;
  if (o.port < 0 || o.port > 65535) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("expected a port 0..65535, got {}", o.port), {}, "port");
  }
  bool ok = false;
  if (o.port == 0) {
    impl_->port = impl_->server->bind_to_any_port(o.host);
    ok = impl_->port > 0;
  } else {
    ok = impl_->server->bind_to_port(o.host, o.port);
    impl_->port = o.port;
  }
  if (!ok) {
    throw Error(ErrorKind::kIO, "cannot listen there (address in use or not local?)",
                fmt::format("{}:{}", o.host, o.port));
  }
  impl_->summaries.Get(*impl_->store);  // the one full aggregation, before the first request
  if (impl_->submit) impl_->submit->Start();  // jobs left queued or running by an earlier server run again
}

int Server::port() const { return impl_->port; }

void Server::Run() { impl_->server->listen_after_bind(); }

void Server::Stop() { impl_->server->stop(); }

}  // namespace kf
