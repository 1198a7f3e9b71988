// The KernelBench importer's template filling. The templates themselves are real files in
// src/pipeline/kernelbench/templates/ (introspect.py, kernel.cpp, task.py, sides.py, config.yaml, conftest.py),
// embedded into the binary at build time (CMakeLists.txt `kf_embed_files` → kernelbench_templates_data.cc).
#include "pipeline/kernelbench_templates.hpp"

#include "kernelfoundry/error.hpp"

namespace kf::kernelbench {

const std::string_view kIntrospectMarker = "KF_INTROSPECTION_JSON ";

std::string SubstituteTemplate(std::string_view text, const std::map<std::string, std::string>& values) {
  std::string out;
  out.reserve(text.size() + 1024);
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) break;
    size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) break;
    std::string key(text.substr(open + 2, close - open - 2));
    auto it = values.find(key);
    if (it == values.end()) throw Error(ErrorKind::kInternal, "kernelbench template: no value for {{" + key + "}}");
    out.append(text.substr(pos, open - pos));
    out += it->second;
    pos = close + 2;
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace kf::kernelbench
