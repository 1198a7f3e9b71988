// Timing on an asynchronous device in native test programs (the SDK's half of the rules in
// python/task/kernelfoundry/device_timing.py), and inputs that rotate between timed samples.
//
// Contract:
//  * Device hooks (DeviceHooks, Device()): a backend header installs them (task_sdk_cuda.hpp: CUDA, at static
//    initialisation, without touching the device). While `in_use()` is true, every timing loop of the SDK calls
//    the task's own sync and then `synchronize()` — all streams of the device (cudaDeviceSynchronize) — before
//    the first and before the last timestamp of each sample: work a candidate left on a side stream is timed.
//  * Cold-cache timing (eval_config.timing.l2_flush: true, in --kf-paired-options): before every paired sample,
//    outside the timed window, a device buffer of 2 × l2_bytes() is overwritten (the sync before the first
//    timestamp waits for it), and each sample is one call (min_sample_s 0).
//  * The clock is the host's steady clock around that synchronisation (not CUDA events, which time one stream).
//  * TimedData: a benchmark that hands over `sets` value sets (load(k) puts set k into ITS side's inputs) and its
//    output (output(): the last call's values, read back) is measured with rotating inputs in paired mode: each
//    round both sides get the same set, never the set of the round before, loaded outside the windows; in checked
//    rounds the candidate's output is compared with the reference's (kf::CompareOutputValues, output_rtol /
//    output_atol_rms / output_min_ok as for pytest tasks): an output cache keyed on the input buffer returns the
//    values of another set and the verdict is output_changed_under_timing.
//  * Conditions (DeviceConditions): {"type": "host"} without a device in use; else the backend's description
//    (name, driver, runtime, L2, …), the SM/memory clocks before the first and after the last paired measurement,
//    the sync and flush policy and the timer.
// Not thread-safe: the SDK's measurements run one at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernelfoundry/output_check.hpp"
#include "kernelfoundry/paired.hpp"

