// Test program of the ocl_vector_add task (KernelFoundry task SDK). The candidate is vector_add.cl (kernel
// `vector_add`); it declares `#define KF_ITEMS k` (elements per work-item) and is launched on ceil(n / k)
// work-items. The reference is a plain C++ loop. Runtime hyperparameter: {"n": elements} (default 4,000,037:
// odd on purpose, so tails are exercised).
#define KF_TASK_MAIN
#include "kernelfoundry/sdk/task_sdk.hpp"
#include "kernelfoundry/sdk/task_sdk_opencl.hpp"

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {
namespace ocl = kf::sdk::ocl;

constexpr const char* kSource = "vector_add.cl";

int Size() { return kf::sdk::runtime_params().value("n", 4000037); }

// The candidate's KF_ITEMS (elements per work-item) from its `#define KF_ITEMS <k>` line.
int ItemsPerWorkItem() {
  std::ifstream in(kSource);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(R"(#define\s+KF_ITEMS\s+([0-9]+))")))
    throw kf::sdk::Failure(std::string(kSource) + " must `#define KF_ITEMS <elements per work-item>`");
  int k = std::stoi(m[1].str());
  if (k < 1 || k > 4096) throw kf::sdk::Failure("KF_ITEMS must be in [1, 4096], got " + m[1].str());
  return k;
}

std::vector<float> Random(int n, unsigned seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    seed = seed * 1103515245u + 12345u;
    x = static_cast<float>((seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
  return v;
}

// The reference: what any C++ programmer writes first.
void Reference(const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c) {
  for (size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
}

struct Launch {
  ocl::Buffer a, b, c;
  int n;
  cl_kernel k;
  size_t global;
  Launch(const std::vector<float>& ha, const std::vector<float>& hb)
      : a(ha), b(hb), c(ha.size(), CL_MEM_WRITE_ONLY), n(static_cast<int>(ha.size())) {
    static cl_kernel kernel = ocl::MakeKernel(ocl::BuildProgramFromFile(kSource), "vector_add");
    k = kernel;
    const size_t items = static_cast<size_t>(ItemsPerWorkItem());
    global = (static_cast<size_t>(n) + items - 1) / items;
    size_t local[3] = {0, 0, 0};
    ocl::Check(clGetKernelWorkGroupInfo(k, ocl::GetDevice().id, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof local,
                                        local, nullptr),
               "clGetKernelWorkGroupInfo");
    if (local[0]) global = (global + local[0] - 1) / local[0] * local[0];  // a multiple of the required size
    local_ = local[0];
  }
  void operator()() const {
    ocl::Check(clSetKernelArg(k, 0, sizeof(cl_mem), &a.mem()), "clSetKernelArg(A)");
    ocl::Check(clSetKernelArg(k, 1, sizeof(cl_mem), &b.mem()), "clSetKernelArg(B)");
    ocl::Check(clSetKernelArg(k, 2, sizeof(cl_mem), &c.mem()), "clSetKernelArg(C)");
    ocl::Check(clSetKernelArg(k, 3, sizeof(int), &n), "clSetKernelArg(n)");
    ocl::Check(clEnqueueNDRangeKernel(ocl::GetDevice().queue, k, 1, nullptr, &global, local_ ? &local_ : nullptr, 0,
                                      nullptr, nullptr),
               "clEnqueueNDRangeKernel(vector_add)");
  }

 private:
  size_t local_ = 0;
};

std::vector<float> Run(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> c(a.size());
  if (kf::sdk::use_reference()) {
    Reference(a, b, c);
    return c;
  }
  Launch l(a, b);
  l();
  return l.c.Read();
}

}  // namespace

KF_TEST(test_output_shapes_match) {
  auto a = Random(1001, 1), b = Random(1001, 2);
  if (Run(a, b).size() != a.size()) throw kf::sdk::Failure("output has the wrong number of elements");
}

KF_TEST(test_values_match) {
  for (int n : {1, 17, 1000, Size()}) {
    auto a = Random(n, 3), b = Random(n, 4);
    std::vector<float> expected(a.size());
    Reference(a, b, expected);
    try {
      kf::sdk::assert_allclose(Run(a, b), expected, 1e-6, 1e-5);
    } catch (const kf::sdk::Failure& e) {
      throw kf::sdk::Failure("n=" + std::to_string(n) + ": " + e.what());
    }
  }
}

KF_BENCHMARK(bench_vector_add) {
  const int n = Size();
  auto a = Random(n, 5), b = Random(n, 6);
  if (kf::sdk::use_reference()) {
    std::vector<float> c(a.size());
    kf::sdk::measure_runtime([&] { Reference(a, b, c); });
    return;
  }
  Launch l(a, b);
  kf::sdk::measure_runtime([&] { l(); }, [] { ocl::Finish(); });
}
