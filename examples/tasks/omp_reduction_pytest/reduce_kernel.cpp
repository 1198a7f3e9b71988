// omp_reduction as a torch C++ extension (module reduce_kernel): sum(x[i]^2) of a contiguous float32 CPU
// tensor, accumulated in double. The EVOLVE block is identical to examples/tasks/omp_reduction's.
#include <torch/extension.h>

#include <cstddef>

// [EVOLVE_START]
double kf_sum_squares(const float* x, std::size_t n) {
  double s = 0.0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}
// [EVOLVE_END]

double sum_squares(torch::Tensor x) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.is_contiguous(),
              "contiguous float32 CPU tensor expected");
  return kf_sum_squares(x.data_ptr<float>(), static_cast<std::size_t>(x.numel()));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("sum_squares", &sum_squares, "sum of squares (double)"); }
