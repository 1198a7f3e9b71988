// Config loading: yaml-cpp -> kf::Json with OmegaConf/PyYAML typing, discovery, legacy keys, overrides.
// Interpolation lives in config_interpolation.cc; YAML output in DumpYaml below.
#include "kernelfoundry/config.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <regex>
#include <set>
#include <utility>
#include <vector>

#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

constexpr const char* kYamlTagPrefix = "tag:yaml.org,2002:";

// PyYAML (YAML 1.1) implicit resolvers, plus the float form OmegaConf adds ("1e3" without a dot).
const std::regex& BoolRe() {
  static const std::regex re("^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$");
  return re;
}
const std::regex& IntRe() {
  static const std::regex re(
      "^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+"
      "|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$");
  return re;
}
const std::regex& FloatRe() {
  static const std::regex re(
      "^(?:[-+]?(?:[0-9][0-9_]*)\\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*(?:[eE][-+]?[0-9]+)"
      "|\\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\\.[0-9_]*"
      "|[-+]?\\.(?:inf|Inf|INF)|\\.(?:nan|NaN|NAN))$");
  return re;
}
bool IsNullText(const std::string& s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

std::string RemoveUnderscores(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s)
    if (c != '_') out.push_back(c);
  return out;
}

// Splits an optional sign off; returns -1 or +1.
int TakeSign(std::string& v) {
  int sign = 1;
  if (!v.empty() && (v[0] == '-' || v[0] == '+')) {
    if (v[0] == '-') sign = -1;
    v.erase(0, 1);
  }
  return sign;
}

