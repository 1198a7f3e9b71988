// kernelfoundry._measure: paired timing (include/kernelfoundry/paired.hpp) and the trusted comparisons the
// pytest plugin's paired mode uses (outputs of timed calls against the reference's, inputs against what was
// put into them). The comparisons read raw buffers (the buffer protocol) in C++, so that candidate code in
// the same process cannot change their verdict by patching Python functions (torch.allclose,
// kernelfoundry.testing.assert_allclose, …).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "convert.hpp"
#include "kernelfoundry/output_check.hpp"
#include "kernelfoundry/paired.hpp"
#include "kernelfoundry/paired_wire.hpp"
#include "kernelfoundry/timing_keys.hpp"

namespace py = pybind11;

namespace {

// IEEE 754 binary16 -> float.
float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits = 0;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3FFu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The element type of a buffer, normalised: "f4", "f8", "f2", "i<n>", "u<n>", "b1"; empty when unsupported.
std::string TypeOf(const py::buffer_info& b) {
  std::string f = b.format;
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@' || f[0] == '!' || f[0] == '>')) f = f.substr(1);
  if (f == "f") return "f4";
  if (f == "d") return "f8";
  if (f == "e") return "f2";
  if (f == "?") return "b1";
  if (f.size() == 1 && std::string("bhilq").find(f[0]) != std::string::npos) return "i" + std::to_string(b.itemsize);
  if (f.size() == 1 && std::string("BHILQ").find(f[0]) != std::string::npos) return "u" + std::to_string(b.itemsize);
  return "";
}

bool Contiguous(const py::buffer_info& b) {
  py::ssize_t expect = b.itemsize;
  for (py::ssize_t d = b.ndim - 1; d >= 0; --d) {
    if (b.shape[static_cast<size_t>(d)] > 1 && b.strides[static_cast<size_t>(d)] != expect) return false;
    expect *= b.shape[static_cast<size_t>(d)];
  }
  return true;
}

std::string ShapeText(const py::buffer_info& b) {
  std::string s = "(";
  for (size_t i = 0; i < b.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(b.shape[i]);
  return s + (b.shape.size() == 1 ? ",)" : ")");
}

// Element i of a float buffer as double; T is float, double or uint16_t (binary16, HalfToFloat).
template <typename T>
double FloatAt(const void* base, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + i * static_cast<int64_t>(sizeof(T)), sizeof v);
  if constexpr (std::is_same_v<T, uint16_t>) {
    return static_cast<double>(HalfToFloat(v));
  } else {
    return static_cast<double>(v);
  }
}

// CompareOutputValues on two float buffers of element type T, read in place. The element type is dispatched
// once per call, not per element (a string comparison per element made a 16 MB comparison take 45 ms, a third
// of the README example's timed-process time, 2026-12-05).
template <typename T>
std::optional<std::string> CompareFloats(const py::buffer_info& a, const py::buffer_info& e, double rtol,
                                         double atol_rms, double min_ok_ratio) {
  return kf::CompareOutputValues(
      static_cast<int64_t>(e.size), [p = a.ptr](int64_t i) { return FloatAt<T>(p, i); },
      [p = e.ptr](int64_t i) { return FloatAt<T>(p, i); }, rtol, atol_rms, min_ok_ratio);
}

// See the binding's docstring.
std::optional<std::string> Compare(const py::buffer& actual, const py::buffer& expected, double rtol, double atol_rms,
                                   double min_ok_ratio) {
  const py::buffer_info a = actual.request();
  const py::buffer_info e = expected.request();
  const std::string ta = TypeOf(a), te = TypeOf(e);
  if (ta.empty() || te.empty()) return "unsupported element type (" + a.format + " / " + e.format + ")";
  if (ta != te) return "dtype " + ta + " where the reference has " + te;
  if (a.shape != e.shape) return "shape " + ShapeText(a) + " where the reference has " + ShapeText(e);
  if (!Contiguous(a) || !Contiguous(e)) return "non-contiguous buffers (internal: convert first)";
  const py::ssize_t n = e.size;
  if (n == 0) return std::nullopt;
  if (ta[0] != 'f') {  // integers and booleans: exact
    py::ssize_t bad = 0, first = -1;
    for (py::ssize_t i = 0; i < n; ++i) {
      if (std::memcmp(static_cast<const char*>(a.ptr) + i * a.itemsize,
                      static_cast<const char*>(e.ptr) + i * e.itemsize, static_cast<size_t>(a.itemsize)) != 0) {
        if (first < 0) first = i;
        ++bad;
      }
    }
    if (bad == 0) return std::nullopt;
    return std::to_string(bad) + " of " + std::to_string(n) + " values differ (first at index " +
           std::to_string(first) + ")";
  }
  // Floats: the one output rule (kernelfoundry/output_check.hpp), read in place from either buffer type.
  if (ta == "f4") return CompareFloats<float>(a, e, rtol, atol_rms, min_ok_ratio);
  if (ta == "f8") return CompareFloats<double>(a, e, rtol, atol_rms, min_ok_ratio);
  return CompareFloats<uint16_t>(a, e, rtol, atol_rms, min_ok_ratio);
}

bool Equal(const py::buffer& x, const py::buffer& y) {
  const py::buffer_info a = x.request();
  const py::buffer_info b = y.request();
  if (TypeOf(a) != TypeOf(b) || a.shape != b.shape || a.itemsize != b.itemsize) return false;
  if (!Contiguous(a) || !Contiguous(b)) throw py::value_error("equal: non-contiguous buffers");
  return std::memcmp(a.ptr, b.ptr, static_cast<size_t>(a.size * a.itemsize)) == 0;
}

// Whether [address, address + bytes) lies in mappings of this process that allow reading (/proc/self/maps: no
// gap, every mapping with 'r'). Lines are in address order; the walk stops at the range's end.
bool Readable(uintptr_t address, size_t bytes) {
  if (bytes == 0) return true;
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return true;  // nothing to tell: the comparison reads the buffer as before
  const uintptr_t end = address + bytes;
  uintptr_t covered = address;  // [address, covered) is known to be readable
  char line[512];
  bool ok = false;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    uintptr_t lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &lo, &hi, perms) != 3) continue;
    if (hi <= covered) continue;
    if (lo > covered || perms[0] != 'r') break;  // a gap, or a part that cannot be read
    covered = hi;
    if (covered >= end) {
      ok = true;
      break;
    }
  }
  std::fclose(f);
  return ok;
}

