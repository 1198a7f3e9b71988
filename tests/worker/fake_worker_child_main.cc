// kf_fake_worker_child: `kf worker-child` with the RecordingHarness (fake_stage_util.hpp) instead of the
// task's harness, configured from the environment. Worker tests start it as the job process of their slots
// to check what crosses the process boundary (device leases, stop requests, kf_verdict) without real builds.
#include "kernelfoundry/worker.hpp"
#include "worker/fake_stage_util.hpp"

int main() {
  static const kf::testing::RecordingHarness harness = kf::testing::RecordingHarness::FromEnvironment();
  return kf::RunWorkerChild(&harness);
}
