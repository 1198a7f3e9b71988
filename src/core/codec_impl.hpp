// The decoders of the wire types (MemoryFileMap, ProcessResult, BuildResult, TestResult, Task), written once
// over a JSON view (json_view.hpp) and instantiated for kf::Json (the public Decode(const Json&) functions)
// and for simdjson's DOM (the DecodeFromString fast paths, json_fast.cc). One body per decoder, so both
// paths accept, reject and name errors identically. Semantics and messages: results.hpp, task.hpp,
// memory_file_map.hpp. Internal to core.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/task.hpp"
#include "kernelfoundry/terminal.hpp"

namespace kf::internal {

// ---------------------------------------------------------------- results

/// Re-establishes the text invariant: valid UTF-8, no terminal escapes.
inline std::string SanitizeText(std::string_view bytes) { return StripTerminalEscapes(DecodeUtf8Replace(bytes)); }

[[noreturn]] inline void FailAt(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::kParse, what, "", where);
}

inline std::string JoinField(const std::string& a, std::string_view b) {
  return a.empty() ? std::string(b) : a + "." + std::string(b);
}

template <class V>
ProcessResult DecodeProcessView(const V& j, const std::string& where) {
  if (!j.is_object()) FailAt(where, std::string("expected a ProcessResult object, got ") + j.type_name());
  static constexpr const char* kKeys[] = {"returncode", "stdout", "stderr", "message", "output_data"};
  j.for_each_member([&](std::string_view key, const V&) {
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      FailAt(JoinField(where, key), "unexpected key '" + std::string(key) +
                                        "' in ProcessResult (allowed: returncode, stdout, stderr, message, output_data)");
    }
  });
  ProcessResult r;
  auto rc = j.find("returncode");
  if (!rc) FailAt(JoinField(where, "returncode"), "missing required key 'returncode'");
  if (!rc->is_number_integer())
    FailAt(JoinField(where, "returncode"), std::string("expected an integer, got ") + rc->type_name());
  const bool in_range = rc->is_number_unsigned()
                            ? rc->get_uint64() <= uint64_t{INT32_MAX}
                            : rc->get_int64() >= INT32_MIN && rc->get_int64() <= INT32_MAX;
  if (!in_range) FailAt(JoinField(where, "returncode"), "integer out of range for a return code");
  r.returncode = static_cast<int>(rc->get_int64());
  for (auto [key, dst] : {std::pair{"stdout", &r.stdout_text}, std::pair{"stderr", &r.stderr_text}}) {
    auto it = j.find(key);
    if (!it) FailAt(JoinField(where, key), std::string("missing required key '") + key + "'");
    if (!it->is_string()) FailAt(JoinField(where, key), std::string("expected a string, got ") + it->type_name());
    *dst = SanitizeText(it->get_string());
  }
  if (auto it = j.find("message"); it && !it->is_null()) {
    if (!it->is_string())
      FailAt(JoinField(where, "message"), std::string("expected a string or null, got ") + it->type_name());
    r.message = SanitizeText(it->get_string());
  }
  if (auto it = j.find("output_data"); it && !it->is_null()) r.output_data = it->to_json();
  return r;
}

template <class V>
std::optional<ProcessResult> DecodeOptionalProcessView(const V& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (!it || it->is_null()) return std::nullopt;
  return DecodeProcessView(*it, JoinField(where, key));
}

template <class V>
std::optional<Json> OptionalJsonView(const V& j, const char* key) {
  auto it = j.find(key);
  if (!it || it->is_null()) return std::nullopt;
  return it->to_json();
}

template <class V>
std::optional<TestResult> DecodeTestView(const V& j, const std::string& where) {
  if (j.is_null()) return std::nullopt;
  if (!j.is_object()) FailAt(where, std::string("expected a TestResult object or null, got ") + j.type_name());
  TestResult t;
  t.worker_info = OptionalJsonView(j, "worker_info");
  t.correctness_result = DecodeOptionalProcessView(j, "correctness_result", where);
  t.performance_result = DecodeOptionalProcessView(j, "performance_result", where);
  if (auto it = j.find("trace_results"); it && !it->is_null()) {
    const std::string tw = JoinField(where, "trace_results");
    if (!it->is_object()) FailAt(tw, std::string("expected an object, got ") + it->type_name());
    it->for_each_member([&](std::string_view name, const V& value) {
      t.trace_results.emplace_back(std::string(name), DecodeProcessView(value, JoinField(tw, name)));
    });
  }
  if (auto it = j.find("results_per_gpu"); it && !it->is_null()) {
    const std::string rw = JoinField(where, "results_per_gpu");
    if (!it->is_object()) FailAt(rw, std::string("expected an object or null, got ") + it->type_name());
    t.results_per_gpu.emplace();
    it->for_each_member([&](std::string_view arch, const V& value) {
      auto sub = DecodeTestView(value, JoinField(rw, arch));
      if (!sub) FailAt(JoinField(rw, arch), "expected a TestResult object, got null");
      t.results_per_gpu->emplace_back(std::string(arch), std::move(*sub));
    });
  }
  return t;
}

