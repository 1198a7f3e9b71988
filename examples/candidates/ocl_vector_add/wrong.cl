// Wrong: a classic vload4/vstore4 misuse — the first argument is an offset in *vectors*, but this kernel
// passes an element offset, so it reads and writes 4x too far (most outputs are never written or get the
// sums of other elements).
#define KF_ITEMS 16
__kernel void vector_add(__global const float* A, __global const float* B, __global float* C, const int n) {
  const int base = get_global_id(0) * KF_ITEMS;
  if (base + KF_ITEMS <= n) {
    for (int j = 0; j < KF_ITEMS; j += 4) {
      if (base + 4 * j + 4 <= n) vstore4(vload4(j, A + base) + vload4(j, B + base), j, C + base);
    }
  } else {
    for (int i = base; i < n; ++i) C[i] = A[i] + B[i];
  }
}
