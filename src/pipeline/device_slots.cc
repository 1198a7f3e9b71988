// DeviceSlots (kernelfoundry/device_slots.hpp): a readers-writer lock per device with writer preference.
#include "kernelfoundry/device_slots.hpp"

#include <utility>

namespace kf {

DeviceSlots::Lease::Lease(Lease&& other) noexcept
    : slots_(std::exchange(other.slots_, nullptr)), held_(std::move(other.held_)) {}

DeviceSlots::Lease& DeviceSlots::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    slots_ = std::exchange(other.slots_, nullptr);
    held_ = std::move(other.held_);
  }
  return *this;
}

DeviceSlots::Lease::~Lease() { Release(); }

void DeviceSlots::Lease::Release() {
  if (slots_ == nullptr) return;
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) slots_->ReleaseOne(it->first, it->second);
  held_.clear();
  slots_ = nullptr;
}

std::string DeviceSlots::DeviceOf(const std::string& arch) {
  if (arch.empty() || arch == "cpu" || arch == "native-cpu") return "host";
  return "gpu:" + arch;
}

bool DeviceSlots::Acquire(const std::string& device, bool exclusive, const std::stop_token& stop) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot& slot = slots_[device];
  if (exclusive) {
    ++slot.waiting_writers;
    const bool ok = cv_.wait(lock, stop, [&] { return !slot.writer && slot.readers == 0; });
    --slot.waiting_writers;
    if (!ok) {
      cv_.notify_all();  // readers held back by our waiting may go on
      return false;
    }
    slot.writer = true;
    return true;
  }
  const bool ok = cv_.wait(lock, stop, [&] { return !slot.writer && slot.waiting_writers == 0; });
  if (!ok) return false;
  ++slot.readers;
  return true;
}

void DeviceSlots::ReleaseOne(const std::string& device, bool exclusive) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& slot = slots_[device];
    if (exclusive) {
      slot.writer = false;
    } else if (slot.readers > 0) {
      --slot.readers;
    }
  }
  cv_.notify_all();
}

DeviceSlots::Lease DeviceSlots::Take(const std::vector<std::pair<std::string, bool>>& wanted,
                                     const std::stop_token& stop) {
  Lease lease;
  lease.slots_ = this;
  for (const auto& [device, exclusive] : wanted) {
    if (!Acquire(device, exclusive, stop)) {
      lease.Release();
      return Lease();
    }
    lease.held_.emplace_back(device, exclusive);
  }
  return lease;
}

DeviceSlots::Lease DeviceSlots::ForBuild(const std::stop_token& stop) { return Take({{"host", false}}, stop); }

DeviceSlots::Lease DeviceSlots::ForTest(const std::string& arch, const std::stop_token& stop) {
  const std::string device = DeviceOf(arch);
  if (device == "host") return Take({{"host", false}}, stop);
  return Take({{"host", false}, {device, false}}, stop);
}

DeviceSlots::Lease DeviceSlots::ForTiming(const std::string& arch, const std::stop_token& stop) {
  const std::string device = DeviceOf(arch);
  if (device == "host") return Take({{"host", true}}, stop);
  return Take({{"host", false}, {device, true}}, stop);
}

std::pair<int, int> DeviceSlots::Holders(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  const Slot& slot = slots_[device];
  return {slot.readers, slot.writer ? 1 : 0};
}

DeviceSlots& ProcessDeviceSlots() {
  static DeviceSlots slots;
  return slots;
}

}  // namespace kf
