// ProcessResult, BuildResult, TestResult for Python (reference spec §3.1-§3.3) — views of the C++ structs of
// include/kernelfoundry/results.hpp. Attribute access and keyword __init__ follow the reference's dataclasses;
// the logic (sanitising, merge, JSON shapes) is the C++ one.
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "convert.hpp"
#include "objects.hpp"

namespace kfpy {
namespace {

using kf::BuildResult;
using kf::ProcessResult;
using kf::TestResult;

PyProcessResult OwnPR(ProcessResult r) { return PyProcessResult{Ref<ProcessResult>::Own(std::move(r), "ProcessResult")}; }
PyBuildResult OwnBR(BuildResult r) { return PyBuildResult{Ref<BuildResult>::Own(std::move(r), "BuildResult")}; }
PyTestResult OwnTR(TestResult r) { return PyTestResult{Ref<TestResult>::Own(std::move(r), "TestResult")}; }

// Raw child output: bytes as they came, or str (UTF-8); None (not captured) is "".
std::string RawOutput(py::handle obj, const char* what) {
  if (obj.is_none()) return {};
  return Bytes(obj, what, /*allow_str=*/true);
}

std::optional<std::string> OptionalText(py::handle obj, const char* what) {
  if (obj.is_none()) return std::nullopt;
  return Utf8(obj, what);
}

// {name: X} (a dict) -> ordered pairs of X values; X checked against wrapper W.
template <typename W>
auto NamedValues(py::handle obj, const char* field, const char* type_name) {
  using T = std::remove_reference_t<decltype(*std::declval<W>().ref)>;
  if (!py::isinstance<py::dict>(obj)) throw py::type_error(std::string(field) + " must be a dict");
  std::vector<std::pair<std::string, T>> out;
  for (auto [key, value] : py::reinterpret_borrow<py::dict>(obj)) {
    std::optional<T> v = OptionalValue<W>(value, field, type_name);
    if (!v) throw py::type_error(std::string(field) + " values must be " + type_name + ", not None");
    out.emplace_back(Utf8(py::str(key), "key"), std::move(*v));
  }
  return out;
}

// A view of the entry `name` of a vector<pair<string, C>> member of P.
template <typename W, typename P, typename C>
py::dict NamedViews(const Ref<P>& parent, std::vector<std::pair<std::string, C>>* (*select)(P&), const char* what) {
  py::dict d;
  auto* entries = select(*parent);
  if (entries == nullptr) return d;
  for (const auto& entry : *entries) {
    const std::string name = entry.first;
    d[Str(name)] = W{parent.template Child<C>([select, name](P& p) -> C* {
      auto* list = select(p);
      if (list == nullptr) return nullptr;
      for (auto& [n, v] : *list)
        if (n == name) return &v;
      return nullptr;
    }, what)};
  }
  return d;
}

std::vector<std::pair<std::string, ProcessResult>>* Traces(TestResult& t) { return &t.trace_results; }
std::vector<std::pair<std::string, TestResult>>* PerGpu(TestResult& t) {
  return t.results_per_gpu ? &*t.results_per_gpu : nullptr;
}

py::object Repr(py::handle o) { return py::repr(o); }

void RegisterProcessResult(py::module_& m) {
  py::class_<PyProcessResult> c(m, "ProcessResult",
                                "The output of one child process (build, test, profiler pass) with a pipeline message "
                                "and parsed output data (reference spec §3.1). stdout/stderr/message are UTF-8 text "
                                "without terminal escapes.");
  c.def(py::init([](int returncode, py::handle out, py::handle err, py::handle message, py::handle output_data) {
          return OwnPR(ProcessResult::Create(returncode, RawOutput(out, "stdout"), RawOutput(err, "stderr"),
                                             OptionalText(message, "message"), ToOptionalJson(output_data)));
        }),
        py::arg("returncode"), py::arg("stdout"), py::arg("stderr"), py::arg("message") = py::none(),
        py::arg("output_data") = py::none(),
        "Like the reference's __post_init__: bytes are decoded as UTF-8 with replacement and terminal escapes are "
        "stripped from stdout, stderr and message.");
  c.def_property("returncode", [](const PyProcessResult& s) { return s.ref->returncode; },
                 [](const PyProcessResult& s, int v) { s.ref->returncode = v; },
                 "Exit status; negative = killed by that signal number.");
  c.def_property("stdout", [](const PyProcessResult& s) { return Str(s.ref->stdout_text); },
                 [](const PyProcessResult& s, py::handle v) { s.ref->stdout_text = Utf8(v, "stdout"); });
  c.def_property("stderr", [](const PyProcessResult& s) { return Str(s.ref->stderr_text); },
                 [](const PyProcessResult& s, py::handle v) { s.ref->stderr_text = Utf8(v, "stderr"); });
  c.def_property("message", [](const PyProcessResult& s) -> py::object {
    return s.ref->message ? py::object(Str(*s.ref->message)) : py::none();
  }, [](const PyProcessResult& s, py::handle v) { s.ref->message = OptionalText(v, "message"); },
                 "Pipeline note, e.g. 'Process timed out after 120 seconds', or None.");
  c.def_property("output_data", [](const PyProcessResult& s) { return ToPy(s.ref->output_data); },
                 [](const PyProcessResult& s, py::handle v) { s.ref->output_data = ToOptionalJson(v); },
                 "Parsed outputs, e.g. {'runtimes': {node_id: [ms, ...]}}, or None (a copy: assign to change it).");
  c.def("combine_output", [](const PyProcessResult& s, bool include_message) {
    return Str(s.ref->CombineOutput(include_message));
  }, py::arg("include_message") = true,
        "message + '\\n' + stdout + '\\n' + stderr when a message is set and include_message, else stdout + "
        "'\\n' + stderr.");
  c.def_static("create", [](py::handle completed, py::handle message, py::handle output_data) {
    return OwnPR(ProcessResult::Create(completed.attr("returncode").cast<int>(),
                                       RawOutput(completed.attr("stdout"), "stdout"),
                                       RawOutput(completed.attr("stderr"), "stderr"), OptionalText(message, "message"),
                                       ToOptionalJson(output_data)));
  }, py::arg("subprocess_result"), py::arg("message") = py::none(), py::arg("output_data") = py::none(),
               "From a subprocess.CompletedProcess (stdout/stderr bytes, str or None).");
  c.def_static("merge", [](py::handle results) -> py::object {
    auto merged = ProcessResult::Merge(NamedValues<PyProcessResult>(results, "results", "ProcessResult"));
    if (!merged) return py::none();
    return py::cast(OwnPR(std::move(*merged)));
  }, py::arg("results"),
               "Merges {name: ProcessResult} in dict order: stdout and stderr joined by '\\n', messages (non-empty) "
               "joined by '\\n'; returncode 0 only when every part is 0, else the first non-zero (B9 fixed: the "
               "reference takes the max, so 0 beats a signal); output_data {name: data} of the parts that have it "
               "(the reference drops it). None for an empty dict.");
  c.def("encode", [](const PyProcessResult& s) { return ToPy(s.ref->Encode()); },
        "{'returncode', 'stdout', 'stderr', 'message', 'output_data'} (the reference's dataclass dict).");
  c.def_static("decode", [](py::handle data) { return OwnPR(ProcessResult::Decode(ToJson(data))); }, py::arg("data"),
               "From the dict of encode(); unknown or missing keys raise ParseError (a ValueError).");
  c.def("__eq__", [](const PyProcessResult& s, py::handle o) -> py::object {
    if (!py::isinstance<PyProcessResult>(o)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    return py::bool_(*s.ref == *o.cast<const PyProcessResult&>().ref);
  });
  c.attr("__hash__") = py::none();
  c.def("__repr__", [](py::handle self) {
    return DataclassRepr("ProcessResult", {{"returncode", self.attr("returncode")}, {"stdout", self.attr("stdout")},
                                           {"stderr", self.attr("stderr")}, {"message", self.attr("message")},
                                           {"output_data", self.attr("output_data")}});
  });
  c.def("__copy__", [](const PyProcessResult& s) { return OwnPR(*s.ref); });
  c.def("__deepcopy__", [](const PyProcessResult& s, py::handle) { return OwnPR(*s.ref); }, py::arg("memo"));
  c.def(py::pickle([](const PyProcessResult& s) { return ToPy(s.ref->Encode()); },
                   [](const py::object& st) { return OwnPR(ProcessResult::Decode(ToJson(st))); }));
}

void RegisterBuildResult(py::module_& m) {
  py::class_<PyBuildResult> c(m, "BuildResult",
                              "The result of a build (reference spec §3.2): worker_info, the build process's result, "
                              "and the artifacts it produced (paths relative to the task tree).");
  c.def(py::init([](py::handle worker_info, py::handle result, py::handle artifacts) {
          BuildResult b;
          b.worker_info = ToOptionalJson(worker_info);
          b.result = OptionalValue<PyProcessResult>(result, "result", "ProcessResult");
          b.artifacts = OptionalValue<PyFileMap>(artifacts, "artifacts", "MemoryFileMap");
          return OwnBR(std::move(b));
        }),
        py::arg("worker_info") = py::none(), py::arg("result") = py::none(), py::arg("artifacts") = py::none());
  c.def_property("worker_info", [](const PyBuildResult& s) { return ToPy(s.ref->worker_info); },
                 [](const PyBuildResult& s, py::handle v) { s.ref->worker_info = ToOptionalJson(v); },
                 "Host/toolchain facts of the builder, or None (a copy: assign to change it).");
  c.def_property("result", [](const PyBuildResult& s) { return MemberView<PyProcessResult>(s.ref, &BuildResult::result, "ProcessResult"); },
                 [](const PyBuildResult& s, py::handle v) {
                   SetMember<PyProcessResult>(s.ref, &BuildResult::result, v, "result", "ProcessResult");
                 });
  c.def_property("artifacts", [](const PyBuildResult& s) { return MemberView<PyFileMap>(s.ref, &BuildResult::artifacts, "MemoryFileMap"); },
                 [](const PyBuildResult& s, py::handle v) {
                   SetMember<PyFileMap>(s.ref, &BuildResult::artifacts, v, "artifacts", "MemoryFileMap");
                 });
  c.def("encode", [](const PyBuildResult& s) { return ToPy(s.ref->Encode()); },
        "{'worker_info', 'result', 'artifacts'} with artifacts as a MemoryFileMap encoding.");
  c.def_static("decode", [](py::handle data) -> py::object {
    auto b = BuildResult::Decode(ToJson(data));
    return b ? py::cast(OwnBR(std::move(*b))) : py::none();
  }, py::arg("data"), "From the dict of encode(); None gives None. Unknown keys are ignored.");
  c.def("__eq__", [](const PyBuildResult& s, py::handle o) -> py::object {
    if (!py::isinstance<PyBuildResult>(o)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    return py::bool_(*s.ref == *o.cast<const PyBuildResult&>().ref);
  });
  c.attr("__hash__") = py::none();
  c.def("__repr__", [](py::handle self) {
    return DataclassRepr("BuildResult", {{"worker_info", self.attr("worker_info")}, {"result", self.attr("result")},
                                         {"artifacts", self.attr("artifacts")}});
  });
  c.def("__copy__", [](const PyBuildResult& s) { return OwnBR(*s.ref); });
  c.def("__deepcopy__", [](const PyBuildResult& s, py::handle) { return OwnBR(*s.ref); }, py::arg("memo"));
  c.def(py::pickle([](const PyBuildResult& s) { return ToPy(s.ref->Encode()); },
                   [](const py::object& st) { return OwnBR(*BuildResult::Decode(ToJson(st))); }));
}

void RegisterTestResult(py::module_& m) {
  py::class_<PyTestResult> c(m, "TestResult",
                             "The result of the correctness and performance runs (reference spec §3.3), possibly "
                             "merged over several GPU archs (results_per_gpu).");
  c.attr("__test__") = false;  // not a pytest test class, although its name starts with "Test"
  c.def(py::init([](py::handle worker_info, py::handle correctness, py::handle performance, py::handle traces,
                    py::handle per_gpu) {
          TestResult t;
          t.worker_info = ToOptionalJson(worker_info);
          t.correctness_result = OptionalValue<PyProcessResult>(correctness, "correctness_result", "ProcessResult");
          t.performance_result = OptionalValue<PyProcessResult>(performance, "performance_result", "ProcessResult");
          if (!traces.is_none()) t.trace_results = NamedValues<PyProcessResult>(traces, "trace_results", "ProcessResult");
          if (!per_gpu.is_none()) t.results_per_gpu = NamedValues<PyTestResult>(per_gpu, "results_per_gpu", "TestResult");
          return OwnTR(std::move(t));
        }),
        py::arg("worker_info") = py::none(), py::arg("correctness_result") = py::none(),
        py::arg("performance_result") = py::none(), py::arg("trace_results") = py::none(),
        py::arg("results_per_gpu") = py::none(),
        "trace_results defaults to {} (None is accepted for it and gives {}).");
  c.def_property("worker_info", [](const PyTestResult& s) { return ToPy(s.ref->worker_info); },
                 [](const PyTestResult& s, py::handle v) { s.ref->worker_info = ToOptionalJson(v); },
                 "Host facts of the tester ({arch: info} after merge), or None (a copy: assign to change it).");
  c.def_property("correctness_result",
                 [](const PyTestResult& s) { return MemberView<PyProcessResult>(s.ref, &TestResult::correctness_result, "ProcessResult"); },
                 [](const PyTestResult& s, py::handle v) {
                   SetMember<PyProcessResult>(s.ref, &TestResult::correctness_result, v, "correctness_result", "ProcessResult");
                 }, "The run with -m 'not performance', or None.");
  c.def_property("performance_result",
                 [](const PyTestResult& s) { return MemberView<PyProcessResult>(s.ref, &TestResult::performance_result, "ProcessResult"); },
                 [](const PyTestResult& s, py::handle v) {
                   SetMember<PyProcessResult>(s.ref, &TestResult::performance_result, v, "performance_result", "ProcessResult");
                 }, "The run with -m performance (output_data = {'runtimes': {node_id: [ms, ...]}}), or None.");
  c.def_property("trace_results", [](const PyTestResult& s) { return NamedViews<PyProcessResult>(s.ref, &Traces, "ProcessResult"); },
                 [](const PyTestResult& s, py::handle v) {
                   auto values = NamedValues<PyProcessResult>(v, "trace_results", "ProcessResult");
                   s.ref->trace_results = std::move(values);
                 }, "{name: ProcessResult} of profiler passes (a new dict of views: assign to add or remove entries).");
  c.def_property("results_per_gpu", [](const PyTestResult& s) -> py::object {
    if (!s.ref->results_per_gpu) return py::none();
    return NamedViews<PyTestResult>(s.ref, &PerGpu, "TestResult");
  }, [](const PyTestResult& s, py::handle v) {
    if (v.is_none()) {
      s.ref->results_per_gpu.reset();
      return;
    }
    auto values = NamedValues<PyTestResult>(v, "results_per_gpu", "TestResult");
    s.ref->results_per_gpu = std::move(values);
  }, "{arch: TestResult} after a multi-arch merge, else None (kept by decode: B10 fixed).");
  c.def_static("decode", [](py::handle data) -> py::object {
    auto t = TestResult::Decode(ToJson(data));
    return t ? py::cast(OwnTR(std::move(*t))) : py::none();
  }, py::arg("data"), "From the dict of encode(); None gives None. results_per_gpu is kept (B10 fixed).");
  c.def_static("merge", [](py::handle results) {
    return OwnTR(TestResult::Merge(NamedValues<PyTestResult>(results, "results", "TestResult")));
  }, py::arg("results"),
               "Merges {arch: TestResult}: one entry gives (a copy of) itself; otherwise worker_info {arch: info}, "
               "correctness/performance = ProcessResult.merge over the archs, trace keys '<name>_<arch>', "
               "results_per_gpu = the input.");
  c.def("encode", [](const PyTestResult& s) { return ToPy(s.ref->Encode()); },
        "{'worker_info', 'correctness_result', 'performance_result', 'trace_results', 'results_per_gpu'}.");
  c.def("__eq__", [](const PyTestResult& s, py::handle o) -> py::object {
    if (!py::isinstance<PyTestResult>(o)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    return py::bool_(*s.ref == *o.cast<const PyTestResult&>().ref);
  });
  c.attr("__hash__") = py::none();
  c.def("__repr__", [](py::handle self) {
    return DataclassRepr("TestResult", {{"worker_info", self.attr("worker_info")},
                                        {"correctness_result", self.attr("correctness_result")},
                                        {"performance_result", self.attr("performance_result")},
                                        {"trace_results", self.attr("trace_results")},
                                        {"results_per_gpu", self.attr("results_per_gpu")}});
  });
  c.def("__copy__", [](const PyTestResult& s) { return OwnTR(*s.ref); });
  c.def("__deepcopy__", [](const PyTestResult& s, py::handle) { return OwnTR(*s.ref); }, py::arg("memo"));
  c.def(py::pickle([](const PyTestResult& s) { return ToPy(s.ref->Encode()); },
                   [](const py::object& st) { return OwnTR(*TestResult::Decode(ToJson(st))); }));
}

}  // namespace

std::string DataclassRepr(const char* name, std::initializer_list<std::pair<const char*, py::object>> fields) {
  std::string out = std::string(name) + "(";
  bool first = true;
  for (const auto& [field, value] : fields) {
    if (!first) out += ", ";
    first = false;
    out += field;
    out += '=';
    out += Utf8(Repr(value), "repr");
  }
  return out + ")";
}

void RegisterResults(py::module_& m) {
  RegisterProcessResult(m);
  RegisterBuildResult(m);
  RegisterTestResult(m);
}

}  // namespace kfpy
