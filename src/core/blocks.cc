// Block markers: extraction, replacement, flattening (see include/kernelfoundry/blocks.hpp; spec §1.7).
//
// One scanner (ScanMarkers) serves GetBlock and UpdateBlock, so both accept exactly the same files. It works
// on byte offsets of the original text: extraction normalises line terminators to "\n", replacement copies
// the untouched bytes verbatim (CRLF kept).
#include "kernelfoundry/blocks.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/terminal.hpp"

namespace kf {
namespace {

/// The reference's allow-list of scanned file extensions (spec §1.7), matched with a case-sensitive endswith.
constexpr const char* kExtensions[] = {".sycl", ".cu",  ".cpp", ".cxx",   ".cc",  ".c",    ".hpp", ".hxx", ".hh",
                                       ".h",    ".inl", ".py",  ".md",    ".txt", ".cl",   ".yml", ".yaml", ".sh",
                                       ".ps1",  ".json", ".toml", ".ini", ".cfg", ".cmake", ".bat", ".cmd"};

/// One line of the text: [begin, content_end) is the text, [content_end, end) the terminator.
struct Line {
  size_t begin;
  size_t content_end;
  size_t end;
};

/// Splits at "\r\n", "\r" or "\n" (Python's universal newlines). The last line may have no terminator.
std::vector<Line> SplitLineSpans(std::string_view text) {
  std::vector<Line> lines;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find_first_of("\r\n", i);
    if (j == std::string_view::npos) {
      lines.push_back({i, text.size(), text.size()});
      break;
    }
    size_t end = (text[j] == '\r' && j + 1 < text.size() && text[j + 1] == '\n') ? j + 2 : j + 1;
    lines.push_back({i, j, end});
    i = end;
  }
  return lines;
}

/// A block: the indices (into the line vector) of its START and END marker lines.
struct Span {
  size_t start_line;
  size_t end_line;
};

struct Markers {
  std::string start;
  std::string end;
  explicit Markers(std::string_view key)
      : start(fmt::format("[{}_START]", key)), end(fmt::format("[{}_END]", key)) {}
};

Error MarkerError(const std::string& message, const std::string& path, size_t line_index) {
  return Error(ErrorKind::kParse, fmt::format("{} at line {}", message, line_index + 1), path,
               fmt::format("line {}", line_index + 1));
}

/// Finds the blocks of one key. Throws kf::Error(kParse) for nested START, stray END, START and END on one
/// line, and an unclosed START.
std::vector<Span> ScanMarkers(std::string_view text, const std::vector<Line>& lines, const Markers& m,
                              const std::string& path) {
  std::vector<Span> spans;
  bool open = false;
  size_t open_line = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = text.substr(lines[i].begin, lines[i].content_end - lines[i].begin);
    bool has_start = line.find(m.start) != std::string_view::npos;
    bool has_end = line.find(m.end) != std::string_view::npos;
    if (has_start && has_end) {
      throw MarkerError(fmt::format("{} and {} on the same line in {}", m.start, m.end, path), path, i);
    }
    if (has_start) {
      if (open) throw MarkerError(fmt::format("Nested {} found in {}", m.start, path), path, i);
      open = true;
      open_line = i;
    } else if (has_end) {
      if (!open) {
        throw MarkerError(fmt::format("{} found without matching {} in {}", m.end, m.start, path), path, i);
      }
      spans.push_back({open_line, i});
      open = false;
    }
  }
  if (open) {
    throw MarkerError(fmt::format("{} without matching {} in {}", m.start, m.end, path), path, open_line);
  }
  return spans;
}

/// True when the text mentions a marker of the key at all (cheap pre-check before splitting lines).
bool MentionsKey(std::string_view text, const Markers& m) {
  return text.find(m.start) != std::string_view::npos || text.find(m.end) != std::string_view::npos;
}

/// The trimmed, LF-normalised content between the marker lines of `span`.
std::string ExtractContent(std::string_view text, const std::vector<Line>& lines, const Span& span) {
  auto blank = [&](size_t i) {
    return IsPythonBlank(text.substr(lines[i].begin, lines[i].content_end - lines[i].begin));
  };
  size_t first = span.start_line + 1, last = span.end_line;  // [first, last)
  while (first < last && blank(first)) ++first;
  while (last > first && blank(last - 1)) --last;
  std::string out;
  for (size_t i = first; i < last; ++i) {
    out.append(text.substr(lines[i].begin, lines[i].content_end - lines[i].begin));
    out.push_back('\n');
  }
  return out;
}

