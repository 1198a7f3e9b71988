// MemoryFileMap for Python (reference spec §2) — a view of kf::MemoryFileMap (include/kernelfoundry/
// memory_file_map.hpp). `open()` is added in Python (kernelfoundry/eval_pipeline/utils/memory_file_map.py):
// it is stream glue over __getitem__ / __setitem__.
#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "convert.hpp"
#include "objects.hpp"

namespace kfpy {
namespace {

using kf::MemoryFileMap;

constexpr const char* kWhat = "MemoryFileMap";

PyFileMap Own(MemoryFileMap m) { return PyFileMap{Ref<MemoryFileMap>::Own(std::move(m), kWhat)}; }

std::string Key(py::handle p) { return Utf8(py::str(p), "path"); }  // the reference looks files up by str(p)

kf::ArchiveFormat TarFormat(const std::string& mode) {
  if (mode == "w" || mode == "w:") return kf::ArchiveFormat::kTar;
  if (mode == "w:gz") return kf::ArchiveFormat::kTarGz;
  if (mode == "w:bz2") return kf::ArchiveFormat::kTarBz2;
  if (mode == "w:xz") return kf::ArchiveFormat::kTarXz;
  throw kf::Error(kf::ErrorKind::kInvalidArgument, "unsupported tar mode '" + mode + "' (use w, w:gz, w:bz2 or w:xz)",
                  "", "mode");
}

// Keeps only files whose lower-case suffix is in `extensions` (reference from_disk include_extensions).
void FilterExtensions(MemoryFileMap& m, const py::object& extensions) {
  if (extensions.is_none()) return;
  std::vector<std::string> allowed;
  for (py::handle e : extensions) {
    std::string s = Utf8(e, "include_extensions entry");
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    allowed.push_back(std::move(s));
  }
  for (const std::string& path : m.ListFiles()) {
    const size_t slash = path.rfind('/');
    const std::string name = path.substr(slash == std::string::npos ? 0 : slash + 1);
    const size_t dot = name.rfind('.');
    std::string suffix = dot == std::string::npos || dot == 0 ? "" : name.substr(dot);
    std::transform(suffix.begin(), suffix.end(), suffix.begin(), [](unsigned char c) { return std::tolower(c); });
    if (std::find(allowed.begin(), allowed.end(), suffix) == allowed.end()) m.Remove(path);
  }
}

// Exactly one of two keyword arguments (the reference asserts this).
void RequireOne(const py::object& a, const py::object& b, const char* name_a, const char* name_b) {
  if (a.is_none() == b.is_none()) {
    throw kf::Error(kf::ErrorKind::kInvalidArgument,
                    std::string("give exactly one of ") + name_a + " and " + name_b);
  }
}

PyFileMap FromArchiveArgs(const py::object& data, const py::object& path, const char* data_name,
                          const char* path_name) {
  RequireOne(data, path, data_name, path_name);
  if (!path.is_none()) {
    const std::string p = FsPath(path, path_name);
    py::gil_scoped_release release;
    return Own(MemoryFileMap::FromPath(p));
  }
  const std::string bytes = Bytes(data, data_name, false);
  py::gil_scoped_release release;
  return Own(MemoryFileMap::FromArchive(bytes));
}

py::dict MetaDict(const kf::FileMeta& meta) {
  py::dict d;
  if (meta.mode) d["mode"] = *meta.mode;
  if (meta.mtime) d["mtime"] = *meta.mtime;
  return d;
}

}  // namespace

void RegisterFileMap(py::module_& m) {
  py::class_<PyFileMap> c(m, "MemoryFileMap",
                          "Files of a task package held in memory: relative POSIX path -> bytes, plus per-file meta "
                          "{mode: permission bits, mtime: float epoch seconds} (reference spec §2; bugs B1-B4, B12 "
                          "fixed). Insertion order is kept. Views obtained from a Task (task.task_data) read and "
                          "write that task in place.");
  c.def(py::init([] { return Own(MemoryFileMap()); }), "An empty map.");
  c.def("__contains__", [](const PyFileMap& self, py::handle p) { return self.ref->Contains(Key(p)); });
  c.def("__getitem__", [](const PyFileMap& self, py::handle p) -> py::object {
    const std::string* bytes = self.ref->Find(Key(p));
    if (bytes == nullptr) return py::none();
    return py::bytes(*bytes);
  }, "The bytes of a file, or None when it is absent (the reference's __getitem__ does not raise).");
  c.def("__setitem__", [](const PyFileMap& self, py::handle p, py::handle data) {
    std::string bytes = Bytes(data, "file content", false);
    self.ref->Set(Key(p), std::move(bytes));
  }, "Stores bytes; meta becomes {existing mode or 0o644, mtime = now}.");
  c.def("__delitem__", [](const PyFileMap& self, py::handle p) {
    const std::string key = Key(p);
    if (!self.ref->Remove(key)) throw py::key_error(key);
  });
  c.def("__len__", [](const PyFileMap& self) { return self.ref->size(); });
  c.def("__iter__", [](const PyFileMap& self) { return py::iter(py::cast(self.ref->ListFiles())); });
  c.def("__eq__", [](const PyFileMap& self, py::handle other) -> py::object {
    if (!py::isinstance<PyFileMap>(other)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    return py::bool_(*self.ref == *other.cast<const PyFileMap&>().ref);
  });
  c.attr("__hash__") = py::none();
  c.def("__repr__", [](const PyFileMap& self) {
    return "MemoryFileMap(" + std::to_string(self.ref->size()) + " files, " + std::to_string(self.ref->TotalBytes()) +
           " bytes)";
  });
  c.def("__copy__", [](const PyFileMap& self) { return Own(*self.ref); });
  c.def("__deepcopy__", [](const PyFileMap& self, py::handle) { return Own(*self.ref); }, py::arg("memo"));
  c.def(py::pickle([](const PyFileMap& self) { return ToPy(self.ref->Encode()); },
                   [](const py::object& state) { return Own(MemoryFileMap::FromJson(ToJson(state))); }));

  c.def("list_files", [](const PyFileMap& self) { return self.ref->ListFiles(); }, "The paths, in insertion order.");
  c.def("clear", [](const PyFileMap& self) { self.ref->Clear(); }, "Removes every file and its meta.");
  c.def("remove_root_dir", [](const PyFileMap& self) { return self.ref->RemoveRootDir(); },
        "Strips the longest common leading directory of all paths (B1/B2 fixed); True when something was stripped.");
  c.def_property_readonly("meta_map", [](const PyFileMap& self) {
    py::dict d;
    for (const std::string& path : self.ref->ListFiles()) {
      if (const kf::FileMeta* meta = self.ref->Meta(path)) d[Str(path)] = MetaDict(*meta);
    }
    return d;
  }, "{path: {'mode': int, 'mtime': float}} (a copy; keys present only when recorded).");
  c.def("_check_valid_file", [](const PyFileMap&, py::handle p) { return !kf::IsIgnoredPath(Key(p)); },
        py::arg("path"), "False when loaders drop this path (__pycache__, .git, *.pyc, ...; B4 fixed).");

  c.def("encode", [](const PyFileMap& self) { return ToPy(self.ref->Encode()); },
        "The reference's JSON-safe dict {path: {'content': base64 str, 'mode': int?, 'mtime': float?}}.");
  c.def("decode", [](py::object self, py::handle data) {
    self.cast<const PyFileMap&>().ref->Decode(ToJson(data));
    return self;
  }, py::arg("data"),
        "Merges an encoding (new form, or the legacy {path: base64}) into this map and returns it. Raises "
        "ParseError (a ValueError) on a bad shape or base64.");
  c.def("to_tarball", [](const PyFileMap& self, const std::string& mode) {
    const kf::ArchiveFormat format = TarFormat(mode);
    const MemoryFileMap& files = *self.ref;
    std::string out;
    {
      py::gil_scoped_release release;
      out = files.ToArchive(format);
    }
    return py::bytes(out);
  }, py::arg("mode") = "w:gz", "The files as a tar archive (mode w, w:gz, w:bz2, w:xz), as bytes.");
  c.def("to_disk", [](const PyFileMap& self, py::handle out_dir) {
    const std::string dir = FsPath(out_dir, "out_dir");
    const MemoryFileMap& files = *self.ref;
    py::gil_scoped_release release;
    files.ToDisk(dir);
  }, py::arg("out_dir"),
        "Writes every file under out_dir (created), restoring mode and mtime; paths are checked first. Raises "
        "UnsafeInputError / LimitExceededError / IoError.");

  c.def_static("from_tarball", [](const py::object& tarball_bytes, const py::object& tarball_path) {
    return FromArchiveArgs(tarball_bytes, tarball_path, "tarball_bytes", "tarball_path");
  }, py::arg("tarball_bytes") = py::none(), py::arg("tarball_path") = py::none(),
               "Loads a tar archive (any compression) from bytes or a path; exactly one must be given.");
  c.def_static("from_zip", [](const py::object& zip_bytes, const py::object& zip_path) {
    return FromArchiveArgs(zip_bytes, zip_path, "zip_bytes", "zip_path");
  }, py::arg("zip_bytes") = py::none(), py::arg("zip_path") = py::none(),
               "Loads a zip archive from bytes or a path; exactly one must be given.");
  c.def_static("from_archive", [](const py::object& archive_bytes, const py::object& archive_path) {
    return FromArchiveArgs(archive_bytes, archive_path, "archive_bytes", "archive_path");
  }, py::arg("archive_bytes") = py::none(), py::arg("archive_path") = py::none(),
               "Loads a zip or tar archive (format sniffed from the content) from bytes or a path.");
  c.def_static("from_disk", [](py::handle dir, const py::object& include_extensions) {
    const std::string d = FsPath(dir, "dir");
    MemoryFileMap files;
    {
      py::gil_scoped_release release;
      files = MemoryFileMap::FromDisk(d);
    }
    FilterExtensions(files, include_extensions);
    return Own(std::move(files));
  }, py::arg("dir"), py::arg("include_extensions") = py::none(),
               "Loads a directory tree (ignored paths skipped; symlinks and special files refused). "
               "include_extensions: keep only these lower-case suffixes, e.g. ['.py', '.cpp'].");
  c.def_static("from_path", [](py::handle path, const py::object& include_extensions) {
    const std::string p = FsPath(path, "path");
    MemoryFileMap files;
    {
      py::gil_scoped_release release;
      files = MemoryFileMap::FromPath(p);
    }
    FilterExtensions(files, include_extensions);
    return Own(std::move(files));
  }, py::arg("path"), py::arg("include_extensions") = py::none(),
               "A directory (from_disk) or an archive file (format sniffed). Raises NotFoundError "
               "(a FileNotFoundError) for a missing path.");
}

}  // namespace kfpy
