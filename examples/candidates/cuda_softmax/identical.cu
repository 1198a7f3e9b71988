// Identical to the task's starting point (the EVOLVE block unchanged): its speedup interval must cover 1.
__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* in = x + static_cast<size_t>(row) * cols;
  float* out = y + static_cast<size_t>(row) * cols;
  float m = -INFINITY;
  for (int j = 0; j < cols; ++j) m = fmaxf(m, in[j]);
  float sum = 0.0f;
  for (int j = 0; j < cols; ++j) sum += expf(in[j] - m);
  for (int j = 0; j < cols; ++j) out[j] = expf(in[j] - m) / sum;
}

inline void launch_softmax(const float* x, float* y, int rows, int cols) {
  const int threads = 128;
  softmax_rows<<<(rows + threads - 1) / threads, threads>>>(x, y, rows, cols);
}
