// Fast but wrong: skips every other element (the sum is about half the true value).
double kf_sum_squares(const float* x, std::size_t n) {
  double s = 0.0;
#pragma omp parallel for simd reduction(+ : s)
  for (std::size_t i = 0; i < n; i += 2) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}
