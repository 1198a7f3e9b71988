// The pytest harness (reference-format tasks). Internal to the harness module; see harness.hpp.
#pragma once

#include <memory>

#include "kernelfoundry/harness.hpp"

namespace kf {

/// The pytest harness: build hooks through `python -m kernelfoundry.build_target`, tests through pytest
/// with the kernelfoundry plugin, which reports through the result pipe (--kf-result-fd).
std::unique_ptr<Harness> MakePytestHarness();

}  // namespace kf
