// DeviceSlots — who may use a device while something is being timed.
//
// The reference keeps a process-wide lock so that GPU tests never overlap (spec §4.2, local mode). We
// generalise it to readers and writers per device: a timed phase holds its device EXCLUSIVELY; builds and
// untimed test phases hold devices SHARED. So, within one process (several concurrent Evaluate calls, batch
// mode, a worker with concurrency > 1), a timed phase never overlaps a build or another timed phase on the
// same device, while builds and correctness runs still run in parallel with each other.
//
// Devices are names: "host" (the CPUs: compilers, CPU kernels, the Python around a GPU kernel) and
// "gpu:<arch>" for an accelerator arch. Writer preference: once an exclusive request waits, new shared
// requests wait behind it, so a stream of builds cannot starve a timed phase. Leases are acquired in a fixed
// order (host first) by the helpers below, which avoids lock-order deadlocks.
//
// Thread-safe. Waiting is interruptible by a std::stop_token (the lease is then empty).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

namespace kf {

class DeviceSlots {
 public:
  /// What one acquisition holds; released on destruction. Movable.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();
    /// False when the wait was cancelled before everything was acquired.
    bool held() const { return slots_ != nullptr; }

   private:
    friend class DeviceSlots;
    DeviceSlots* slots_ = nullptr;
    std::vector<std::pair<std::string, bool>> held_;  ///< (device, exclusive), in acquisition order
    void Release();
  };

  DeviceSlots() = default;
  DeviceSlots(const DeviceSlots&) = delete;
  DeviceSlots& operator=(const DeviceSlots&) = delete;

  /// For a build: "host" shared.
  Lease ForBuild(const std::stop_token& stop = {});
  /// For an untimed test phase on `arch`: "host" shared, and the arch's device shared when it is not the host.
  Lease ForTest(const std::string& arch, const std::stop_token& stop = {});
  /// For a timed phase on `arch`: the arch's device exclusively ("host" exclusively for a CPU arch; for a GPU
  /// arch "host" shared plus "gpu:<arch>" exclusively).
  Lease ForTiming(const std::string& arch, const std::stop_token& stop = {});

  /// The device of an arch: "host" for "cpu" (and "", "native-cpu"), else "gpu:<arch>".
  static std::string DeviceOf(const std::string& arch);

  /// How many leases hold `device` now: (shared holders, exclusive holders). For tests and diagnostics.
  std::pair<int, int> Holders(const std::string& device);

 private:
  struct Slot {
    int readers = 0;
    bool writer = false;
    int waiting_writers = 0;
  };
  bool Acquire(const std::string& device, bool exclusive, const std::stop_token& stop);
  void ReleaseOne(const std::string& device, bool exclusive);
  Lease Take(const std::vector<std::pair<std::string, bool>>& wanted, const std::stop_token& stop);

  std::mutex mu_;
  std::condition_variable_any cv_;
  std::map<std::string, Slot> slots_;
};

/// The process-wide instance (what Evaluate uses unless EvaluateOptions names another).
DeviceSlots& ProcessDeviceSlots();

}  // namespace kf
