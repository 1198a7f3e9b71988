// C++ task SDK — writing the test program of a native task (harness: native; C++/OpenMP, OpenCL, CUDA).
//
// A native task's test program registers correctness tests and benchmarks by name and lets the SDK's main
// speak the protocol with the pipeline. Exactly one translation unit defines KF_TASK_MAIN before including
// this header; that TU gets `int main`.
//
//   #define KF_TASK_MAIN
//   #include "kernelfoundry/task_sdk.hpp"
//   KF_TEST(test_values_match) { ... kf::sdk::assert_allclose(out, ref); }
//   KF_BENCHMARK(bench_matmul) { kf::sdk::measure_runtime([&] { run(); }, [&] { clFinish(q); }); }
//
// Building: the native harness gives the build `KF_INCLUDE_DIR` (this repo's include/, add `-I$KF_INCLUDE_DIR`)
// and `KF_SDK_SOURCES` (the .cc files of the timing loop, compile them into the program), besides
// `KF_DEFINES` (buildtime hyperparameters as -DNAME=VALUE) and `KF_GPU_ARCH`. nlohmann/json (system) is used.
//
// Protocol (pipeline <-> test program):
//  * `PROG --kf-list` prints {"tests":[{"name":…,"kind":"correctness"|"performance"}]} on stdout, exit 0.
//  * `PROG --kf-run --kf-select=correctness|performance [--kf-ref] [--kf-runtime-params=JSON]
//     --kf-result-fd=N` runs the selected tests in registration order, prints `name PASSED|FAILED|SKIPPED`
//    lines on stdout, and writes ONE JSON document to descriptor N (a pipe made by the pipeline):
//    {"tests":[{"name","kind","status":"passed"|"failed"|"skipped"|"error","message"}],
//     "runtimes":{name:[ms,…]}, "skipped_reason": string|null, "elapsed_ms": number, "timed_calls": n}.
//    timed_calls is the number of kernel calls made in timed trials (profiler passes divide their counts
//    by it; kernelfoundry/profile.hpp). elapsed_ms is the
//    program's own time from entering Main to writing the document (static initialisation and process start
//    excluded), as pytest's "in 1.23s". Exit 0 when nothing failed, 1 otherwise.
//  * A test fails by throwing (assert_allclose throws kf::sdk::Failure); KF_SKIP(reason) marks it skipped.
//  * Runtimes are per-call milliseconds from kf::MeasureRuntime — the same loop and statistics as pytest tasks.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernelfoundry/measure.hpp"
#include "kernelfoundry/perf_control.hpp"