// A Python callable run with the GIL held (MeasurePaired runs without it); Ctrl-C is checked after each call.
template <typename... Args>
std::function<void(Args...)> WithGil(const py::object& fn) {
  if (fn.is_none()) return nullptr;
  if (!PyCallable_Check(fn.ptr())) throw py::type_error("expected a callable or None");
  return [fn](Args... args) {
    py::gil_scoped_acquire gil;
    fn(args...);
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  };
}

kf::PairedSide SideFrom(const py::tuple& side) {
  if (side.size() != 3 && side.size() != 4) {
    throw py::value_error("a side is (prepare(load) | None, call(), sync() | None[, settle() -> float | None])");
  }
  kf::PairedSide s;
  s.prepare = WithGil<int64_t>(side[0]);
  s.call = WithGil<>(side[1]);
  s.sync = WithGil<>(side[2]);
  if (!s.call) throw py::value_error("a side needs a call()");
  if (side.size() == 4 && !side[3].is_none()) {
    py::object fn = side[3];
    if (!PyCallable_Check(fn.ptr())) throw py::type_error("settle: expected a callable or None");
    s.settle = [fn]() {
      py::gil_scoped_acquire gil;
      const double used = fn().cast<double>();
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      return used;
    };
  }
  return s;
}

// The record of a measurement handed in by Python (a dict in PairedRecord's wire form).
kf::PairedRecord RecordFrom(const py::handle& record) { return kf::PairedRecordFromJson(kfpy::ToJson(record)); }

py::object MeasurePairedPy(const py::tuple& candidate, const py::tuple& reference, const py::dict& options,
                           const py::object& check) {
  const kf::PairedOptions o = kf::PairedOptionsFromJson(kfpy::ToJson(options));
  kf::PairedSide c = SideFrom(candidate), r = SideFrom(reference);
  kf::PairedCheck chk;
  if (!check.is_none()) {
    chk = [check](int64_t round) -> std::optional<std::string> {
      py::gil_scoped_acquire gil;
      py::object res = check(round);
      if (res.is_none()) return std::nullopt;
      return py::str(res).cast<std::string>();
    };
  }
  kf::PairedResult res;
  {
    py::gil_scoped_release release;
    res = kf::MeasurePaired(c, r, o, chk);
  }
  return kfpy::ToPy(kf::ToJson(kf::RecordOf(res)));
}

py::object JudgePairedPy(const py::dict& record, const py::dict& options, const py::object& remeasure) {
  kf::PairedRemeasure again;
  if (!remeasure.is_none()) {
    again = [remeasure] { return RecordFrom(remeasure()); };
  }
  return kfpy::ToPy(
      kf::ToJson(kf::JudgePaired(RecordFrom(record), kf::PairedOptionsFromJson(kfpy::ToJson(options)), again)));
}

}  // namespace