Json ConstructInt(const std::string& text) {
  std::string v = RemoveUnderscores(text);
  const int sign = TakeSign(v);
  if (v == "0") return Json(0);
  const bool decimal = v[0] != '0' && v.find(':') == std::string::npos;
  if (decimal) {
    errno = 0;
    long long x = std::strtoll(v.c_str(), nullptr, 10);
    if (errno != ERANGE) return Json(static_cast<int64_t>(sign * x));
    return Json(sign * std::strtod(v.c_str(), nullptr));  // Python keeps a big int; JSON cannot
  }
  long double value = 0;
  if (v.rfind("0b", 0) == 0) {
    for (char c : v.substr(2)) value = value * 2 + (c - '0');
  } else if (v.rfind("0x", 0) == 0) {
    for (char c : v.substr(2)) {
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : c - 'A' + 10;
      value = value * 16 + d;
    }
  } else if (v[0] == '0') {  // YAML 1.1 legacy octal
    for (char c : v.substr(1)) value = value * 8 + (c - '0');
  } else {  // sexagesimal: 1:30 = 90
    size_t start = 0;
    while (true) {
      size_t colon = v.find(':', start);
      value = value * 60 + std::strtold(v.substr(start, colon - start).c_str(), nullptr);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  value *= sign;
  if (value >= static_cast<long double>(std::numeric_limits<int64_t>::min()) &&
      value <= static_cast<long double>(std::numeric_limits<int64_t>::max()))
    return Json(static_cast<int64_t>(value));
  return Json(static_cast<double>(value));
}

Json ConstructFloat(const std::string& text) {
  std::string v = RemoveUnderscores(text);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int sign = TakeSign(v);
  if (v == ".inf") return Json(sign * std::numeric_limits<double>::infinity());
  if (v == ".nan") return Json(std::numeric_limits<double>::quiet_NaN());
  if (v.find(':') != std::string::npos) {
    double value = 0;
    size_t start = 0;
    while (true) {
      size_t colon = v.find(':', start);
      value = value * 60 + std::strtod(v.substr(start, colon - start).c_str(), nullptr);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    return Json(sign * value);
  }
  return Json(sign * std::strtod(v.c_str(), nullptr));
}

[[noreturn]] void ThrowAt(const YAML::Mark& mark, const std::string& what, const std::string& source,
                          const std::string& field = {}) {
  if (mark.is_null()) throw Error(ErrorKind::kParse, what, source, field);
  throw Error(ErrorKind::kParse, fmt::format("line {}, column {}: {}", mark.line + 1, mark.column + 1, what),
              source, field);
}

// Converts a typed scalar to the string a JSON object key gets (json.dumps of a Python dict key).
std::string KeyText(const Json& key) {
  if (key.is_string()) return key.get<std::string>();
  return key.dump();
}

namespace {

// "expected 'a: b'" for text "a:b" (a colon followed by neither a space nor the end: a `key: value` written
// without its space), or "" for any other text. The one reading of that typo for the parser's three messages.
std::string ColonFix(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 >= text.size() || text[colon + 1] == ' ' ||
      text.find('\n') != std::string_view::npos) {
    return "";
  }
  return fmt::format("expected '{}: {}'", text.substr(0, colon), text.substr(colon + 1));
}

}  // namespace

class Converter {
 public:
  explicit Converter(const std::string& source) : source_(source) {}

  Json Convert(const YAML::Node& node, const std::string& path) {
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null: return nullptr;
      case YAML::NodeType::Scalar: return Scalar(node, path);
      case YAML::NodeType::Sequence: {
        Json arr = Json::array();
        size_t i = 0;
        for (const auto& item : node) arr.push_back(Convert(item, fmt::format("{}[{}]", path, i++)));
        return arr;
      }
      case YAML::NodeType::Map: return Mapping(node, path);
    }
    return nullptr;
  }

  Json Scalar(const YAML::Node& node, const std::string& path) {
    const std::string& text = node.Scalar();
    const std::string& tag = node.Tag();
    if (tag == "!") return Json(text);  // quoted: always a string
    if (tag == "?" || tag.empty()) return ResolvePlainScalar(text);
    if (tag.rfind(kYamlTagPrefix, 0) == 0) {
      std::string kind = tag.substr(std::string(kYamlTagPrefix).size());
      if (kind == "str") return Json(text);
      if (kind == "null") return nullptr;
      Json typed = ResolvePlainScalar(text);
      if (kind == "int" && typed.is_number_integer()) return typed;
      if (kind == "float" && typed.is_number()) return Json(typed.get<double>());
      if (kind == "bool" && typed.is_boolean()) return typed;
      ThrowAt(node.Mark(), fmt::format("value '{}' is not a valid !!{}", text, kind), source_, path);
    }
    ThrowAt(node.Mark(), fmt::format("unsupported YAML tag '{}'", tag), source_, path);
  }

  Json Mapping(const YAML::Node& node, const std::string& path) {
    Json obj = Json::object();
    std::set<std::string> own_keys;
    std::vector<Json> merges;  // "<<" merge keys (PyYAML: merged keys first, own keys override)
    std::vector<std::pair<std::string, YAML::Node>> own;
    for (const auto& kv : node) {
      const YAML::Node& key = kv.first;
      if (!key.IsScalar() && !key.IsNull())
        ThrowAt(key.Mark(), "mapping keys must be scalars", source_, path);
      if (key.IsScalar() && key.Tag() == "?" && key.Scalar() == "<<") {
        merges.push_back(Convert(kv.second, path + ".<<"));
        continue;
      }
      std::string name = key.IsNull() ? "null" : KeyText(Scalar(key, path));
      // yaml-cpp reads a line `threads:1` (no space after the colon) in a block mapping as the key "threads:1" with
      // no value, where PyYAML (the reference's loader) refuses the file: refused here too, naming the fix
      // (regression, 2026-12-05: `threads:1` under eval_config was taken silently and the default thread count
      // used). In a flow mapping (`{a:1}`) PyYAML reads that key too, so it stays accepted there.
      if (key.IsScalar() && key.Tag() == "?" && kv.second.IsNull() && node.Style() == YAML::EmitterStyle::Block) {
        if (const std::string fix = ColonFix(name); !fix.empty()) {
          ThrowAt(key.Mark(),
                  fmt::format("'{}' is a key without a value; {} (YAML needs a space after the colon)", name, fix),
                  source_, Join(path, name));
        }
      }
      if (!own_keys.insert(name).second)
        ThrowAt(key.Mark(), fmt::format("duplicate key '{}'", name), source_, Join(path, name));
      own.emplace_back(name, kv.second);
    }
    for (const Json& merge : merges) {
      std::vector<const Json*> parts;
      if (merge.is_object()) parts.push_back(&merge);
      else if (merge.is_array())
        for (const Json& m : merge) parts.push_back(&m);
      for (const Json* part : parts) {
        if (!part->is_object())
          throw Error(ErrorKind::kParse, "'<<' merge value must be a mapping or a list of mappings", source_,
                      path);
        for (const auto& [k, v] : part->items())
          if (!obj.contains(k)) obj[k] = v;
      }
    }
    for (const auto& [name, value] : own) obj[name] = Convert(value, Join(path, name));
    return obj;
  }

 private:
  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  const std::string& source_;
};

}  // namespace

