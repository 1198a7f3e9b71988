// Store URL parsing and OpenStore (see store_url.hpp and kernelfoundry/store.hpp).
#include "store/store_url.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "store/sqlite_store.hpp"
#if KF_HAVE_LIBPQ
#include "store/postgres_store.hpp"
#endif

namespace kf {
namespace store {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

/// The scheme of "scheme:rest" (letters, digits, + . -; starting with a letter), or "".
std::string_view SchemeOf(std::string_view url) {
  size_t colon = url.find(':');
  if (colon == std::string_view::npos || colon == 0 || !std::isalpha(static_cast<unsigned char>(url[0]))) return {};
  for (size_t i = 0; i < colon; ++i) {
    char c = url[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '.' && c != '-') return {};
  }
  return url.substr(0, colon);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

/// `url` with the password of its "scheme:[//]user:password@host…" part replaced by "***".
std::string RedactUserinfo(std::string_view url, std::string_view scheme) {
  std::string s(url);
  size_t start = scheme.size() + 1;
  if (s.compare(start, 2, "//") == 0) start += 2;
  size_t end = std::min(s.find_first_of("/?", start), s.size());
  size_t at = s.rfind('@', end == 0 ? 0 : end - 1);
  if (at == std::string::npos || at < start) return s;
  size_t colon = s.find(':', start);
  if (colon != std::string::npos && colon < at) s.replace(colon + 1, at - colon - 1, "***");
  return s;
}

[[noreturn]] void BadUrl(const std::string& redacted, const std::string& why) {
  throw Error(ErrorKind::kInvalidArgument, fmt::format("invalid database URL '{}': {}", redacted, why), {}, "db");
}

constexpr std::array<std::string_view, 12> kKnownSchemes = {"sqlite",  "postgresql", "postgres", "mysql",
                                                             "mariadb", "oracle",     "mssql",    "file",
                                                             "http",    "https",      "redis",    "amqp"};

/// Splits a postgresql URL (after the scheme's "://") and fills `out`.
void ParsePostgres(std::string_view url, std::string_view scheme, std::string_view rest, StoreUrl& out) {
  out.redacted = RedactUserinfo(url, scheme);
  size_t end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, end);
  std::string_view hosts = authority;
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    hosts = authority.substr(at + 1);
    size_t colon = userinfo.find(':');
    if (colon != std::string_view::npos) out.password = PercentDecode(userinfo.substr(colon + 1));
  }
  // host[:port][,host[:port]…]; IPv6 literals in brackets.
  size_t pos = 0;
  while (pos <= hosts.size()) {
    size_t comma = hosts.find(',', pos);
    std::string_view host = hosts.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    size_t bracket = host.rfind(']');
    size_t colon = host.rfind(':');
    if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
      std::string_view port = host.substr(colon + 1);
      bool digits = !port.empty() && port.size() <= 5 &&
                    std::all_of(port.begin(), port.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
      if (!digits || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
        BadUrl(out.redacted, fmt::format("the port '{}' is not a number from 1 to 65535", port));
      }
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
}

}  // namespace

std::string ScrubSecret(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  for (size_t pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos + 3)) {
    text.replace(pos, secret.size(), "***");
  }
  return text;
}

StoreUrl ParseStoreUrl(std::string_view url) {
  StoreUrl out;
  std::string_view scheme = SchemeOf(url);
  std::string base = Lower(scheme.substr(0, scheme.find('+')));
  bool known = std::find(kKnownSchemes.begin(), kKnownSchemes.end(), base) != kKnownSchemes.end();
  bool has_slashes = !scheme.empty() && url.substr(scheme.size(), 3) == "://";
  if (!has_slashes && !known) {  // a plain path (possibly containing ':')
    if (url.empty()) BadUrl("", "it is empty");
    out.sqlite_path = std::string(url);
    out.redacted = out.sqlite_path;
    return out;
  }
  std::string_view rest = has_slashes ? url.substr(scheme.size() + 3) : std::string_view();
  if (base == "postgresql" || base == "postgres") {
    if (!has_slashes) BadUrl(RedactUserinfo(url, scheme), "expected postgresql://user[:password]@host[:port]/database");
    ParsePostgres(url, scheme, rest, out);
    out.kind = StoreUrl::Kind::kPostgres;
    out.conninfo = "postgresql://" + std::string(rest);
    return out;
  }
  out.redacted = RedactUserinfo(url, scheme);
  if (base == "sqlite") {
    if (!has_slashes || rest.empty() || rest[0] != '/') {
      BadUrl(out.redacted, "expected sqlite:///relative/path or sqlite:////absolute/path");
    }
    std::string_view path = rest.substr(1);
    if (path.empty()) BadUrl(out.redacted, "the database path is empty");
    if (path.find('?') != std::string_view::npos) BadUrl(out.redacted, "query parameters are not supported for SQLite");
    out.sqlite_path = std::string(path);
    return out;
  }
  BadUrl(out.redacted, fmt::format("unknown scheme '{}' (expected a file path, sqlite:///path or "
                                   "postgresql://user@host:port/database)",
                                   scheme));
}

std::string RedactForMessage(std::string_view url) {
  try {
    return ParseStoreUrl(url).redacted;
  } catch (const Error&) {  // not parseable: still hide a "user:password@" part
    std::string_view scheme = SchemeOf(url);
    return scheme.empty() ? std::string(url) : RedactUserinfo(url, scheme);
  }
}

}  // namespace store

std::string RedactStoreUrl(std::string_view url) { return store::RedactForMessage(url); }

std::unique_ptr<Store> OpenStore(const std::string& url, const StoreOptions& options) {
  store::StoreUrl parsed = store::ParseStoreUrl(url);
  if (parsed.kind == store::StoreUrl::Kind::kSqlite) return store::OpenSqliteStore(parsed.sqlite_path, options);
#if KF_HAVE_LIBPQ
  return store::OpenPostgresStore(parsed, options);
#else
  throw Error(ErrorKind::kUnsupported, "this kf was built without PostgreSQL support (libpq)", parsed.redacted, "db");
#endif
}

}  // namespace kf
