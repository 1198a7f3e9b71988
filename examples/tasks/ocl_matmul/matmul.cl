// ocl_matmul kernel: C[row, col] = sum_k A[row, k] * B[k, col], row-major n x n, one work-item per element
// (global size n x n, local size chosen by the runtime). OpenCL C 1.2.
// [EVOLVE_START]
__kernel void matmul(__global const float* A, __global const float* B, __global float* C, const int n) {
  const int col = get_global_id(0);
  const int row = get_global_id(1);
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}
// [EVOLVE_END]
