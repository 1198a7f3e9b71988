// Test program of the ocl_matmul task (KernelFoundry task SDK). The candidate is matmul.cl (kernel `matmul`,
// global size n x n; KF_LOCAL_SIZE defined at build time sets a 2-D local size), the reference a C++ loop.
// Runtime hyperparameter: {"n": size} (default 256, a multiple of 16). OpenCL build logs and error codes are
// reported in the failure message.
#define KF_TASK_MAIN
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernelfoundry/task_sdk.hpp"

namespace {

void Check(cl_int err, const char* what) {
  if (err != CL_SUCCESS) throw std::runtime_error(std::string(what) + " failed with OpenCL error " + std::to_string(err));
}

// One OpenCL context/queue/kernel for the whole run.
struct Ocl {
  cl_context ctx = nullptr;
  cl_command_queue queue = nullptr;
  cl_kernel kernel = nullptr;
  Ocl() {
    cl_platform_id platform;
    cl_uint count = 0;
    Check(clGetPlatformIDs(1, &platform, &count), "clGetPlatformIDs");
    if (count == 0) KF_SKIP("no OpenCL platform");
    cl_device_id dev;
    Check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &dev, nullptr), "clGetDeviceIDs");
    cl_int err = 0;
    ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
    Check(err, "clCreateContext");
    queue = clCreateCommandQueue(ctx, dev, 0, &err);
    Check(err, "clCreateCommandQueue");
    std::ifstream in("matmul.cl");
    if (!in) throw std::runtime_error("cannot read matmul.cl");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string src = ss.str();
    const char* p = src.c_str();
    cl_program prog = clCreateProgramWithSource(ctx, 1, &p, nullptr, &err);
    Check(err, "clCreateProgramWithSource");
    if (clBuildProgram(prog, 1, &dev, "-cl-std=CL1.2", nullptr, nullptr) != CL_SUCCESS) {
      size_t len = 0;
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &len);
      std::string log(len, '\0');
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, len, log.data(), nullptr);
      throw kf::sdk::Failure("OpenCL build of matmul.cl failed:\n" + log);
    }
    kernel = clCreateKernel(prog, "matmul", &err);
    Check(err, "clCreateKernel(matmul)");
  }
};

Ocl& Cl() {
  static Ocl ocl;
  return ocl;
}

int Size() { return kf::sdk::runtime_params().value("n", 256); }

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

// Runs the candidate kernel: returns a callable that enqueues one launch, and a sync.
struct Launch {
  cl_mem a, b, c;
  int n;
  Launch(const std::vector<float>& ha, const std::vector<float>& hb, int size) : n(size) {
    cl_int err = 0;
    size_t bytes = ha.size() * sizeof(float);
    a = clCreateBuffer(Cl().ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, const_cast<float*>(ha.data()), &err);
    Check(err, "clCreateBuffer(A)");
    b = clCreateBuffer(Cl().ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, const_cast<float*>(hb.data()), &err);
    Check(err, "clCreateBuffer(B)");
    c = clCreateBuffer(Cl().ctx, CL_MEM_WRITE_ONLY, bytes, nullptr, &err);
    Check(err, "clCreateBuffer(C)");
  }
  void operator()() const {
    cl_kernel k = Cl().kernel;
    Check(clSetKernelArg(k, 0, sizeof(cl_mem), &a), "clSetKernelArg");
    Check(clSetKernelArg(k, 1, sizeof(cl_mem), &b), "clSetKernelArg");
    Check(clSetKernelArg(k, 2, sizeof(cl_mem), &c), "clSetKernelArg");
    Check(clSetKernelArg(k, 3, sizeof(int), &n), "clSetKernelArg");
    size_t global[2] = {static_cast<size_t>(n), static_cast<size_t>(n)};
    // A kernel with reqd_work_group_size gets exactly that local size; else KF_LOCAL_SIZE or the runtime's.
    size_t local[3] = {0, 0, 0};
    cl_device_id dev;
    Check(clGetCommandQueueInfo(Cl().queue, CL_QUEUE_DEVICE, sizeof dev, &dev, nullptr), "clGetCommandQueueInfo");
    Check(clGetKernelWorkGroupInfo(k, dev, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof local, local, nullptr),
          "clGetKernelWorkGroupInfo");
#ifdef KF_LOCAL_SIZE
    if (local[0] == 0) local[0] = local[1] = KF_LOCAL_SIZE;
#endif
    Check(clEnqueueNDRangeKernel(Cl().queue, k, 2, nullptr, global, local[0] ? local : nullptr, 0, nullptr, nullptr),
          "clEnqueueNDRangeKernel");
  }
  std::vector<float> Read() const {
    std::vector<float> out(static_cast<size_t>(n) * static_cast<size_t>(n));
    Check(clEnqueueReadBuffer(Cl().queue, c, CL_TRUE, 0, out.size() * sizeof(float), out.data(), 0, nullptr, nullptr),
          "clEnqueueReadBuffer");
    return out;
  }
};

std::vector<float> Run(const std::vector<float>& a, const std::vector<float>& b, int n) {
  if (kf::sdk::use_reference()) return Reference(a, b, n);
  Launch l(a, b, n);
  l();
  return l.Read();
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
  kf::sdk::measure_runtime([&] { l(); }, [&] { clFinish(Cl().queue); });
}