Json ResolvePlainScalar(const std::string& text) {
  if (IsNullText(text)) return nullptr;
  const char c = text[0];
  if (std::string_view("yYnNtTfFoO").find(c) != std::string_view::npos && std::regex_match(text, BoolRe())) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return Json(l == 'y' || l == 't' || (l == 'o' && (text[1] == 'n' || text[1] == 'N')));
  }
  if (std::string_view("-+0123456789.").find(c) != std::string_view::npos) {
    // The int and float patterns never both match the same text, so their order does not matter.
    if (std::regex_match(text, IntRe())) return ConstructInt(text);
    if (std::regex_match(text, FloatRe())) return ConstructFloat(text);
  }
  return Json(text);
}

namespace {

// " (line N: …)" naming a `key:value` line without a space after the colon at or just before `mark` (yaml-cpp's
// error then points elsewhere: "end of map not found", "illegal map value"), or "".
std::string ColonLineHint(std::string_view text, const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  // An indented `key:value` (optionally a list item, a quoted key, a trailing comment): groups 3 and 4.
  static const std::regex kLine(R"re(^\s*(-\s+)?(["']?)([A-Za-z_][\w.-]*)\2:([^\s:/][^#]*?)\s*(#.*)?$)re");
  std::vector<std::string_view> lines;
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  const int64_t at = mark.line;
  for (int64_t i = std::min<int64_t>(at, static_cast<int64_t>(lines.size()) - 1); i >= std::max<int64_t>(0, at - 2);
       --i) {
    std::string line(lines[static_cast<size_t>(i)]);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::smatch m;
    if (std::regex_match(line, m, kLine)) {
      return fmt::format(" (line {}: {}; YAML needs a space after the colon)", i + 1,
                         ColonFix(m[3].str() + ":" + m[4].str()));
    }
  }
  return "";
}

}  // namespace

std::string ColonValueHint(const Json& value) {
  const std::string fix = value.is_string() ? ColonFix(value.get_ref<const std::string&>()) : "";
  return fix.empty() ? "" : " (" + fix + "? YAML needs a space after the colon)";
}

Json ParseYaml(std::string_view text, const std::string& source) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    ThrowAt(e.mark, "invalid YAML: " + e.msg + ColonLineHint(text, e.mark), source);
  }
  if (docs.empty()) return nullptr;
  if (docs.size() > 1)
    throw Error(ErrorKind::kParse, fmt::format("expected one YAML document, found {}", docs.size()), source);
  try {
    return Converter(source).Convert(docs[0], "");
  } catch (const YAML::Exception& e) {
    ThrowAt(e.mark, "invalid YAML: " + e.msg, source);
  }
}

Json LoadConfigText(std::string_view text, const std::string& source) {
  Json doc = ParseYaml(text, source);
  if (doc.is_null()) return Json::object();
  if (doc.is_string()) {  // OmegaConf.create("text") gives {"text": None}
    Json obj = Json::object();
    obj[doc.get<std::string>()] = nullptr;
    return obj;
  }
  if (!doc.is_object())
    throw Error(ErrorKind::kParse, fmt::format("expected a mapping at the top level, got a {}", doc.type_name()),
                source);
  return ResolveInterpolations(doc, source);
}