/// ParseBlocks for text already known to be valid UTF-8.
std::vector<std::string> ParseValid(std::string_view text, const Markers& m, const std::string& path) {
  if (!MentionsKey(text, m)) return {};
  std::vector<Line> lines = SplitLineSpans(text);
  std::vector<std::string> out;
  for (const Span& span : ScanMarkers(text, lines, m, path)) out.push_back(ExtractContent(text, lines, span));
  return out;
}

Error Utf8Error(std::string_view text, const std::string& path) {
  return Error(ErrorKind::kParse, fmt::format("{} is not valid UTF-8: {}", path, DescribeUtf8Error(text)), path);
}

/// Scans all allow-listed files for `keys`, gathering errors (see GetBlock).
TaskBlocks ScanFiles(const MemoryFileMap& files, const std::vector<std::string_view>& keys) {
  std::vector<std::string> paths = files.ListFiles();
  std::sort(paths.begin(), paths.end());
  std::vector<Markers> markers(keys.begin(), keys.end());
  TaskBlocks result;
  std::vector<Error> errors;
  for (const std::string& path : paths) {
    if (!IsBlockFile(path)) continue;
    const std::string* text = files.Find(path);
    if (text == nullptr) continue;
    if (!IsValidUtf8(*text)) {
      errors.push_back(Utf8Error(*text, path));
      continue;
    }
    for (size_t k = 0; k < keys.size(); ++k) {
      try {
        std::vector<std::string> blocks = ParseValid(*text, markers[k], path);
        if (!blocks.empty()) result[std::string(keys[k])][path] = std::move(blocks);
      } catch (const Error& e) {
        errors.push_back(e);
      }
    }
  }
  if (errors.size() == 1) throw errors.front();
  if (errors.size() > 1) {
    // The first few in full, then a count: a package of 1,200 binary files named *.txt made a 70 kB error line.
    constexpr size_t kShown = 5;
    std::string message;
    for (size_t i = 0; i < errors.size() && i < kShown; ++i) message += (i == 0 ? "" : "; ") + errors[i].message();
    if (errors.size() > kShown) message += fmt::format("; and {} more problems", errors.size() - kShown);
    throw Error(ErrorKind::kParse, message, errors.front().file(), errors.front().field());
  }
  return result;
}

/// Rewrites content's newlines to `eol` ("\n" keeps it verbatim) and appends `eol` when missing.
std::string AdaptNewlines(std::string_view content, std::string_view eol) {
  std::string out;
  if (eol == "\n") {
    out.assign(content);
  } else {
    out.reserve(content.size() + content.size() / 16);
    for (size_t i = 0; i < content.size(); ++i) {
      char c = content[i];
      if (eol == "\r\n") {
        if (c == '\n' && (i == 0 || content[i - 1] != '\r')) out += "\r\n";
        else out.push_back(c);
      } else {  // "\r"
        if (c == '\r' && i + 1 < content.size() && content[i + 1] == '\n') continue;  // CRLF -> CR
        out.push_back(c == '\n' ? '\r' : c);
      }
    }
  }
  if (out.size() < eol.size() || out.compare(out.size() - eol.size(), eol.size(), eol) != 0) out += eol;
  return out;
}

}  // namespace

std::vector<std::string> BlockExtensions() { return {std::begin(kExtensions), std::end(kExtensions)}; }

bool IsBlockFile(std::string_view path) {
  for (const char* ext : kExtensions) {
    std::string_view e(ext);
    if (path.size() >= e.size() && path.substr(path.size() - e.size()) == e) return true;
  }
  return false;
}

std::vector<std::string> ParseBlocks(std::string_view text, std::string_view key, const std::string& path) {
  if (!IsValidUtf8(text)) throw Utf8Error(text, path);
  return ParseValid(text, Markers(key), path);
}

BlockMap GetBlock(const MemoryFileMap& files, std::string_view key) {
  TaskBlocks all = ScanFiles(files, {key});
  auto it = all.find(std::string(key));
  return it == all.end() ? BlockMap{} : std::move(it->second);
}

TaskBlocks GetAllBlocks(const MemoryFileMap& files) {
  return ScanFiles(files, {std::begin(kBlockKeys), std::end(kBlockKeys)});
}