namespace kf::sdk {

/// Thrown by a failing check; the test is reported "failed" with what().
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Thrown by KF_SKIP; the test is reported "skipped" with the reason.
struct Skip : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One registered test.
struct TestCase {
  std::string name;
  std::string kind;  ///< "correctness" or "performance"
  std::function<void()> body;
};

/// The registry and the state of the current run (internal; tests use the free functions below).
struct State {
  std::vector<TestCase> tests;
  bool reference = false;
  nlohmann::ordered_json runtime_params = nlohmann::ordered_json::object();
  std::string current;                                   ///< name of the running test
  nlohmann::ordered_json runtimes = nlohmann::ordered_json::object();
  long long timed_calls = 0;                             ///< kernel calls in timed trials (all benchmarks)
};
inline State& GetState() {
  static State state;
  return state;
}

/// Registers a test (used by KF_TEST / KF_BENCHMARK at static-initialisation time). Returns true.
inline bool Register(const char* name, const char* kind, void (*body)()) {
  GetState().tests.push_back({name, kind, body});
  return true;
}

/// True when the program runs as the reference variant (--kf-ref): call the reference implementation.
inline bool use_reference() { return GetState().reference; }

/// The runtime hyperparameters (--kf-runtime-params), a JSON object ({} when none were given).
inline const nlohmann::ordered_json& runtime_params() { return GetState().runtime_params; }

/// Checks `actual` against `expected` with the reference's semantics (spec §4.5): passes when more than
/// `ratio_below_max_err` of the elements have |a-e| / (|e| + epsilon) < rtol. Throws Failure with mismatch
/// statistics otherwise, or when the sizes differ.
template <typename A, typename E>
void assert_allclose(const A& actual, const E& expected, double epsilon = 1e-7, double rtol = 0.01,
                     double ratio_below_max_err = 0.99) {
  if (std::size(actual) != std::size(expected)) {
    throw Failure("shape mismatch: actual has " + std::to_string(std::size(actual)) + " elements, expected " +
                  std::to_string(std::size(expected)));
  }
  size_t n = std::size(actual), good = 0;
  double worst = 0;
  size_t worst_i = 0;
  auto a = std::begin(actual);
  auto e = std::begin(expected);
  for (size_t i = 0; i < n; ++i, ++a, ++e) {
    double av = static_cast<double>(*a), ev = static_cast<double>(*e);
    double rel = std::fabs(av - ev) / (std::fabs(ev) + epsilon);
    if (rel < rtol) {
      ++good;
    } else if (!(rel <= worst)) {  // NaN counts as worst
      worst = rel;
      worst_i = i;
    }
  }
  double ratio = n == 0 ? 1.0 : static_cast<double>(good) / static_cast<double>(n);
  if (ratio > ratio_below_max_err || n == 0) return;
  std::ostringstream msg;
  msg << "values mismatch: " << (n - good) << " of " << n << " elements exceed rtol " << rtol << " (ratio within "
      << ratio << ", need > " << ratio_below_max_err << "); worst relative error " << worst << " at index "
      << worst_i;
  throw Failure(msg.str());
}

/// Times `target` with kf::MeasureRuntime (the pipeline's one timing loop; `sync` waits for the device,
/// may be empty on a CPU) and records the per-call samples in ms under the current benchmark's name.
/// Under a perf profiler pass the timed trials switch perf's counters on and off (kf::PerfControl).
/// Returns the samples.
inline std::vector<double> measure_runtime(const std::function<void()>& target,
                                           const std::function<void()>& sync = {},
                                           const kf::MeasureOptions& options = {}) {
  kf::MeasureOptions o = options;
  if (auto name = kf::DetectProfiler()) o.profiler_mode = kf::ProfilerModeFor(name);
  static kf::PerfControl perf = kf::PerfControl::FromEnvironment();
  kf::MeasureResult r = kf::MeasureRuntime(target, sync, o, perf.Hooks());
  GetState().timed_calls += r.plan.inner_iters > 0 ? r.plan.trials * r.plan.inner_iters
                                                   : static_cast<long long>(r.trial_ms.size());
  auto& slot = GetState().runtimes[GetState().current];
  if (!slot.is_array()) slot = nlohmann::ordered_json::array();
  for (double ms : r.trial_ms) slot.push_back(ms);
  return r.trial_ms;
}

/// Runs the protocol (see the file comment). Returns the exit code.
inline int Main(int argc, char** argv) {
  const auto started = std::chrono::steady_clock::now();
  State& st = GetState();
  bool list = false, run = false;
  std::string select;
  int fd = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--kf-list") list = true;
    else if (a == "--kf-run") run = true;
    else if (a == "--kf-ref") st.reference = true;
    else if (a.rfind("--kf-select=", 0) == 0) select = a.substr(12);
    else if (a.rfind("--kf-result-fd=", 0) == 0) fd = std::atoi(a.c_str() + 15);
    else if (a.rfind("--kf-runtime-params=", 0) == 0) {
      try {
        st.runtime_params = nlohmann::ordered_json::parse(a.substr(20));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "kf sdk: --kf-runtime-params is not JSON: %s\n", e.what());
        return 2;
      }
    } else {
      std::fprintf(stderr, "kf sdk: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (list) {
    nlohmann::ordered_json doc = {{"tests", nlohmann::ordered_json::array()}};
    for (const auto& t : st.tests) doc["tests"].push_back({{"name", t.name}, {"kind", t.kind}});
    std::printf("%s\n", doc.dump().c_str());
    return 0;
  }
  if (!run || (select != "correctness" && select != "performance")) {
    std::fprintf(stderr, "usage: %s --kf-list | --kf-run --kf-select=correctness|performance [--kf-ref] "
                 "[--kf-runtime-params=JSON] --kf-result-fd=N\n", argv[0]);
    return 2;
  }
  nlohmann::ordered_json doc = {{"tests", nlohmann::ordered_json::array()}, {"runtimes", nullptr},
                                {"skipped_reason", nullptr}};
  bool failed = false;
  for (const auto& t : st.tests) {
    if (t.kind != select) continue;
    st.current = t.name;
    std::string status = "passed", message;
    try {
      t.body();
    } catch (const Skip& e) {
      status = "skipped";
      message = e.what();
      if (doc["skipped_reason"].is_null()) doc["skipped_reason"] = message;
    } catch (const Failure& e) {
      status = "failed";
      message = e.what();
    } catch (const std::exception& e) {
      status = "error";
      message = e.what();
    } catch (...) {
      status = "error";
      message = "unknown exception";
    }
    if (status == "failed" || status == "error") failed = true;
    std::string upper = status == "passed" ? "PASSED" : status == "skipped" ? "SKIPPED" : "FAILED";
    std::printf("%s %s%s%s\n", t.name.c_str(), upper.c_str(), message.empty() ? "" : ": ", message.c_str());
    std::fflush(stdout);
    doc["tests"].push_back({{"name", t.name}, {"kind", t.kind}, {"status", status}, {"message", message}});
  }
  doc["runtimes"] = st.runtimes;
  doc["timed_calls"] = st.timed_calls;
  doc["elapsed_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  std::string text = doc.dump();
  if (fd >= 0) {
    size_t off = 0;
    while (off < text.size()) {
      ssize_t n = ::write(fd, text.data() + off, text.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  }
  return failed ? 1 : 0;
}

}  // namespace kf::sdk

/// Registers a correctness test named `name` (its body follows as a function body).
#define KF_TEST(name)                                                                                 \
  static void kf_test_##name();                                                                      \
  [[maybe_unused]] static const bool kf_registered_##name = ::kf::sdk::Register(#name, "correctness", \
                                                                                kf_test_##name);     \
  static void kf_test_##name()
/// Registers a benchmark named `name`; its body calls kf::sdk::measure_runtime.
#define KF_BENCHMARK(name)                                                                            \
  static void kf_test_##name();                                                                      \
  [[maybe_unused]] static const bool kf_registered_##name = ::kf::sdk::Register(#name, "performance", \
                                                                                kf_test_##name);     \
  static void kf_test_##name()
/// Ends the current test as skipped with `reason` (e.g. "no CUDA device").
#define KF_SKIP(reason) throw ::kf::sdk::Skip(reason)

#ifdef KF_TASK_MAIN
int main(int argc, char** argv) { return ::kf::sdk::Main(argc, argv); }
#endif
