// RoundSignificant: rounding to N significant digits (the scoring display form, spec §4.9).
// Kept in its own translation unit so that it links alone.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "kernelfoundry/measure.hpp"

namespace kf {

double RoundSignificant(double value, int digits) {
  if (value == 0 || !std::isfinite(value)) return value;
  digits = std::clamp(digits, 1, 17);
  // printf's %g rounds the exact binary value correctly, as Python's format(x, ".3g") does.
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, value);
  return std::strtod(buf, nullptr);
}

}  // namespace kf
