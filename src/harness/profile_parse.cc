// Parsers of profiler outputs (perf stat -x, ncu --csv, nsys stats csv), the compact profile line of the
// verdict table and the profiler_data of a verdict (see include/kernelfoundry/profile.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "core/strings.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/profile.hpp"

namespace kf {

namespace {

// Splits CSV text into records of fields (RFC 4180: quoted fields, "" escapes, newlines inside quotes).
std::vector<std::vector<std::string>> ParseCsv(std::string_view text, char sep = ',') {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == sep) {
      row.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n') {
      if (!field.empty() && field.back() == '\r') field.pop_back();
      if (any || !field.empty()) {
        row.push_back(std::move(field));
        rows.push_back(std::move(row));
      }
      row.clear();
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (any || !field.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  return rows;
}

// Drops the tools' own message lines ("==PROF== Connected to process …", "==WARNING== …").
std::string WithoutToolLines(std::string_view text) {
  std::string out;
  for (std::string_view line : SplitLines(text)) {
    if (Trim(line).rfind("==", 0) == 0) continue;
    out.append(line);
    out += '\n';
  }
  return out;
}

// A number, allowing thousands separators ("1,024.5"); nullopt for anything else.
std::optional<double> Number(std::string_view raw) {
  std::string s;
  for (char c : Trim(raw)) {
    if (c != ',') s += c;
  }
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

Json NumberOrText(std::string_view raw) {
  if (auto v = Number(raw)) return *v;
  return std::string(Trim(raw));
}

// "cpu_core/instructions/u" -> "instructions"; "instructions:u" -> "instructions".
std::string PlainEventName(std::string_view event) {
  std::string_view e = Trim(event);
  if (const size_t slash = e.find('/'); slash != std::string_view::npos) {
    const size_t end = e.find('/', slash + 1);
    e = e.substr(slash + 1, end == std::string_view::npos ? std::string_view::npos : end - slash - 1);
  }
  if (const size_t colon = e.find(':'); colon != std::string_view::npos) e = e.substr(0, colon);
  return std::string(e);
}

Json Measure(double value, const char* unit) { return Json{{"value", value}, {"unit", unit}}; }

// Microseconds per unit of an ncu duration, or nullopt for a unit that is not a time.
std::optional<double> MicrosecondsPer(const std::string& unit) {
  static const std::map<std::string, double> kUnits = {{"ns", 1e-3},     {"nsecond", 1e-3}, {"us", 1.0},
                                                       {"usecond", 1.0}, {"ms", 1e3},       {"msecond", 1e3},
                                                       {"s", 1e6},       {"second", 1e6}};
  auto it = kUnits.find(unit);
  if (it == kUnits.end()) return std::nullopt;
  return it->second;
}

// The summary of one ncu kernel from its metrics (details-page display names or raw metric names).
Json NcuSummary(const Json& metrics) {
  auto find = [&](std::initializer_list<const char*> names, bool percent) -> std::optional<std::pair<double, std::string>> {
    for (const char* n : names) {
      for (const auto& [key, m] : metrics.items()) {
        if (key != n && key.rfind(std::string(n) + " (", 0) != 0) continue;
        const std::string unit = m.value("unit", "");
        if (percent && unit != "%" && unit != "pct" && unit.find('%') == std::string::npos &&
            std::string_view(n).find("pct") == std::string_view::npos) {
          continue;
        }
        if (m.contains("value") && m["value"].is_number()) return std::make_pair(m["value"].get<double>(), unit);
      }
    }
    return std::nullopt;
  };
  Json s = Json::object();
  if (auto d = find({"Duration", "gpu__time_duration.sum"}, false)) {
    if (auto per = MicrosecondsPer(d->second)) s["duration_us"] = d->first * *per;
  }
  auto pct = [&](const char* key, std::initializer_list<const char*> names) {
    if (auto v = find(names, true)) s[key] = v->first;
  };
  pct("achieved_occupancy_pct", {"Achieved Occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active"});
  pct("dram_throughput_pct", {"DRAM Throughput", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                              "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"});
  pct("l2_throughput_pct", {"L2 Cache Throughput", "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
                            "lts__throughput.avg.pct_of_peak_sustained_elapsed"});
  pct("memory_throughput_pct", {"Memory Throughput", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"});
  pct("sm_throughput_pct", {"Compute (SM) Throughput", "sm__throughput.avg.pct_of_peak_sustained_elapsed"});
  return s;
}

int ColumnOf(const std::vector<std::string>& header, std::string_view name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (Trim(header[i]) == name) return static_cast<int>(i);
  }
  return -1;
}

std::string Cell(const std::vector<std::string>& row, int col) {
  return col >= 0 && static_cast<size_t>(col) < row.size() ? std::string(Trim(row[col])) : std::string();
}

std::string Fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

// "0.412" / "12.3" / "1.2e-05": enough digits for small per-call values.
std::string Short(double v) {
  if (v == 0) return "0";
  if (std::fabs(v) >= 100) return Fixed(v, 0);
  if (std::fabs(v) >= 0.01) return fmt::format("{:.3g}", v);
  return fmt::format("{:.2e}", v);
}

std::optional<double> DerivedValue(const Json& data, const char* key) {
  if (!data.contains("derived") || !data["derived"].contains(key)) return std::nullopt;
  const Json& v = data["derived"][key];
  if (!v.contains("value") || !v["value"].is_number()) return std::nullopt;
  return v["value"].get<double>();
}

std::string PerfLine(const Json& data) {
  std::vector<std::string> parts;
  if (auto v = DerivedValue(data, "ipc")) parts.push_back("IPC " + Fixed(*v, 2));
  if (auto v = DerivedValue(data, "cache_misses_per_kinstr")) parts.push_back("cache-misses " + Fixed(*v, 2) + "/kinstr");
  if (auto v = DerivedValue(data, "branch_misses_per_kinstr")) parts.push_back("branch-misses " + Fixed(*v, 2) + "/kinstr");
  if (auto v = DerivedValue(data, "page_faults_per_call")) parts.push_back("page-faults " + Short(*v) + "/call");
  if (auto v = DerivedValue(data, "task_clock_ms_per_call")) parts.push_back("task-clock " + Short(*v) + " ms/call");
  if (auto v = DerivedValue(data, "context_switches_per_call")) parts.push_back("context-switches " + Short(*v) + "/call");
  const bool hardware = data.value("hardware_counters", true);
  std::string head = hardware ? "perf" : "perf (software events only)";
  if (parts.empty()) {
    return head + ": no counts" + (data.contains("timed_calls") && data["timed_calls"].is_null()
                                       ? " (the run reported no timed calls)" : "");
  }
  if (data.contains("timed_calls") && data["timed_calls"].is_number()) {
    parts.push_back(fmt::format("{} calls", data["timed_calls"].get<int64_t>()));
  }
  return head + ": " + Join(parts, ", ");
}

std::string NcuLine(const Json& data) {
  if (!data.contains("kernels") || !data["kernels"].is_array() || data["kernels"].empty() ||
      !data.contains("longest") || !data["longest"].is_number()) {
    return "ncu: no kernels in the report";
  }
  const Json& k = data["kernels"][data["longest"].get<size_t>()];
  const Json& s = k["summary"];
  std::vector<std::string> parts;
  if (s.contains("duration_us")) parts.push_back(Short(s["duration_us"].get<double>()) + " us");
  auto pct = [&](const char* key, const char* label) {
    if (s.contains(key)) parts.push_back(fmt::format("{} {:.0f}%", label, s[key].get<double>()));
  };
  pct("achieved_occupancy_pct", "occupancy");
  pct("dram_throughput_pct", "DRAM");
  pct("l2_throughput_pct", "L2");
  pct("sm_throughput_pct", "SM");
  std::string name = k.value("name", "");
  name = name.substr(0, name.find('('));  // "softmax_rows(const float *, …)" -> "softmax_rows"
  if (name.size() > 40) name = name.substr(0, 37) + "...";
  std::string line = "ncu: " + name + " " + Join(parts, ", ");
  if (data["kernels"].size() > 1) line += fmt::format(" (longest of {} kernels)", data["kernels"].size());
  return line;
}

std::string NsysLine(const Json& data) {
  if (!data.contains("kernels") || !data["kernels"].is_array() || data["kernels"].empty()) {
    return "nsys: no kernels in the report";
  }
  const Json& k = data["kernels"][0];
  return fmt::format("nsys: {} {} x {} us avg ({:.0f}% of GPU time)", k.value("name", ""),
                     k.value("instances", Json(0)).dump(), Short(k.value("avg_ns", 0.0) / 1000.0),
                     k.value("time_pct", 0.0));
}

// "perf.000" -> "perf"; "ncu.001_bmg" -> "ncu".
std::string PassTool(const std::string& key) { return key.substr(0, key.find('.')); }

}  // namespace

Json ParsePerfStat(std::string_view text, std::optional<int64_t> timed_calls) {
  Json counters = Json::object();
  for (std::string_view raw : SplitLines(text)) {
    std::string_view line = Trim(raw);
    if (line.empty() || line.front() == '#' || line.rfind("Events ", 0) == 0) continue;
    std::vector<std::string> f;
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      f.emplace_back(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (f.size() < 3) {
      throw Error(ErrorKind::kParse, "expected value,unit,event,… in \"" + std::string(line) + "\"",
                  "perf stat output");
    }
    const std::string event = PlainEventName(f[2]);
    if (event.empty()) continue;
    std::string unit = std::string(Trim(f[1]));
    if (unit == "msec") unit = "ms";
    if (unit.empty()) unit = "count";
    Json& c = counters[event];
    const std::string value_text(Trim(f[0]));
    if (value_text == "<not supported>" || value_text == "<not counted>") {
      if (!c.contains("value")) {
        c = Json{{"value", nullptr}, {"unit", unit}, {"status", value_text.substr(1, value_text.size() - 2)}};
      }
      continue;
    }
    std::optional<double> v = Number(value_text);
    if (!v) continue;
    const double before = c.contains("value") && c["value"].is_number() ? c["value"].get<double>() : 0.0;
    c["value"] = before + *v;
    c["unit"] = unit;
    if (f.size() > 4) {
      if (auto pct = Number(f[4])) c["enabled_pct"] = *pct;
    }
    c["status"] = "counted";
  }
  const bool per_call = timed_calls && *timed_calls > 0;
  if (per_call) {
    for (auto& [name, c] : counters.items()) {
      (void)name;
      if (c["value"].is_number()) c["per_call"] = c["value"].get<double>() / static_cast<double>(*timed_calls);
    }
  }
  auto counted = [&](const char* name) -> std::optional<double> {
    if (!counters.contains(name) || !counters[name]["value"].is_number()) return std::nullopt;
    return counters[name]["value"].get<double>();
  };
  Json derived = Json::object();
  const auto cycles = counted("cycles"), instructions = counted("instructions");
  if (cycles && instructions && *cycles > 0) derived["ipc"] = Measure(*instructions / *cycles, "instructions/cycle");
  if (instructions && *instructions > 0) {
    if (auto m = counted("cache-misses")) {
      derived["cache_misses_per_kinstr"] = Measure(*m / *instructions * 1000.0, "misses/1000 instructions");
    }
    if (auto m = counted("branch-misses")) {
      derived["branch_misses_per_kinstr"] = Measure(*m / *instructions * 1000.0, "misses/1000 instructions");
    }
  }
  if (auto refs = counted("cache-references"); refs && *refs > 0) {
    if (auto m = counted("cache-misses")) derived["cache_miss_pct"] = Measure(*m / *refs * 100.0, "%");
  }
  if (per_call) {
    const double n = static_cast<double>(*timed_calls);
    if (auto v = counted("page-faults")) derived["page_faults_per_call"] = Measure(*v / n, "faults/call");
    if (auto v = counted("task-clock")) {
      const std::string unit = counters["task-clock"]["unit"].get<std::string>();
      const double ms = unit == "ms" ? *v : unit == "ns" ? *v / 1e6 : unit == "us" ? *v / 1e3 : *v;
      derived["task_clock_ms_per_call"] = Measure(ms / n, "ms/call");
    }
    if (auto v = counted("context-switches")) derived["context_switches_per_call"] = Measure(*v / n, "switches/call");
    if (instructions) derived["instructions_per_call"] = Measure(*instructions / n, "instructions/call");
  }
  Json out = Json::object();
  out["tool"] = "perf stat";
  out["timed_calls"] = timed_calls ? Json(*timed_calls) : Json(nullptr);
  out["counters"] = std::move(counters);
  out["derived"] = std::move(derived);
  return out;
}

Json ParseNcuCsv(std::string_view text) {
  const auto rows = ParseCsv(WithoutToolLines(text));
  if (rows.empty() || ColumnOf(rows[0], "Kernel Name") < 0) {
    throw Error(ErrorKind::kParse, "no CSV header with a \"Kernel Name\" column", "ncu report");
  }
  const auto& header = rows[0];
  const int c_id = ColumnOf(header, "ID"), c_name = ColumnOf(header, "Kernel Name"),
            c_dev = ColumnOf(header, "Device"), c_block = ColumnOf(header, "Block Size"),
            c_grid = ColumnOf(header, "Grid Size"), c_cc = ColumnOf(header, "CC");
  const int c_section = ColumnOf(header, "Section Name"), c_metric = ColumnOf(header, "Metric Name"),
            c_unit = ColumnOf(header, "Metric Unit"), c_value = ColumnOf(header, "Metric Value");
  Json kernels = Json::array();
  std::map<std::string, size_t> by_id;
  auto kernel_for = [&](const std::vector<std::string>& row) -> Json& {
    const std::string id = c_id >= 0 ? Cell(row, c_id) : std::to_string(kernels.size());
    auto it = by_id.find(id);
    if (it != by_id.end()) return kernels[it->second];
    Json k = Json::object();
    k["id"] = NumberOrText(id);
    k["name"] = Cell(row, c_name);
    k["device"] = Cell(row, c_dev);
    k["cc"] = Cell(row, c_cc);
    k["block_size"] = Cell(row, c_block);
    k["grid_size"] = Cell(row, c_grid);
    k["metrics"] = Json::object();
    by_id[id] = kernels.size();
    kernels.push_back(std::move(k));
    return kernels.back();
  };
  if (c_metric >= 0 && c_value >= 0) {  // details page: one row per metric
    for (size_t r = 1; r < rows.size(); ++r) {
      const auto& row = rows[r];
      if (row.size() < header.size() / 2) continue;
      Json& k = kernel_for(row);
      std::string name = Cell(row, c_metric);
      if (name.empty()) continue;
      Json m = Json{{"value", NumberOrText(Cell(row, c_value))}, {"unit", Cell(row, c_unit)}};
      if (k["metrics"].contains(name)) {
        if (k["metrics"][name] == m) continue;
        name += " (" + Cell(row, c_section) + ")";
      }
      if (!k["metrics"].contains(name)) k["metrics"][name] = std::move(m);
    }
  } else {  // raw page: metric names as columns, then a units row
    size_t first = 1;
    std::vector<std::string> units(header.size());
    if (rows.size() > 1 && (c_id < 0 || Cell(rows[1], c_id).empty())) {
      for (size_t i = 0; i < header.size(); ++i) units[i] = Cell(rows[1], static_cast<int>(i));
      first = 2;
    }
    static const std::vector<std::string> kIdentity = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name",
                                                       "Context", "Stream", "Device", "CC", "Block Size", "Grid Size",
                                                       "Kernel Time", "Device Name"};
    for (size_t r = first; r < rows.size(); ++r) {
      const auto& row = rows[r];
      if (row.size() < header.size() / 2) continue;
      Json& k = kernel_for(row);
      for (size_t i = 0; i < header.size() && i < row.size(); ++i) {
        const std::string name(Trim(header[i]));
        if (name.empty() || std::find(kIdentity.begin(), kIdentity.end(), name) != kIdentity.end()) continue;
        k["metrics"][name] = Json{{"value", NumberOrText(row[i])}, {"unit", units[i]}};
      }
    }
  }
  Json longest = nullptr;
  double longest_us = -1;
  for (size_t i = 0; i < kernels.size(); ++i) {
    kernels[i]["summary"] = NcuSummary(kernels[i]["metrics"]);
    const Json& s = kernels[i]["summary"];
    const double us = s.contains("duration_us") ? s["duration_us"].get<double>() : 0.0;
    if (us > longest_us) {
      longest_us = us;
      longest = i;
    }
  }
  Json out = Json::object();
  out["tool"] = "ncu";
  out["kernels"] = std::move(kernels);
  out["longest"] = longest;
  return out;
}

Json ParseNsysKernelSummary(std::string_view text) {
  const auto all = ParseCsv(WithoutToolLines(text));
  // nsys may print a title line before the table: the header is the first row with a "Name" column.
  size_t h = 0;
  while (h < all.size() && (ColumnOf(all[h], "Name") < 0 || ColumnOf(all[h], "Total Time (ns)") < 0)) ++h;
  if (h == all.size()) {
    throw Error(ErrorKind::kParse, "no CSV header with \"Total Time (ns)\" and \"Name\" columns", "nsys report");
  }
  const auto& header = all[h];
  static const std::pair<const char*, const char*> kColumns[] = {
      {"Time (%)", "time_pct"}, {"Total Time (ns)", "total_ns"}, {"Instances", "instances"}, {"Avg (ns)", "avg_ns"},
      {"Med (ns)", "med_ns"},   {"Min (ns)", "min_ns"},          {"Max (ns)", "max_ns"},     {"StdDev (ns)", "stddev_ns"}};
  Json kernels = Json::array();
  for (size_t r = h + 1; r < all.size(); ++r) {
    const auto& row = all[r];
    if (row.size() < header.size()) continue;
    Json k = Json::object();
    k["name"] = Cell(row, ColumnOf(header, "Name"));
    for (const auto& [col, key] : kColumns) {
      const int c = ColumnOf(header, col);
      if (c < 0) continue;
      if (auto v = Number(Cell(row, c))) {
        k[key] = std::string_view(key) == "instances" ? Json(static_cast<int64_t>(std::llround(*v))) : Json(*v);
      }
    }
    kernels.push_back(std::move(k));
  }
  return Json{{"tool", "nsys"}, {"kernels", std::move(kernels)}};
}

std::string ProfileSummaryLine(const std::vector<std::pair<std::string, ProcessResult>>& traces) {
  std::vector<std::string> parts;
  for (const auto& [key, pr] : traces) {
    const std::string tool = PassTool(key);
    const Json data = pr.output_data.value_or(Json::object());
    if (data.is_object() && data.contains("available") && data["available"] == false) {
      parts.push_back(tool + ": not run (" + data.value("reason", pr.message.value_or("")) + ")");
      continue;
    }
    std::string line;
    if (data.is_object() && data.value("tool", "") == "perf stat") {
      line = PerfLine(data);
    } else if (data.is_object() && data.value("tool", "") == "ncu") {
      line = NcuLine(data);
    } else if (data.is_object() && data.value("tool", "") == "nsys") {
      line = NsysLine(data);
    } else {
      line = tool + ": no parsed output";
    }
    if (pr.returncode != 0) {
      std::string why = pr.message.value_or("");
      why = why.substr(0, why.find('\n'));
      line += fmt::format(" [pass exited {}{}]", pr.returncode, why.empty() ? "" : ": " + why);
    }
    parts.push_back(std::move(line));
  }
  return Join(parts, "; ");
}

std::vector<std::string> ProfileTableLines(const std::optional<TestResult>& candidate,
                                           const std::optional<TestResult>& reference) {
  std::vector<std::string> lines;
  for (const auto& [side, result] : {std::pair{"candidate", &candidate}, std::pair{"reference", &reference}}) {
    if (*result && !(*result)->trace_results.empty()) {
      lines.push_back(std::string("profile ") + side + ": " + ProfileSummaryLine((*result)->trace_results));
    }
  }
  return lines;
}

Json ProfilerDataFromTraces(const std::vector<std::pair<std::string, ProcessResult>>& traces) {
  Json out = Json::object();
  for (const auto& [key, pr] : traces) {
    const std::string tool = PassTool(key);
    if (out.contains(tool) || !pr.output_data || !pr.output_data->is_object()) continue;
    Json data = *pr.output_data;
    for (const char* raw : {"perf_stat.csv", "ncu_report.csv", "nsys_cuda_gpu_kern_sum.csv"}) data.erase(raw);
    out[tool] = std::move(data);
  }
  return out;
}

ProcessResult UnavailableTrace(const std::string& profiler, const std::string& reason) {
  ProcessResult r;
  r.returncode = -1;
  r.message = "profiler unavailable: " + reason;
  r.output_data = Json{{"profiler", profiler}, {"available", false}, {"reason", reason}};
  return r;
}

}  // namespace kf
