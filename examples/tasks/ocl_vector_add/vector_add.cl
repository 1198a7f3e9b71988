// ocl_vector_add kernel: C[i] = A[i] + B[i] for i < n (float32). The test program launches a 1-D range of
// ceil(n / KF_ITEMS) work-items (KF_ITEMS, a #define in this file, is how many elements one work-item handles;
// 1 here), with the local size from reqd_work_group_size when the kernel declares one, else the runtime's.
// OpenCL C 1.2.
// [EVOLVE_START]
#define KF_ITEMS 1
__kernel void vector_add(__global const float* A, __global const float* B, __global float* C, const int n) {
  const int i = get_global_id(0);
  if (i < n) C[i] = A[i] + B[i];
}
// [EVOLVE_END]
