// Celery protocol-v2 task messages (celery-interop.md §2.1): decoding what Python clients send, encoding
// what the reference's TaskRunner sends; ISO-8601 times of the eta/expires headers.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "kernelfoundry/celery.hpp"
#include "kernelfoundry/error.hpp"

namespace kf::celery {

namespace {

constexpr size_t kReprMax = 1024;  // Celery's saferepr maxlen for argsrepr/kwargsrepr

std::optional<std::string> OptString(const Json& headers, const char* key) {
  if (!headers.contains(key) || headers[key].is_null()) return std::nullopt;
  if (!headers[key].is_string()) {
    throw Error(ErrorKind::kParse, "expected a string or null, got " + DumpJson(headers[key]), "",
                std::string("headers.") + key);
  }
  return headers[key].get<std::string>();
}

std::string StringOr(const Json& headers, const char* key) { return OptString(headers, key).value_or(""); }

std::optional<double> OptSeconds(const Json& v, const char* field) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) throw Error(ErrorKind::kParse, "expected a number of seconds or null, got " + DumpJson(v), "", field);
  return v.get<double>();
}

// A short Python-like repr (argsrepr/kwargsrepr are for logs only).
void Repr(const Json& v, std::string& out) {
  if (out.size() > kReprMax) return;
  switch (v.type()) {
    case Json::value_t::null: out += "None"; break;
    case Json::value_t::boolean: out += v.get<bool>() ? "True" : "False"; break;
    case Json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      out += "'" + (s.size() > 64 ? s.substr(0, 64) + "..." : s) + "'";
      break;
    }
    case Json::value_t::array: {
      out += "[";
      bool first = true;
      for (const Json& item : v) {
        if (!first) out += ", ";
        first = false;
        Repr(item, out);
      }
      out += "]";
      break;
    }
    case Json::value_t::object: {
      out += "{";
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        out += "'" + it.key() + "': ";
        Repr(it.value(), out);
      }
      out += "}";
      break;
    }
    default: out += v.dump(); break;
  }
}

std::string ShortRepr(const Json& v, bool as_tuple) {
  std::string out;
  if (as_tuple && v.is_array()) {
    out = "(";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      Repr(v[i], out);
    }
    out += v.size() == 1 ? ",)" : ")";
  } else {
    Repr(v, out);
  }
  if (out.size() > kReprMax) out = out.substr(0, kReprMax - 3) + "...";
  return out;
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

std::string BuildQueueName(std::string_view language) {
  std::string lower(language);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return "build_custom_task_" + lower;
}

std::string TestQueueName(std::string_view gpu_arch) { return "test_custom_task_" + std::string(gpu_arch); }

std::string TaskShortName(std::string_view task) {
  const size_t dot = task.rfind('.');
  return std::string(dot == std::string_view::npos ? task : task.substr(dot + 1));
}

TaskMessage DecodeTaskMessage(const Message& message) {
  const MessageProperties& p = message.properties;
  TaskMessage m;
  m.headers = p.headers.is_object() ? p.headers : Json::object();
  const Json& h = m.headers;
  std::string ct = p.content_type;
  for (char& c : ct) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  m.content_type = ct == "application/json" ? ContentType::kJson : ContentType::kMsgpack;
  m.reply_to = p.reply_to;
  m.correlation_id = p.correlation_id;
  // Identity first, so that later problems can still be answered with a FAILURE for this id.
  m.id = StringOr(h, "id");
  m.task = StringOr(h, "task");
  if (m.id.empty()) m.id = p.correlation_id;
  if (m.task.empty()) {
    throw Error(ErrorKind::kParse,
                "missing header 'task' (not a Celery protocol-v2 task message; protocol 1 is not supported)", "",
                "headers.task");
  }
  if (m.id.empty()) throw Error(ErrorKind::kParse, "missing header 'id' and no correlation_id", "", "headers.id");
  if (h.contains("lang") && h["lang"].is_string() && h["lang"] != "py") {
    // Celery itself only warns; the body layout is the same.
  }
  if (h.contains("retries") && h["retries"].is_number_integer()) m.retries = h["retries"].get<int>();
  if (h.contains("timelimit") && !h["timelimit"].is_null()) {
    const Json& tl = h["timelimit"];
    if (!tl.is_array() || tl.size() != 2) {
      throw Error(ErrorKind::kParse, "expected [hard, soft] seconds, got " + DumpJson(tl), "", "headers.timelimit");
    }
    m.hard_time_limit = OptSeconds(tl[0], "headers.timelimit[0]");
    m.soft_time_limit = OptSeconds(tl[1], "headers.timelimit[1]");
  }
  m.eta = OptString(h, "eta");
  m.expires = OptString(h, "expires");
  m.root_id = StringOr(h, "root_id");
  m.parent_id = StringOr(h, "parent_id");
  m.group = StringOr(h, "group");
  m.origin = StringOr(h, "origin");

  Json body = DeserializeBody(message.body, p.content_type);
  if (!body.is_array() || body.size() < 2 || body.size() > 3) {
    throw Error(ErrorKind::kParse, "expected the protocol-v2 body [args, kwargs, embed], got a " +
                                       std::string(body.type_name()) +
                                       (body.is_array() ? " of " + std::to_string(body.size()) + " items" : ""),
                "", "body");
  }
  if (!body[0].is_array()) throw Error(ErrorKind::kParse, "args must be an array", "", "body[0]");
  if (!body[1].is_object()) throw Error(ErrorKind::kParse, "kwargs must be a map", "", "body[1]");
  m.args = std::move(body[0]);
  m.kwargs = std::move(body[1]);
  if (body.size() == 3 && !body[2].is_null()) {
    if (!body[2].is_object()) throw Error(ErrorKind::kParse, "embed must be a map", "", "body[2]");
    for (auto it = body[2].begin(); it != body[2].end(); ++it) m.embed[it.key()] = it.value();
  }
  return m;
}