// ---------------------------------------------------------------- MemoryFileMap

/// The decoder's access to MemoryFileMap's storage (a friend of the class).
struct FileMapAccess {
  /// MemoryFileMap::Decode over a view: everything is parsed first, so a bad entry leaves `map` untouched.
  template <class V>
  static void Decode(MemoryFileMap& map, const V& data) {
    constexpr uint32_t kDefaultMode = 0644;
    if (!data.is_object()) {
      throw Error(ErrorKind::kParse, std::string("expected an object {path: entry}, got ") + data.type_name(),
                  "<file map>");
    }
    struct Parsed {
      std::string path;
      std::string_view text;  // base64, decoded below (it lives in `data`)
      FileMeta meta;
      bool set_meta;
      std::string bytes;
    };
    std::vector<Parsed> parsed;
    parsed.reserve(data.size());
    data.for_each_member([&](std::string_view key, const V& value) {
      if (value.is_string()) {  // legacy {path: base64}
        parsed.push_back({std::string(key), value.get_string(), FileMeta{kDefaultMode, UnixTimeNow()}, true, {}});
        return;
      }
      const std::string path(key);
      if (!value.is_object()) {
        throw Error(ErrorKind::kParse,
                    std::string("expected a base64 string or {content, mode?, mtime?}, got ") + value.type_name(),
                    path);
      }
      auto content = value.find("content");
      if (!content || !content->is_string()) throw Error(ErrorKind::kParse, "expected a base64 string", path, "content");
      Parsed p{path, content->get_string(), FileMeta{}, false, {}};
      if (auto mode = value.find("mode"); mode && !mode->is_null()) {
        if (!mode->is_number_integer() || mode->get_int64() < 0) {
          throw Error(ErrorKind::kParse, "expected a non-negative integer permission mode, got " + mode->dump(),
                      path, "mode");
        }
        p.meta.mode = static_cast<uint32_t>(mode->get_int64()) & 0777u;
        p.set_meta = true;
      }
      if (auto mtime = value.find("mtime"); mtime && !mtime->is_null()) {
        if (!mtime->is_number()) {
          throw Error(ErrorKind::kParse, "expected a number of seconds since the epoch, got " + mtime->dump(), path,
                      "mtime");
        }
        p.meta.mtime = mtime->get_double();
        p.set_meta = true;
      }
      parsed.push_back(std::move(p));
    });
    // The contents last, all at once (on several threads when they are big: Base64DecodeAll).
    std::vector<Base64Job> jobs;
    jobs.reserve(parsed.size());
    for (Parsed& p : parsed) jobs.push_back({p.text, &p.bytes});
    if (auto failure = Base64DecodeAll(jobs)) {
      throw Error(ErrorKind::kParse, failure->second.message(), parsed[failure->first].path, "content");
    }
    for (Parsed& p : parsed) {
      auto [it, inserted] = map.files_.insert_or_assign(p.path, std::move(p.bytes));
      if (inserted) map.order_.push_back(p.path);
      if (p.set_meta) map.meta_[p.path] = p.meta;
    }
  }

  /// The keys in insertion order, without a copy.
  static const std::vector<std::string>& Order(const MemoryFileMap& map) { return map.order_; }
};

template <class V>
std::optional<BuildResult> DecodeBuildView(const V& j) {
  if (j.is_null()) return std::nullopt;
  const std::string where = "BuildResult";
  if (!j.is_object()) FailAt(where, std::string("expected a BuildResult object or null, got ") + j.type_name());
  BuildResult b;
  b.worker_info = OptionalJsonView(j, "worker_info");
  b.result = DecodeOptionalProcessView(j, "result", where);
  if (auto it = j.find("artifacts"); it && !it->is_null()) {
    if (!it->is_object()) FailAt(JoinField(where, "artifacts"), std::string("expected an object, got ") + it->type_name());
    b.artifacts.emplace();
    FileMapAccess::Decode(*b.artifacts, *it);
  }
  return b;
}

// ---------------------------------------------------------------- Task

inline constexpr const char* kTaskSource = "<task json>";

template <class V>
V RequiredKey(const V& data, const char* key) {
  auto it = data.find(key);
  if (!it) throw Error(ErrorKind::kParse, "missing required key of an encoded task", kTaskSource, key);
  return *it;
}

template <class V>
bool DecodeTaskBool(const V& value, const char* key) {
  if (!value.is_boolean())
    throw Error(ErrorKind::kParse, fmt::format("expected true or false, got {}", value.type_name()), kTaskSource, key);
  return value.get_bool();
}

