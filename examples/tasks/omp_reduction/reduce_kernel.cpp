// omp_reduction candidate kernel: returns sum(x[i]^2) for i < n, accumulated in double. Built into the task's
// executor program (-DKF_EXECUTOR), a process of its own beside the test program (kernel_api.hpp).
// The EVOLVE block is what an optimiser rewrites.
#include <cstddef>

#include "kernel_api.hpp"

// [EVOLVE_START]
double kf_sum_squares(const float* x, std::size_t n) {
  double s = 0.0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}
// [EVOLVE_END]
