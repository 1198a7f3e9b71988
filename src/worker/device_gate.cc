// DeviceGate over a DeviceSlots, and the GatedHarness that takes its leases (see worker.hpp,
// gated_harness.hpp).
#include "worker/gated_harness.hpp"

namespace kf {

namespace {

class SlotsGate final : public DeviceGate {
 public:
  explicit SlotsGate(DeviceSlots& slots) : slots_(slots) {}

  std::unique_ptr<Lease> Acquire(DeviceUse use, const std::string& arch, const std::stop_token& stop) override {
    DeviceSlots::Lease lease;
    switch (use) {
      case DeviceUse::kBuild: lease = slots_.ForBuild(stop); break;
      case DeviceUse::kTest: lease = slots_.ForTest(arch, stop); break;
      case DeviceUse::kTiming: lease = slots_.ForTiming(arch, stop); break;
    }
    if (!lease.held()) return nullptr;
    return std::make_unique<Held>(std::move(lease));
  }

 private:
  struct Held final : Lease {
    explicit Held(DeviceSlots::Lease l) : lease(std::move(l)) {}
    DeviceSlots::Lease lease;
  };
  DeviceSlots& slots_;
};

constexpr const char* kCanceledWaiting = "canceled while waiting for the device";

}  // namespace

const char* DeviceUseName(DeviceUse use) {
  switch (use) {
    case DeviceUse::kBuild: return "build";
    case DeviceUse::kTest: return "test";
    case DeviceUse::kTiming: return "timing";
  }
  return "build";
}

std::optional<DeviceUse> DeviceUseFromName(std::string_view name) {
  for (DeviceUse u : {DeviceUse::kBuild, DeviceUse::kTest, DeviceUse::kTiming}) {
    if (name == DeviceUseName(u)) return u;
  }
  return std::nullopt;
}

std::unique_ptr<DeviceGate> MakeSlotsGate(DeviceSlots& slots) { return std::make_unique<SlotsGate>(slots); }

namespace worker_internal {

namespace {

PhaseRun CanceledRun() {
  PhaseRun r;
  r.result = ProcessResult::Create(-1, "", "", kCanceledWaiting);
  r.verdict = Classification{EvalStatus::kCanceled, kCanceledWaiting};
  r.reason = TerminationReason::kCanceled;
  return r;
}

}  // namespace

BuildRun GatedHarness::Build(const BuildRequest& request) const {
  std::unique_ptr<DeviceGate::Lease> lease = gate_.Acquire(DeviceUse::kBuild, request.gpu_arch, request.stop);
  if (!lease) {
    BuildRun b;
    b.result.result = ProcessResult::Create(-1, "", "", kCanceledWaiting);
    b.reason = TerminationReason::kCanceled;
    return b;
  }
  return inner_.Build(request);
}

PhaseRun GatedHarness::Correctness(const TestRequest& request) const {
  std::unique_ptr<DeviceGate::Lease> lease = gate_.Acquire(DeviceUse::kTest, request.gpu_arch, request.stop);
  if (!lease) return CanceledRun();
  return inner_.Correctness(request);
}

PhaseRun GatedHarness::Performance(const TestRequest& request) const {
  std::unique_ptr<DeviceGate::Lease> lease = gate_.Acquire(DeviceUse::kTiming, request.gpu_arch, request.stop);
  if (!lease) return CanceledRun();
  return inner_.Performance(request);
}

}  // namespace worker_internal
}  // namespace kf
