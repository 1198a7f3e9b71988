// kf validate's checks as one JSON document, for kf mcp's validate_task (implemented in cmd_validate.cc).
#pragma once

#include <string>

#include "kernelfoundry/json.hpp"

namespace kf::cli {

/// {"task", "valid", "problems", "harness", "checks", "correctness_tests", "performance_tests"}; with `run` (and
/// no problem) also the reference's own run ("reference_passes", "reference_status", "reference_log" when it
/// fails) and the low-signal check ("low_signal": [{"test", "accepts": "zeros"|"constant"}]). Nothing is
/// recorded. Throws kf::Error for input that cannot be read.
Json ValidateTaskJson(const std::string& path, bool run);

}  // namespace kf::cli
