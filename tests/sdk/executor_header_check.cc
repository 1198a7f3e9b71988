// Compile-time check (built with every test binary, target kf_executor_header_check): a native task's executor
// — the candidate's program, compiled once per candidate — includes sdk/remote.hpp with -DKF_EXECUTOR and must
// not pull in nlohmann/json or kf's measurement headers, which made up two thirds of each candidate's compile
// (6.8 s of g++ -O0 for omp_reduction's one-function executor, 2026-12-07). It still gets the standard headers
// task_sdk.hpp brings, so candidates that relied on them keep compiling. Also built with KF_EXECUTOR_MAIN: the
// executor's main must compile without the checker's SDK.
#define KF_EXECUTOR 1
#define KF_EXECUTOR_MAIN 1
#include "kernelfoundry/sdk/remote.hpp"

#ifdef NLOHMANN_JSON_VERSION_MAJOR
#error "sdk/remote.hpp pulls nlohmann/json into the executor build (-DKF_EXECUTOR): keep the checker's SDK out"
#endif
#ifdef KF_TEST  // defined by task_sdk.hpp
#error "sdk/remote.hpp pulls task_sdk.hpp into the executor build (-DKF_EXECUTOR)"
#endif

// Standard names a candidate may have used through the old include chain, among them those that came only through
// nlohmann/json (stranger test, 2026-12-07: <any>, <cassert>, <filesystem>, <forward_list>, <iomanip>, <ranges>,
// <valarray> were missing at first).
static_assert(sizeof(std::vector<float>) > 0 && sizeof(std::optional<int>) > 0 && sizeof(std::function<void()>) > 0);
static_assert(sizeof(std::any) > 0 && sizeof(std::forward_list<int>) > 0 && sizeof(std::valarray<float>) > 0);
[[maybe_unused]] static double UsesCmath(double x) { return std::sqrt(x) + std::max(x, 1.0); }
#if defined(__GLIBCXX__) && !defined(_GLIBCXX_RANGES)  // <ranges>' guard (clang 14 cannot use libstdc++ 12's views)
#error "sdk/remote.hpp no longer gives the executor <ranges>"
#endif
[[maybe_unused]] static bool UsesTheJsonChain([[maybe_unused]] int n) {  // (assert is empty under NDEBUG)
  assert(n >= 0);
  std::ostringstream s;
  s << std::setw(4) << std::setprecision(3) << 1.5;
  return std::filesystem::path("a").has_filename() && !s.str().empty();
}

KF_REMOTE(double, kf_header_check_sum, const float*, std::size_t)
double kf_header_check_sum(const float* x, std::size_t n) { return n > 0 ? static_cast<double>(x[0]) : 0.0; }
