// Fills a Store with evaluations shaped like kf run's rows (kf::KernelRow, kf::ProcessLogs) from the examples'
// task blocks and candidates, for the serve tests, the browser test and bench/serve_bench.cc.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernelfoundry/store.hpp"

namespace kf::testing {

/// The markup an attacker would try: a script element and an image with an error handler.
inline const std::string kHostile = "<script>alert('x')</script><img src=x onerror=alert(1)>";

/// What FillDemoDb wrote.
struct DemoDb {
  std::vector<std::string> tasks;                ///< task names, in insertion order
  std::vector<int64_t> kernel_ids;               ///< every kernels.id written
  std::map<std::string, int64_t> per_status;     ///< kf_status -> rows, over all tasks
  int64_t hostile_id = 0;                        ///< the kernel whose code, log and job log hold kHostile
  std::string hostile_task;                      ///< its task name (also contains kHostile)
};

/// Writes `evaluations` kernels (one job each, with a build and a test job log) spread over the tasks
/// "omp_reduction" and "row_softmax" (2:1), whose code comes from examples/ under `source_dir`; statuses cycle
/// deterministically through correct (half), value_mismatch, build_error, crash and timeout; correct rows get a
/// speedup that grows noisily. With `hostile`, one more task named with kHostile gets one kernel whose code,
/// eval_log and job log contain kHostile. Uses only the Store's write API. Throws kf::Error on store errors.
DemoDb FillDemoDb(Store& store, const std::string& source_dir, int evaluations, bool hostile);

}  // namespace kf::testing
