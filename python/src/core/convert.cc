// kf::Json <-> Python objects through the CPython API, and text/bytes helpers (see convert.hpp).
#include "convert.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace kfpy {
namespace {

constexpr int kMaxDepth = 1000;  // json.dumps refuses deeper nesting through the recursion limit too

[[noreturn]] void ThrowPython() { throw py::error_already_set(); }

PyObject* StrRaw(std::string_view s) { return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"); }

PyObject* ToPyRaw(const kf::Json& j) {
  using V = kf::Json::value_t;
  switch (j.type()) {
    case V::null:
    case V::discarded: Py_RETURN_NONE;
    case V::boolean:
      if (j.get<bool>()) Py_RETURN_TRUE;
      Py_RETURN_FALSE;
    case V::number_integer: return PyLong_FromLongLong(j.get<int64_t>());
    case V::number_unsigned: return PyLong_FromUnsignedLongLong(j.get<uint64_t>());
    case V::number_float: return PyFloat_FromDouble(j.get<double>());
    case V::string: return StrRaw(j.get_ref<const std::string&>());
    case V::binary: {
      const auto& b = j.get_binary();
      return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(b.data()), static_cast<Py_ssize_t>(b.size()));
    }
    case V::array: {
      const auto& a = j.get_ref<const kf::Json::array_t&>();
      PyObject* list = PyList_New(static_cast<Py_ssize_t>(a.size()));
      if (list == nullptr) return nullptr;
      Py_ssize_t i = 0;
      for (const kf::Json& e : a) {
        PyObject* v = ToPyRaw(e);
        if (v == nullptr) {
          Py_DECREF(list);
          return nullptr;
        }
        PyList_SET_ITEM(list, i++, v);  // steals v
      }
      return list;
    }
    case V::object: {
      PyObject* dict = PyDict_New();
      if (dict == nullptr) return nullptr;
      for (const auto& [key, value] : j.get_ref<const kf::Json::object_t&>()) {
        PyObject* k = StrRaw(key);
        PyObject* v = k != nullptr ? ToPyRaw(value) : nullptr;
        const int rc = v != nullptr ? PyDict_SetItem(dict, k, v) : -1;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (rc != 0) {
          Py_DECREF(dict);
          return nullptr;
        }
      }
      return dict;
    }
  }
  Py_RETURN_NONE;
}

std::string TypeName(PyObject* o) { return Py_TYPE(o)->tp_name; }

// A dict key as json.dumps writes it: str as is; True/False/None as true/false/null; int and float as text.
std::string KeyString(PyObject* k) {
  if (PyUnicode_Check(k)) return Utf8(k, "dict key");
  if (k == Py_True) return "true";
  if (k == Py_False) return "false";
  if (k == Py_None) return "null";
  if (PyLong_Check(k) || PyFloat_Check(k)) {
    py::object text = py::reinterpret_steal<py::object>(PyObject_Repr(k));
    if (!text) ThrowPython();
    return Utf8(text, "dict key");
  }
  throw py::type_error("keys must be str, int, float, bool or None, not " + TypeName(k));
}

kf::Json FromPyRaw(PyObject* o, int depth) {
  if (depth > kMaxDepth) throw py::value_error("nesting deeper than 1000 levels cannot be converted to JSON");
  if (o == Py_None) return nullptr;
  if (o == Py_True) return true;
  if (o == Py_False) return false;
  if (PyUnicode_Check(o)) return Utf8(o, "str");
  if (PyLong_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0) {
      if (v == -1 && PyErr_Occurred()) ThrowPython();
      return static_cast<int64_t>(v);
    }
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(o);
      if (!PyErr_Occurred()) return static_cast<uint64_t>(u);
      PyErr_Clear();
    }
    throw py::value_error("integer does not fit in 64 bits and cannot be converted to JSON");
  }
  if (PyFloat_Check(o)) return PyFloat_AS_DOUBLE(o);
  if (PyDict_Check(o)) {
    kf::Json obj = kf::Json::object();
    // Python dict keys are unique, so the entries are appended without ordered_map's linear duplicate
    // search (which would make large dicts quadratic).
    auto& entries = static_cast<kf::Json::object_t::Container&>(obj.get_ref<kf::Json::object_t&>());
    entries.reserve(static_cast<size_t>(PyDict_Size(o)));
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &key, &value)) {
      if (PyUnicode_Check(key)) {
        entries.emplace_back(Utf8(key, "dict key"), FromPyRaw(value, depth + 1));
      } else {  // a converted key may collide with a str key: insert through the map
        obj[KeyString(key)] = FromPyRaw(value, depth + 1);
      }
    }
    return obj;
  }
  if (PyList_Check(o) || PyTuple_Check(o)) {
    const bool list = PyList_Check(o);
    const Py_ssize_t n = list ? PyList_GET_SIZE(o) : PyTuple_GET_SIZE(o);
    kf::Json arr = kf::Json::array();
    auto& items = arr.get_ref<kf::Json::array_t&>();
    items.reserve(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) items.push_back(FromPyRaw(list ? PyList_GET_ITEM(o, i) : PyTuple_GET_ITEM(o, i), depth + 1));
    return arr;
  }
  if (PyBytes_Check(o) || PyByteArray_Check(o)) {
    throw py::type_error("Object of type " + TypeName(o) + " is not JSON serializable");
  }
  if (PyIndex_Check(o)) {  // numpy integers
    py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(o));
    if (!i) ThrowPython();
    return FromPyRaw(i.ptr(), depth + 1);
  }
  if (PyMapping_Check(o) && PyObject_HasAttrString(o, "items")) {  // other mappings (e.g. MappingProxy)
    py::object d = py::reinterpret_steal<py::object>(PyDict_New());
    if (!d || PyDict_Merge(d.ptr(), o, 1) != 0) ThrowPython();
    return FromPyRaw(d.ptr(), depth + 1);
  }
  if (Py_TYPE(o)->tp_as_number != nullptr && Py_TYPE(o)->tp_as_number->nb_float != nullptr) {  // numpy floats
    const double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) ThrowPython();
    return d;
  }
  throw py::type_error("Object of type " + TypeName(o) + " is not JSON serializable");
}

}  // namespace

