// rpc:// results, Celery's queue topology and remote control over the pidbox (celery-interop.md §1.2, §2.2,
// §2.3, §4.1).
#include "kernelfoundry/celery.hpp"
#include "core/clock.hpp"
#include "kernelfoundry/error.hpp"

namespace kf::celery {

// ---- results ----

bool IsReadyState(std::string_view status) { return status == kSuccess || status == kFailure || status == kRevoked; }

Json ExceptionInfo(std::string_view exc_type, const std::string& message, std::string_view exc_module) {
  Json info = Json::object();
  info["exc_type"] = std::string(exc_type);
  info["exc_message"] = Json::array({message});
  info["exc_module"] = std::string(exc_module);
  return info;
}

Message EncodeResultMessage(const TaskResult& result, const std::string& reply_to, const std::string& correlation_id,
                            ContentType type) {
  Json body = Json::object();
  body["task_id"] = result.task_id;
  body["status"] = result.status;
  body["result"] = result.result;
  body["traceback"] = result.traceback;
  body["children"] = result.children;
  Message m;
  m.exchange = "";
  m.routing_key = reply_to;
  m.properties.content_type = std::string(ContentTypeName(type));
  m.properties.content_encoding = std::string(ContentEncodingName(type));
  m.properties.delivery_mode = 1;
  m.properties.priority = 0;
  m.properties.correlation_id = correlation_id.empty() ? result.task_id : correlation_id;
  m.body = SerializeBody(body, type);
  return m;
}

TaskResult DecodeResultMessage(const Message& message) {
  Json body = DeserializeBody(message.body, message.properties.content_type);
  if (!body.is_object() || !body.contains("task_id") || !body["task_id"].is_string() || !body.contains("status") ||
      !body["status"].is_string()) {
    throw Error(ErrorKind::kParse, "expected a result map with task_id and status", "", "body");
  }
  TaskResult r;
  r.task_id = body["task_id"].get<std::string>();
  r.status = body["status"].get<std::string>();
  if (body.contains("result")) r.result = std::move(body["result"]);
  if (body.contains("traceback")) r.traceback = std::move(body["traceback"]);
  if (body.contains("children")) r.children = std::move(body["children"]);
  return r;
}

// ---- topology ----

ExchangeSpec TaskExchange(const std::string& queue) { return ExchangeSpec{queue, "direct", true, false}; }

QueueSpec TaskQueue(const std::string& queue) { return QueueSpec{queue, true, false, false, Json::object()}; }

QueueSpec ReplyQueue(const std::string& oid) {
  return QueueSpec{oid, false, false, true, Json{{"x-expires", 86400000}}};
}

ExchangeSpec PidboxExchange() { return ExchangeSpec{"celery.pidbox", "fanout", false, false}; }

ExchangeSpec PidboxReplyExchange() { return ExchangeSpec{"reply.celery.pidbox", "direct", false, false}; }

QueueSpec PidboxQueue(const std::string& node) {
  return QueueSpec{node + ".celery.pidbox", false, false, true, Json{{"x-expires", 10000}, {"x-message-ttl", 300000}}};
}

QueueSpec PidboxReplyQueue(const std::string& oid) {
  return QueueSpec{oid + ".reply.celery.pidbox", false, false, true, Json{{"x-expires", 10000}}};
}

Json QueueAsDict(const std::string& queue) {
  // The keys in kombu's order (Queue.as_dict / Exchange.as_dict, spec/celery-interop.md).
  Json exchange = {{"name", queue},          {"type", "direct"},   {"arguments", nullptr},
                   {"durable", true},        {"passive", false},   {"auto_delete", false},
                   {"delivery_mode", nullptr}, {"no_declare", false}};
  return Json{{"name", queue},
              {"exchange", std::move(exchange)},
              {"routing_key", queue},
              {"queue_arguments", nullptr},
              {"binding_arguments", nullptr},
              {"consumer_arguments", nullptr},
              {"durable", true},
              {"exclusive", false},
              {"auto_delete", false},
              {"no_ack", false},
              {"alias", nullptr},
              {"bindings", Json::array()},
              {"no_declare", nullptr},
              {"expires", nullptr},
              {"message_ttl", nullptr},
              {"max_length", nullptr},
              {"max_length_bytes", nullptr},
              {"max_priority", nullptr}};
}

void DeclareTaskQueue(Broker& broker, const std::string& queue) {
  broker.DeclareExchange(TaskExchange(queue));
  broker.DeclareQueue(TaskQueue(queue));
  broker.BindQueue(queue, queue, queue);
}

// ---- remote control ----

ControlRequest DecodeControlRequest(const Message& message) {
  Json body = DeserializeBody(message.body, message.properties.content_type);
  if (!body.is_object() || !body.contains("method") || !body["method"].is_string()) {
    throw Error(ErrorKind::kParse, "expected a control request map with a method", "", "body");
  }
  ControlRequest r;
  r.content_type = message.properties.content_type == "application/json" ? ContentType::kJson : ContentType::kMsgpack;
  r.method = body["method"].get<std::string>();
  if (body.contains("arguments") && body["arguments"].is_object()) r.arguments = body["arguments"];
  if (body.contains("destination") && body["destination"].is_array()) {
    std::vector<std::string> dest;
    for (const Json& d : body["destination"]) {
      if (d.is_string()) dest.push_back(d.get<std::string>());
    }
    r.destination = std::move(dest);
  }
  if (body.contains("ticket") && body["ticket"].is_string()) r.ticket = body["ticket"].get<std::string>();
  if (body.contains("reply_to") && body["reply_to"].is_object()) {
    const Json& rt = body["reply_to"];
    if (rt.contains("exchange") && rt["exchange"].is_string()) r.reply_exchange = rt["exchange"].get<std::string>();
    if (rt.contains("routing_key") && rt["routing_key"].is_string()) {
      r.reply_routing_key = rt["routing_key"].get<std::string>();
    }
  }
  const Json& h = message.properties.headers;
  if (h.is_object() && h.contains("expires") && h["expires"].is_number()) r.expires = h["expires"].get<double>();
  return r;
}

bool ControlRequestIsFor(const ControlRequest& request, const std::string& node, double now_epoch_s) {
  if (request.expires > 0 && now_epoch_s > request.expires) return false;
  if (!request.destination || request.destination->empty()) return true;
  for (const std::string& d : *request.destination) {
    if (d == node) return true;
  }
  return false;
}

Message EncodeControlReply(const ControlRequest& request, const std::string& node, const Json& data, int64_t clock) {
  Message m;
  m.exchange = request.reply_exchange;
  m.routing_key = request.reply_routing_key;
  m.properties.content_type = std::string(ContentTypeName(request.content_type));
  m.properties.content_encoding = std::string(ContentEncodingName(request.content_type));
  m.properties.delivery_mode = 1;
  m.properties.priority = 0;
  m.properties.headers = Json{{"ticket", request.ticket}, {"clock", clock}};
  Json body = Json::object();
  body[node] = data;
  m.body = SerializeBody(body, request.content_type);
  return m;
}

Message EncodeControlRequest(const std::string& method, const Json& arguments, const std::string& reply_oid,
                             const std::string& ticket, double timeout_s, int64_t clock,
                             const std::vector<std::string>& destination) {
  Json body = Json::object();
  body["method"] = method;
  body["arguments"] = arguments.is_object() ? arguments : Json::object();
  body["destination"] = destination.empty() ? Json(nullptr) : Json(destination);
  body["pattern"] = nullptr;
  body["matcher"] = nullptr;
  if (!reply_oid.empty()) {
    body["ticket"] = ticket;
    body["reply_to"] = Json{{"exchange", PidboxReplyExchange().name}, {"routing_key", reply_oid}};
  }
  Message m;
  m.exchange = PidboxExchange().name;
  m.routing_key = "";
  m.properties.content_type = std::string(ContentTypeName(ContentType::kMsgpack));
  m.properties.content_encoding = std::string(ContentEncodingName(ContentType::kMsgpack));
  m.properties.delivery_mode = 2;
  m.properties.priority = 0;
  const double now = UnixTimeNow();
  m.properties.headers = Json{{"clock", clock}, {"expires", timeout_s > 0 ? now + timeout_s : 0.0}};
  m.body = SerializeBody(body, ContentType::kMsgpack);
  return m;
}

ControlReply DecodeControlReply(const Message& message) {
  Json body = DeserializeBody(message.body, message.properties.content_type);
  if (!body.is_object() || body.size() != 1) {
    throw Error(ErrorKind::kParse, "expected a control reply {node: data}", "", "body");
  }
  ControlReply r;
  const Json& h = message.properties.headers;
  if (h.is_object() && h.contains("ticket") && h["ticket"].is_string()) r.ticket = h["ticket"].get<std::string>();
  r.node = body.begin().key();
  r.data = body.begin().value();
  return r;
}

}  // namespace kf::celery
