// The wire form of paired timing: kf::PairedRecord as JSON (the result fd of a test run, Celery bodies, the
// store), the timing document of a run (PairedTiming) and the paired knobs read from JSON (eval_config.timing,
// --kf-paired-options, kernelfoundry.paired.DEFAULTS).
//
// Contract:
//  * ToJson(record) writes {"paired", "status", "detail", "speedup", "ci": [low, high], "rel_half_width", "rounds",
//    "warmup_rounds", "calls_per_sample", "checked_rounds", "stop", "candidate_ms", "reference_ms", "elapsed_s",
//    "elapsed_raw_s", "window_ms": {"candidate", "reference"}, "after_return_cpu_ms": {"candidate",
//    "reference"}, "value_sets", "remeasured"?: {"speedup", "ci", "rounds"}, "mode"?, "processes"?, "process"?,
//    "process_rounds"?, "process_speedups"?, "process_cis"?, "more"?}; an unpaired record only {"paired": false,
//    "status", "detail", "candidate_ms"?}. Times in the JSON are ms where the key says so, else seconds.
//  * PairedRecordFromJson reads it back: absent fields keep their defaults (elapsed_raw_s: elapsed_s), unknown
//    keys are ignored, a wrong type or an unknown status throws kf::Error(kInvalidArgument, "paired record",
//    field).
//  * Inline on purpose: the native SDK's test program (sdk/task_sdk.hpp) already compiles nlohmann/json, and a
//    separate translation unit of this code in every native build cost ~5 s more CPU than here (-O2, 2-core
//    machine, 2026-12-02), against build limits of 40–60 s in the hardening tests. Thread-safe (pure functions).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/paired_record.hpp"

namespace kf {

namespace paired_wire_internal {

/// Reads the fields of one JSON object, naming the field in errors ("<prefix><key>").
class Reader {
 public:
  Reader(const Json& j, std::string prefix) : j_(j), prefix_(std::move(prefix)) {
    if (!j_.is_object()) Fail("", "a JSON object");
  }
  [[noreturn]] void Fail(const std::string& key, const std::string& what) const {
    throw Error(ErrorKind::kInvalidArgument, "expected " + what, "paired record", prefix_ + key);
  }
  /// The value of `key`, or nullptr when absent or null.
  const Json* Find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  void Number(const char* key, double* out) const {
    if (const Json* v = Find(key)) *out = NumberOf(*v, key);
  }
  void Int(const char* key, int64_t* out) const {
    if (const Json* v = Find(key)) {
      if (!v->is_number_integer()) Fail(key, "a whole number");
      *out = v->get<int64_t>();
    }
  }
  void String(const char* key, std::string* out) const {
    if (const Json* v = Find(key)) {
      if (!v->is_string()) Fail(key, "a string");
      *out = v->get<std::string>();
    }
  }
  void Numbers(const char* key, std::vector<double>* out) const {
    if (const Json* v = Find(key)) {
      if (!v->is_array()) Fail(key, "a list of numbers");
      for (const Json& x : *v) out->push_back(NumberOf(x, key));
    }
  }
  /// [low, high] into ci->low / ci->high.
  void Interval(const Json& v, const std::string& key, MedianCI* ci) const {
    if (!v.is_array() || v.size() != 2) Fail(key, "an interval [low, high]");
    ci->low = NumberOf(v[0], key);
    ci->high = NumberOf(v[1], key);
  }
  double NumberOf(const Json& v, const std::string& key) const {
    if (!v.is_number()) Fail(key, "a number");
    return v.get<double>();
  }