void UpdateBlock(MemoryFileMap& files, std::string_view key, const std::string& path, std::string_view content,
                 size_t block_index) {
  const std::string* text = files.Find(path);
  if (text == nullptr) throw Error(ErrorKind::kNotFound, "File not found: " + path, path);
  if (!IsValidUtf8(*text)) throw Utf8Error(*text, path);
  Markers m(key);
  if (content.find(m.start) != std::string_view::npos || content.find(m.end) != std::string_view::npos) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("replacement content for block {} of '{}' in {} contains a {} or {} marker", block_index,
                            key, path, m.start, m.end),
                path);
  }
  std::vector<Line> lines = SplitLineSpans(*text);
  std::vector<Span> spans = ScanMarkers(*text, lines, m, path);
  if (spans.empty()) {
    throw Error(ErrorKind::kNotFound, fmt::format("Block with key '{}' not found in {}", key, path), path);
  }
  if (block_index >= spans.size()) {
    throw Error(ErrorKind::kNotFound,
                fmt::format("Block index {} out of range; only {} '{}' block(s) in {}", block_index, spans.size(),
                            key, path),
                path);
  }
  const Line& start = lines[spans[block_index].start_line];
  const Line& end = lines[spans[block_index].end_line];
  std::string_view eol = std::string_view(*text).substr(start.content_end, start.end - start.content_end);
  if (eol.empty()) eol = "\n";  // unreachable: an END line follows the START line
  std::string replacement = AdaptNewlines(content, eol);
  std::string updated;
  updated.reserve(text->size() + replacement.size());
  updated.append(*text, 0, start.end);
  updated += replacement;
  updated.append(*text, end.begin, std::string::npos);
  files.Set(path, std::move(updated));
}

std::string FindPath(const TaskBlocks& blocks, std::string_view key) {
  auto it = blocks.find(std::string(key));
  size_t count = 0;
  if (it != blocks.end()) {
    for (const auto& [path, contents] : it->second) count += contents.size();
  }
  if (count == 0) throw Error(ErrorKind::kNotFound, fmt::format("No block with key '{}'", key), "", std::string(key));
  if (count > 1) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("Multiple blocks exist for key '{}'. Provide a dict mapping "
                            "key->file_path->list[content].",
                            key),
                "", std::string(key));
  }
  for (const auto& [path, contents] : it->second) {
    if (!contents.empty()) return path;
  }
  throw Error(ErrorKind::kInternal, "unreachable in FindPath");
}

std::string BlocksToStr(const BlockMap& blocks) {
  size_t count = 0;
  for (const auto& [path, contents] : blocks) count += contents.size();
  std::string out;
  bool first = true;
  for (const auto& [path, contents] : blocks) {
    for (const std::string& c : contents) {
      if (count == 1) return c;
      if (!first) out += '\n';
      first = false;
      out += "### Block: " + path + " ###\n" + c;
    }
  }
  return out;
}

Json BlocksToJson(const TaskBlocks& blocks) {
  Json j = Json::object();
  auto emit = [&](const std::string& key, const BlockMap& map) {
    Json per = Json::object();
    for (const auto& [path, contents] : map) per[path] = contents;
    j[key] = std::move(per);
  };
  for (const char* key : kBlockKeys) {
    if (auto it = blocks.find(key); it != blocks.end()) emit(it->first, it->second);
  }
  for (const auto& entry : blocks) {
    const std::string& key = entry.first;
    if (std::none_of(std::begin(kBlockKeys), std::end(kBlockKeys), [&](const char* k) { return key == k; })) {
      emit(key, entry.second);
    }
  }
  return j;
}

TaskBlocks BlocksFromJson(const Json& j, const std::string& source) {
  auto fail = [&](const std::string& field, const std::string& what) {
    throw Error(ErrorKind::kParse, what, source, field);
  };
  if (!j.is_object()) fail("blocks", std::string("expected an object {KEY: {path: [content]}}, got ") + j.type_name());
  TaskBlocks out;
  for (const auto& [key, per] : j.items()) {
    const std::string key_field = "blocks." + key;
    if (!per.is_object()) fail(key_field, std::string("expected an object {path: [content]}, got ") + per.type_name());
    BlockMap& map = out[key];
    for (const auto& [path, list] : per.items()) {
      const std::string pf = key_field + "." + path;
      if (!list.is_array()) fail(pf, std::string("expected a list of strings, got ") + list.type_name());
      std::vector<std::string>& contents = map[path];
      for (size_t i = 0; i < list.size(); ++i) {
        if (!list[i].is_string()) {
          fail(fmt::format("{}[{}]", pf, i), std::string("expected a string, got ") + list[i].type_name());
        }
        contents.push_back(list[i].get<std::string>());
      }
    }
  }
  return out;
}

}  // namespace kf