namespace kf::sdk {

/// The device a test program times on, as its backend installs it. All empty: a host program.
struct DeviceHooks {
  std::function<bool()> in_use;                 ///< a device is usable in this process (cached by the backend)
  std::function<void()> synchronize;            ///< waits for all work on all streams of the device
  std::function<size_t()> l2_bytes;             ///< the L2 cache size in bytes
  /// A function that overwrites a device buffer of `bytes` bytes (asynchronously; allocated once here).
  std::function<std::function<void()>(size_t bytes)> flusher;
  std::function<nlohmann::ordered_json()> describe;  ///< name, driver, runtime, L2, memory …
  std::function<nlohmann::ordered_json()> clocks;    ///< {"sm_mhz", "mem_mhz"} now, or {"error": why}
};

/// The process's device hooks (set by a backend header, or by a test).
inline DeviceHooks& Device() {
  static DeviceHooks hooks;
  return hooks;
}

/// True when a device is in use (hooks installed and the backend says so).
inline bool DeviceInUse() { return Device().in_use && Device().synchronize && Device().in_use(); }

/// Inputs of a benchmark that rotate between timed samples, and its output for the check (see the file comment).
struct TimedData {
  int sets = 4;                                  ///< distinct value sets (≥ 2 for the rotation to mean anything)
  std::function<void(int set)> load;             ///< puts value set `set` into this side's inputs
  std::function<std::vector<double>()> output;   ///< this side's output of its last call, on the host
};

/// The timing loops' sync: `task_sync` (may be empty), then the whole device when one is in use.
inline std::function<void()> WithDeviceSync(std::function<void()> task_sync) {
  if (!DeviceInUse()) return task_sync;
  std::function<void()> whole = Device().synchronize;
  if (!task_sync) return whole;
  return [task_sync = std::move(task_sync), whole = std::move(whole)] {
    task_sync();
    whole();
  };
}

/// What the timings of this process saw of the device (internal: DeviceConditions reads it).
inline nlohmann::ordered_json& DeviceSeen() {
  static nlohmann::ordered_json seen = nlohmann::ordered_json::object();
  return seen;
}

/// Notes the device and its clocks before the first measurement (`before`), or the clocks after the latest.
inline void NoteDeviceClocks(bool before) {
  if (!DeviceInUse()) return;
  nlohmann::ordered_json& seen = DeviceSeen();
  if (before && seen.contains("clocks_before")) return;
  if (before && Device().describe) seen["device"] = Device().describe();
  const nlohmann::ordered_json clocks =
      Device().clocks ? Device().clocks() : nlohmann::ordered_json{{"error", "the backend reads no clocks"}};
  seen[before ? "clocks_before" : "clocks_after"] = clocks;
}

/// The device part of the result document's "conditions" (see the file comment).
inline nlohmann::ordered_json DeviceConditions() {
  const nlohmann::ordered_json& seen = DeviceSeen();
  if (!seen.contains("device")) {
    return {{"type", "host"}, {"timer", "host steady clock"}, {"sync", "the task's own (no device in use)"}};
  }
  nlohmann::ordered_json out = seen["device"];
  out["clocks_mhz"] = {{"before", seen.value("clocks_before", nlohmann::ordered_json())},
                       {"after", seen.value("clocks_after", nlohmann::ordered_json())}};
  out["timer"] = "host steady clock; each window ends after the device synchronisation";
  out["sync"] = "the whole device, all streams (cudaDeviceSynchronize), after the task's own sync";
  out["l2_flush"] = seen.value("l2_flush", nlohmann::ordered_json{{"enabled", false}});
  return out;
}

/// With l2_flush in `options` and a device in use: the flush to run before every sample (and `o` switched to
/// one call per sample). Empty otherwise. Records the policy for DeviceConditions.
inline std::function<void()> DeviceFlusher(const nlohmann::ordered_json& options, kf::PairedOptions* o) {
  const bool wanted = options.is_object() && options.value("l2_flush", false);
  if (!wanted || !DeviceInUse() || !Device().flusher || !Device().l2_bytes) {
    DeviceSeen()["l2_flush"] = {{"enabled", false}};
    return {};
  }
  const size_t bytes = 2 * std::max<size_t>(Device().l2_bytes(), 1);
  o->min_sample_s = 0;
  DeviceSeen()["l2_flush"] = {{"enabled", true}, {"bytes", bytes},
                              {"when", "before every sample, outside the timed window; one call per sample"}};
  return Device().flusher(bytes);
}

/// The value set of each load of the paired loop (PairedSide::prepare: both sides use the same one; never the set
/// of the load before), drawn from a seed.
class ValueSetPlan {
 public:
  ValueSetPlan(int sets, uint64_t seed) : sets_(std::max(1, sets)), rng_(seed) {}
  /// The set of `load` (loads are asked for in order; asking again for the current load repeats it).
  int SetFor(int64_t load) {
    if (load != load_) {
      int k = static_cast<int>(rng_() % static_cast<uint64_t>(sets_));
      if (sets_ > 1 && k == last_) k = (k + 1) % sets_;
      last_ = k;
      load_ = load;
    }
    return last_;
  }

 private:
  int sets_;
  std::mt19937_64 rng_;
  int64_t load_ = -1;
  int last_ = -1;
};

/// The check of a checked round for two sides with TimedData: the candidate's output against the reference's
/// (the options' output_rtol, output_atol_rms, output_min_ok; the pytest plugin's defaults otherwise). Returns
/// "output_changed_under_timing: …" when they differ.
inline std::optional<std::string> CheckTimedOutputs(const TimedData& candidate, const TimedData& reference,
                                                    const nlohmann::ordered_json& options) {
  const std::vector<double> a = candidate.output(), e = reference.output();
  if (a.size() != e.size()) {
    return "output_changed_under_timing: output: " + std::to_string(a.size()) + " values where the reference has " +
           std::to_string(e.size());
  }
  const auto knob = [&](const char* key, double fallback) {
    return options.is_object() && options.contains(key) && options[key].is_number() ? options[key].get<double>()
                                                                                     : fallback;
  };
  std::optional<std::string> problem = kf::CompareOutputValues(
      static_cast<int64_t>(a.size()), [&](int64_t i) { return a[static_cast<size_t>(i)]; },
      [&](int64_t i) { return e[static_cast<size_t>(i)]; }, knob("output_rtol", 1e-2), knob("output_atol_rms", 1e-3),
      knob("output_min_ok", 0.99));
  if (!problem) return std::nullopt;
  return "output_changed_under_timing: output: " + *problem;
}

}  // namespace kf::sdk
