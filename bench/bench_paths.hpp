// This checkout's paths for the benchmarks. They are compiled into bench_paths.cc alone: as definitions of every
// benchmark's source they would put the checkout's path on each compile command, and ccache would miss them all in
// a clone at another path (CI's clean clone).
#pragma once

#include <filesystem>

namespace kf::bench {

/// The source tree this build was configured from.
std::filesystem::path SourceDir();
/// The shared data beside it (<source>/../shared: fixtures/, kernelbench/), as configured (not canonicalised).
std::filesystem::path SharedDir();

}  // namespace kf::bench
