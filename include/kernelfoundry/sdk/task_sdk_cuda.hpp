// CUDA helpers for native task test programs (header-only; include after kernelfoundry/sdk/task_sdk.hpp in a .cu
// file compiled by nvcc).
//
// A CUDA task must build on machines without a GPU (CI, laptops) and say so when it cannot run there:
// RequireDevice() KF_SKIPs the test with "no CUDA device: <runtime's reason>", so the pipeline reports the
// evaluation as skipped rather than failed. Runtime errors are thrown with the CUDA error name and string
// (e.g. "kernel launch failed: cudaErrorInvalidConfiguration (invalid configuration argument)").
//
// Timing (device_timing.hpp): including this header installs the CUDA device hooks of the SDK's timing loops at
// static initialisation (no CUDA call until a measurement runs): every timed window ends after
// cudaDeviceSynchronize (all streams), eval_config.timing.l2_flush overwrites 2 × cudaDevAttrL2CacheSize bytes
// before each sample, and the result document's conditions name the device, the driver (NVML, loaded with
// dlopen: nothing to link) and the SM/memory clocks before and after.
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

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

/// NVML, loaded at run time from the driver (libnvidia-ml.so.1): driver version and current clocks.
class Nvml {
 public:
  /// The library, initialised once; null when the driver has none (then `why()` says so).
  static Nvml& Get() {
    static Nvml nvml;
    return nvml;
  }
  const std::string& why() const { return why_; }
  /// The driver version, or empty.
  std::string Driver() const {
    char buf[96] = {};
    return ok() && driver_(buf, sizeof buf) == 0 ? std::string(buf) : std::string();
  }
  /// {"sm_mhz", "mem_mhz"} of CUDA device `device` now (matched by PCI bus id), or {"error": why}.
  nlohmann::ordered_json Clocks(int device) const {
    if (!ok()) return {{"error", why_}};
    char bus[32] = {};
    void* handle = nullptr;
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess || by_bus_(bus, &handle) != 0) {
      return {{"error", std::string("no NVML device for PCI bus ") + bus}};
    }
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (auto [key, type] : {std::pair<const char*, int>{"sm_mhz", 1}, {"mem_mhz", 2}}) {  // NVML_CLOCK_SM, _MEM
      unsigned mhz = 0;
      out[key] = clock_(handle, type, &mhz) == 0 ? nlohmann::ordered_json(mhz) : nlohmann::ordered_json();
    }
    return out;
  }

 private:
  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      why_ = std::string("NVML unavailable: ") + dlerror();
      return;
    }
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    driver_ = reinterpret_cast<int (*)(char*, unsigned)>(dlsym(lib, "nvmlSystemGetDriverVersion"));
    by_bus_ = reinterpret_cast<int (*)(const char*, void**)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    if (init == nullptr || driver_ == nullptr || by_bus_ == nullptr || clock_ == nullptr) {
      why_ = "NVML lacks the functions kf reads";
    } else if (const int rc = init(); rc != 0) {
      why_ = "nvmlInit_v2 failed (" + std::to_string(rc) + ")";
    }
  }
  bool ok() const { return why_.empty(); }
  std::string why_;
  int (*driver_)(char*, unsigned) = nullptr;
  int (*by_bus_)(const char*, void**) = nullptr;
  int (*clock_)(void*, int, unsigned*) = nullptr;
};

/// True when a CUDA device is usable in this process (asked once).
inline bool DeviceUsable() {
  static const bool usable = [] {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }();
  return usable;
}

/// The SDK's device hooks for CUDA (device_timing.hpp): installed once, at static initialisation.
inline bool InstallDeviceHooks() {
  DeviceHooks& d = Device();
  d.in_use = DeviceUsable;
  d.synchronize = [] { Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (all streams)"); };
  d.l2_bytes = [] {
    int dev = 0, bytes = 0;
    Check(cudaGetDevice(&dev), "cudaGetDevice");
    Check(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute(L2CacheSize)");
    return static_cast<size_t>(bytes);
  };
  d.flusher = [](size_t bytes) -> std::function<void()> {
    void* buffer = nullptr;  // kept for the life of the process (one per measurement at most)
    Check(cudaMalloc(&buffer, bytes), "cudaMalloc (L2 flush buffer)");
    return [buffer, bytes] { Check(cudaMemsetAsync(buffer, 0, bytes, nullptr), "cudaMemsetAsync (L2 flush)"); };
  };
  d.describe = [] {
    int dev = 0, driver = 0, runtime = 0, l2 = 0, sms = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, dev);
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    const std::string nvml_driver = Nvml::Get().Driver();
    nlohmann::ordered_json out = {{"type", "cuda"}, {"name", std::string(p.name)},
                                  {"capability", std::to_string(major) + "." + std::to_string(minor)},
                                  {"memory_bytes", static_cast<unsigned long long>(p.totalGlobalMem)},
                                  {"l2_bytes", l2}, {"multiprocessors", sms},
                                  {"driver", nvml_driver.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(nvml_driver)},
                                  {"cuda_driver_api", driver}, {"cuda_runtime", runtime}};
    if (!Nvml::Get().why().empty()) out["nvml"] = Nvml::Get().why();
    return out;
  };
  d.clocks = [] {
    int dev = 0;
    cudaGetDevice(&dev);
    return Nvml::Get().Clocks(dev);
  };
  return true;
}
[[maybe_unused]] inline const bool kDeviceHooksInstalled = InstallDeviceHooks();

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
