// The native SDK's timing on an asynchronous device (include/kernelfoundry/sdk/device_timing.hpp) with a fake
// device in place of CUDA (this machine has none; scripts/device-check.sh runs the real hooks): the paired loop's
// windows end after the whole-device sync, so work a candidate leaves on a "side stream" is timed; the L2 flush
// runs before every sample outside the windows with a buffer of 2 x L2; the conditions name the device, clocks
// before and after, sync, flush policy and timer; TimedData's rotating inputs catch an output cache.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernelfoundry/sdk/task_sdk.hpp"

namespace kf {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kWorkMs = 2.0;  // what one kernel call keeps the fake device busy for

/// A device whose work runs asynchronously: Launch queues work that ends `ms` after the queue is free and
/// returns at once (a launch on a side stream); Synchronize waits until the queue is empty (as
/// cudaDeviceSynchronize waits for every stream). Every call is logged in `events`.
struct FakeDevice {
  std::vector<std::string> events;
  Clock::time_point busy_until = Clock::now();
  size_t l2 = 1 << 20, flushed_bytes = 0;
  double flush_ms = 0;
  void Launch(double ms) {
    busy_until = std::max(busy_until, Clock::now()) +
                 std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
  }
  void Synchronize() {
    events.push_back("sync");
    std::this_thread::sleep_until(busy_until);
  }
  sdk::DeviceHooks Hooks() {
    sdk::DeviceHooks h;
    h.in_use = [] { return true; };
    h.synchronize = [this] { Synchronize(); };
    h.l2_bytes = [this] { return l2; };
    h.flusher = [this](size_t bytes) -> std::function<void()> {
      flushed_bytes = bytes;
      return [this] {
        events.push_back("flush");
        Launch(flush_ms);
      };
    };
    h.describe = [] { return nlohmann::ordered_json{{"type", "fake"}, {"name", "Fake GPU"}, {"driver", "0.0"}}; };
    h.clocks = [] { return nlohmann::ordered_json{{"sm_mhz", 1980}, {"mem_mhz", 3201}}; };
    return h;
  }
};

/// Installs `dev` (or no device) and paired mode with `options` for one test; restores the SDK state after.
class SdkDevice : public ::testing::Test {
 protected:
  void Use(FakeDevice* dev, nlohmann::ordered_json options) {
    if (dev != nullptr) sdk::Device() = dev->Hooks();
    sdk::State& st = sdk::GetState();
    st.paired = true;
    st.paired_options = std::move(options);
    st.paired_records = nlohmann::ordered_json::object();
    st.current = "bench";
  }
  void TearDown() override {
    sdk::Device() = {};
    sdk::DeviceSeen() = nlohmann::ordered_json::object();
    sdk::GetState().paired = false;
    sdk::GetState().paired_options = nlohmann::ordered_json::object();
  }
  /// Runs `body` as a paired benchmark (both sides, as the test program does). Returns its paired record.
  nlohmann::ordered_json RunPaired(void (*body)()) {
    const std::string error = sdk::RunPairedBody(sdk::TestCase{"bench", "performance", body});
    EXPECT_EQ(error, "");
    return sdk::GetState().paired_records["bench"];
  }
};

FakeDevice* g_dev = nullptr;
const nlohmann::ordered_json kQuick = {{"budget_s", 0.4}, {"min_rounds", 6}, {"warmup_min_rounds", 2}};

/// Both sides launch kWorkMs on a side stream and return at once; their own sync waits for nothing.
void SideStreamBody() {
  sdk::measure_runtime(
      [] {
        g_dev->events.push_back("call");
        g_dev->Launch(kWorkMs);
      },
      [] {});
}

/// True when every run of calls (a window's calls) is followed directly by a sync.
bool WindowsEndWithSync(const std::vector<std::string>& events) {
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i] == "call" && (i + 1 >= events.size() || (events[i + 1] != "call" && events[i + 1] != "sync"))) {
      return false;
    }
  }
  return !events.empty() && events.back() != "call";
}

double MinOf(const nlohmann::ordered_json& list) {
  double m = 1e300;
  for (const auto& v : list) m = std::min(m, v.get<double>());
  return m;
}

