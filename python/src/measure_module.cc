// kernelfoundry._measure — Python binding of the one C++ timing loop (include/kernelfoundry/measure.hpp).
//
// The target and sync functions are Python callables, so the GIL is held for the whole measurement; only
// the loop bookkeeping and the clock reads are C++. Per-call inputs are given as parallel sequences of
// positional-argument tuples and keyword dicts and are used round-robin (input replication, spec §4.6
// step 2, is prepared by kernelfoundry.measure). Pending signals (Ctrl-C) are checked after every call.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/measure.hpp"

namespace py = pybind11;

namespace {

/// Calls `fn(*args, **kwargs)` through the C API (no per-call tuple building) and drops the result.
void CallPython(PyObject* fn, PyObject* args, PyObject* kwargs) {
  PyObject* r = args == nullptr && kwargs == nullptr ? PyObject_CallNoArgs(fn) : PyObject_Call(fn, args, kwargs);
  if (r == nullptr) throw py::error_already_set();
  Py_DECREF(r);
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

/// Round-robin over prepared per-call inputs.
class CallInputs {
 public:
  CallInputs(const py::object& args_list, const py::object& kwargs_list) {
    if (!args_list.is_none()) {
      for (py::handle a : args_list) args_.push_back(py::tuple(py::reinterpret_borrow<py::object>(a)));
    }
    if (!kwargs_list.is_none()) {
      for (py::handle k : kwargs_list) {
        if (!py::isinstance<py::dict>(k)) throw py::type_error("kwargs_list entries must be dicts");
        kwargs_.push_back(py::reinterpret_borrow<py::dict>(k));
      }
    }
    if (!args_.empty() && !kwargs_.empty() && args_.size() != kwargs_.size()) {
      throw py::value_error("args_list and kwargs_list must have the same length, got " +
                            std::to_string(args_.size()) + " and " + std::to_string(kwargs_.size()));
    }
    if ((!args_list.is_none() && args_.empty()) || (!kwargs_list.is_none() && kwargs_.empty())) {
      throw py::value_error("args_list / kwargs_list must not be empty (use None for no arguments)");
    }
    n_ = std::max(args_.size(), kwargs_.size());
  }

  /// Calls fn with the next inputs.
  void CallNext(PyObject* fn) {
    if (n_ == 0) return CallPython(fn, nullptr, nullptr);
    const size_t i = next_;
    next_ = next_ + 1 == n_ ? 0 : next_ + 1;
    PyObject* args = args_.empty() ? empty_.ptr() : args_[i].ptr();
    PyObject* kwargs = kwargs_.empty() || PyDict_Size(kwargs_[i].ptr()) == 0 ? nullptr : kwargs_[i].ptr();
    CallPython(fn, args, kwargs);
  }

 private:
  std::vector<py::tuple> args_;
  std::vector<py::dict> kwargs_;
  py::tuple empty_ = py::tuple(0);
  size_t n_ = 0;
  size_t next_ = 0;
};

std::function<void()> NoArgCall(const py::object& fn) {
  if (fn.is_none()) return nullptr;
  if (!PyCallable_Check(fn.ptr())) throw py::type_error("expected a callable or None");
  PyObject* raw = fn.ptr();  // kept alive by the caller's reference for the duration of measure()
  return [raw] { CallPython(raw, nullptr, nullptr); };
}

py::dict Measure(const py::object& target, const py::object& sync, const py::object& args_list,
                 const py::object& kwargs_list, double warmup_min_time, int64_t warmup_min_iters,
                 double inner_loop_min_time, int64_t perf_trials_min_iters, double perf_trials_min_time,
                 int64_t test_trials, const std::string& profiler_mode, const py::object& on_timed_begin,
                 const py::object& on_timed_end) {
  if (!PyCallable_Check(target.ptr())) throw py::type_error("target must be callable");
  kf::MeasureOptions o;
  o.warmup_min_time_s = warmup_min_time;
  o.warmup_min_iters = warmup_min_iters;
  o.inner_loop_min_time_s = inner_loop_min_time;
  o.perf_trials_min_iters = perf_trials_min_iters;
  o.perf_trials_min_time_s = perf_trials_min_time;
  o.test_trials = test_trials;
  o.profiler_mode = kf::ParseProfilerMode(profiler_mode);

  CallInputs inputs(args_list, kwargs_list);
  PyObject* raw_target = target.ptr();
  kf::MeasureHooks hooks{NoArgCall(on_timed_begin), NoArgCall(on_timed_end)};
  kf::MeasureResult r = kf::MeasureRuntime([&] { inputs.CallNext(raw_target); }, NoArgCall(sync), o, hooks);

  py::dict out;
  out["trials_ms"] = r.trial_ms;
  out["warmup_iters"] = r.plan.warmup_iters;
  out["inner_iters"] = r.plan.inner_iters;
  out["trials"] = r.plan.trials;
  out["min_test_trial_ms"] = r.plan.min_test_trial_s * 1000.0;
  out["warmup_time_s"] = r.plan.warmup_time_s;
  out["profiler_mode"] = std::string(kf::ProfilerModeName(o.profiler_mode));
  return out;
}

py::dict StatsDict(const kf::TimingStats& s) {
  py::dict d;
  d["mean"] = s.mean;
  d["std"] = s.std;
  d["min"] = s.min;
  d["max"] = s.max;
  d["median"] = s.median;
  d["num_trials"] = s.num_trials;
  return d;
}

}  // namespace

void RegisterPaired(py::module_& m);  // measure_paired.cc

PYBIND11_MODULE(_measure, m) {
  m.doc() = "KernelFoundry's C++ timing loop and timing statistics (see include/kernelfoundry/measure.hpp).";
  RegisterPaired(m);

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kf::Error& e) {
      PyErr_SetString(e.kind() == kf::ErrorKind::kInvalidArgument ? PyExc_ValueError : PyExc_RuntimeError,
                      e.what());
    }
  });

  const kf::MeasureOptions d;
  m.def("measure", &Measure, py::arg("target"), py::arg("sync") = py::none(), py::kw_only(),
        py::arg("args_list") = py::none(), py::arg("kwargs_list") = py::none(),
        py::arg("warmup_min_time") = d.warmup_min_time_s, py::arg("warmup_min_iters") = d.warmup_min_iters,
        py::arg("inner_loop_min_time") = d.inner_loop_min_time_s,
        py::arg("perf_trials_min_iters") = d.perf_trials_min_iters,
        py::arg("perf_trials_min_time") = d.perf_trials_min_time_s, py::arg("test_trials") = d.test_trials,
        py::arg("profiler_mode") = "none", py::arg("on_timed_begin") = py::none(),
        py::arg("on_timed_end") = py::none(),
        "Times target (spec §4.6 steps 4-7). Returns a dict: trials_ms (list of per-call ms, one per timed "
        "trial), warmup_iters, inner_iters, trials, min_test_trial_ms, warmup_time_s, profiler_mode. "
        "args_list/kwargs_list: per-call inputs used round-robin. profiler_mode: none|sampling|replay. "
        "Raises ValueError on invalid options; exceptions of target/sync propagate.");

  py::dict defaults;
  defaults["warmup_min_time"] = d.warmup_min_time_s;
  defaults["warmup_min_iters"] = d.warmup_min_iters;
  defaults["inner_loop_min_time"] = d.inner_loop_min_time_s;
  defaults["perf_trials_min_iters"] = d.perf_trials_min_iters;
  defaults["perf_trials_min_time"] = d.perf_trials_min_time_s;
  defaults["test_trials"] = d.test_trials;
  m.attr("DEFAULTS") = defaults;

  m.def(
      "timing_stats",
      [](const std::vector<double>& samples, std::optional<int> digits) {
        kf::TimingStats s = kf::ComputeTimingStats(samples);
        return StatsDict(digits ? kf::RoundTimingStats(s, *digits) : s);
      },
      py::arg("samples"), py::arg("round_digits") = py::none(),
      "{mean, std (population), min, max, median, num_trials} of samples (ms); rounded to round_digits "
      "significant digits when given. Raises ValueError for an empty list (bug B18).");
  m.def("round_significant", &kf::RoundSignificant, py::arg("value"), py::arg("digits") = 3,
        "Rounds to `digits` significant digits like float(f'{value:.3g}').");
  m.def(
      "detect_profiler", [] { return kf::DetectProfiler(); },
      "The profiler wrapping this process from the environment (KERNELFOUNDRY_PROFILER, UNITRACE_VERSION -> "
      "'unitrace', NV_NSIGHT_INJECTION_PORT_BASE -> 'ncu'), or None.");
  m.def(
      "profiler_mode_for",
      [](const std::optional<std::string>& name) { return std::string(kf::ProfilerModeName(kf::ProfilerModeFor(name))); },
      py::arg("profiler"), "'replay' for ncu, 'sampling' for any other profiler name, 'none' for None.");
}