std::optional<std::string> FindTopLevelConfig(const MemoryFileMap& files, std::string_view stem) {
  std::vector<std::string> found;
  for (const char* ext : {".yaml", ".yml"}) {
    std::string name = std::string(stem) + ext;
    if (files.Contains(name)) found.push_back(name);
  }
  if (found.empty()) return std::nullopt;
  if (found.size() > 1)
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("two {} files: {} and {}; keep exactly one", stem, found[0], found[1]), found[0]);
  return found[0];
}

void RenameLegacyKeys(Json& config) {
  if (!config.is_object()) return;
  for (const auto& [old_key, new_key] : {std::pair{"run_name", "job_name"}, std::pair{"Op_Name", "task_name"}}) {
    if (!config.contains(new_key) && config.contains(old_key)) {
      Json value = config[old_key];
      config.erase(old_key);
      config[new_key] = std::move(value);  // appended: the reference pops and re-inserts
    }
  }
}

Json GetConfig(const MemoryFileMap& files) {
  std::optional<std::string> name = FindTopLevelConfig(files, "config");
  if (!name)
    throw Error(ErrorKind::kNotFound, "no config.yaml or config.yml at the top level of the task package",
                "config.yaml");
  Json config = LoadConfigText(*files.Find(*name), *name);
  RenameLegacyKeys(config);
  return config;
}

std::optional<Json> TakeOverrides(MemoryFileMap& files) {
  std::optional<std::string> name = FindTopLevelConfig(files, "overrides");
  if (!name) return std::nullopt;
  Json overrides = LoadConfigText(*files.Find(*name), *name);
  files.Remove(*name);
  return overrides;
}

Json MergeConfig(const Json& base, const Json& overlay) {
  if (!base.is_object() || !overlay.is_object()) return overlay;
  Json out = base;
  for (const auto& [key, value] : overlay.items()) {
    auto it = out.find(key);
    if (it != out.end() && it->is_object() && value.is_object()) *it = MergeConfig(*it, value);
    else out[key] = value;
  }
  return out;
}

namespace {
void EmitYaml(YAML::Emitter& out, const Json& v) {
  switch (v.type()) {
    case Json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [k, x] : v.items()) {
        out << YAML::Key;
        EmitYaml(out, Json(k));
        out << YAML::Value;
        EmitYaml(out, x);
      }
      out << YAML::EndMap;
      break;
    case Json::value_t::array:
      out << YAML::BeginSeq;
      for (const Json& x : v) EmitYaml(out, x);
      out << YAML::EndSeq;
      break;
    case Json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      // Quote strings that a YAML reader would type as something else ("01", "true", "null", "").
      if (!ResolvePlainScalar(s).is_string()) out << YAML::DoubleQuoted << s;
      else out << s;
      break;
    }
    case Json::value_t::null: out << YAML::Null; break;
    case Json::value_t::boolean: out << YAML::TrueFalseBool << v.get<bool>(); break;
    default: out << v.dump(); break;  // numbers: JSON text is valid plain YAML
  }
}
}  // namespace

std::string DumpYaml(const Json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  EmitYaml(out, value);
  std::string text = out.c_str();
  if (!text.empty() && text.back() != '\n') text.push_back('\n');
  return text;
}

}  // namespace kf

namespace kf {
namespace {

// True when every part of the dotted key path exists (a null value counts as present).
bool ConfigHasKey(const Json& config, std::string_view key) {
  const Json* node = &config;
  while (true) {
    if (!node->is_object()) return false;
    const size_t dot = key.find('.');
    auto it = node->find(std::string(key.substr(0, dot)));
    if (it == node->end()) return false;
    if (dot == std::string_view::npos) return true;
    node = &*it;
    key.remove_prefix(dot + 1);
  }
}

}  // namespace

ConfigView::ConfigView(const Json& config, std::string file) : config_(config), file_(std::move(file)) {}

const Json* ConfigView::Find(std::string_view key) const {
  const Json* node = &config_;
  while (true) {
    if (!node->is_object()) return nullptr;
    const size_t dot = key.find('.');
    auto it = node->find(std::string(key.substr(0, dot)));
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string_view::npos) break;
    key.remove_prefix(dot + 1);
  }
  return node->is_null() ? nullptr : node;
}

