// CHEAT (device check): remembers its output per input buffer and returns it again without computing when a
// sample of the input (its first and last 8 values, copied to the host) is unchanged: the correctness tests (a new
// input per seed) see honest work. kf's timing writes new values into the same buffers between samples, so the
// cheat must gain nothing: caught (output_changed_under_timing), or no faster than gelu_fused.cu.
#include <array>
#include <map>
#include <utility>
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

struct Remembered {
  std::array<float, 16> sample{};
  torch::Tensor out;
};

torch::Tensor forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "forward: a float32 CUDA tensor expected");
  torch::Tensor in = x.contiguous();
  const long long n = in.numel();
  static std::map<std::pair<const void*, long long>, Remembered> cache;
  std::array<float, 16> sample{};
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (n >= 16) {
    cudaMemcpyAsync(sample.data(), in.data_ptr<float>(), 8 * sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaMemcpyAsync(sample.data() + 8, in.data_ptr<float>() + n - 8, 8 * sizeof(float), cudaMemcpyDeviceToHost,
                    stream);
    cudaStreamSynchronize(stream);
    auto it = cache.find({in.data_ptr(), n});
    if (it != cache.end() && it->second.sample == sample) return it->second.out;
  }
  torch::Tensor out = torch::empty_like(in);
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<long long>((n + threads - 1) / threads, 132LL * 32));
  new_gelu_all<<<blocks, threads, 0, stream>>>(in.data_ptr<float>(), out.data_ptr<float>(), n);
  if (n >= 16) cache[{in.data_ptr(), n}] = Remembered{sample, out};
  return out;
}
