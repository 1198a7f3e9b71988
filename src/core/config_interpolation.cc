// OmegaConf-style interpolation for loaded configs (the reference resolves with to_container(resolve=True)).
//
// Supported: "${a.b.c}" / "${a[0]}" (absolute), "${.x}" / "${..x}" (relative to the node holding the
// string), "${oc.env:NAME}" / "${oc.env:NAME,default}" (also the legacy "${env:NAME}"), and "\${" as a
// literal "${". A string that is exactly one interpolation takes the target's value and type; otherwise
// the parts are joined as text (Python str(): True, None, 1.5). Cycles and missing keys are errors.
#include <fmt/format.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

using Path = std::vector<std::string>;  // object keys or decimal array indices

std::string PathText(const Path& path) {
  std::string out;
  for (const std::string& p : path) out += (out.empty() ? "" : ".") + p;
  return out;
}

// Python str() of a scalar, as OmegaConf uses when an interpolation is embedded in a longer string.
std::string PyStr(const Json& v, const std::string& source, const std::string& field) {
  switch (v.type()) {
    case Json::value_t::string: return v.get<std::string>();
    case Json::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case Json::value_t::null: return "None";
    case Json::value_t::number_float: {
      std::string s = v.dump();
      return s;
    }
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return v.dump();
    default:
      throw Error(ErrorKind::kParse, "cannot embed a mapping or list inside a string interpolation", source,
                  field);
  }
}

class Resolver {
 public:
  Resolver(const Json& root, const std::string& source) : root_(root), source_(source) {}

  Json Resolve(const Json& node, Path& path) {
    if (node.is_object()) {
      Json out = Json::object();
      for (const auto& [k, v] : node.items()) {
        path.push_back(k);
        out[k] = Resolve(v, path);
        path.pop_back();
      }
      return out;
    }
    if (node.is_array()) {
      Json out = Json::array();
      for (size_t i = 0; i < node.size(); ++i) {
        path.push_back(std::to_string(i));
        out.push_back(Resolve(node[i], path));
        path.pop_back();
      }
      return out;
    }
    if (node.is_string()) return ResolveString(node.get_ref<const std::string&>(), path);
    return node;
  }

 private:
  // Resolves one string value found at `path`.
  Json ResolveString(const std::string& s, const Path& path) {
    if (s.find("${") == std::string::npos) return s;
    const std::string field = PathText(path);
    if (!active_.insert(field).second)
      throw Error(ErrorKind::kParse, "interpolation cycle", source_, field);
    struct Part {
      bool is_ref;
      std::string text;
    };
    std::vector<Part> parts;
    size_t i = 0;
    std::string literal;
    while (i < s.size()) {
      if (s.compare(i, 3, "\\${") == 0) {
        literal += "${";
        i += 3;
      } else if (s.compare(i, 2, "${") == 0) {
        size_t close = s.find('}', i + 2);
        if (close == std::string::npos)
          throw Error(ErrorKind::kParse, fmt::format("unterminated interpolation in '{}'", s), source_, field);
        std::string inner = s.substr(i + 2, close - i - 2);
        if (inner.find("${") != std::string::npos)
          throw Error(ErrorKind::kParse, fmt::format("nested interpolation is not supported: '{}'", s), source_,
                      field);
        if (!literal.empty()) parts.push_back({false, std::move(literal)});
        literal.clear();
        parts.push_back({true, inner});
        i = close + 1;
      } else {
        literal += s[i++];
      }
    }
    if (!literal.empty()) parts.push_back({false, literal});

    Json result;
    if (parts.size() == 1 && parts[0].is_ref) {
      result = Evaluate(parts[0].text, path);
    } else {
      std::string text;
      for (const Part& p : parts) text += p.is_ref ? PyStr(Evaluate(p.text, path), source_, field) : p.text;
      result = text;
    }
    active_.erase(field);
    return result;
  }

  // Evaluates the inside of "${...}" for the string at `path`.
  Json Evaluate(const std::string& inner, const Path& path) {
    const std::string field = PathText(path);
    size_t colon = inner.find(':');
    if (colon != std::string::npos) {
      std::string name = inner.substr(0, colon);
      if (name != "oc.env" && name != "env")
        throw Error(ErrorKind::kParse, fmt::format("unsupported resolver '{}' in ${{{}}}", name, inner), source_,
                    field);
      std::string args = inner.substr(colon + 1);
      std::string var = args, def;
      bool has_default = false;
      if (size_t comma = args.find(','); comma != std::string::npos) {
        var = args.substr(0, comma);
        def = args.substr(comma + 1);
        has_default = true;
      }
      auto trim = [](std::string t) {
        size_t b = t.find_first_not_of(" \t"), e = t.find_last_not_of(" \t");
        return b == std::string::npos ? std::string() : t.substr(b, e - b + 1);
      };
      var = trim(var);
      if (const char* value = std::getenv(var.c_str())) return std::string(value);
      if (!has_default)
        throw Error(ErrorKind::kParse, fmt::format("environment variable '{}' is not set", var), source_, field);
      def = trim(def);
      if (def == "null") return nullptr;
      if (def.size() >= 2 && (def.front() == '\'' || def.front() == '"') && def.back() == def.front())
        def = def.substr(1, def.size() - 2);
      return def;
    }
    // Key path: leading dots are relative to the container holding the string.
    Path target;
    size_t pos = 0;
    if (!inner.empty() && inner[0] == '.') {
      size_t dots = inner.find_first_not_of('.');
      if (dots == std::string::npos) dots = inner.size();
      if (dots > path.size())
        throw Error(ErrorKind::kParse, fmt::format("relative interpolation ${{{}}} goes above the root", inner),
                    source_, field);
      target.assign(path.begin(), path.end() - static_cast<std::ptrdiff_t>(dots));
      pos = dots;
    }
    std::string seg;
    for (; pos <= inner.size(); ++pos) {
      char c = pos < inner.size() ? inner[pos] : '.';
      if (c == '.' || c == '[' || c == ']') {
        if (!seg.empty()) target.push_back(seg);
        seg.clear();
      } else {
        seg += c;
      }
    }
    const Json* node = &root_;
    Path walked;
    for (const std::string& key : target) {
      walked.push_back(key);
      if (node->is_object() && node->contains(key)) {
        node = &(*node)[key];
      } else if (node->is_array() && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(key) < node->size()) {
        node = &(*node)[std::stoul(key)];
      } else {
        throw Error(ErrorKind::kParse,
                    fmt::format("interpolation ${{{}}} refers to missing key '{}'", inner, PathText(walked)),
                    source_, field);
      }
    }
    Path target_path = walked;
    return Resolve(*node, target_path);
  }

  const Json& root_;
  const std::string& source_;
  std::set<std::string> active_;
};

}  // namespace

Json ResolveInterpolations(const Json& root, const std::string& source) {
  Resolver resolver(root, source);
  Path path;
  return resolver.Resolve(root, path);
}

}  // namespace kf
