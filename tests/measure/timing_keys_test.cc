// The one table of eval_config.timing's keys (kernelfoundry/timing_keys.hpp) against its readers.
#include "kernelfoundry/timing_keys.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/paired_wire.hpp"

namespace kf {
namespace {

// Every key the table gives to the loop is one PairedOptionsFromJson reads: a value of the wrong type is refused
// naming that key (a key it ignored would pass).
TEST(TimingKeys, EveryLoopKeyIsReadByPairedOptionsFromJson) {
  int loop_keys = 0;
  for (const TimingKey& k : TimingKeys()) {
    if (k.reader != TimingKeyReader::kLoop) continue;
    ++loop_keys;
    const std::string name(k.name);
    try {
      (void)PairedOptionsFromJson(Json{{name, "not a number"}});
      ADD_FAILURE() << name << " is not read by PairedOptionsFromJson";
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), name);
    }
  }
  EXPECT_EQ(loop_keys, 14);
}

// The loop's defaults are valid options, and they are what a test process runs with (not PairedOptions{}'s own).
TEST(TimingKeys, TheLoopDefaultsAreValidOptions) {
  Json defaults = Json::object();
  for (const TimingKey& k : TimingKeys()) {
    if (k.reader != TimingKeyReader::kLoop) continue;
    ASSERT_FALSE(std::isnan(k.default_value)) << k.name;
    if (k.kind == TimingKeyKind::kWhole) {
      defaults[std::string(k.name)] = static_cast<int64_t>(k.default_value);
    } else {
      defaults[std::string(k.name)] = k.default_value;
    }
  }
  const PairedOptions o = PairedOptionsFromJson(defaults);
  EXPECT_EQ(o.budget_s, 20.0);
  EXPECT_EQ(o.seed, 20261130u);
  EXPECT_EQ(o.target_rel_half_width, 0.02);
  EXPECT_EQ(o.after_return_cpu_ratio, 0.25);
}

TEST(TimingKeys, NamesAreUniqueAndLookupsWork) {
  std::set<std::string_view> names;
  for (const TimingKey& k : TimingKeys()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name;
    EXPECT_EQ(FindTimingKey(k.name), &k);
    if (k.reader != TimingKeyReader::kLoop) {
      EXPECT_FALSE(k.expected.empty()) << k.name << " is range-checked from the table and needs its words";
      EXPECT_LE(k.low, k.high) << k.name;
    }
  }
  EXPECT_EQ(FindTimingKey("mode"), nullptr);  // removed mechanisms are not keys
  EXPECT_EQ(TimingDefault("value_sets"), 4);
  EXPECT_EQ(TimingDefault("processes"), 4);
  EXPECT_THROW(TimingDefault("max_processes"), Error);  // derived: 6 x processes
  EXPECT_THROW(TimingDefault("no_such_key"), Error);
}

}  // namespace
}  // namespace kf
