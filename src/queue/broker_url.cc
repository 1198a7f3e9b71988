// Broker URLs (kombu's amqp:// form and the reference's RABBITMQ_* environment) and task-id UUIDs.
#include <cstdlib>

#include <fmt/format.h>

#include "core/strings.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/queue.hpp"

namespace kf {

namespace {

std::string PercentDecode(std::string_view s, const char* field) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      throw Error(ErrorKind::kInvalidArgument, "bad percent escape in the broker URL", "", field);
    }
    out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
    i += 2;
  }
  return out;
}

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

std::string BrokerUrl::Redacted() const {
  std::string path = vhost == "/" ? "/" : vhost;
  return fmt::format("amqp://{}:***@{}:{}/{}", user, host, port, path);
}

BrokerUrl ParseBrokerUrl(std::string_view url) {
  BrokerUrl out;
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    throw Error(ErrorKind::kInvalidArgument,
                "expected amqp://user:password@host:port/vhost, got '" + std::string(url) + "'", "", "broker");
  }
  std::string scheme(url.substr(0, sep));
  if (scheme != "amqp" && scheme != "pyamqp" && scheme != "librabbitmq") {
    throw Error(ErrorKind::kInvalidArgument,
                "unsupported broker scheme '" + scheme + "' (RabbitMQ: amqp://user:password@host:port/vhost)", "",
                "broker");
  }
  std::string_view rest = url.substr(sep + 3);
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    size_t colon = userinfo.find(':');
    out.user = PercentDecode(userinfo.substr(0, colon), "broker.user");
    if (colon != std::string_view::npos) out.password = PercentDecode(userinfo.substr(colon + 1), "broker.password");
  }
  std::string_view host = authority;
  if (!authority.empty() && authority.front() == '[') {  // [ipv6]:port
    size_t close = authority.find(']');
    if (close == std::string_view::npos) throw Error(ErrorKind::kInvalidArgument, "unclosed '[' in host", "", "broker");
    host = authority.substr(1, close - 1);
    authority = authority.substr(close + 1);
    if (!authority.empty() && authority.front() == ':') {
      authority = authority.substr(1);
    } else {
      authority = {};
    }
  } else {
    size_t colon = authority.rfind(':');
    host = authority.substr(0, colon);
    authority = colon == std::string_view::npos ? std::string_view() : authority.substr(colon + 1);
  }
  if (!host.empty()) out.host = std::string(host);
  if (!authority.empty()) {
    char* end = nullptr;
    std::string port(authority);
    long p = std::strtol(port.c_str(), &end, 10);
    if (end != port.c_str() + port.size() || p <= 0 || p > 65535) {
      throw Error(ErrorKind::kInvalidArgument, "bad port '" + port + "' in the broker URL", "", "broker");
    }
    out.port = static_cast<int>(p);
  }
  size_t query = path.find('?');
  path = path.substr(0, query);
  out.vhost = path.empty() ? "/" : PercentDecode(path, "broker.vhost");
  return out;
}

std::string DefaultBrokerUrl() {
  const char* url = std::getenv("KF_BROKER_URL");
  if (url && *url) return url;
  return fmt::format("amqp://{}:{}@{}:5672//", Env("RABBITMQ_USERNAME", "guest"), Env("RABBITMQ_PASSWORD", "guest"),
                     Env("RABBITMQ_IP", "localhost"));
}

std::string NewUuid() { return RandomUuid4(); }

}  // namespace kf
