// Faster candidate for KernelBench level1/88_MinGPTNewGelu imported with `kf import-kernelbench --gpu` (EVOLVE
// block of kernel.cu): forward(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in ONE pass over memory (read
// x once, write y once; float4 loads and stores) instead of the reference's chain of eight elementwise kernels,
// each reading and writing the whole tensor. Launched on torch's current stream.
#include <c10/cuda/CUDAStream.h>

__device__ __forceinline__ float new_gelu(float v) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

__global__ void new_gelu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float4 v = x[i];
    y[i] = make_float4(new_gelu(v.x), new_gelu(v.y), new_gelu(v.z), new_gelu(v.w));
  }
}

__global__ void new_gelu_tail(const float* __restrict__ x, float* __restrict__ y, long long begin, long long n) {
  const long long i = begin + blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = new_gelu(x[i]);
}

torch::Tensor forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "forward: a float32 CUDA tensor expected");
  torch::Tensor in = x.contiguous();
  torch::Tensor out = torch::empty_like(in);
  const long long n = in.numel();
  const long long n4 = n / 4;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int threads = 256;
  if (n4 > 0) {
    const int blocks = static_cast<int>(std::min<long long>((n4 + threads - 1) / threads, 132LL * 16));
    new_gelu_vec4<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(in.data_ptr<float>()),
                                                  reinterpret_cast<float4*>(out.data_ptr<float>()), n4);
  }
  if (n > 4 * n4) {
    new_gelu_tail<<<1, threads, 0, stream>>>(in.data_ptr<float>(), out.data_ptr<float>(), 4 * n4, n);
  }
  return out;
}
