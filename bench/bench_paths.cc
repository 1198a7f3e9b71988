// This checkout's paths for the benchmarks (bench_paths.hpp).
#include "bench_paths.hpp"

namespace kf::bench {

std::filesystem::path SourceDir() { return KF_SOURCE_DIR; }
std::filesystem::path SharedDir() { return KF_SHARED_DIR; }

}  // namespace kf::bench
