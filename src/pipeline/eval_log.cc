// Log post-processing for eval_log (eval_log.hpp): pytest output (spec §4.9 convert_test_result_to_exec_result) and
// compiler output (spec §4.9 step 7). Our own implementation of the behaviour described there.
#include <algorithm>
#include <cctype>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "core/strings.hpp"
#include "pipeline/eval_log.hpp"

namespace kf {


std::string CollapseTensorDumps(std::string_view text) {
  static constexpr std::string_view kOpen = "tensor(";
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t hit = text.find(kOpen, pos);
    if (hit == std::string_view::npos) break;
    bool word_start = hit == 0 || !(std::isalnum(static_cast<unsigned char>(text[hit - 1])) ||
                                    text[hit - 1] == '_');
    size_t close = std::string_view::npos;
    if (word_start) {
      int depth = 1;
      for (size_t i = hit + kOpen.size(); i < text.size(); ++i) {
        if (text[i] == '(') {
          ++depth;
        } else if (text[i] == ')' && --depth == 0) {
          close = i;
          break;
        }
      }
    }
    if (close == std::string_view::npos) {  // not a dump, or an unterminated one: keep as is
      out.append(text.substr(pos, hit + kOpen.size() - pos));
      pos = hit + kOpen.size();
      continue;
    }
    out.append(text.substr(pos, hit - pos));
    out += "tensor(...)";
    pos = close + 1;
  }
  out.append(text.substr(std::min(pos, text.size())));
  return out;
}

std::string PostprocessPytestOutput(std::string_view output, size_t cap_chars) {
  std::vector<std::string_view> lines = SplitLines(output);
  size_t first = 0;
  auto it = std::find_if(lines.begin(), lines.end(),
                         [](std::string_view l) { return l.find("task.py::") != std::string_view::npos; });
  // Without any test line (collection error, import error) the whole output is the useful part; the
  // reference dropped it all.
  if (it != lines.end()) first = static_cast<size_t>(it - lines.begin());
  std::string body;
  for (size_t i = first; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    bool skip_noise = l.find("SKIPPED") != std::string_view::npos &&
                      (l.find("could not import") != std::string_view::npos ||
                       l.find("No module named") != std::string_view::npos);
    if (skip_noise) continue;
    body.append(l);
    body += '\n';
  }
  std::string text = "==== test session starts\n\n" + CapMiddle(CollapseTensorDumps(body), cap_chars);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

namespace {

bool IsIncludeContinuation(std::string_view line) {
  size_t i = line.find_first_not_of(' ');
  return i != std::string_view::npos && i > 0 && line.substr(i).rfind("from ", 0) == 0;
}

bool IsCommandLine(std::string_view line) {
  static const std::regex kNinjaStep(R"(^\[[0-9]+/[0-9]+\] )");
  std::string s(line.substr(0, 32));
  return std::regex_search(s, kNinjaStep) ||
         (line.find(" -c ") != std::string_view::npos && line.find(" -o ") != std::string_view::npos);
}

/// "path:line[:col]: warning:" / "note:" with an absolute path outside the project.
bool IsOutsideDiagnostic(std::string_view line, std::string_view kind) {
  if (line.empty() || line[0] != '/') return false;
  size_t k = line.find(kind);
  if (k == std::string_view::npos) return false;
  size_t colon = line.find(':');
  return colon != std::string_view::npos && colon < k;
}

}  // namespace

std::string PostprocessCompilerOutput(std::string_view output, std::string_view project_dir,
                                      size_t head_chars, size_t error_chars) {
  // 1. Nothing after ninja's stop line is about the failure.
  std::string text(output);
  if (size_t stop = text.find("ninja: build stopped"); stop != std::string::npos) {
    size_t eol = text.find('\n', stop);
    text.resize(eol == std::string::npos ? text.size() : eol + 1);
  }
  // 2. Shorten the project directory.
  std::string dir(project_dir);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!dir.empty()) {
    std::string replaced;
    size_t pos = 0;
    for (size_t hit; (hit = text.find(dir, pos)) != std::string::npos; pos = hit + dir.size()) {
      replaced.append(text, pos, hit - pos);
      replaced += "<project_dir>";
    }
    replaced.append(text, pos);
    text = std::move(replaced);
  }
  // 3. Line filters.
  std::vector<std::string_view> lines = SplitLines(text);
  std::string out;
  bool dropping = false;  // inside the context of a dropped outside-project warning
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (dropping) {
      bool context = (!line.empty() && line[0] == ' ') || IsOutsideDiagnostic(line, ": note:");
      if (context) continue;
      dropping = false;
    }
    if (!dir.empty() && IsOutsideDiagnostic(line, ": warning:")) {
      dropping = true;
      continue;
    }
    if (line.rfind("In file included from ", 0) == 0) {
      size_t j = i + 1;
      while (j < lines.size() && IsIncludeContinuation(lines[j])) ++j;
      size_t more = j - i - 1;
      out.append(line);
      out += '\n';
      if (more >= 2) out += "                 [... " + std::to_string(more - 1) + " more includes ...]\n";
      if (more >= 1) {
        out.append(lines[j - 1]);
        out += '\n';
      }
      i = j - 1;
      continue;
    }
    if (line.size() > 400 && IsCommandLine(line)) {
      out.append(line.substr(0, 160));
      out += " [...] ";
      out.append(line.substr(line.size() - 80));
      out += '\n';
      continue;
    }
    out.append(line);
    out += '\n';
  }
  if (out.size() <= head_chars) return out;
  // 4. Cap: the head, plus the error lines of the part that was cut.
  size_t cut = out.rfind('\n', head_chars);
  if (cut == std::string::npos || cut < head_chars / 2) {
    cut = head_chars;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
  } else {
    cut += 1;
  }
  std::string result = out.substr(0, cut);
  std::string errors;
  for (std::string_view line : SplitLines(std::string_view(out).substr(cut))) {
    if (!ContainsNoCase(line, "error")) continue;
    if (errors.size() + line.size() + 1 > error_chars) break;
    errors.append(line);
    errors += '\n';
  }
  result += "\n[... compiler output truncated ...]\n";
  if (!errors.empty()) result += "Errors in the truncated part:\n" + errors;
  return result;
}

}  // namespace kf
