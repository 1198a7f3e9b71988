// The keys of eval_config.timing (kernelfoundry/timing_keys.hpp).
#include "kernelfoundry/timing_keys.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
constexpr double kBig = 1e15;
using K = TimingKeyKind;
using R = TimingKeyReader;

// The loop's keys are range-checked by PairedOptions::Validate (their cross-field rules live there); the ranges
// below repeat nothing of it and are only read for kPlugin keys.
constexpr TimingKey kKeys[] = {
    // Stop once the 95 % interval's half-width is at most this share of the median ratio.
    {"target_rel_half_width", K::kNumber, R::kLoop, 0.02, 0, kBig, ""},
    // Seconds of timing loop per benchmark, warm-up included (kf splits it over the timed processes).
    {"budget_s", K::kNumber, R::kLoop, 20.0, 0, kBig, ""},
    {"min_rounds", K::kWhole, R::kLoop, 12, 0, kBig, ""},
    {"max_rounds", K::kWhole, R::kLoop, 1'000'000, 0, kBig, ""},
    // The warm-up (include/kernelfoundry/paired.hpp, PairedOptions).
    {"warmup_budget_fraction", K::kNumber, R::kLoop, 0.3, 0, kBig, ""},
    {"warmup_min_rounds", K::kWhole, R::kLoop, 3, 0, kBig, ""},
    // Two windows of 2 rounds within 25 %: a first-touch or JIT start (2x and more) is still waited out, while
    // the ~10-15 % a single round varies by on a 2-core VM no longer keeps the warm-up going. Measured on the
    // README example (2026-12-04): windows of 5 within 5 % took 10-17 rounds per process, 20-40 % of all rounds,
    // and stopped on the budget cap; with 3 warm-up rounds the first measured rounds' ratios differed from their
    // process's median by +0.9, +1.1, +2.3 % (78 processes, standard error 1.1 %) and later ones by -1.2..+0.5 %.
    {"warmup_window", K::kWhole, R::kLoop, 2, 0, kBig, ""},
    {"warmup_tolerance", K::kNumber, R::kLoop, 0.25, 0, kBig, ""},
    // Share of rounds whose outputs and inputs are checked (the first three always).
    {"check_fraction", K::kNumber, R::kLoop, 0.2, 0, kBig, ""},
    {"quiesce_max_s", K::kNumber, R::kLoop, 0.05, 0, kBig, ""},
    {"min_sample_s", K::kNumber, R::kLoop, 2e-4, 0, kBig, ""},
    {"seed", K::kWhole, R::kLoop, 20261130, 0, kBig, ""},
    // Speedups above this are measured again with new values and must hold.
    {"suspicious_speedup", K::kNumber, R::kLoop, 10.0, 0, kBig, ""},
    // Other threads' CPU after the candidate's calls returned, against its timed windows.
    {"after_return_cpu_ratio", K::kNumber, R::kLoop, 0.25, 0, kBig, ""},
    // Distinct input value sets (the originals and perturbed copies), memory permitting.
    {"value_sets", K::kWhole, R::kPlugin, 4, 1, 64, "a whole number from 1 to 64"},
    {"value_sets_max_bytes", K::kWhole, R::kPlugin, double(1 << 30), 1, kBig, "a whole number of bytes >= 1"},
    // Floating-point inputs are multiplied by 1 + U(-p, p) per element.
    {"perturbation", K::kNumber, R::kPlugin, 0.1, 0, 0.5, "a number from 0 to 0.5"},
    {"output_rtol", K::kNumber, R::kPlugin, 1e-2, 0, 1e9, "a number >= 0"},
    // Absolute tolerance relative to the reference output's RMS.
    {"output_atol_rms", K::kNumber, R::kPlugin, 1e-3, 0, 1e9, "a number >= 0"},
    {"output_min_ok", K::kNumber, R::kPlugin, 0.99, 0, 1, "a number from 0 to 1"},
    // Cold-cache timing on a device: 2 x L2 overwritten before every sample.
    {"l2_flush", K::kBool, R::kPlugin, 0, 0, 1, "true or false"},
    // Timed processes that always run (pipeline/paired_processes.hpp; $KF_TIMING_PROCESSES changes the default).
    {"processes", K::kWhole, R::kPipeline, 4, 1, 16, "a whole number from 1 to 16"},
    // More processes run while the merged interval misses the target; default 6 x processes.
    {"max_processes", K::kWhole, R::kPipeline, kNone, 1, 48, "a whole number from 1 to 48"},
};

}  // namespace

std::span<const TimingKey> TimingKeys() { return kKeys; }

const TimingKey* FindTimingKey(std::string_view name) {
  for (const TimingKey& k : kKeys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

double TimingDefault(std::string_view name) {
  const TimingKey* key = FindTimingKey(name);
  if (key == nullptr || std::isnan(key->default_value)) {
    throw Error(ErrorKind::kInvalidArgument, "no fixed default for this timing key", "eval_config.timing",
                std::string(name));
  }
  return key->default_value;
}

}  // namespace kf