py::object ToPy(const kf::Json& value) {
  PyObject* o = ToPyRaw(value);
  if (o == nullptr) ThrowPython();
  return py::reinterpret_steal<py::object>(o);
}

py::object ToPy(const std::optional<kf::Json>& value) { return value ? ToPy(*value) : py::none(); }

kf::Json ToJson(py::handle obj) { return FromPyRaw(obj.ptr(), 0); }

std::optional<kf::Json> ToOptionalJson(py::handle obj) {
  if (obj.is_none()) return std::nullopt;
  return ToJson(obj);
}

std::string Utf8(py::handle obj, const char* what) {
  if (!PyUnicode_Check(obj.ptr())) throw py::type_error(std::string(what) + " must be a str, not " + TypeName(obj.ptr()));
  Py_ssize_t size = 0;
  if (const char* data = PyUnicode_AsUTF8AndSize(obj.ptr(), &size)) return std::string(data, static_cast<size_t>(size));
  PyErr_Clear();  // lone surrogates: give back the bytes surrogateescape stood for, replace the rest
  py::object b = py::reinterpret_steal<py::object>(PyUnicode_AsEncodedString(obj.ptr(), "utf-8", "surrogateescape"));
  if (!b) {
    PyErr_Clear();
    b = py::reinterpret_steal<py::object>(PyUnicode_AsEncodedString(obj.ptr(), "utf-8", "replace"));
    if (!b) ThrowPython();
  }
  return std::string(PyBytes_AS_STRING(b.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(b.ptr())));
}

std::string Bytes(py::handle obj, const char* what, bool allow_str) {
  PyObject* o = obj.ptr();
  if (PyBytes_Check(o)) return std::string(PyBytes_AS_STRING(o), static_cast<size_t>(PyBytes_GET_SIZE(o)));
  if (PyByteArray_Check(o)) return std::string(PyByteArray_AS_STRING(o), static_cast<size_t>(PyByteArray_GET_SIZE(o)));
  if (allow_str && PyUnicode_Check(o)) return Utf8(obj, what);
  if (PyObject_CheckBuffer(o)) {
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_CONTIG_RO) != 0) ThrowPython();
    std::string out(static_cast<const char*>(view.buf), static_cast<size_t>(view.len));
    PyBuffer_Release(&view);
    return out;
  }
  throw py::type_error(std::string(what) + " must be bytes" + (allow_str ? " or str" : "") + ", not " + TypeName(o));
}

py::str Str(std::string_view utf8) {
  PyObject* o = StrRaw(utf8);
  if (o == nullptr) ThrowPython();
  return py::reinterpret_steal<py::str>(o);
}

std::string FsPath(py::handle obj, const char* what) {
  py::object p = py::reinterpret_steal<py::object>(PyOS_FSPath(obj.ptr()));
  if (!p) ThrowPython();
  if (PyBytes_Check(p.ptr())) return Bytes(p, what, false);
  return Utf8(p, what);
}

}  // namespace kfpy
