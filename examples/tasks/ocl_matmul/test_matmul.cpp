// Test program of the ocl_matmul task (KernelFoundry task SDK). The candidate is matmul.cl (kernel `matmul`,
// global size n x n; KF_LOCAL_SIZE defined at build time sets a 2-D local size), the reference a plain C++
// loop. Runtime hyperparameter: {"n": size} (default 512, a multiple of 16). OpenCL build logs and error
// names are reported in the failure message (kernelfoundry/sdk/task_sdk_opencl.hpp).
#define KF_TASK_MAIN
#include "kernelfoundry/sdk/task_sdk.hpp"
#include "kernelfoundry/sdk/task_sdk_opencl.hpp"

#include <string>
#include <vector>

namespace {
namespace ocl = kf::sdk::ocl;

int Size() { return kf::sdk::runtime_params().value("n", 512); }

// n x n floats in [-1, 1] from a fixed-seed LCG (the same data for candidate and reference runs).
std::vector<float> Random(int n, unsigned seed) {
  std::vector<float> v(static_cast<size_t>(n) * static_cast<size_t>(n));
  for (auto& x : v) {
    seed = seed * 1103515245u + 12345u;
    x = static_cast<float>((seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
  return v;
}

std::vector<float> Reference(const std::vector<float>& a, const std::vector<float>& b, int n) {
  std::vector<float> c(a.size(), 0.0f);
  // The textbook i-j-k loop: one dot product per output element (what a "plain C++ reference" is).
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < n; ++k) acc += a[i * n + k] * b[k * n + j];
      c[i * n + j] = acc;
    }
  return c;
}

cl_kernel Kernel() {
  static cl_kernel k = ocl::MakeKernel(ocl::BuildProgramFromFile("matmul.cl"), "matmul");
  return k;
}

// The candidate's buffers and one launch of its kernel.
struct Launch {
  ocl::Buffer a, b, c;
  int n;
  Launch(const std::vector<float>& ha, const std::vector<float>& hb, int size)
      : a(ha), b(hb), c(ha.size(), CL_MEM_WRITE_ONLY), n(size) {}
  void operator()() const {
    cl_kernel k = Kernel();
    ocl::Check(clSetKernelArg(k, 0, sizeof(cl_mem), &a.mem()), "clSetKernelArg(A)");
    ocl::Check(clSetKernelArg(k, 1, sizeof(cl_mem), &b.mem()), "clSetKernelArg(B)");
    ocl::Check(clSetKernelArg(k, 2, sizeof(cl_mem), &c.mem()), "clSetKernelArg(C)");
    ocl::Check(clSetKernelArg(k, 3, sizeof(int), &n), "clSetKernelArg(n)");
    size_t global[2] = {static_cast<size_t>(n), static_cast<size_t>(n)};
    // A kernel with reqd_work_group_size gets exactly that local size; else KF_LOCAL_SIZE or the runtime's.
    size_t local[3] = {0, 0, 0};
    ocl::Check(clGetKernelWorkGroupInfo(k, ocl::GetDevice().id, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof local,
                                        local, nullptr),
               "clGetKernelWorkGroupInfo");
#ifdef KF_LOCAL_SIZE
    if (local[0] == 0) local[0] = local[1] = KF_LOCAL_SIZE;
#endif
    ocl::Check(clEnqueueNDRangeKernel(ocl::GetDevice().queue, k, 2, nullptr, global, local[0] ? local : nullptr, 0,
                                      nullptr, nullptr),
               "clEnqueueNDRangeKernel(matmul)");
  }
};

std::vector<float> Run(const std::vector<float>& a, const std::vector<float>& b, int n) {
  if (kf::sdk::use_reference()) return Reference(a, b, n);
  Launch l(a, b, n);
  l();
  return l.c.Read();
}

}  // namespace

KF_TEST(test_output_shapes_match) {
  const int n = 16;
  auto a = Random(n, 1), b = Random(n, 2);
  std::vector<float> c = Run(a, b, n);
  if (c.size() != a.size()) throw kf::sdk::Failure("output has the wrong number of elements");
}

KF_TEST(test_values_match) {
  const int n = Size();
  auto a = Random(n, 3), b = Random(n, 4);
  kf::sdk::assert_allclose(Run(a, b, n), Reference(a, b, n), 1e-3, 0.01);
}

KF_BENCHMARK(bench_matmul) {
  const int n = Size();
  auto a = Random(n, 5), b = Random(n, 6);
  if (kf::sdk::use_reference()) {
    volatile float sink = 0;
    kf::sdk::measure_runtime([&] { sink = Reference(a, b, n)[0]; });
    (void)sink;
    return;
  }
  Launch l(a, b, n);
  kf::sdk::measure_runtime([&] { l(); }, [] { ocl::Finish(); });
}
