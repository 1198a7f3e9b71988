// The paired timing record, its wire form and the one verdict policy (kernelfoundry/paired_record.hpp).
// Compiled into the native task SDK as well (src/modules.txt): no fmt, no other kf sources than core/error.cc.
#include "kernelfoundry/paired_record.hpp"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <tuple>
#include <type_traits>

#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

constexpr struct {
  PairedStatus status;
  std::string_view name;
} kStatusNames[] = {{PairedStatus::kCorrect, "correct"},
                    {PairedStatus::kNoisy, "noisy"},
                    {PairedStatus::kSuspicious, "suspicious"},
                    {PairedStatus::kInputMutated, "input_mutated"},
                    {PairedStatus::kOutputChangedUnderTiming, "output_changed_under_timing"},
                    {PairedStatus::kError, "error"}};

// printf-style formatting into a std::string (the SDK build has no fmt).
std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return text;
}

// Reads the fields of one JSON object, naming the field in errors ("<prefix><key>").
class Reader {
 public:
  Reader(const Json& j, std::string prefix) : j_(j), prefix_(std::move(prefix)) {
    if (!j_.is_object()) Fail("", "a JSON object");
  }
  [[noreturn]] void Fail(const std::string& key, const std::string& what) const {
    throw Error(ErrorKind::kInvalidArgument, "expected " + what, "paired record", prefix_ + key);
  }
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

Json IntervalJson(const MedianCI& ci) {
  Json j = Json::array();
  j.push_back(ci.low);
  j.push_back(ci.high);
  return j;
}

// {"candidate": candidate_s × 1000, "reference": reference_s × 1000}.
Json SidesMs(double candidate_s, double reference_s) {
  Json j = Json::object();
  j["candidate"] = candidate_s * 1e3;
  j["reference"] = reference_s * 1e3;
  return j;
}

Json ProcessesJson(const PairedRecord& r, Json j) {
  if (r.processes > 1 || r.process) j["processes"] = r.processes;
  if (r.process) j["process"] = *r.process;
  if (!r.process_rounds.empty()) j["process_rounds"] = r.process_rounds;
  if (!r.process_speedups.empty()) {
    Json speedups = Json::array(), cis = Json::array();
    for (const MedianCI& p : r.process_speedups) {
      speedups.push_back(p.median);
      cis.push_back(IntervalJson(p));
    }
    j["process_speedups"] = std::move(speedups);
    j["process_cis"] = std::move(cis);
  }
  return j;
}

void ReadProcesses(const Reader& in, PairedRecord* r) {
  in.Int("processes", &r->processes);
  if (const Json* p = in.Find("process")) {
    if (!p->is_number_integer()) in.Fail("process", "a whole number");
    r->process = p->get<int64_t>();
  }
  if (const Json* rounds = in.Find("process_rounds")) {
    if (!rounds->is_array()) in.Fail("process_rounds", "a list of whole numbers");
    for (const Json& n : *rounds) {
      if (!n.is_number_integer()) in.Fail("process_rounds", "a list of whole numbers");
      r->process_rounds.push_back(n.get<int64_t>());
    }
  }
  std::vector<double> speedups;
  in.Numbers("process_speedups", &speedups);
  const Json* cis = in.Find("process_cis");
  if (cis && (!cis->is_array() || cis->size() != speedups.size())) in.Fail("process_cis", "one interval per process");
  for (size_t i = 0; i < speedups.size(); ++i) {
    MedianCI p{speedups[i], speedups[i], speedups[i]};
    if (cis) in.Interval((*cis)[i], "process_cis", &p);
    r->process_speedups.push_back(p);
  }
  if (const Json* more = in.Find("more")) {
    if (!more->is_array()) in.Fail("more", "a list of records");
    for (const Json& m : *more) r->more.push_back(PairedRecord::FromJson(m));
  }
}

// "<detail>; <note>", or either alone.
std::string WithNote(std::string detail, const std::string& note) {
  if (note.empty()) return detail;
  return detail.empty() ? note : detail + "; " + note;
}

// Rule 2 of JudgePaired: the evidence that the timed windows did not see all of the candidate's work. The
// problem's detail, or "" when there is none.
std::string IntegrityProblem(const PairedRecord& r, const PairedOptions& o) {
  const double after = r.candidate_after_cpu_s - r.reference_after_cpu_s;
  if (after > std::max(o.after_return_cpu_ratio * r.candidate_window_s, 0.005)) {
    return Format("work continued after the call returned: other threads used %.1f ms of CPU after the candidate's "
                  "calls, the timed windows lasted %.1f ms",
                  after * 1e3, r.candidate_window_s * 1e3);
  }
  if (std::fabs(r.elapsed_raw_s - r.elapsed_s) > 0.05 * r.elapsed_s + 0.05) {
    return Format("the timing clock disagrees with the raw system clock (%.3f s vs %.3f s)", r.elapsed_s,
                  r.elapsed_raw_s);
  }
  return "";
}

}  // namespace

