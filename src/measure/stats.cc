// Timing statistics (reference spec §4.9, get_timing_stats) and 3-significant-digit rounding.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/measure.hpp"

namespace kf {

TimingStats ComputeTimingStats(std::span<const double> samples) {
  if (samples.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "no timing samples: the benchmark never measured anything (expected at least one trial)", "",
                "runtimes");
  }
  std::vector<double> sorted(samples.begin(), samples.end());
  for (double v : sorted) {
    if (std::isnan(v)) throw Error(ErrorKind::kInvalidArgument, "timing sample is NaN", "", "runtimes");
  }
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  TimingStats s;
  s.num_trials = static_cast<int64_t>(n);
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
  // Two passes like numpy: mean first, then the mean squared deviation (population variance, ddof = 0).
  double sum = 0;
  for (double v : samples) sum += v;
  s.mean = sum / static_cast<double>(n);
  double sq = 0;
  for (double v : samples) sq += (v - s.mean) * (v - s.mean);
  s.std = std::sqrt(sq / static_cast<double>(n));
  return s;
}

TimingStats RoundTimingStats(const TimingStats& stats, int digits) {
  TimingStats r = stats;
  r.mean = RoundSignificant(stats.mean, digits);
  r.std = RoundSignificant(stats.std, digits);
  r.min = RoundSignificant(stats.min, digits);
  r.max = RoundSignificant(stats.max, digits);
  r.median = RoundSignificant(stats.median, digits);
  return r;
}

}  // namespace kf
