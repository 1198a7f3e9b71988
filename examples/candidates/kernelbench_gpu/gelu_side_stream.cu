// CHEAT (device check): gelu_fused.cu's kernel launched on a stream of its own, not torch's current stream, so the
// benchmark's own sync (current stream only) returns before the work is done. kf's whole-device sync must time it:
// its speedup may be no higher than gelu_fused.cu's. (Correct output: the checks synchronise the device.)
#include <c10/cuda/CUDAStream.h>

__device__ __forceinline__ float new_gelu(float v) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

__global__ void new_gelu_all(const float* __restrict__ x, float* __restrict__ y, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    y[i] = new_gelu(x[i]);
  }
}

torch::Tensor forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "forward: a float32 CUDA tensor expected");
  torch::Tensor in = x.contiguous();
  torch::Tensor out = torch::empty_like(in);
  static cudaStream_t side = [] {
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }();
  const long long n = in.numel();
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<long long>((n + threads - 1) / threads, 132LL * 32));
  new_gelu_all<<<blocks, threads, 0, side>>>(in.data_ptr<float>(), out.data_ptr<float>(), n);
  return out;
}