std::string_view PairedStatusName(PairedStatus status) {
  for (const auto& s : kStatusNames) {
    if (s.status == status) return s.name;
  }
  return "error";
}

std::optional<PairedStatus> PairedStatusFromName(std::string_view name) {
  for (const auto& s : kStatusNames) {
    if (s.name == name) return s.status;
  }
  return std::nullopt;
}

Json PairedRecord::ToJson() const {
  Json j = Json::object();
  j["paired"] = paired;
  j["status"] = std::string(PairedStatusName(status));
  j["detail"] = detail;
  if (!paired) {
    if (!candidate_ms.empty()) j["candidate_ms"] = candidate_ms;
    return j;
  }
  j["speedup"] = speedup.median;
  j["ci"] = IntervalJson(speedup);
  j["rel_half_width"] = rel_half_width;
  j["rounds"] = rounds;
  j["warmup_rounds"] = warmup_rounds;
  j["calls_per_sample"] = calls_per_sample;
  j["checked_rounds"] = checked_rounds;
  j["stop"] = stop;
  j["candidate_ms"] = candidate_ms;
  j["reference_ms"] = reference_ms;
  j["elapsed_s"] = elapsed_s;
  j["elapsed_raw_s"] = elapsed_raw_s;
  j["window_ms"] = SidesMs(candidate_window_s, reference_window_s);
  j["after_return_cpu_ms"] = SidesMs(candidate_after_cpu_s, reference_after_cpu_s);
  j["value_sets"] = value_sets;
  if (remeasured) {
    Json& again = j["remeasured"];
    again["speedup"] = remeasured->speedup;
    again["ci"] = IntervalJson(remeasured->ci);
    again["rounds"] = remeasured->rounds;
  }
  if (!mode.empty()) j["mode"] = mode;
  j = ProcessesJson(*this, std::move(j));
  if (!more.empty()) {
    Json list = Json::array();
    for (const PairedRecord& m : more) list.push_back(m.ToJson());
    j["more"] = std::move(list);
  }
  return j;
}

PairedRecord PairedRecord::FromJson(const Json& j) {
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
  for (const auto& [key, cand, ref] : {std::tuple{"window_ms", &r.candidate_window_s, &r.reference_window_s},
                                       {"after_return_cpu_ms", &r.candidate_after_cpu_s, &r.reference_after_cpu_s}}) {
    if (const Json* pair = in.Find(key)) {
      const Reader sides(*pair, std::string(key) + ".");
      sides.Number("candidate", cand);
      sides.Number("reference", ref);
      *cand /= 1e3;
      *ref /= 1e3;
    }
  }
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
  ReadProcesses(in, &r);
  return r;
}

const PairedRecord* PairedTiming::Find(std::string_view name) const {
  for (const auto& [n, r] : records) {
    if (n == name) return &r;
  }
  return nullptr;
}

Json PairedTiming::ToJson() const {
  Json paired = Json::object();
  for (const auto& [name, r] : records) paired[name] = r.ToJson();
  Json j = Json::object();
  j["paired"] = std::move(paired);
  j["conditions"] = conditions;
  return j;
}

PairedTiming PairedTiming::FromJson(const Json& json) {
  const Reader in(json, "");
  PairedTiming t;
  if (const Json* paired = in.Find("paired")) {
    if (!paired->is_object()) in.Fail("paired", "an object {benchmark: record}");
    for (const auto& [name, record] : paired->items()) {
      try {
        t.records.emplace_back(name, PairedRecord::FromJson(record));
      } catch (const Error& e) {
        throw Error(ErrorKind::kInvalidArgument, e.message(), "paired record", "paired." + name + "." + e.field());
      }
    }
  }
  if (const Json* c = in.Find("conditions")) t.conditions = *c;
  return t;
}