TEST_F(SdkDevice, SideStreamWorkIsCountedByTheWholeDeviceSync) {
  FakeDevice dev;
  g_dev = &dev;
  Use(&dev, kQuick);
  const nlohmann::ordered_json r = RunPaired(SideStreamBody);
  ASSERT_TRUE(r["paired"].get<bool>()) << r.dump();
  EXPECT_GE(r["rounds"].get<int>(), 6);
  // Each call queued 2 ms its own sync never waits for; the loop's device sync does.
  EXPECT_GE(MinOf(r["candidate_ms"]), kWorkMs * 0.999) << r["candidate_ms"].dump();
  EXPECT_GE(MinOf(r["reference_ms"]), kWorkMs * 0.999);
  EXPECT_TRUE(WindowsEndWithSync(dev.events));
  const nlohmann::ordered_json c = sdk::DeviceConditions();
  EXPECT_EQ(c["name"], "Fake GPU");
  EXPECT_EQ(c["clocks_mhz"]["before"]["sm_mhz"], 1980);
  EXPECT_EQ(c["clocks_mhz"]["after"]["mem_mhz"], 3201);
  EXPECT_EQ(c["timer"], "host steady clock; each window ends after the device synchronisation");
  EXPECT_EQ(c["l2_flush"]["enabled"], false);
}

TEST_F(SdkDevice, WithoutADeviceTheSideStreamWorkIsMissed) {  // the counter-test: host program, same body
  FakeDevice dev;
  g_dev = &dev;
  Use(nullptr, kQuick);
  const nlohmann::ordered_json r = RunPaired(SideStreamBody);
  EXPECT_LT(MinOf(r["candidate_ms"]), kWorkMs / 2);
  EXPECT_EQ(std::count(dev.events.begin(), dev.events.end(), "sync"), 0);
  EXPECT_EQ(sdk::DeviceConditions()["type"], "host");
}

TEST_F(SdkDevice, L2FlushRunsBeforeEverySampleOutsideTheWindow) {
  FakeDevice dev;
  dev.flush_ms = 5;  // a slow flush: inside a window it would make that sample > 5 ms
  g_dev = &dev;
  nlohmann::ordered_json o = kQuick;
  o["l2_flush"] = true;
  Use(&dev, o);
  const nlohmann::ordered_json r = RunPaired(SideStreamBody);
  ASSERT_TRUE(r["paired"].get<bool>()) << r.dump();
  EXPECT_EQ(dev.flushed_bytes, 2 * dev.l2);
  EXPECT_EQ(r["calls_per_sample"], 1);
  int flushes = 0;
  for (size_t i = 0; i + 2 < dev.events.size(); ++i) {
    if (dev.events[i] != "flush") continue;
    ++flushes;  // flush, then the sync before t0 (waits for it), then the window's one call
    EXPECT_EQ(dev.events[i + 1], "sync");
    EXPECT_EQ(dev.events[i + 2], "call");
  }
  EXPECT_GE(flushes, 2 * r["rounds"].get<int>());
  EXPECT_LT(MinOf(r["candidate_ms"]), 5.0);
  const nlohmann::ordered_json c = sdk::DeviceConditions();
  EXPECT_EQ(c["l2_flush"]["enabled"], true);
  EXPECT_EQ(c["l2_flush"]["bytes"], 2 * dev.l2);
}

// TimedData: both sides compute y = 2x over rotating value sets; the candidate caches its first output (an
// output cache keyed on the input buffer, which never moves). The check of a checked round catches it.
struct Side {
  std::vector<std::vector<double>> sets{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}};
  std::vector<double> x, y;
  bool cached = false;
};

void RotatingBody(bool cheat) {
  // One Side per side: the paired loop calls both sides' lambdas from the candidate's thread.
  auto s = std::make_shared<Side>();
  const bool is_ref = sdk::use_reference();
  sdk::TimedData data{4, [s](int k) { s->x = s->sets[static_cast<size_t>(k)]; }, [s] { return s->y; }};
  sdk::measure_runtime(
      [s, cheat, is_ref] {
        if (cheat && !is_ref && s->cached) return;
        s->y.resize(s->x.size());
        for (size_t i = 0; i < s->x.size(); ++i) s->y[i] = 2 * s->x[i];
        s->cached = true;
      },
      {}, data);
}

TEST_F(SdkDevice, RotatingInputsPassAnHonestCandidateAndCatchAnOutputCache) {
  Use(nullptr, kQuick);
  nlohmann::ordered_json honest = RunPaired([] { RotatingBody(false); });
  EXPECT_TRUE(honest["status"] == "correct" || honest["status"] == "noisy") << honest.dump();
  EXPECT_EQ(honest["value_sets"], 4);
  nlohmann::ordered_json cheat = RunPaired([] { RotatingBody(true); });
  EXPECT_EQ(cheat["status"], "output_changed_under_timing") << cheat.dump();
  EXPECT_NE(cheat["detail"].get<std::string>().find("values differ from the reference's"), std::string::npos)
      << cheat.dump();
}

}  // namespace
}  // namespace kf
