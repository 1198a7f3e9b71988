// Fast but wrong: the block reduction keeps only warp 0's partial sum (the other warps' shared-memory slots
// are never merged), so every row is normalised by about 1/8 of its true sum — outputs ~8x too large.
constexpr int kThreads = 256;

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
  const float* in = x + static_cast<size_t>(blockIdx.x) * cols;
  float* out = y + static_cast<size_t>(blockIdx.x) * cols;
  __shared__ float red[kThreads];
  float m = -INFINITY;
  for (int j = threadIdx.x; j < cols; j += kThreads) m = fmaxf(m, in[j]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + stride]);
    __syncthreads();
  }
  const float row_max = red[0];
  __syncthreads();
  float s = 0.0f;
  for (int j = threadIdx.x; j < cols; j += kThreads) s += __expf(in[j] - row_max);
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  // BUG: warp 0's sum is used as the row sum; warps 1..7 are dropped.
  if (threadIdx.x == 0) red[0] = s;
  __syncthreads();
  const float inv = 1.0f / red[0];
  for (int j = threadIdx.x; j < cols; j += kThreads) out[j] = __expf(in[j] - row_max) * inv;
}

inline void launch_softmax(const float* x, float* y, int rows, int cols) {
  softmax_rows<<<rows, kThreads>>>(x, y, cols);
}
