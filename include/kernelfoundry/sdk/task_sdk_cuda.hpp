// CUDA helpers for native task test programs (header-only; include after kernelfoundry/sdk/task_sdk.hpp in a .cu
// file compiled by nvcc).
//
// A CUDA task must build on machines without a GPU (CI, laptops) and say so when it cannot run there:
// RequireDevice() KF_SKIPs the test with "no CUDA device: <runtime's reason>", so the pipeline reports the
// evaluation as skipped rather than failed. Runtime errors are thrown with the CUDA error name and string
// (e.g. "kernel launch failed: cudaErrorInvalidConfiguration (invalid configuration argument)").
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernelfoundry/sdk/task_sdk.hpp"

namespace kf::sdk::cuda {

/// Throws std::runtime_error "<what> failed: <cudaErrorName> (<cudaErrorString>)" unless `err` is cudaSuccess.
inline void Check(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(what + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
}

/// KF_SKIPs the calling test when no CUDA device is usable (no driver, no GPU, or CUDA_VISIBLE_DEVICES
/// hides them); otherwise selects device 0. Cheap after the first call.
inline void RequireDevice() {
  static const std::string reason = [] {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(err);
    if (count == 0) return std::string("no CUDA device: the driver reports 0 devices");
    err = cudaSetDevice(0);
    if (err != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(err);
    return std::string();
  }();
  if (!reason.empty()) KF_SKIP(reason);
}

/// Checks the last kernel launch (configuration errors) — call right after <<<...>>>.
inline void CheckLaunch(const std::string& kernel) { Check(cudaGetLastError(), kernel + " launch"); }

/// Waits for the device and surfaces asynchronous kernel errors (the measure_runtime sync hook).
inline void Sync() { Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

/// A device array of `count` T, optionally initialised from host data; freed on destruction.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    Check(cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T)), "cudaMalloc");
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    Check(cudaMemcpy(ptr_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy(host->device)");
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr_); }
  T* get() const { return ptr_; }
  /// Copies the whole array back (synchronous).
  std::vector<T> Read() const {
    std::vector<T> out(count_);
    Check(cudaMemcpy(out.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy(device->host)");
    return out;
  }

 private:
  size_t count_;
  T* ptr_ = nullptr;
};

}  // namespace kf::sdk::cuda
