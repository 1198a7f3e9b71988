// Correct and faster than the C++ reference: 16 x 16 tiles of A and B staged in local memory (the kernel
// requires local size 16 x 16, which the test program honours). On a GPU the tiling is what makes it fast;
// on PoCL's CPU device it runs about as fast as the starting kernel (PoCL already vectorises that one across
// work-items) and the speedup over the single-threaded C++ loop comes from vector units and all cores.
#define TILE 16
__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void matmul(__global const float* A, __global const float* B, __global float* C, const int n) {
  __local float As[TILE][TILE];
  __local float Bs[TILE][TILE];
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int col = get_global_id(0), row = get_global_id(1);
  float acc = 0.0f;
  for (int t = 0; t < n; t += TILE) {
    As[ly][lx] = (row < n && t + lx < n) ? A[row * n + t + lx] : 0.0f;
    Bs[ly][lx] = (t + ly < n && col < n) ? B[(t + ly) * n + col] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TILE; ++k) acc += As[ly][k] * Bs[k][lx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (row < n && col < n) C[row * n + col] = acc;
}