/// Adds measure_paired, judge_paired, wait_quiet, process_cpu_seconds, compare, equal and median_ci to the _measure module (called from measure_module.cc).
void RegisterPaired(py::module_& m) {
  m.def(
      "timing_defaults",
      [] {
        py::dict out;  // the keys a test process reads: the loop's and the plugin's (not the pipeline's)
        for (const kf::TimingKey& k : kf::TimingKeys()) {
          if (k.reader == kf::TimingKeyReader::kPipeline) continue;
          const py::str name(k.name.data(), k.name.size());
          if (k.kind == kf::TimingKeyKind::kBool) {
            out[name] = py::bool_(k.default_value != 0);
          } else if (k.kind == kf::TimingKeyKind::kWhole) {
            out[name] = py::int_(static_cast<long long>(k.default_value));
          } else {
            out[name] = py::float_(k.default_value);
          }
        }
        return out;
      },
      "The defaults of eval_config.timing's keys that a test process reads (include/kernelfoundry/timing_keys.hpp, "
      "the one table): {name: default}, whole numbers as int, flags as bool.");
  m.def("measure_paired", &MeasurePairedPy, py::arg("candidate"), py::arg("reference"),
        py::arg("options") = py::dict(), py::arg("check") = py::none(),
        "Paired timing (include/kernelfoundry/paired.hpp). candidate/reference: (prepare(load) | None, call(), "
        "sync() | None[, settle() -> after-return CPU seconds | None]). options: PairedOptions fields by name "
        "(other keys are ignored). check(load) -> None | 'status: problem', called after both sides ran in a "
        "checked round. Returns the measurement's record, not judged yet (kf::RecordOf: a dict in the wire form "
        "of include/kernelfoundry/paired_record.hpp). The GIL is released between callbacks.");
  m.def("judge_paired", &JudgePairedPy, py::arg("record"), py::arg("options") = py::dict(),
        py::arg("remeasure") = py::none(),
        "The verdict of a measured record (kf::JudgePaired, paired_record.hpp): the record with status (correct, "
        "noisy, suspicious, or the problem a check found) and detail set. options: eval_config.timing keys "
        "(target_rel_half_width, min_rounds, after_return_cpu_ratio, suspicious_speedup; others ignored). "
        "remeasure() -> a new measurement's record, called when the speedup exceeds suspicious_speedup.");
  m.def(
      "wait_quiet",
      [](int pid, double max_s) {
        py::gil_scoped_release release;
        return kf::WaitProcessQuiet(pid, max_s);
      },
      py::arg("pid"), py::arg("max_s"),
      "Waits until process pid is idle (kf::WaitQuiet: < 50 us of CPU per 200 us slice and no thread running or "
      "waiting for a CPU, two slices in a row; at most max_s) and returns its CPU seconds at the end.");
  m.def("process_cpu_seconds", &kf::ProcessCpuSeconds, py::arg("pid"),
        "CPU seconds used so far by all threads of process pid (0 once it is gone).");
  m.def("compare", &Compare, py::arg("actual"), py::arg("expected"), py::arg("rtol") = 1e-2,
        py::arg("atol_rms") = 1e-3, py::arg("min_ok_ratio") = 0.99,
        "Compares two contiguous buffers (numpy arrays) element by element: None when they agree, else the "
        "problem. dtype and shape must match; integers/booleans exactly; floats within rtol·|e| + "
        "atol_rms·rms(e) (the absolute part scales with the reference's magnitude, so an all-zeros output "
        "fails), at least min_ok_ratio of the elements, and no NaN/Inf where the reference is finite.");
  m.def("readable", &Readable, py::arg("address"), py::arg("bytes"),
        "True when the bytes [address, address + bytes) of this process are mapped with read permission "
        "(/proc/self/maps), so reading them cannot fault.");
  m.def("equal", &Equal, py::arg("a"), py::arg("b"),
        "True when two contiguous buffers have the same type, shape and bytes.");
  m.def(
      "median_ci",
      [](std::vector<double> values, double confidence) {
        kf::MedianCI ci = kf::MedianWithCI(std::move(values), confidence);
        return py::make_tuple(ci.median, ci.low, ci.high);
      },
      py::arg("values"), py::arg("confidence") = 0.95,
      "(median, low, high): the median and its distribution-free confidence interval from order statistics.");
}
