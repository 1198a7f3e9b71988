// C++ task SDK — writing the test program of a native task (harness: native; C++/OpenMP, OpenCL, CUDA).
//
// A native task's test program registers correctness tests and benchmarks by name and lets the SDK's main
// speak the protocol with the pipeline. Exactly one translation unit defines KF_TASK_MAIN before including
// this header; that TU gets `int main`.
//
//   #define KF_TASK_MAIN
//   #include "kernelfoundry/sdk/task_sdk.hpp"
//   KF_TEST(test_values_match) { ... kf::sdk::assert_allclose(out, ref); }
//   KF_BENCHMARK(bench_matmul) { kf::sdk::measure_runtime([&] { run(); }, [&] { clFinish(q); }); }
//
// Building: the native harness gives the build `KF_INCLUDE_DIR` (this repo's include/, add `-I$KF_INCLUDE_DIR`)
// and `KF_SDK_LINK` (the SDK compiled once, or its .cc files where kf has no fresh object: put it on the command
// line that links the program) or `KF_SDK_SOURCES` (always the .cc files, to compile them yourself), besides
// `KF_DEFINES` (buildtime hyperparameters as -DNAME=VALUE) and `KF_GPU_ARCH`. nlohmann/json (system) is used.
//
// Protocol (pipeline <-> test program):
//  * `PROG --kf-list` prints {"tests":[{"name":…,"kind":"correctness"|"performance"}]} on stdout, exit 0.
//  * `PROG --kf-run --kf-select=correctness|performance [--kf-ref] [--kf-runtime-params=JSON]
//     --kf-result-fd=N` runs the selected tests in registration order, prints `name PASSED|FAILED|SKIPPED`
//    lines on stdout, and writes ONE JSON document to descriptor N (a pipe made by the pipeline):
//    {"tests":[{"name","kind","status":"passed"|"failed"|"skipped"|"error","message"}],
//     "runtimes":{name:[ms,…]}, "skipped_reason": string|null, "elapsed_ms": number, "timed_calls": n
//     [, "build_error": {…}]}. timed_calls is the number of kernel calls made in timed trials (profiler passes
//    divide their counts by it; kernelfoundry/profile.hpp). elapsed_ms is the
//    program's own time from entering Main to writing the document (static initialisation and process start
//    excluded), as pytest's "in 1.23s". Exit 0 when nothing failed, 1 otherwise.
//    When code the program compiles at run time does not build (kf::sdk::BuildFailure, thrown e.g. by
//    ocl::BuildProgramFromFile), the test is "error" and the document has a top-level
//    "build_error": {"message": "<source> failed …; first error: <the compiler's first error line>",
//    "log": "<the build log, head and tail kept when over 64 KiB>"} — the first build failure of the run.
//    The harness scores such a run as build_error (a candidate that does not compile), never as a test
//    failure or a shape mismatch.
//  * A test fails by throwing (assert_allclose throws kf::sdk::Failure); KF_SKIP(reason) marks it skipped.
//  * Runtimes are per-call milliseconds from kf::MeasureRuntime — the same loop and statistics as pytest tasks.
//  * Paired timing (`--kf-select=performance --kf-paired [--kf-paired-options=JSON]`): each benchmark body runs
//    twice at once — as the candidate in the main thread and as the reference (use_reference() true) in a
//    helper thread; both measure_runtime calls meet, and the main thread times the two lambdas against each
//    other with kf::MeasurePaired (include/kernelfoundry/paired.hpp: interleaved rounds, median per-round
//    ratio with a 95 % interval), judged by kf::JudgePaired (paired_record.hpp, the pytest plugin's policy,
//    --kf-paired-options knobs included). The document then also has "paired": {name: record (the wire form of
//    kf::PairedRecord: "paired", "status", "detail", "speedup", "ci", "rounds", …)}, "reference_runtimes" and
//    "reference_tests". A benchmark whose reference side does not measure is timed alone ("paired": false).
//  * `--kf-executor=PATH`: the task's executor program (config `executor_executable`) for the KF_REMOTE functions
//    of kernelfoundry/sdk/remote.hpp — the candidate in a process of its own.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernelfoundry/measure.hpp"
#include "kernelfoundry/paired.hpp"
#include "kernelfoundry/paired_wire.hpp"
#include "kernelfoundry/sdk/device_timing.hpp"
#include "kernelfoundry/sdk/perf_control.hpp"

