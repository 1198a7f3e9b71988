// The keys of eval_config.timing (the paired timing's knobs, also --kf-paired-options of the pytest plugin): one
// table with each key's kind, reader, default and allowed range. Read by kf's config check and process plan
// (src/pipeline/test_stage.cc, paired_processes.cc) and, through kernelfoundry._measure.timing_defaults(), by the
// task-side pytest plugin (kernelfoundry.paired.DEFAULTS): a default or a key lives here and nowhere else.
// Compiled into the native task SDK as well (src/modules.txt): no fmt, no JSON.
#pragma once

#include <span>
#include <string_view>

namespace kf {

/// The JSON kind of a timing key's value.
enum class TimingKeyKind {
  kNumber,  ///< any JSON number
  kWhole,   ///< a JSON integer
  kBool,    ///< true or false
};

/// Who reads a timing key (and so checks it).
enum class TimingKeyReader {
  kLoop,      ///< the paired loop and its verdict: PairedOptions (PairedOptionsFromJson, ranges in Validate())
  kPlugin,    ///< only the task-side pytest plugin (input value sets, output checks): range checked from this table
  kPipeline,  ///< only kf's test stage (how many timed processes run); never passed to a test process
};

/// One key of eval_config.timing.
struct TimingKey {
  std::string_view name;
  TimingKeyKind kind;
  TimingKeyReader reader;
  double default_value;       ///< the value when the config does not set the key; NaN: derived (see the key)
  double low, high;           ///< the allowed range, both ends included (checked here for kPlugin keys)
  std::string_view expected;  ///< what a value out of range is told it should be ("a number from 0 to 0.5")
};

/// Every key of eval_config.timing, in a fixed order.
std::span<const TimingKey> TimingKeys();

/// The key called `name`, or nullptr when there is none.
const TimingKey* FindTimingKey(std::string_view name);

/// The default of the key called `name`. Throws kf::Error(kInvalidArgument, field = name) for an unknown key or
/// one without a fixed default.
double TimingDefault(std::string_view name);

}  // namespace kf