 private:
  const Json& j_;
  std::string prefix_;
};

inline Json IntervalJson(const MedianCI& ci) {
  Json j = Json::array();
  j.push_back(ci.low);
  j.push_back(ci.high);
  return j;
}

/// {"candidate": candidate_s × 1000, "reference": reference_s × 1000}.
inline Json SidesMs(double candidate_s, double reference_s) {
  Json j = Json::object();
  j["candidate"] = candidate_s * 1e3;
  j["reference"] = reference_s * 1e3;
  return j;
}

/// Reads {"candidate", "reference"} in ms (when present) into seconds.
inline void ReadSidesMs(const Reader& in, const char* key, double* candidate_s, double* reference_s) {
  if (const Json* pair = in.Find(key)) {
    const Reader sides(*pair, std::string(key) + ".");
    double c = *candidate_s * 1e3, r = *reference_s * 1e3;
    sides.Number("candidate", &c);
    sides.Number("reference", &r);
    *candidate_s = c / 1e3;
    *reference_s = r / 1e3;
  }
}

}  // namespace paired_wire_internal

/// The wire form of `r` (see the file comment).
inline Json ToJson(const PairedRecord& r) {
  using namespace paired_wire_internal;
  Json j = Json::object();
  j["paired"] = r.paired;
  j["status"] = std::string(PairedStatusName(r.status));
  j["detail"] = r.detail;
  if (!r.paired) {
    if (!r.candidate_ms.empty()) j["candidate_ms"] = r.candidate_ms;
    return j;
  }
  j["speedup"] = r.speedup.median;
  j["ci"] = IntervalJson(r.speedup);
  j["rel_half_width"] = r.rel_half_width;
  j["rounds"] = r.rounds;
  j["warmup_rounds"] = r.warmup_rounds;
  j["calls_per_sample"] = r.calls_per_sample;
  j["checked_rounds"] = r.checked_rounds;
  j["stop"] = r.stop;
  j["candidate_ms"] = r.candidate_ms;
  j["reference_ms"] = r.reference_ms;
  j["elapsed_s"] = r.elapsed_s;
  j["elapsed_raw_s"] = r.elapsed_raw_s;
  j["window_ms"] = SidesMs(r.candidate_window_s, r.reference_window_s);
  j["after_return_cpu_ms"] = SidesMs(r.candidate_after_cpu_s, r.reference_after_cpu_s);
  j["value_sets"] = r.value_sets;
  if (r.remeasured) {
    Json& again = j["remeasured"];
    again["speedup"] = r.remeasured->speedup;
    again["ci"] = IntervalJson(r.remeasured->ci);
    again["rounds"] = r.remeasured->rounds;
  }
  if (!r.mode.empty()) j["mode"] = r.mode;
  if (r.processes > 1 || r.process) j["processes"] = r.processes;
  if (r.process) j["process"] = *r.process;
  if (!r.process_rounds.empty()) j["process_rounds"] = r.process_rounds;
  if (!r.process_speedups.empty()) {
    Json& speedups = j["process_speedups"] = Json::array();
    Json& cis = j["process_cis"] = Json::array();
    for (const MedianCI& p : r.process_speedups) {
      speedups.push_back(p.median);
      cis.push_back(IntervalJson(p));
    }
  }
  if (!r.more.empty()) {
    Json& list = j["more"] = Json::array();
    for (const PairedRecord& m : r.more) list.push_back(ToJson(m));
  }
  return j;
}

/// A record from its wire form (see the file comment). Throws kf::Error(kInvalidArgument, "paired record", field).
inline PairedRecord PairedRecordFromJson(const Json& j) {
  using namespace paired_wire_internal;
  const Reader in(j, "");
  PairedRecord r;
  if (const Json* p = in.Find("paired")) {
    if (!p->is_boolean()) in.Fail("paired", "true or false");
    r.paired = p->get<bool>();
  }
  std::string status;
  in.String("status", &status);
  const std::optional<PairedStatus> s = PairedStatusFromName(status);
  if (!s) in.Fail("status", "correct, noisy, suspicious, input_mutated, output_changed_under_timing or error");
  r.status = *s;
  in.String("detail", &r.detail);
  in.Numbers("candidate_ms", &r.candidate_ms);
  if (!r.paired) return r;
  in.Number("speedup", &r.speedup.median);
  r.speedup.low = r.speedup.high = r.speedup.median;
  if (const Json* ci = in.Find("ci")) in.Interval(*ci, "ci", &r.speedup);
  in.Number("rel_half_width", &r.rel_half_width);
  in.Int("rounds", &r.rounds);
  in.Int("warmup_rounds", &r.warmup_rounds);
  in.Int("calls_per_sample", &r.calls_per_sample);
  in.Int("checked_rounds", &r.checked_rounds);
  in.String("stop", &r.stop);
  in.Numbers("reference_ms", &r.reference_ms);
  in.Number("elapsed_s", &r.elapsed_s);
  r.elapsed_raw_s = r.elapsed_s;
  in.Number("elapsed_raw_s", &r.elapsed_raw_s);
  ReadSidesMs(in, "window_ms", &r.candidate_window_s, &r.reference_window_s);
  ReadSidesMs(in, "after_return_cpu_ms", &r.candidate_after_cpu_s, &r.reference_after_cpu_s);
  in.Int("value_sets", &r.value_sets);
  if (const Json* again = in.Find("remeasured")) {
    const Reader a(*again, "remeasured.");
    PairedRemeasured m;
    a.Number("speedup", &m.speedup);
    m.ci = {m.speedup, m.speedup, m.speedup};
    if (const Json* ci = a.Find("ci")) a.Interval(*ci, "ci", &m.ci);
    a.Int("rounds", &m.rounds);
    r.remeasured = m;
  }
  in.String("mode", &r.mode);
  in.Int("processes", &r.processes);
  if (const Json* p = in.Find("process")) {
    if (!p->is_number_integer()) in.Fail("process", "a whole number");
    r.process = p->get<int64_t>();
  }
  if (const Json* rounds = in.Find("process_rounds")) {
    if (!rounds->is_array()) in.Fail("process_rounds", "a list of whole numbers");
    for (const Json& n : *rounds) {
      if (!n.is_number_integer()) in.Fail("process_rounds", "a list of whole numbers");
      r.process_rounds.push_back(n.get<int64_t>());
    }
  }
  std::vector<double> speedups;
  in.Numbers("process_speedups", &speedups);
  const Json* cis = in.Find("process_cis");
  if (cis && (!cis->is_array() || cis->size() != speedups.size())) in.Fail("process_cis", "one interval per process");
  for (size_t i = 0; i < speedups.size(); ++i) {
    MedianCI p{speedups[i], speedups[i], speedups[i]};
    if (cis) in.Interval((*cis)[i], "process_cis", &p);
    r.process_speedups.push_back(p);
  }
  if (const Json* more = in.Find("more")) {
    if (!more->is_array()) in.Fail("more", "a list of records");
    for (const Json& m : *more) r.more.push_back(PairedRecordFromJson(m));
  }
  return r;
}

/// The paired timing of one performance run: a record per benchmark (in the order the run reported them) and the
/// conditions it ran under (threads, allocator, load, …; free-form).
struct PairedTiming {
  std::vector<std::pair<std::string, PairedRecord>> records;
  Json conditions = Json::object();