PairedOptions PairedOptionsFromJson(const Json& options, PairedOptions o) {
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
    auto it = options.find(key);
    if (it == options.end()) return;
    if (!it->is_number_integer() || (std::is_unsigned_v<std::remove_pointer_t<decltype(out)>> && *it < 0)) {
      throw Error(ErrorKind::kInvalidArgument, "expected a whole number", "eval_config.timing", key);
    }
    *out = it->get<std::remove_pointer_t<decltype(out)>>();
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

PairedRecord RecordOf(const PairedResult& res) {
  PairedRecord r;
  r.speedup = res.speedup;
  r.rel_half_width = res.rel_half_width;
  r.rounds = res.rounds;
  r.warmup_rounds = res.warmup_rounds;
  r.calls_per_sample = res.calls_per_sample;
  r.checked_rounds = res.checked_rounds;
  r.stop = res.stop;
  r.candidate_ms = res.candidate_ms;
  r.reference_ms = res.reference_ms;
  r.elapsed_s = res.elapsed_s;
  r.elapsed_raw_s = res.elapsed_raw_s;
  r.candidate_window_s = res.candidate_window_s;
  r.reference_window_s = res.reference_window_s;
  r.candidate_after_cpu_s = res.candidate_after_cpu_s;
  r.reference_after_cpu_s = res.reference_after_cpu_s;
  if (res.problem) {
    const size_t colon = res.problem->find(": ");
    const std::optional<PairedStatus> s =
        colon == std::string::npos ? std::nullopt : PairedStatusFromName(res.problem->substr(0, colon));
    const bool caught = s && *s != PairedStatus::kCorrect && *s != PairedStatus::kNoisy;
    r.status = caught ? *s : PairedStatus::kError;
    r.detail = caught ? res.problem->substr(colon + 2) : *res.problem;
  }
  return r;
}

PairedRecord JudgePaired(PairedRecord r, const PairedOptions& o, const PairedRemeasure& remeasure) {
  if (!r.paired || r.status != PairedStatus::kCorrect) return r;
  const std::string note = std::move(r.detail);
  auto decide = [&](PairedStatus status, std::string detail) {
    r.status = status;
    r.detail = WithNote(std::move(detail), note);
    return r;
  };
  // Rules 2 and 3 judge one measurement; a merged record's processes were judged one by one.
  if (r.processes <= 1) {
    if (std::string problem = IntegrityProblem(r, o); !problem.empty()) {
      return decide(PairedStatus::kSuspicious, std::move(problem));
    }
    if (r.speedup.median > o.suspicious_speedup) {
      if (!remeasure) {
        return decide(PairedStatus::kSuspicious,
                      Format("a speedup of %.2fx could not be measured again", r.speedup.median));
      }
      const PairedRecord again = remeasure();
      r.remeasured = PairedRemeasured{again.speedup.median, again.speedup, again.rounds};
      if (again.status != PairedStatus::kCorrect) return decide(again.status, again.detail);
      const double change = again.speedup.median / r.speedup.median;
      if (!(change >= 0.75 && change <= 1.33)) {
        return decide(PairedStatus::kSuspicious,
                      Format("a speedup of %.2fx did not hold when measured again with new inputs (%.2fx)",
                             r.speedup.median, again.speedup.median));
      }
    }
  }
  if (!ReachesTarget(r.speedup, r.rounds, o)) {
    const std::string in = r.processes > 1 ? Format(" in %lld processes", static_cast<long long>(r.processes)) : "";
    return decide(PairedStatus::kNoisy,
                  Format("the 95 %% interval [%.3f, %.3f] is ±%.1f %% after %lld rounds%s (target ±%.1f %%)",
                         r.speedup.low, r.speedup.high, r.rel_half_width * 100, static_cast<long long>(r.rounds),
                         in.c_str(), o.target_rel_half_width * 100));
  }
  return decide(PairedStatus::kCorrect, "");
}

}  // namespace kf
