// MemoryFileMap: the in-memory part (access, meta, root stripping, JSON encode/decode, path rules).
// Loading from / writing to disk lives in file_map_disk.cc, archives in archive.cc.
#include "kernelfoundry/memory_file_map.hpp"

#include <algorithm>
#include <chrono>

#include "core/clock.hpp"
#include "core/codec_impl.hpp"
#include "core/json_view.hpp"
#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

constexpr uint32_t kDefaultMode = 0644;

/// Splits on '/', dropping empty and "." components.
std::vector<std::string_view> Components(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (!part.empty() && part != ".") out.push_back(part);
    start = end + 1;
  }
  return out;
}

bool MetaEmpty(const FileMeta& m) { return !m.mode && !m.mtime; }

}  // namespace

bool IsIgnoredPath(std::string_view path) {
  const auto parts = Components(path);
  for (std::string_view part : parts) {
    if (part == "__pycache__" || part == ".git" || part == "__MACOSX") return true;
  }
  if (parts.empty()) return false;
  const std::string_view name = parts.back();
  return name == ".DS_Store" || name == "Thumbs.db" || name.ends_with(".pyc") || name.ends_with(".pyo") ||
         name.ends_with(".swp");
}

std::string NormalizeMemberPath(std::string_view name, const std::string& source) {
  if (name.find('\0') != std::string_view::npos) {  // the OS would cut the path there: "a\0evil" writes "a"
    std::string shown(name);
    std::replace(shown.begin(), shown.end(), '\0', '?');
    throw Error(ErrorKind::kUnsafe, "member path '" + shown + "' contains a NUL byte", source, shown);
  }
  if (!name.empty() && name.front() == '/') {
    throw Error(ErrorKind::kUnsafe, "absolute member path '" + std::string(name) + "' is not allowed", source,
                std::string(name));
  }
  std::string out;
  out.reserve(name.size());
  for (std::string_view part : Components(name)) {
    if (part == "..") {
      throw Error(ErrorKind::kUnsafe, "member path '" + std::string(name) + "' escapes the package via '..'",
                  source, std::string(name));
    }
    if (!out.empty()) out += '/';
    out.append(part);
  }
  return out;
}

// ---- access ----

bool MemoryFileMap::Contains(const std::string& path) const { return files_.count(path) != 0; }

std::optional<std::string> MemoryFileMap::Get(const std::string& path) const {
  auto it = files_.find(path);
  if (it == files_.end()) return std::nullopt;
  return it->second;
}

const std::string* MemoryFileMap::Find(const std::string& path) const {
  auto it = files_.find(path);
  return it == files_.end() ? nullptr : &it->second;
}

void MemoryFileMap::Set(const std::string& path, std::string bytes) {
  FileMeta meta;
  auto it = meta_.find(path);
  meta.mode = (it != meta_.end() && it->second.mode) ? *it->second.mode : kDefaultMode;
  meta.mtime = UnixTimeNow();
  Set(path, std::move(bytes), meta);
}

void MemoryFileMap::Set(const std::string& path, std::string bytes, FileMeta meta) {
  auto [it, inserted] = files_.insert_or_assign(path, std::move(bytes));
  if (inserted) order_.push_back(path);
  if (MetaEmpty(meta)) {
    meta_.erase(path);
  } else {
    meta_[path] = meta;
  }
}

bool MemoryFileMap::Remove(const std::string& path) {
  if (files_.erase(path) == 0) return false;
  meta_.erase(path);
  order_.erase(std::find(order_.begin(), order_.end(), path));
  return true;
}

const FileMeta* MemoryFileMap::Meta(const std::string& path) const {
  auto it = meta_.find(path);
  return it == meta_.end() ? nullptr : &it->second;
}

void MemoryFileMap::SetMeta(const std::string& path, FileMeta meta) {
  if (!Contains(path)) return;
  if (MetaEmpty(meta)) {
    meta_.erase(path);
  } else {
    meta_[path] = meta;
  }
}

std::vector<std::string> MemoryFileMap::ListFiles() const { return order_; }

void MemoryFileMap::Clear() {
  files_.clear();
  meta_.clear();
  order_.clear();
}

uint64_t MemoryFileMap::TotalBytes() const {
  uint64_t total = 0;
  for (const auto& [path, bytes] : files_) total += bytes.size();
  return total;
}

bool MemoryFileMap::RemoveRootDir() {
  if (order_.empty()) return false;
  // Longest common prefix of the directory components (the file name excluded: B1/B2).
  std::vector<std::string> common;
  bool first = true;
  for (const std::string& key : order_) {
    auto parts = Components(key);
    if (!parts.empty()) parts.pop_back();  // the file name
    if (first) {
      common.assign(parts.begin(), parts.end());
      first = false;
    } else {
      size_t n = 0;
      while (n < common.size() && n < parts.size() && common[n] == parts[n]) ++n;
      common.resize(n);
    }
    if (common.empty()) return false;
  }
  MemoryFileMap stripped;
  for (const std::string& key : order_) {
    const auto parts = Components(key);
    std::string rel;
    for (size_t i = common.size(); i < parts.size(); ++i) {
      if (!rel.empty()) rel += '/';
      rel.append(parts[i]);
    }
    auto meta_it = meta_.find(key);
    stripped.Set(rel, std::move(files_.at(key)), meta_it == meta_.end() ? FileMeta{} : meta_it->second);
  }
  *this = std::move(stripped);
  return true;
}

// ---- JSON ----

Json MemoryFileMap::Encode() const {
  Json out = Json::object();
  for (const std::string& key : order_) {
    Json entry = Json::object();
    entry["content"] = Base64Encode(files_.at(key));
    if (const FileMeta* m = Meta(key)) {
      if (m->mode) entry["mode"] = *m->mode;
      if (m->mtime) entry["mtime"] = *m->mtime;
    }
    out.emplace(key, std::move(entry));
  }
  return out;
}

void MemoryFileMap::Decode(const Json& data) { internal::FileMapAccess::Decode(*this, internal::NlohmannView(data)); }

MemoryFileMap MemoryFileMap::FromJson(const Json& data) {
  MemoryFileMap map;
  map.Decode(data);
  return map;
}

bool MemoryFileMap::operator==(const MemoryFileMap& other) const {
  if (files_ != other.files_) return false;
  for (const auto& [path, bytes] : files_) {
    const FileMeta* a = Meta(path);
    const FileMeta* b = other.Meta(path);
    if ((a ? *a : FileMeta{}) != (b ? *b : FileMeta{})) return false;
  }
  return true;
}

}  // namespace kf
