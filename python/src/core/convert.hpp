// Conversions between Python objects and the C++ core's values, in one place for the whole _core module:
// kf::Json <-> dict/list/str/int/float/bool/None, text and bytes, and the one kf::Error -> Python exception
// mapping table (the counterpart of the CLI's ExitCodeFor, src/cli/exit_codes.hpp).
//
// Json conversion builds Python objects directly through the C API (no JSON text in between). Strings are
// UTF-8 in C++; invalid bytes become U+FFFD on the way to Python (like DumpJson). Python -> Json accepts
// what json.dumps accepts (dict with str/int/float/bool/None keys, list, tuple, str, int, float, bool,
// None), plus other mappings and objects with __index__ / __float__ (numpy scalars); anything else is a
// TypeError naming the type. All functions need the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <string_view>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"

namespace kfpy {

namespace py = pybind11;

/// kf::Json -> a new Python object (dict keeps the key order).
py::object ToPy(const kf::Json& value);
/// nullopt -> None, else ToPy.
py::object ToPy(const std::optional<kf::Json>& value);
/// A JSON-compatible Python object -> kf::Json. Raises TypeError (unsupported type) or ValueError (an int
/// outside 64 bits, nesting deeper than 1000).
kf::Json ToJson(py::handle obj);
/// None -> nullopt, else ToJson.
std::optional<kf::Json> ToOptionalJson(py::handle obj);

/// UTF-8 text of a str (lone surrogates from surrogateescape decoding become their original bytes).
/// Raises TypeError for anything that is not a str.
std::string Utf8(py::handle obj, const char* what);
/// The bytes of a bytes-like object (bytes, bytearray, memoryview) or, when `allow_str`, of a str (UTF-8).
/// Raises TypeError otherwise.
std::string Bytes(py::handle obj, const char* what, bool allow_str);
/// UTF-8 -> str (invalid bytes replaced by U+FFFD).
py::str Str(std::string_view utf8);
/// os.fspath(obj) as a UTF-8 string: str and os.PathLike are accepted (e.g. pathlib.Path).
std::string FsPath(py::handle obj, const char* what);

/// Creates the exception classes (Error and one subclass per kf::ErrorKind, each also deriving from the
/// builtins the reference raises for that kind of failure) as attributes of `m`, and registers the
/// module-local translator kf::Error -> those classes.
void RegisterErrors(py::module_& m);
/// The Python class for `kind` (valid after RegisterErrors).
py::handle ErrorClass(kf::ErrorKind kind);
/// Sets the Python error indicator from a kf::Error (used by the translator and by callers that must not
/// throw C++ exceptions through Python frames).
void SetPythonError(const kf::Error& e);

}  // namespace kfpy
