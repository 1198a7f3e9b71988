// interval_bench — does the two-level bootstrap ever decide the merged speedup interval?
//
// The interval of a speedup measured in K processes (pipeline/paired_processes.hpp) was the union of three:
// the pooled order-statistic interval of all rounds (MedianWithCI), Student's t interval over the processes'
// log-medians, and a two-level bootstrap over processes and their rounds (Davison & Hinkley 1997, §3.8). This
// bench replays synthetic-but-realistic paired runs and counts how often the bootstrap's bound is the binding
// one (lower than both other lows, or higher than both other highs), by how much it widens the union, whether
// that changes a verdict (half-width across the ±2 % target) and whether it changes coverage of the true ratio.
//
// Model of one run (calibrated on recorded runs, README "Paired timing" and issue 28): per-round ratio
// r_ij = θ · exp(b_i + e_ij), b_i ~ N(0, σ_b) the process's offset (layout: 0–4 %, a 7 % spread over three
// processes was seen), e_ij a heavy-tailed round noise: N(0, σ_w) with probability 0.9, N(0, 4 σ_w) otherwise
// (bursts of load), σ_w 3–15 % (per-process intervals of ±1–4 % after ~120 rounds); K = 2–9 processes, 20–150
// rounds each (kf runs 3 by default and up to 9 while the target is missed).
//
// Real runs: `interval_bench --replay VERDICT.json…` replays the merged records of `kf run --json` verdicts
// (timing.paired.<benchmark> with process_rounds: the per-round lists split by process) instead.
//
// Usage: interval_bench [--trials N] (default 100 per cell) | interval_bench --replay FILE…
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/files.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/paired.hpp"
#include "kernelfoundry/paired_wire.hpp"

