// Fast JSON paths of the big wire documents (Task, MemoryFileMap, BuildResult, TestResult):
//  * EncodeToString: a JsonWriter walks the value and writes the text nlohmann would write for Encode(),
//    with file contents base64-encoded straight into the output buffer (no per-character escaping: base64
//    needs none) and no intermediate kf::Json;
//  * DecodeFromString: simdjson parses the text into its DOM and the shared decoders (codec_impl.hpp) read
//    it through DomView; file contents are decoded at the end, all at once (Base64DecodeAll).
//  * Big buffers (the output, the padded input copy, the DOM) are backed by huge pages (ParseDom). Text simdjson refuses goes to nlohmann (ParseJson + Decode), which accepts what
//    simdjson does not (integers beyond 64 bits) or throws the usual error, so results and errors are those
//    of Decode(ParseJson(text)).
#include <simdjson.h>

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "core/codec_impl.hpp"
#include "core/huge_pages.hpp"
#include "core/json_writer.hpp"
#include "core/simdjson_view.hpp"
#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/task.hpp"

namespace kf {
namespace {

using internal::DomView;
using internal::JsonWriter;

// ---- writers (each mirrors the Encode() of its type key for key) ----

/// Indices of `items` as a JSON object keeps them: first-seen name order, last value of a repeated name
/// (what `obj[name] = value` does in Encode()).
template <class T>
std::vector<size_t> ObjectOrder(const std::vector<std::pair<std::string, T>>& items) {
  std::vector<size_t> order;
  order.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    bool seen = false;
    for (size_t& o : order) {
      if (items[o].first == items[i].first) {
        o = i;
        seen = true;
        break;
      }
    }
    if (!seen) order.push_back(i);
  }
  return order;
}

void WriteFileMap(JsonWriter& w, const MemoryFileMap& map) {
  w.BeginObject();
  for (const std::string& key : internal::FileMapAccess::Order(map)) {
    w.Key(key);
    w.BeginObject();
    w.Key("content");
    w.Base64String(*map.Find(key));
    if (const FileMeta* m = map.Meta(key)) {
      if (m->mode) {
        w.Key("mode");
        w.Uint(*m->mode);
      }
      if (m->mtime) {
        w.Key("mtime");
        w.Double(*m->mtime);
      }
    }
    w.EndObject();
  }
  w.EndObject();
}

void WriteOptionalJson(JsonWriter& w, const std::optional<Json>& value) {
  if (value) {
    w.Value(*value);
  } else {
    w.Null();
  }
}

void WriteProcess(JsonWriter& w, const ProcessResult& r) {
  w.BeginObject();
  w.Key("returncode");
  w.Int(r.returncode);
  w.Key("stdout");
  w.String(r.stdout_text);
  w.Key("stderr");
  w.String(r.stderr_text);
  w.Key("message");
  if (r.message) {
    w.String(*r.message);
  } else {
    w.Null();
  }
  w.Key("output_data");
  WriteOptionalJson(w, r.output_data);
  w.EndObject();
}

void WriteOptionalProcess(JsonWriter& w, const std::optional<ProcessResult>& r) {
  if (r) {
    WriteProcess(w, *r);
  } else {
    w.Null();
  }
}

void WriteBuild(JsonWriter& w, const BuildResult& b) {
  w.BeginObject();
  w.Key("worker_info");
  WriteOptionalJson(w, b.worker_info);
  w.Key("result");
  WriteOptionalProcess(w, b.result);
  w.Key("artifacts");
  if (b.artifacts) {
    WriteFileMap(w, *b.artifacts);
  } else {
    w.Null();
  }
  w.EndObject();
}

void WriteTest(JsonWriter& w, const TestResult& t) {
  w.BeginObject();
  w.Key("worker_info");
  WriteOptionalJson(w, t.worker_info);
  w.Key("correctness_result");
  WriteOptionalProcess(w, t.correctness_result);
  w.Key("performance_result");
  WriteOptionalProcess(w, t.performance_result);
  w.Key("trace_results");
  w.BeginObject();
  for (size_t i : ObjectOrder(t.trace_results)) {
    w.Key(t.trace_results[i].first);
    WriteProcess(w, t.trace_results[i].second);
  }
  w.EndObject();
  w.Key("results_per_gpu");
  if (t.results_per_gpu) {
    w.BeginObject();
    for (size_t i : ObjectOrder(*t.results_per_gpu)) {
      w.Key((*t.results_per_gpu)[i].first);
      WriteTest(w, (*t.results_per_gpu)[i].second);
    }
    w.EndObject();
  } else {
    w.Null();
  }
  w.EndObject();
}

template <class T, class F>
void WriteOptional(JsonWriter& w, const std::optional<T>& value, F&& write) {
  if (value) {
    write(w, *value);
  } else {
    w.Null();
  }
}

void WriteStrings(JsonWriter& w, const std::vector<std::string>& items) {
  w.BeginArray();
  for (const std::string& s : items) w.String(s);
  w.EndArray();
}

/// Output bytes the files of `map` take at least (base64 text plus keys and per-entry overhead).
size_t FileMapTextSize(const MemoryFileMap& map) {
  size_t total = 2;
  for (const std::string& key : internal::FileMapAccess::Order(map))
    total += Base64EncodedSize(map.Find(key)->size()) + key.size() + 64;
  return total;
}

size_t BuildTextSize(const std::optional<BuildResult>& b) {
  if (!b) return 0;
  size_t n = b->artifacts ? FileMapTextSize(*b->artifacts) : 0;
  if (b->result) n += b->result->stdout_text.size() + b->result->stderr_text.size();
  return n;
}

// ---- parsing ----

/// A simdjson DOM of one document: the parser owns the DOM's memory; `padded` the copy of a big input.
struct Dom {
  simdjson::dom::parser parser;
  std::unique_ptr<char[]> padded;
  simdjson::dom::element root;
};

/// Parses with simdjson into dom->root; false when simdjson refuses the text (the caller then goes through
/// nlohmann, which accepts what simdjson cannot represent or throws its usual error).
///
/// simdjson reads up to SIMDJSON_PADDING bytes past the end of its input, so it always parses a padded copy
/// of a string_view. For a big document that copy and the DOM's buffers (a tape of 8 bytes per input byte,
/// strings of up to 5/3 of it, sizes from simdjson 3.0's document::allocate, mostly untouched) are
/// allocated here, advised to huge pages before their first write (core/huge_pages.hpp): a fresh parser on
/// the 70 MB task of bench/task_bench took 45.6 ms with 17,206 page faults, 17.4 ms with 621.
bool ParseDom(std::string_view json, Dom* dom) {
  const size_t n = json.size();
  if (n < internal::kHugePageWorthyBytes) {
    return dom->parser.parse(json.data(), n, /*realloc_if_needed=*/true).get(dom->root) == simdjson::SUCCESS;
  }
  dom->padded.reset(new char[n + simdjson::SIMDJSON_PADDING]);
  internal::AdviseHugePages(dom->padded.get(), n + simdjson::SIMDJSON_PADDING);
  std::memcpy(dom->padded.get(), json.data(), n);
  std::memset(dom->padded.get() + n, 0, simdjson::SIMDJSON_PADDING);
  if (dom->parser.allocate(n) != simdjson::SUCCESS || dom->parser.doc.allocate(n) != simdjson::SUCCESS) return false;
  internal::AdviseHugePages(dom->parser.doc.tape.get(), n * sizeof(uint64_t));
  internal::AdviseHugePages(dom->parser.doc.string_buf.get(), n / 3 * 5);
  return dom->parser.parse(dom->padded.get(), n, /*realloc_if_needed=*/false).get(dom->root) == simdjson::SUCCESS;
}

/// An output string with room for `bytes`, advised to huge pages when big (see ParseDom).
std::string ReservedOutput(size_t bytes) {
  std::string out;
  out.reserve(bytes);
  internal::AdviseHugePages(out.data(), out.capacity());
  return out;
}

}  // namespace

