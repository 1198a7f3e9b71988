// Test program of the omp_reduction task (KernelFoundry task SDK; protocol in kernelfoundry/sdk/task_sdk.hpp).
// Runtime hyperparameter: {"n": elements} (default 4 Mi). The candidate runs in the executor process
// (kernel_api.hpp): what it reads is allocated in the shared arena (SharedVector); the expected values stay here.
#define KF_TASK_MAIN
#include "kernelfoundry/sdk/task_sdk.hpp"

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "kernel_api.hpp"  // kf_sum_squares: the candidate (reduce_kernel.cpp), called in the executor

namespace {

// The reference: a plain serial loop.
double ReferenceSumSquares(const float* x, std::size_t n) {
  double s = 0.0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}

using Floats = kf::sdk::SharedVector<float>;

double Run(const Floats& x) {
  return kf::sdk::use_reference() ? ReferenceSumSquares(x.data(), x.size()) : kf_sum_squares(x.data(), x.size());
}

Floats Input() {
  std::size_t n = kf::sdk::runtime_params().value("n", std::size_t{1} << 22);
  Floats x(n);
  unsigned state = 12345;
  for (auto& v : x) {
    state = state * 1103515245u + 12345u;
    v = static_cast<float>((state >> 8) % 2001) / 1000.0f - 1.0f;
  }
  return x;
}

}  // namespace

KF_TEST(test_output_shapes_match) {
  // A reduction's output is one finite number; its value is test_values_match's business (so a wrong sum
  // is a value mismatch, not a shape mismatch).
  Floats x(17, 1.0f);
  const double got = Run(x);
  if (!std::isfinite(got)) throw kf::sdk::Failure("the result is not a finite number: " + std::to_string(got));
}

KF_TEST(test_values_match) {
  Floats x = Input();
  std::vector<double> got = {Run(x)};
  std::vector<double> want = {ReferenceSumSquares(x.data(), x.size())};
  kf::sdk::assert_allclose(got, want, 1e-7, 1e-4);
}

KF_BENCHMARK(bench_sum_squares) {
  Floats x = Input();
  volatile double sink = 0;
  kf::sdk::measure_runtime([&] { sink = Run(x); });
  (void)sink;
}
