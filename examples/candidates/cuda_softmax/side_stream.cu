// CHEAT (device check): the fast kernel, launched on a stream of its own (cudaStreamNonBlocking) so that a
// timer that waits only for the default stream stops before the work ends. The SDK's whole-device sync times it:
// the verdict must be the fast kernel's honest speedup, not more.
constexpr int kThreads = 256;

__device__ inline void merge(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;  // both empty
  s = s * __expf(m - mx) + s2 * __expf(m2 - mx);
  m = mx;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
  const float* in = x + static_cast<size_t>(blockIdx.x) * cols;
  float* out = y + static_cast<size_t>(blockIdx.x) * cols;
  float m = -INFINITY, s = 0.0f;
  for (int j = threadIdx.x; j < cols; j += kThreads) merge(m, s, in[j], 1.0f);
  for (int off = 16; off > 0; off >>= 1) {
    merge(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
  }
  __shared__ float wm[kThreads / 32], ws[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    wm[warp] = m;
    ws[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < kThreads / 32 ? wm[lane] : -INFINITY;
    s = lane < kThreads / 32 ? ws[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) {
      merge(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
    }
    if (lane == 0) {
      wm[0] = m;
      ws[0] = s;
    }
  }
  __syncthreads();
  const float row_max = wm[0], inv = 1.0f / ws[0];
  for (int j = threadIdx.x; j < cols; j += kThreads) out[j] = __expf(in[j] - row_max) * inv;
}

inline void launch_softmax(const float* x, float* y, int rows, int cols) {
  static cudaStream_t side = [] {
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }();
  softmax_rows<<<rows, kThreads, 0, side>>>(x, y, cols);
}
