// Profiler selection (reference spec §4.4 step 8 "Profiling skip", §4.8 table), profiler settings and the
// command lines of the passes (see include/kernelfoundry/profile.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/strings.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/profile.hpp"

namespace kf {
namespace fs = std::filesystem;

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsHostArch(const std::string& arch) {
  const std::string a = Lower(Trim(arch));
  return a.empty() || a == "cpu" || a == "native-cpu" || a == "host";
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

const std::vector<std::string>& KnownProfilers() {
  static const std::vector<std::string> kNames = {"perf", "ncu", "nsys", "unitrace", "vtune"};
  return kNames;
}

bool ShouldProfileVariant(const Json& config, const std::string& variant_key, std::optional<bool> force) {
  if (force) return *force;
  const ConfigView view(config);
  if (variant_key.find("custom") != std::string::npos) {
    return view.Bool("eval_config.profile_custom_model", true);
  }
  if (variant_key.find("reference") != std::string::npos) {
    return view.Bool("eval_config.profile_original_model", false);
  }
  return false;
}

bool IsCudaArch(const std::string& gpu_arch) {
  static const char* const kNames[] = {"maxwell", "pascal", "volta", "turing", "ampere", "hopper", "ada",
                                       "native", "a100", "a6000", "l40s", "l4"};
  const std::string a = Lower(Trim(gpu_arch));
  for (const char* n : kNames) {
    if (a == n) return true;
  }
  std::string_view rest = a;
  if (rest.rfind("sm_", 0) == 0) rest.remove_prefix(3);
  if (rest.size() > 1 && (rest.back() == 'a' || rest.back() == 'f')) rest.remove_suffix(1);  // "90a", "10.0f"
  if (AllDigits(rest)) return true;  // "90", "sm_90"
  const size_t dot = rest.find('.');
  return dot != std::string_view::npos && AllDigits(rest.substr(0, dot)) && AllDigits(rest.substr(dot + 1));
}

ProfilerSelection SelectProfilers(const Json& config, bool reference, const std::string& gpu_arch) {
  ProfilerSelection out;
  const char* type_key = reference ? "profiler_reference" : "profiler_kernel";
  const Json* type = config.is_object() && config.contains(type_key) ? &config[type_key] : nullptr;
  if (type != nullptr && !type->is_null()) {
    if (type->is_string() && !type->get<std::string>().empty()) {
      out.profilers.push_back(Lower(type->get<std::string>()));
      return out;
    }
    if (type->is_array() && !type->empty() &&
        std::all_of(type->begin(), type->end(), [](const Json& v) { return v.is_string() && !v.get<std::string>().empty(); })) {
      for (const Json& v : *type) out.profilers.push_back(Lower(v.get<std::string>()));
      return out;
    }
    out.problem = fmt::format("config.yaml: {}: expected a profiler name or a list of names ({}), got {}", type_key,
                              Join(KnownProfilers(), ", "), DumpJson(*type));
    return out;
  }
  // The language: the reference variant's is prompt.reference_language (the reference's default "Pytorch"),
  // falling back to the task language.
  std::string language;
  if (config.is_object() && config.contains("language") && config["language"].is_string()) {
    language = config["language"].get<std::string>();
  }
  if (reference && config.is_object() && config.contains("prompt") && config["prompt"].is_object() &&
      config["prompt"].contains("reference_language") && config["prompt"]["reference_language"].is_string()) {
    language = config["prompt"]["reference_language"].get<std::string>();
  }
  const std::string lang = Lower(Trim(language));
  if (lang == "cuda") {
    out.profilers = {"ncu"};
  } else if (IsHostArch(gpu_arch) || lang == "cpp" || lang == "c++" || lang == "c" || lang == "openmp" ||
             lang == "omp") {
    out.profilers = {"perf"};  // our addition: code that runs on the host gets perf
  } else if (lang == "sycl") {
    out.profilers = {"unitrace"};
  } else if (lang == "ocl" || lang == "opencl") {
    out.profilers = {"vtune"};
  } else if (lang == "pytorch" || lang == "triton" || lang == "python") {
    out.profilers = {IsCudaArch(gpu_arch) ? "ncu" : "unitrace"};
  } else {
    out.problem = fmt::format("no profiler for language '{}' on gpu_arch '{}' (set profiler_kernel / "
                              "profiler_reference to one of: {})",
                              language, gpu_arch, Join(KnownProfilers(), ", "));
  }
  return out;
}

std::string TraceKey(const std::string& name, size_t index) { return fmt::format("{}.{:03d}", name, index); }

ProfilerSettings ProfilerSettings::FromConfig(const Json& config) {
  ProfilerSettings s;
  if (!config.is_object() || !config.contains("profiler_settings") || config["profiler_settings"].is_null()) return s;
  const Json& root = config["profiler_settings"];
  auto fail = [](const std::string& field, const std::string& what) {
    return Error(ErrorKind::kInvalidArgument, "expected " + what, "config.yaml", "profiler_settings" + field);
  };
  if (!root.is_object()) throw fail("", "a mapping {perf: {...}, ncu: {...}, nsys: {...}}");
  const ConfigView view(config);
  auto strings = [&](const std::string& tool, const char* key, std::vector<std::string>* out) {
    if (auto v = view.StringList("profiler_settings." + tool + "." + key)) *out = *v;
  };
  for (const auto& [tool, value] : root.items()) {
    if (value.is_null()) continue;
    if (!value.is_object()) throw fail("." + tool, "a mapping of settings");
    const std::string prefix = "profiler_settings." + tool + ".";
    for (const auto& [key, unused] : value.items()) {
      (void)unused;
      static const std::vector<std::pair<std::string, std::vector<std::string>>> kKeys = {
          {"perf", {"events", "extra_args"}},
          {"ncu", {"set", "metrics", "kernel_name", "launch_skip", "launch_count", "extra_args"}},
          {"nsys", {"trace", "extra_args"}}};
      auto it = std::find_if(kKeys.begin(), kKeys.end(), [&](const auto& k) { return k.first == tool; });
      if (it == kKeys.end()) throw fail("." + tool, "one of the tools perf, ncu, nsys");
      if (std::find(it->second.begin(), it->second.end(), key) == it->second.end()) {
        throw fail("." + tool + "." + key, "one of the keys " + Join(it->second, ", "));
      }
    }
    if (tool == "perf") {
      strings(tool, "events", &s.perf.events);
      strings(tool, "extra_args", &s.perf.extra_args);
    } else if (tool == "ncu") {
      s.ncu.set = view.String(prefix + "set", s.ncu.set);
      strings(tool, "metrics", &s.ncu.metrics);
      s.ncu.kernel_name = view.String(prefix + "kernel_name", "");
      if (view.Has(prefix + "launch_skip")) s.ncu.launch_skip = view.Int(prefix + "launch_skip", 0);
      if (view.Has(prefix + "launch_count")) s.ncu.launch_count = view.Int(prefix + "launch_count", 1);
      strings(tool, "extra_args", &s.ncu.extra_args);
    } else if (tool == "nsys") {
      s.nsys.trace = view.String(prefix + "trace", s.nsys.trace);
      strings(tool, "extra_args", &s.nsys.extra_args);
    }
  }
  return s;
}

std::vector<std::string> DefaultPerfEvents(bool hardware) {
  std::vector<std::string> events;
  if (hardware) {
    events = {"cycles", "instructions", "cache-references", "cache-misses", "branches", "branch-misses"};
  }
  for (const char* e : {"task-clock", "page-faults", "major-faults", "context-switches", "cpu-migrations"}) {
    events.emplace_back(e);
  }
  return events;
}

std::vector<std::string> PerfStatCommand(const std::string& perf, const std::vector<std::string>& events,
                                         const fs::path& output_csv, const fs::path& ctl_fifo,
                                         const fs::path& ack_fifo, const std::vector<std::string>& extra_args,
                                         const std::vector<std::string>& argv) {
  std::vector<std::string> cmd = {perf, "stat", "-x", ",", "--no-big-num", "-e", Join(events, ","), "-D", "-1",
                                  "--control", "fifo:" + ctl_fifo.string() + "," + ack_fifo.string(),
                                  "-o", output_csv.string()};
  cmd.insert(cmd.end(), extra_args.begin(), extra_args.end());
  cmd.push_back("--");
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  return cmd;
}

std::vector<std::string> NcuCommand(const std::string& ncu, const ProfilerSettings::Ncu& settings,
                                    const fs::path& report_csv, const std::vector<std::string>& argv) {
  std::vector<std::string> cmd = {ncu, "--csv", "--log-file", report_csv.string(), "--set", settings.set};
  if (!settings.metrics.empty()) {
    cmd.push_back("--metrics");
    cmd.push_back(Join(settings.metrics, ","));
  }
  if (!settings.kernel_name.empty()) {
    cmd.push_back("--kernel-name");
    cmd.push_back(settings.kernel_name);
  }
  if (settings.launch_skip) {
    cmd.push_back("--launch-skip");
    cmd.push_back(std::to_string(*settings.launch_skip));
  }
  if (settings.launch_count) {
    cmd.push_back("--launch-count");
    cmd.push_back(std::to_string(*settings.launch_count));
  }
  cmd.push_back("--target-processes");
  cmd.push_back("all");
  cmd.insert(cmd.end(), settings.extra_args.begin(), settings.extra_args.end());
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  return cmd;
}

std::vector<std::string> NsysProfileCommand(const std::string& nsys, const ProfilerSettings::Nsys& settings,
                                            const fs::path& output_prefix, const std::vector<std::string>& argv) {
  std::vector<std::string> cmd = {nsys,           "profile", "--output",     output_prefix.string(),
                                  "--force-overwrite", "true", "--trace",    settings.trace,
                                  "--sample",     "none",    "--cpuctxsw",   "none",
                                  "--stats",      "false"};
  cmd.insert(cmd.end(), settings.extra_args.begin(), settings.extra_args.end());
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  return cmd;
}

std::vector<std::string> NsysStatsCommand(const std::string& nsys, const fs::path& report,
                                          const fs::path& output_prefix) {
  return {nsys,     "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--force-export", "true",
          "--output", output_prefix.string(), report.string()};
}

}  // namespace kf
