// Never finishes: every work-item spins forever (the test run must hit its timeout and be killed).
__kernel void matmul(__global const float* A, __global const float* B, __global float* C, const int n) {
  volatile int spin = 1;
  while (spin) {
  }
  C[get_global_id(0)] = A[0] + B[0] + (float)n;
}