// ---- MemoryFileMap ----

std::string MemoryFileMap::EncodeToString(int indent) const {
  std::string out = ReservedOutput(FileMapTextSize(*this));
  JsonWriter w(&out, indent);
  WriteFileMap(w, *this);
  return out;
}

MemoryFileMap MemoryFileMap::DecodeFromString(std::string_view json, const std::string& source) {
  Dom dom;
  if (!ParseDom(json, &dom)) return FromJson(ParseJson(json, source));
  MemoryFileMap map;
  internal::FileMapAccess::Decode(map, DomView(dom.root));
  return map;
}

// ---- BuildResult / TestResult ----

std::string BuildResult::EncodeToString(int indent) const {
  std::string out = ReservedOutput(BuildTextSize(*this) + 4096);
  JsonWriter w(&out, indent);
  WriteBuild(w, *this);
  return out;
}

std::optional<BuildResult> BuildResult::DecodeFromString(std::string_view json, const std::string& source) {
  Dom dom;
  if (!ParseDom(json, &dom)) return Decode(ParseJson(json, source));
  return internal::DecodeBuildView(DomView(dom.root));
}

std::string TestResult::EncodeToString(int indent) const {
  std::string out;
  JsonWriter w(&out, indent);
  WriteTest(w, *this);
  return out;
}

std::optional<TestResult> TestResult::DecodeFromString(std::string_view json, const std::string& source) {
  Dom dom;
  if (!ParseDom(json, &dom)) return Decode(ParseJson(json, source));
  return internal::DecodeTestView(DomView(dom.root), "TestResult");
}

// ---- Task ----

std::string Task::EncodeToString(int indent) const {
  std::string out = ReservedOutput(FileMapTextSize(task_data) + BuildTextSize(build_result) +
                                   BuildTextSize(build_result_reference) + 4096);
  JsonWriter w(&out, indent);
  w.BeginObject();
  w.Key("task_data");
  WriteFileMap(w, task_data);
  w.Key("has_build_step");
  w.Bool(has_build_step);
  w.Key("has_reference_build_step");
  w.Bool(has_reference_build_step);
  w.Key("correctness_tests");
  WriteStrings(w, correctness_tests);
  w.Key("profile_tests");
  WriteStrings(w, profile_tests);
  w.Key("config");
  w.Value(config);
  w.Key("blocks");
  w.Value(BlocksToJson(blocks));
  w.Key("extract_code_result");
  WriteOptional(w, extract_code_result, WriteProcess);
  w.Key("build_result");
  WriteOptional(w, build_result, WriteBuild);
  w.Key("build_result_reference");
  WriteOptional(w, build_result_reference, WriteBuild);
  w.Key("test_result");
  WriteOptional(w, test_result, WriteTest);
  w.Key("test_result_reference");
  WriteOptional(w, test_result_reference, WriteTest);
  w.Key("hyperparameters");
  w.Value(hyperparameters);
  w.EndObject();
  return out;
}

Task Task::DecodeFromString(std::string_view json, const std::string& source) {
  Dom dom;
  if (!ParseDom(json, &dom)) return Decode(ParseJson(json, source));
  return internal::DecodeTaskView(DomView(dom.root));
}

}  // namespace kf