namespace {

struct Interval {
  double low, high;
};

// Student's t interval of the mean of the groups' log-medians, back-transformed (as GroupedMedianCI).
Interval TInterval(const std::vector<std::vector<double>>& by_group) {
  std::vector<double> logs;
  for (const auto& g : by_group) logs.push_back(std::log(kf::MedianWithCI(g).median));
  const double k = static_cast<double>(logs.size());
  double mean = 0, ss = 0;
  for (double v : logs) mean += v / k;
  for (double v : logs) ss += (v - mean) * (v - mean);
  const double half = kf::StudentT975(static_cast<int64_t>(logs.size()) - 1) * std::sqrt(ss / (k - 1) / k);
  return {std::exp(mean - half), std::exp(mean + half)};
}

struct Cell {
  int k, n;
  double sigma_b, sigma_w;
};

struct Tally {
  int trials = 0, binds = 0, verdict_changed = 0, covered_with = 0, covered_without = 0;
  double widen_sum = 0, widen_max = 0;  // extra half-width (relative to the median) from the bootstrap
};

Tally Run(const Cell& c, int trials, std::mt19937_64& rng) {
  Tally t;
  std::normal_distribution<double> unit(0.0, 1.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double theta = 1.0;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<double> values;
    std::vector<int64_t> groups;
    std::vector<std::vector<double>> by_group(static_cast<size_t>(c.k));
    for (int i = 0; i < c.k; ++i) {
      const double b = c.sigma_b * unit(rng);
      for (int j = 0; j < c.n; ++j) {
        const double sd = u(rng) < 0.9 ? c.sigma_w : 4 * c.sigma_w;
        const double r = theta * std::exp(b + sd * unit(rng));
        values.push_back(r);
        groups.push_back(i);
        by_group[static_cast<size_t>(i)].push_back(r);
      }
    }
    const kf::MedianCI pooled = kf::MedianWithCI(values);
    const Interval ti = TInterval(by_group);
    const kf::MedianCI boot = kf::HierarchicalMedianCI(values, groups, 2000, 20261130u + static_cast<uint64_t>(trial));
    const double lo = std::min(pooled.low, ti.low), hi = std::max(pooled.high, ti.high);
    const double lo_all = std::min(lo, boot.low), hi_all = std::max(hi, boot.high);
    const double m = pooled.median;
    const double widen = ((hi_all - lo_all) - (hi - lo)) / 2 / m;
    ++t.trials;
    if (boot.low < lo || boot.high > hi) ++t.binds;
    t.widen_sum += widen;
    t.widen_max = std::max(t.widen_max, widen);
    const bool ok_without = (hi - lo) / 2 <= 0.02 * m, ok_with = (hi_all - lo_all) / 2 <= 0.02 * m;
    if (ok_without != ok_with) ++t.verdict_changed;
    t.covered_without += lo <= theta && theta <= hi;
    t.covered_with += lo_all <= theta && theta <= hi_all;
  }
  return t;
}

// One merged record's rounds, grouped by process: the three intervals, and which bound is binding.
void Replay(const std::string& name, const kf::PairedRecord& r) {
  std::vector<double> values;
  std::vector<int64_t> groups;
  std::vector<std::vector<double>> by_group;
  size_t at = 0;
  for (size_t g = 0; g < r.process_rounds.size(); ++g) {
    by_group.emplace_back();
    for (int64_t j = 0; j < r.process_rounds[g] && at < r.candidate_ms.size(); ++j, ++at) {
      const double ratio = r.reference_ms[at] / r.candidate_ms[at];
      values.push_back(ratio);
      groups.push_back(static_cast<int64_t>(g));
      by_group.back().push_back(ratio);
    }
  }
  const kf::MedianCI pooled = kf::MedianWithCI(values);
  const Interval ti = TInterval(by_group);
  const kf::MedianCI boot = kf::HierarchicalMedianCI(values, groups, 2000, 20261130);
  const double lo = std::min(pooled.low, ti.low), hi = std::max(pooled.high, ti.high), m = pooled.median;
  std::printf("%s: %zu processes, %zu rounds, speedup %.3f; pooled ±%.2f%%, t ±%.2f%%, bootstrap ±%.2f%%; "
              "bootstrap binding: %s (extra half-width %.3f%%)\n",
              name.c_str(), by_group.size(), values.size(), m, 50 * (pooled.high - pooled.low) / m,
              50 * (ti.high - ti.low) / m, 50 * (boot.high - boot.low) / m,
              boot.low < lo || boot.high > hi ? "yes" : "no",
              50 * ((std::max(hi, boot.high) - std::min(lo, boot.low)) - (hi - lo)) / m);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--replay") {
    for (int i = 2; i < argc; ++i) {
      const kf::Json verdict = kf::ParseJson(kf::ReadFileBytes(argv[i]).value_or("{}"), argv[i]);
      const kf::Json timing = verdict.value("timing", kf::Json::object());
      for (const auto& [name, record] : timing.value("paired", kf::Json::object()).items()) {
        const kf::PairedRecord r = kf::PairedRecordFromJson(record);
        if (r.process_rounds.size() > 1) Replay(std::string(argv[i]) + " " + name, r);
      }
    }
    return 0;
  }
  int trials = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--trials") trials = std::atoi(argv[i + 1]);
  }
  std::mt19937_64 rng(7);
  std::printf("interval_bench: %d simulated merged runs per row; 'binds': the bootstrap's low or high lies outside "
              "the union of the pooled order-statistic and t intervals\n", trials);
  std::printf("%3s %4s %6s %6s | %7s %9s %9s %8s | %9s %9s\n", "K", "n", "sd_b", "sd_w", "binds", "widen_avg",
              "widen_max", "verdict", "cov_w/o", "cov_with");
  Tally all;
  std::vector<std::pair<int, Tally>> per_k;
  for (int k : {2, 3, 4, 6, 9}) {
    Tally mine;
    for (int n : {20, 60, 150}) {
      for (double sb : {0.0, 0.01, 0.02, 0.04}) {
        for (double sw : {0.03, 0.08, 0.15}) {
          const Tally t = Run({k, n, sb, sw}, trials, rng);
          std::printf("%3d %4d %5.0f%% %5.0f%% | %6.1f%% %8.3f%% %8.3f%% %8d | %8.1f%% %8.1f%%\n", k, n, sb * 100,
                      sw * 100, 100.0 * t.binds / t.trials, 100 * t.widen_sum / t.trials, 100 * t.widen_max,
                      t.verdict_changed, 100.0 * t.covered_without / t.trials, 100.0 * t.covered_with / t.trials);
          for (Tally* sum : {&all, &mine}) {
            sum->trials += t.trials;
            sum->binds += t.binds;
            sum->verdict_changed += t.verdict_changed;
            sum->covered_with += t.covered_with;
            sum->covered_without += t.covered_without;
            sum->widen_sum += t.widen_sum;
            sum->widen_max = std::max(sum->widen_max, t.widen_max);
          }
        }
      }
    }
    per_k.emplace_back(k, mine);
  }
  for (const auto& [k, t] : per_k) {
    std::printf("K=%d: bootstrap binding in %.1f%%, mean extra half-width %.3f%%, verdicts changed %d of %d, "
                "coverage %.2f%% without it, %.2f%% with it\n",
                k, 100.0 * t.binds / t.trials, 100 * t.widen_sum / t.trials, t.verdict_changed, t.trials,
                100.0 * t.covered_without / t.trials, 100.0 * t.covered_with / t.trials);
  }
  std::printf("all: %d runs, bootstrap binding in %d (%.2f%%), mean extra half-width %.4f%%, max %.3f%%, "
              "verdicts changed %d, coverage of the true ratio %.2f%% without it, %.2f%% with it\n",
              all.trials, all.binds, 100.0 * all.binds / all.trials, 100 * all.widen_sum / all.trials,
              100 * all.widen_max, all.verdict_changed, 100.0 * all.covered_without / all.trials,
              100.0 * all.covered_with / all.trials);
  // What the bootstrap costs at kf's largest merge (9 processes of 200 rounds, 2,000 resamples).
  std::vector<double> values;
  std::vector<int64_t> groups;
  std::lognormal_distribution<double> noise(0.0, 0.08);
  for (int i = 0; i < 9 * 200; ++i) {
    values.push_back(noise(rng));
    groups.push_back(i / 200);
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) kf::GroupedMedianCI(values, groups, 2000, static_cast<uint64_t>(i));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 20;
  std::printf("GroupedMedianCI of 9 x 200 rounds, 2000 resamples: %.1f ms per call\n", ms);
  return 0;
}
