// GatedHarness: a Harness whose builds and test runs first take a device lease from a DeviceGate (the
// worker's slots share one DeviceSlots this way, also across job processes). Internal to the worker module.
#pragma once

#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/worker.hpp"

namespace kf::worker_internal {

/// Wraps `inner`: Build holds DeviceUse::kBuild, Correctness kTest and Performance kTiming of the request's
/// arch for the whole call. A request cancelled while it waits for its lease returns a canceled run
/// (TerminationReason::kCanceled, verdict kCanceled) without calling `inner`. Both references must outlive
/// it. Thread-safe when `inner` is.
class GatedHarness final : public Harness {
 public:
  GatedHarness(const Harness& inner, DeviceGate& gate) : inner_(inner), gate_(gate) {}
  std::string_view Name() const override { return inner_.Name(); }
  BuildRun Build(const BuildRequest& request) const override;
  PhaseRun Correctness(const TestRequest& request) const override;
  PhaseRun Performance(const TestRequest& request) const override;

 private:
  const Harness& inner_;
  DeviceGate& gate_;
};

}  // namespace kf::worker_internal
