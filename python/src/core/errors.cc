// The one kf::Error -> Python exception mapping (the counterpart of the CLI's ExitCodeFor).
//
// Every kf::ErrorKind has one class, kernelfoundry.eval_pipeline.errors.<Name>, deriving from the common
// base `Error` and from each builtin the Python reference raises for failures of that kind, so that code
// written against the reference (`except KeyError:`, `except ValueError:`, `except AssertionError:`) keeps
// working. The instance's str() is kf::Error::what() ("<file>: <field>: <message>"); the attributes kind
// (ErrorKindName), file, field and message carry the parts.
#include <array>
#include <string>

#include "convert.hpp"

namespace kfpy {
namespace {

constexpr const char* kModule = "kernelfoundry.eval_pipeline.errors";

struct ErrorRow {
  kf::ErrorKind kind;
  const char* name;
  std::vector<PyObject*> builtins;  // the reference's exception types for this kind of failure
  const char* doc;
};

// One row per kind. The reference cases each builtin stands for are named in the docs.
std::vector<ErrorRow> Rows() {
  using K = kf::ErrorKind;
  return {
      {K::kInvalidArgument, "InvalidArgumentError", {PyExc_ValueError, PyExc_AssertionError, PyExc_RuntimeError},
       "Malformed input or an invalid task (kind 'invalid_argument'). Also a ValueError (the reference's "
       "'Multiple blocks exist ...', two config files), an AssertionError (its Task.validate) and a "
       "RuntimeError (its 'Failed to collect profile tests')."},
      {K::kNotFound, "NotFoundError", {PyExc_FileNotFoundError, PyExc_KeyError, PyExc_AssertionError},
       "A required file, key or block does not exist (kind 'not_found'). Also a FileNotFoundError (missing "
       "path or config.yaml), a KeyError (a block key the task lacks, config without task_name) and an "
       "AssertionError (block index out of range), as the reference raises for these."},
      {K::kParse, "ParseError", {PyExc_ValueError, PyExc_KeyError, PyExc_TypeError},
       "Input that cannot be parsed: YAML, JSON shapes, archives, block markers, UTF-8 (kind 'parse'). Also a "
       "ValueError (the reference's block parser), a KeyError (its Task.decode of a dict without a required "
       "key) and a TypeError (its ProcessResult decode of an unknown key)."},
      {K::kIO, "IoError", {PyExc_OSError},
       "The operating system refused a read, write or spawn (kind 'io'). Also an OSError."},
      {K::kLimit, "LimitExceededError", {PyExc_ValueError},
       "A configured limit was exceeded: file count, size, time, memory (kind 'limit'). Also a ValueError."},
      {K::kUnsafe, "UnsafeInputError", {PyExc_ValueError},
       "Input tried to escape its sandbox: zip-slip, absolute path, link, device node (kind 'unsafe'). Also "
       "a ValueError."},
      {K::kUnsupported, "UnsupportedError", {PyExc_NotImplementedError},
       "A feature that is not available here (kind 'unsupported'). Also a NotImplementedError."},
      {K::kInternal, "InternalError", {PyExc_RuntimeError},
       "A bug in KernelFoundry itself (kind 'internal'). Also a RuntimeError."},
  };
}

constexpr size_t kKinds = 8;
std::array<PyObject*, kKinds> g_classes{};  // owned for the life of the process (module never unloaded)
PyObject* g_base = nullptr;

size_t Index(kf::ErrorKind kind) { return static_cast<size_t>(kind); }

}  // namespace

void RegisterErrors(py::module_& m) {
  // BaseException.__str__ on the base class: it precedes the builtins in every subclass's MRO, so str(e) is
  // the message line even where a builtin (KeyError) would quote it.
  py::dict base_dict;
  base_dict["__str__"] = py::handle(PyExc_BaseException).attr("__str__");
  g_base = PyErr_NewExceptionWithDoc(
      (std::string(kModule) + ".Error").c_str(),
      "Base of every KernelFoundry error. str(e) is the C++ kf::Error line '<file>: <field>: <message>'; the "
      "attributes kind (e.g. 'not_found'), file, field and message carry its parts.",
      PyExc_Exception, base_dict.ptr());
  if (g_base == nullptr) throw py::error_already_set();
  m.attr("Error") = py::reinterpret_borrow<py::object>(g_base);
  for (const ErrorRow& row : Rows()) {
    py::tuple bases(1 + row.builtins.size());
    bases[0] = py::reinterpret_borrow<py::object>(g_base);
    for (size_t i = 0; i < row.builtins.size(); ++i) bases[i + 1] = py::reinterpret_borrow<py::object>(row.builtins[i]);
    PyObject* cls = PyErr_NewExceptionWithDoc((std::string(kModule) + "." + row.name).c_str(), row.doc,
                                              bases.ptr(), nullptr);
    if (cls == nullptr) throw py::error_already_set();
    g_classes.at(Index(row.kind)) = cls;
    m.attr(row.name) = py::reinterpret_borrow<py::object>(cls);
  }
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kf::Error& e) {
      SetPythonError(e);
    }
  });
}

py::handle ErrorClass(kf::ErrorKind kind) {
  PyObject* cls = Index(kind) < kKinds ? g_classes[Index(kind)] : nullptr;
  return cls != nullptr ? cls : g_base;
}

void SetPythonError(const kf::Error& e) {
  py::handle cls = ErrorClass(e.kind());
  PyObject* text = PyUnicode_DecodeUTF8(e.what(), static_cast<Py_ssize_t>(std::char_traits<char>::length(e.what())),
                                        "replace");
  PyObject* exc = text != nullptr ? PyObject_CallOneArg(cls.ptr(), text) : nullptr;
  Py_XDECREF(text);
  if (exc == nullptr) return;  // the error of the failed construction stays set
  auto set = [&](const char* name, std::string_view value) {
    PyObject* v = PyUnicode_DecodeUTF8(value.data(), static_cast<Py_ssize_t>(value.size()), "replace");
    if (v != nullptr) PyObject_SetAttrString(exc, name, v);
    Py_XDECREF(v);
  };
  set("kind", kf::ErrorKindName(e.kind()));
  set("file", e.file());
  set("field", e.field());
  set("message", e.message());
  PyErr_SetObject(cls.ptr(), exc);
  Py_DECREF(exc);
}

}  // namespace kfpy