  /// The record of benchmark `name`, or nullptr.
  const PairedRecord* Find(std::string_view name) const {
    for (const auto& [n, r] : records) {
      if (n == name) return &r;
    }
    return nullptr;
  }
  /// {"paired": {name: record}, "conditions": {...}}.
  Json ToJson() const {
    Json j = Json::object();
    Json& paired = j["paired"] = Json::object();
    for (const auto& [name, r] : records) paired[name] = kf::ToJson(r);
    j["conditions"] = conditions;
    return j;
  }
  /// Parses ToJson's form ("paired" absent: no records). Throws like PairedRecordFromJson, the field named
  /// "paired.<benchmark>.<field>".
  static PairedTiming FromJson(const Json& json) {
    const paired_wire_internal::Reader in(json, "");
    PairedTiming t;
    if (const Json* paired = in.Find("paired")) {
      if (!paired->is_object()) in.Fail("paired", "an object {benchmark: record}");
      for (const auto& [name, record] : paired->items()) {
        try {
          t.records.emplace_back(name, PairedRecordFromJson(record));
        } catch (const Error& e) {
          throw Error(ErrorKind::kInvalidArgument, e.message(), "paired record", "paired." + name + "." + e.field());
        }
      }
    }
    if (const Json* c = in.Find("conditions")) t.conditions = *c;
    return t;
  }
};

/// The knobs of paired timing by name (kernelfoundry.paired.DEFAULTS / eval_config.timing keys) onto `base`:
/// the loop's and the verdict's fields of PairedOptions; other keys are ignored (they belong to the pytest
/// plugin or the pipeline). Throws kf::Error(kInvalidArgument, "eval_config.timing", key) for a value of the
/// wrong type, then PairedOptions::Validate's errors.
inline PairedOptions PairedOptionsFromJson(const Json& options, PairedOptions o = {}) {
  if (!options.is_object()) {
    throw Error(ErrorKind::kInvalidArgument, "expected a mapping of timing options", "eval_config.timing", "");
  }
  auto number = [&](const char* key, double* out) {
    auto it = options.find(key);
    if (it == options.end()) return;
    if (!it->is_number()) throw Error(ErrorKind::kInvalidArgument, "expected a number", "eval_config.timing", key);
    *out = it->get<double>();
  };
  auto whole = [&](const char* key, auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    auto it = options.find(key);
    if (it == options.end()) return;
    // A whole number past int64's range parses as unsigned or floating point: named as too large, not as "not
    // whole" (regression, stranger test 2026-12-04: warmup_window: 99999999999999999999).
    const bool huge = (it->is_number_float() && std::fabs(it->get<double>()) >= 0x1p63) ||
                      (!std::is_unsigned_v<T> && it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX});
    if (huge) {
      throw Error(ErrorKind::kInvalidArgument, "expected a whole number below 2^63, got " + it->dump(),
                  "eval_config.timing", key);
    }
    if (!it->is_number_integer()) {
      throw Error(ErrorKind::kInvalidArgument, "expected a whole number, got " + it->dump(), "eval_config.timing", key);
    }
    if (std::is_unsigned_v<T> && !it->is_number_unsigned() && it->get<int64_t>() < 0) {
      throw Error(ErrorKind::kInvalidArgument, "expected a whole number >= 0, got " + it->dump(), "eval_config.timing",
                  key);
    }
    *out = it->get<T>();
  };
  number("target_rel_half_width", &o.target_rel_half_width);
  number("budget_s", &o.budget_s);
  number("warmup_budget_fraction", &o.warmup_budget_fraction);
  whole("min_rounds", &o.min_rounds);
  whole("max_rounds", &o.max_rounds);
  whole("warmup_min_rounds", &o.warmup_min_rounds);
  whole("warmup_window", &o.warmup_window);
  number("warmup_tolerance", &o.warmup_tolerance);
  number("min_sample_s", &o.min_sample_s);
  number("quiesce_max_s", &o.quiesce_max_s);
  number("check_fraction", &o.check_fraction);
  whole("seed", &o.seed);
  number("after_return_cpu_ratio", &o.after_return_cpu_ratio);
  number("suspicious_speedup", &o.suspicious_speedup);
  o.Validate();
  return o;
}

}  // namespace kf
