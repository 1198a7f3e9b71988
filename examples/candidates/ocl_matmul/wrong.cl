// Fast but wrong: reads B row-major as if it were transposed (computes A x B^T).
__kernel void matmul(__global const float* A, __global const float* B, __global float* C, const int n) {
  const int col = get_global_id(0);
  const int row = get_global_id(1);
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[col * n + k];
  C[row * n + col] = acc;
}
