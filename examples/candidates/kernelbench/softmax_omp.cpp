// OpenMP candidate for KernelBench level1/23_Softmax imported by `kf import-kernelbench` (EVOLVE block of
// kernel.cpp): softmax over dim 1 of a (batch, dim) float32 tensor. Calling convention:
// forward(*inputs, *model_state_tensors, *init_inputs) = forward(x). Rows run in parallel; each row is
// max-subtracted (numerically stable), exponentiated once into the output, and scaled by 1 / sum.
#include <algorithm>
#include <cmath>
#include <limits>

torch::Tensor forward(torch::Tensor x) {
  TORCH_CHECK(x.device().is_cpu(), "forward: CPU tensor expected");
  if (x.scalar_type() != torch::kFloat32 || x.dim() != 2) return torch::softmax(x, 1);
  torch::Tensor in = x.contiguous();
  torch::Tensor out = torch::empty_like(in);
  const int64_t rows = in.size(0), cols = in.size(1);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = src + r * cols;
    float* y = dst + r * cols;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, a[c]);
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const float e = std::exp(a[c] - mx);
      y[c] = e;
      sum += e;
    }
    const float inv = static_cast<float>(1.0 / sum);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) y[c] *= inv;
  }
  return out;
}
