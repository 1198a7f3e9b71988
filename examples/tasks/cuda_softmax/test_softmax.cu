// Test program of the cuda_softmax task (KernelFoundry task SDK, built by nvcc). The candidate is
// softmax_kernel.h (launch_softmax); the reference is a plain C++ softmax on the host. On a machine without
// a CUDA device every test reports "skipped: no CUDA device: …" (the build still proves the candidate
// compiles for the task's gpu_arch). Runtime hyperparameters: {"rows": R, "cols": C} (default 4096 x 1024).
#define KF_TASK_MAIN
#include "kernelfoundry/sdk/task_sdk.hpp"
#include "kernelfoundry/sdk/task_sdk_cuda.hpp"

#include <cmath>
#include <vector>

#include "softmax_kernel.h"

namespace {
namespace cu = kf::sdk::cuda;

int Rows() { return kf::sdk::runtime_params().value("rows", 4096); }
int Cols() { return kf::sdk::runtime_params().value("cols", 1024); }

std::vector<float> Random(size_t n, unsigned seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 1103515245u + 12345u;
    x = static_cast<float>((seed >> 8) % 20001) / 1000.0f - 10.0f;  // [-10, 10]: exp overflows without the max
  }
  return v;
}

std::vector<float> Reference(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> y(x.size());
  for (int r = 0; r < rows; ++r) {
    const float* in = &x[static_cast<size_t>(r) * cols];
    float* out = &y[static_cast<size_t>(r) * cols];
    float m = -INFINITY;
    for (int j = 0; j < cols; ++j) m = std::fmax(m, in[j]);
    double sum = 0;
    for (int j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(in[j] - m));
    for (int j = 0; j < cols; ++j) out[j] = static_cast<float>(std::exp(static_cast<double>(in[j] - m)) / sum);
  }
  return y;
}

std::vector<float> RunCandidate(const std::vector<float>& x, int rows, int cols) {
  cu::DeviceArray<float> dx(x), dy(x.size());
  launch_softmax(dx.get(), dy.get(), rows, cols);
  cu::CheckLaunch("launch_softmax");
  cu::Sync();
  return dy.Read();
}

}  // namespace

KF_TEST(test_output_shapes_match) {
  cu::RequireDevice();
  auto x = Random(3 * 37, 1);
  if (RunCandidate(x, 3, 37).size() != x.size()) throw kf::sdk::Failure("output has the wrong number of elements");
}

KF_TEST(test_values_match) {
  cu::RequireDevice();
  for (auto [rows, cols] : {std::pair{1, 1}, std::pair{7, 33}, std::pair{Rows(), Cols()}}) {
    auto x = Random(static_cast<size_t>(rows) * cols, 3);
    kf::sdk::assert_allclose(RunCandidate(x, rows, cols), Reference(x, rows, cols), 1e-7, 1e-3);
  }
}

// Timed with rotating inputs (kf::sdk::TimedData): in paired mode each round loads one of kSets value sets into
// both sides' inputs (outside the timed window) and checked rounds compare the candidate's output with the
// reference's for the same values, so a candidate that caches its output (e.g. keyed on the input pointer,
// which never changes) is caught (output_changed_under_timing). Every window ends after cudaDeviceSynchronize
// (the SDK adds it), so work left on another stream is timed too.
KF_BENCHMARK(bench_softmax) {
  constexpr int kSets = 4;
  const int rows = Rows(), cols = Cols();
  const size_t n = static_cast<size_t>(rows) * cols;
  std::vector<std::vector<float>> sets;
  for (int k = 0; k < kSets; ++k) sets.push_back(Random(n, 5 + 7919u * static_cast<unsigned>(k)));
  auto widen = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  if (kf::sdk::use_reference()) {
    std::vector<float> x = sets[0], y;
    kf::sdk::TimedData data{kSets, [&](int k) { x = sets[static_cast<size_t>(k)]; }, [&] { return widen(y); }};
    kf::sdk::measure_runtime([&] { y = Reference(x, rows, cols); }, {}, data);
    return;
  }
  cu::RequireDevice();
  cu::DeviceArray<float> dx(sets[0]), dy(n);
  kf::sdk::TimedData data{kSets,
                          [&](int k) {
                            cu::Check(cudaMemcpy(dx.get(), sets[static_cast<size_t>(k)].data(), n * sizeof(float),
                                                 cudaMemcpyHostToDevice),
                                      "cudaMemcpy (inputs)");
                          },
                          [&] { return widen(dy.Read()); }};
  kf::sdk::measure_runtime([&] { launch_softmax(dx.get(), dy.get(), rows, cols); }, [] { cu::Sync(); }, data);
  cu::CheckLaunch("launch_softmax");
}