void ConfigView::Fail(std::string_view key, const std::string& expected, const Json& got) const {
  throw Error(ErrorKind::kInvalidArgument, "expected " + expected + ", got " + DumpJson(got), file_,
              std::string(key));
}

bool ConfigView::Bool(std::string_view key, bool fallback) const {
  const Json* v = Find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) Fail(key, "true or false", *v);
  return v->get<bool>();
}

int64_t ConfigView::Int(std::string_view key, int64_t fallback) const {
  const Json* v = Find(key);
  if (v == nullptr) return fallback;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  Fail(key, "an integer", *v);
}

double ConfigView::Number(std::string_view key, double fallback) const {
  const Json* v = Find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number() || !std::isfinite(v->get<double>())) Fail(key, "a number", *v);
  return v->get<double>();
}

std::string ConfigView::String(std::string_view key, const std::string& fallback) const {
  const Json* v = Find(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) Fail(key, "a string", *v);
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> ConfigView::StringList(std::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) Fail(key, "a list of strings", *v);
  std::vector<std::string> out;
  for (const Json& item : *v) {
    if (!item.is_string()) Fail(key, "a list of strings", *v);
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::optional<uint64_t> ParseByteSize(std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(value) || value < 0) return std::nullopt;
  std::string unit = end;
  if (unit.size() > 1 && (unit.substr(1) == "B" || unit.substr(1) == "iB")) unit = unit.substr(0, 1);
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"", 1.0}, {"b", 1.0}, {"B", 1.0}, {"k", 0x1p10}, {"K", 0x1p10}, {"m", 0x1p20}, {"M", 0x1p20},
      {"g", 0x1p30}, {"G", 0x1p30}, {"t", 0x1p40}, {"T", 0x1p40}};
  for (const auto& [name, mult] : kUnits) {
    if (unit == name) {
      const double bytes = value * mult;
      if (bytes >= 0x1p63) return std::nullopt;
      return static_cast<uint64_t>(std::llround(bytes));
    }
  }
  return std::nullopt;
}

namespace {

// The part of a limit that Bytes and Count read alike: 0 for null, false (YAML's unquoted `off`) and "off"; a
// whole number >= 0 as it is; nullopt for anything else.
std::optional<uint64_t> OffOrWhole(const Json* v) {
  if (v == nullptr || (v->is_boolean() && !v->get<bool>()) || (v->is_string() && v->get<std::string>() == "off")) {
    return 0;
  }
  if (v->is_number_integer() && v->get<int64_t>() >= 0) return v->get<uint64_t>();
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> ConfigView::Bytes(std::string_view key) const {
  if (!ConfigHasKey(config_, key)) return std::nullopt;
  const Json* v = Find(key);
  if (std::optional<uint64_t> n = OffOrWhole(v)) return n;
  if (v->is_string()) {
    if (std::optional<uint64_t> b = ParseByteSize(v->get<std::string>())) return b;
  }
  Fail(key, "a size in bytes (a whole number, or a string like \"8G\" or \"512M\"; off, 0 or null for none)", *v);
}

std::optional<uint64_t> ConfigView::Count(std::string_view key) const {
  if (!ConfigHasKey(config_, key)) return std::nullopt;
  const Json* v = Find(key);
  if (std::optional<uint64_t> n = OffOrWhole(v)) return n;
  Fail(key, "a whole number (off, 0 or null for none)", *v);
}

std::optional<double> ConfigView::Seconds(std::string_view key) const {
  if (!ConfigHasKey(config_, key)) return std::nullopt;
  const Json* v = Find(key);
  if (v == nullptr) return 0.0;  // present and null
  if (!v->is_number()) Fail(key, "a number of seconds", *v);
  const double s = v->get<double>();
  if (!std::isfinite(s) || s < 0 || s > 1e7) Fail(key, "a number of seconds in [0, 1e7]", *v);
  return s;
}

}  // namespace kf
