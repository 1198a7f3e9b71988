// OpenMP candidate for KernelBench level1/19_ReLU imported by `kf import-kernelbench` (EVOLVE block of
// kernel.cpp). Calling convention: forward(*inputs, *model_state_tensors, *init_inputs) = forward(x): no
// state tensors, no init inputs. One parallel pass over memory; float32 fast path, torch fallback otherwise.
torch::Tensor forward(torch::Tensor x) {
  TORCH_CHECK(x.device().is_cpu(), "forward: CPU tensor expected");
  if (x.scalar_type() != torch::kFloat32) return torch::relu(x);
  torch::Tensor in = x.contiguous();
  torch::Tensor out = torch::empty_like(in);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const int64_t n = in.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = src[i];
    dst[i] = v > 0.0f ? v : (v != v ? v : 0.0f);  // NaN propagates like torch.relu
  }
  return out;
}