namespace kf::sdk {

/// Thrown by a failing check; the test is reported "failed" with what().
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Thrown by KF_SKIP; the test is reported "skipped" with the reason.
struct Skip : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Thrown when code the test program compiles at run time (an OpenCL program, an NVRTC module, …) does not
/// build: the candidate does not compile, whichever phase builds it. The test is reported "error" and the
/// result document gets a top-level "build_error" {"message", "log"} (the first one of the run), which the
/// harness scores as build_error. what() names the source and the compiler's FIRST error (FirstCompilerError).
struct BuildFailure : std::runtime_error {
  BuildFailure(const std::string& message, std::string build_log)
      : std::runtime_error(message), log(std::move(build_log)) {}
  std::string log;  ///< the compiler's whole build log
};

/// The first error of a compiler log: the first line holding "error:" or "error " after a file:line prefix
/// ("<source>:3:5: error: use of undeclared identifier 'x'", "error: …", "fatal error: …"), with up to two
/// following lines that are not themselves diagnostics (the source line and the caret). Warnings before it
/// are skipped however many there are; "" when the log names no error.
inline std::string FirstCompilerError(const std::string& log) {
  auto is_diag = [](const std::string& l) {
    return l.find("warning:") != std::string::npos || l.find("error:") != std::string::npos ||
           l.find("note:") != std::string::npos;
  };
  std::istringstream in(log);
  std::string line, out;
  int context = -1;
  while (std::getline(in, line)) {
    if (context < 0) {
      if (line.find("error:") != std::string::npos || line.find("error ") == 0) {
        out = line;
        context = 0;
      }
    } else if (context < 2 && !is_diag(line)) {
      out += "\n" + line;
      ++context;
    } else {
      break;
    }
  }
  return out;
}

/// One registered test.
struct TestCase {
  std::string name;
  std::string kind;  ///< "correctness" or "performance"
  std::function<void()> body;
};

/// A benchmark's measurement, as the paired mode's two sides hand it over (internal).
struct PairedCall {
  std::function<void()> target, sync;
  std::optional<TimedData> data;  ///< the side's rotating inputs and output (device_timing.hpp), if handed over
};

/// The meeting point of the two sides of one paired benchmark (internal).
struct PairedMeeting {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<PairedCall> reference;  ///< set by the reference side's measure_runtime
  bool reference_ended = false;         ///< the reference side's body returned or threw
  bool measured = false;                ///< the main thread is done with the reference's lambda
  std::vector<double> reference_ms;
  std::string reference_error;
};

/// The registry and the state of the current run (internal; tests use the free functions below).
struct State {
  std::vector<TestCase> tests;
  bool reference = false;
  bool paired = false;                                   ///< --kf-paired
  nlohmann::ordered_json paired_options = nlohmann::ordered_json::object();
  nlohmann::ordered_json paired_records = nlohmann::ordered_json::object();
  nlohmann::ordered_json reference_runtimes = nlohmann::ordered_json::object();
  PairedMeeting* meeting = nullptr;                      ///< the benchmark being paired now
  nlohmann::ordered_json runtime_params = nlohmann::ordered_json::object();
  std::string current;                                   ///< name of the running test
  nlohmann::ordered_json runtimes = nlohmann::ordered_json::object();
  long long timed_calls = 0;                             ///< kernel calls in timed trials (all benchmarks)
  // KF_REMOTE (kernelfoundry/sdk/remote.hpp): the candidate in an executor process.
  std::string executor_path;                             ///< --kf-executor=PATH
  std::atomic<long long> remote_calls{0};                ///< calls of KF_REMOTE functions so far
  std::function<void()> remote_start, remote_ping;       ///< set by remote.hpp in a test program that uses it
  std::function<double(double)> remote_settle;           ///< the executor's CPU after its last reply (s)
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

/// In paired mode: the side the calling thread runs (1 reference, 0 candidate, -1 the program's mode).
inline int& ThreadSide() {
  thread_local int side = -1;
  return side;
}

/// True when the program runs as the reference variant (--kf-ref) — or, in paired mode, when the calling
/// thread runs the reference side: call the reference implementation.
inline bool use_reference() { return ThreadSide() >= 0 ? ThreadSide() == 1 : GetState().reference; }

/// The runtime hyperparameters (--kf-runtime-params), a JSON object ({} when none were given).
inline const nlohmann::ordered_json& runtime_params() { return GetState().runtime_params; }

/// The element type of a container as a dtype name ("float32", "float64", "float16", "int32", …); the
/// C++ type's mangled name for anything else.
template <typename T>
std::string DtypeName() {
  using V = std::remove_cv_t<std::remove_reference_t<T>>;
  if constexpr (std::is_same_v<V, float>) return "float32";
  else if constexpr (std::is_same_v<V, double>) return "float64";
  else if constexpr (std::is_same_v<V, long double>) return "float128";
  else if constexpr (std::is_same_v<V, bool>) return "bool";
  else if constexpr (std::is_integral_v<V>) return (std::is_signed_v<V> ? "int" : "uint") + std::to_string(8 * sizeof(V));
  else if constexpr (std::is_floating_point_v<V>) return "float" + std::to_string(8 * sizeof(V));
  else if constexpr (sizeof(V) == 2) return "float16";  // e.g. cl_half / __half / _Float16 wrappers
  else return typeid(V).name();
}

/// Checks `actual` against `expected` with the reference's semantics (spec §4.5): passes when more than
/// `ratio_below_max_err` of the elements have |a-e| / (|e| + epsilon) < rtol — with two rules the reference
/// lacked (issue 10): any NaN/Inf in `actual` where `expected` is finite fails whatever the ratio allows,
/// and the element types must agree (float64 results for a float32 reference fail naming both) unless
/// `check_dtype` is false. Throws Failure naming the first bad index and the counts of NaN, Inf and
/// out-of-tolerance elements, or when the sizes differ. (assert_allclose without the low-signal mode.)
template <typename A, typename E>
void CheckAllClose(const A& actual, const E& expected, double epsilon, double rtol, double ratio_below_max_err,
                   bool check_dtype) {
  using AV = std::remove_cv_t<std::remove_reference_t<decltype(*std::begin(actual))>>;
  using EV = std::remove_cv_t<std::remove_reference_t<decltype(*std::begin(expected))>>;
  if constexpr (!std::is_same_v<AV, EV>) {
    if (check_dtype) {
      throw Failure("dtype mismatch: actual " + DtypeName<AV>() + " vs expected " + DtypeName<EV>() +
                    " (pass check_dtype = false if the task accepts a different element type)");
    }
  }
  if (std::size(actual) != std::size(expected)) {
    throw Failure("shape mismatch: actual has " + std::to_string(std::size(actual)) + " elements, expected " +
                  std::to_string(std::size(expected)));
  }
  size_t n = std::size(actual), good = 0, n_nan = 0, n_inf = 0, n_tol = 0;
  double worst = 0;
  size_t worst_i = 0, first_bad = n;
  double first_a = 0, first_e = 0;
  auto a = std::begin(actual);
  auto e = std::begin(expected);
  for (size_t i = 0; i < n; ++i, ++a, ++e) {
    double av = static_cast<double>(*a), ev = static_cast<double>(*e);
    bool ok;
    if (!std::isfinite(av) && std::isfinite(ev)) {
      ok = false;
      ++(std::isnan(av) ? n_nan : n_inf);
    } else {
      double rel = std::fabs(av - ev) / (std::fabs(ev) + epsilon);
      ok = rel < rtol || av == ev || (std::isnan(av) && std::isnan(ev));
      if (!ok) {
        ++n_tol;
        if (!(rel <= worst)) {  // NaN counts as worst
          worst = rel;
          worst_i = i;
        }
      }
    }
    if (ok) {
      ++good;
    } else if (first_bad == n) {
      first_bad = i;
      first_a = av;
      first_e = ev;
    }
  }
  double ratio = n == 0 ? 1.0 : static_cast<double>(good) / static_cast<double>(n);
  if (n == 0 || (n_nan + n_inf == 0 && ratio > ratio_below_max_err)) return;
  std::ostringstream msg;
  msg << "values mismatch: " << (n - good) << " of " << n << " elements are bad: " << n_nan << " NaN and " << n_inf
      << " Inf where the reference is finite, " << n_tol << " exceed rtol " << rtol << "; first bad element at index "
      << first_bad << ": actual " << first_a << ", expected " << first_e;
  if (n_nan + n_inf > 0) {
    msg << "; non-finite values fail whatever ratio_below_max_err allows";
  } else {
    msg << " (ratio within " << ratio << ", need > " << ratio_below_max_err << "); worst relative error " << worst
        << " at index " << worst_i;
  }
  throw Failure(msg.str());
}

/// The low-signal mode of `kf validate --run` ($KF_FAKE_OUTPUT = "zeros" or "constant"), else "".
inline std::string FakeOutputMode() {
  const char* m = std::getenv("KF_FAKE_OUTPUT");
  const std::string mode = m ? m : "";
  return mode == "zeros" || mode == "constant" ? mode : std::string();
}

/// Checks `actual` against `expected` (CheckAllClose; the reference's semantics plus issue 10's NaN and dtype
/// rules). Low-signal mode (FakeOutputMode() not empty, `kf validate --run`): `actual` is ignored and an
/// all-zeros output (or one filled with the mean of `expected`) is checked instead; when that passes, throws
/// Failure("KF-LOW-SIGNAL[<test>]: …"), else returns — the test then fails exactly when its check cannot tell
/// a trivial output from the reference's.
template <typename A, typename E>
void assert_allclose(const A& actual, const E& expected, double epsilon = 1e-7, double rtol = 0.01,
                     double ratio_below_max_err = 0.99, bool check_dtype = true) {
  using EV = std::remove_cv_t<std::remove_reference_t<decltype(*std::begin(expected))>>;
  if constexpr (std::is_arithmetic_v<EV>) {
    if (const std::string mode = FakeOutputMode(); !mode.empty()) {
      double fill = 0;
      if (mode == "constant") {
        double sum = 0;
        size_t n = 0;
        for (const auto& v : expected) {
          if (std::isfinite(static_cast<double>(v))) {
            sum += static_cast<double>(v);
            ++n;
          }
        }
        fill = n ? sum / static_cast<double>(n) : 0.0;
      }
      std::vector<EV> fake(std::size(expected), static_cast<EV>(fill));
      try {
        CheckAllClose(fake, expected, epsilon, rtol, ratio_below_max_err, false);
      } catch (const Failure&) {
        return;  // the check tells the trivial output apart
      }
      throw Failure("KF-LOW-SIGNAL[" + GetState().current + "]: assert_allclose accepts an all-" + mode +
                    " output here (mode KF_FAKE_OUTPUT=" + mode + "); tighten its tolerance or check values "
                    "that a trivial output cannot match");
    }
  }
  CheckAllClose(actual, expected, epsilon, rtol, ratio_below_max_err, check_dtype);
}

/// Times the candidate's `target` against the reference side's (paired mode, main thread). Returns the
/// candidate's per-round samples. (Internal; defined in src/sdk/task_sdk.cc.)
std::vector<double> MeasurePairedBenchmark(const std::function<void()>& target, const std::function<void()>& sync,
                                           const TimedData* data);

/// measure_runtime's work, with or without rotating inputs (internal; see the two overloads; defined in
/// src/sdk/task_sdk.cc).
std::vector<double> MeasureRuntimeWith(const std::function<void()>& target, const std::function<void()>& sync,
                                       const kf::MeasureOptions& options, const TimedData* data);

/// Times `target` with kf::MeasureRuntime (the pipeline's one timing loop; `sync` waits for the device,
/// may be empty on a CPU; with a device in use the whole device is synchronised after it, device_timing.hpp)
/// and records the per-call samples in ms under the current benchmark's name.
/// Returns the samples. In paired mode (see the file comment) the candidate's call is timed against the
/// reference's and the reference side's call returns once that is done. Unpaired, under a perf profiler pass
/// the timed trials switch perf's counters on and off (kf::PerfControl) and count the timed kernel calls.
inline std::vector<double> measure_runtime(const std::function<void()>& target,
                                           const std::function<void()>& sync = {},
                                           const kf::MeasureOptions& options = {}) {
  return MeasureRuntimeWith(target, sync, options, nullptr);
}

/// measure_runtime with inputs that rotate between paired samples and an output that is checked against the
/// reference's for the same values (TimedData, device_timing.hpp): what catches an output cache. Unpaired, set 0
/// is loaded once before timing.
inline std::vector<double> measure_runtime(const std::function<void()>& target, const std::function<void()>& sync,
                                           const TimedData& data, const kf::MeasureOptions& options = {}) {
  return MeasureRuntimeWith(target, sync, options, &data);
}

/// Runs a benchmark's body on both sides at once (paired mode): the reference side in a helper thread, the
/// candidate side here. Returns the reference side's outcome: "" when it passed, else its error. (Internal;
/// defined in src/sdk/task_sdk.cc.)
std::string RunPairedBody(const TestCase& t);

/// Runs the protocol (see the file comment). Returns the exit code. Defined in src/sdk/task_sdk.cc, which the
/// program links ($KF_SDK_LINK, or compiled from $KF_SDK_SOURCES).
int Main(int argc, char** argv);

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