template <class V>
std::vector<std::string> DecodeTestIds(const V& value, const char* key) {
  if (!value.is_array())
    throw Error(ErrorKind::kParse, fmt::format("expected a list of test ids, got {}", value.type_name()), kTaskSource,
                key);
  std::vector<std::string> out;
  out.reserve(value.size());
  value.for_each_element([&](const V& item) {
    if (!item.is_string())
      throw Error(ErrorKind::kParse, fmt::format("expected a string test id, got {}", item.type_name()), kTaskSource,
                  key);
    out.emplace_back(item.get_string());
  });
  return out;
}

/// Prefixes the field of errors raised by nested decoders with the task key they came from.
template <typename F>
auto WithTaskField(const char* key, F&& decode) -> decltype(decode()) {
  try {
    return decode();
  } catch (const Error& e) {
    if (e.field().rfind(key, 0) == 0) throw;
    std::string field = e.field().empty() ? std::string(key) : fmt::format("{}.{}", key, e.field());
    throw Error(e.kind(), e.message(), e.file().empty() ? kTaskSource : e.file(), field);
  }
}

/// Python truthiness of a JSON value (`if d.get("extract_code_result")`).
template <class V>
bool Truthy(const V& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get_bool();
  if (v.is_number()) return v.get_double() != 0.0;
  if (v.is_string()) return !v.get_string().empty();
  return v.size() != 0;
}

template <class V>
Task DecodeTaskView(const V& data) {
  if (!data.is_object())
    throw Error(ErrorKind::kParse, fmt::format("an encoded task must be a JSON object, got {}", data.type_name()),
                kTaskSource);
  Task task;
  const V files = RequiredKey(data, "task_data");
  task.has_build_step = DecodeTaskBool(RequiredKey(data, "has_build_step"), "has_build_step");
  task.correctness_tests = DecodeTestIds(RequiredKey(data, "correctness_tests"), "correctness_tests");
  task.profile_tests = DecodeTestIds(RequiredKey(data, "profile_tests"), "profile_tests");
  task.config = RequiredKey(data, "config").to_json();
  if (!task.config.is_object())
    throw Error(ErrorKind::kParse, fmt::format("expected a mapping, got {}", task.config.type_name()), kTaskSource,
                "config");
  const V blocks = RequiredKey(data, "blocks");

  if (!files.is_object())
    throw Error(ErrorKind::kParse, fmt::format("expected a mapping path -> file, got {}", files.type_name()),
                kTaskSource, "task_data");
  files.for_each_member([&](std::string_view key, const V&) {  // never a path outside the task tree
    std::string normal;
    try {
      normal = NormalizeMemberPath(key, kTaskSource);
    } catch (const Error& e) {
      throw Error(ErrorKind::kUnsafe, e.message(), kTaskSource, "task_data." + std::string(key));
    }
    if (normal != key || normal.empty())
      throw Error(ErrorKind::kUnsafe, "file paths must be normalised relative paths (no '.', '..', '//', '/')",
                  kTaskSource, "task_data." + std::string(key));
  });
  WithTaskField("task_data", [&] { FileMapAccess::Decode(task.task_data, files); });
  task.blocks = WithTaskField("blocks", [&] { return BlocksFromJson(blocks.to_json(), kTaskSource); });

  task.has_reference_build_step = false;  // the reference's decode default (B13: create defaults to true)
  if (auto it = data.find("has_reference_build_step"); it && !it->is_null())
    task.has_reference_build_step = DecodeTaskBool(*it, "has_reference_build_step");
  if (auto it = data.find("extract_code_result"); it && Truthy(*it))
    task.extract_code_result = WithTaskField("extract_code_result", [&] { return DecodeProcessView(*it, "ProcessResult"); });
  if (auto it = data.find("build_result"))
    task.build_result = WithTaskField("build_result", [&] { return DecodeBuildView(*it); });
  if (auto it = data.find("build_result_reference"))
    task.build_result_reference = WithTaskField("build_result_reference", [&] { return DecodeBuildView(*it); });
  if (auto it = data.find("test_result"))
    task.test_result = WithTaskField("test_result", [&] { return DecodeTestView(*it, "TestResult"); });
  if (auto it = data.find("test_result_reference"))
    task.test_result_reference = WithTaskField("test_result_reference", [&] { return DecodeTestView(*it, "TestResult"); });
  if (auto it = data.find("hyperparameters")) {
    if (!it->is_null() && !it->is_object())
      throw Error(ErrorKind::kParse, fmt::format("expected a mapping or null, got {}", it->type_name()), kTaskSource,
                  "hyperparameters");
    task.hyperparameters = it->to_json();
  }
  return task;
}

}  // namespace kf::internal