Message EncodeTaskMessage(const std::string& id, std::string_view task, const Json& args, const Json& kwargs,
                          const SendOptions& options) {
  static const std::string origin = fmt::format("gen{}@{}", ::getpid(), HostName());
  Json h = Json::object();
  h["lang"] = "py";
  h["task"] = std::string(task);
  h["id"] = id;
  h["shadow"] = nullptr;
  h["eta"] = nullptr;
  h["expires"] = options.expires ? Json(*options.expires) : Json(nullptr);
  h["group"] = nullptr;
  h["group_index"] = nullptr;
  h["retries"] = options.retries;
  auto seconds = [](const std::optional<double>& v) -> Json {
    if (!v) return nullptr;
    if (*v == std::floor(*v) && std::fabs(*v) < 2e9) return static_cast<int64_t>(*v);
    return *v;
  };
  h["timelimit"] = Json::array({seconds(options.hard_time_limit), seconds(options.soft_time_limit)});
  h["root_id"] = id;
  h["parent_id"] = nullptr;
  h["argsrepr"] = ShortRepr(args, true);
  h["kwargsrepr"] = ShortRepr(kwargs, false);
  h["origin"] = origin;
  h["ignore_result"] = false;
  for (auto it = options.extra_headers.begin(); it != options.extra_headers.end(); ++it) h[it.key()] = it.value();

  Message m;
  m.exchange = "";
  m.routing_key = options.queue;
  m.properties.content_type = std::string(ContentTypeName(options.content_type));
  m.properties.content_encoding = std::string(ContentEncodingName(options.content_type));
  m.properties.delivery_mode = 2;
  m.properties.priority = 0;
  m.properties.correlation_id = id;
  m.properties.reply_to = options.reply_to;
  m.properties.headers = std::move(h);
  Json body = Json::array(
      {args, kwargs, Json{{"callbacks", nullptr}, {"errbacks", nullptr}, {"chain", nullptr}, {"chord", nullptr}}});
  m.body = SerializeBody(body, options.content_type);
  return m;
}

double ParseIsoTime(std::string_view text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, used = 0;
  std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%n", &year, &month, &day, &used) != 3 || used != 10) {
    throw Error(ErrorKind::kParse, "not an ISO-8601 time: '" + s + "'", "", "expires");
  }
  size_t pos = 10;
  double fraction = 0;
  if (pos < s.size() && (s[pos] == 'T' || s[pos] == ' ')) {
    int n = 0;
    if (std::sscanf(s.c_str() + pos + 1, "%2d:%2d:%2d%n", &hour, &minute, &second, &n) != 3 || n != 8) {
      throw Error(ErrorKind::kParse, "not an ISO-8601 time: '" + s + "'", "", "expires");
    }
    pos += 1 + static_cast<size_t>(n);
    if (pos < s.size() && s[pos] == '.') {
      size_t start = pos;
      ++pos;
      while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
      fraction = std::stod("0" + s.substr(start, pos - start));
    }
  }
  int offset_s = 0;
  if (pos < s.size()) {
    if (s[pos] == 'Z' && pos + 1 == s.size()) {
      pos = s.size();
    } else if ((s[pos] == '+' || s[pos] == '-') && pos + 6 == s.size() && s[pos + 3] == ':') {
      int oh = std::stoi(s.substr(pos + 1, 2)), om = std::stoi(s.substr(pos + 4, 2));
      offset_s = (oh * 3600 + om * 60) * (s[pos] == '-' ? -1 : 1);
      pos = s.size();
    } else {
      throw Error(ErrorKind::kParse, "not an ISO-8601 time: '" + s + "'", "", "expires");
    }
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return static_cast<double>(::timegm(&tm)) + fraction - offset_s;
}

std::string FormatIsoTime(double epoch_seconds) {
  const std::time_t whole = static_cast<std::time_t>(std::floor(epoch_seconds));
  int micros = static_cast<int>(std::lround((epoch_seconds - static_cast<double>(whole)) * 1e6));
  std::time_t t = whole;
  if (micros >= 1000000) {
    micros -= 1000000;
    ++t;
  }
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:06d}+00:00", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, micros);
}

}  // namespace kf::celery
