// MemoryFileMap for Python (reference spec §2) — a view of kf::MemoryFileMap (include/kernelfoundry/
// memory_file_map.hpp). kernelfoundry/eval_pipeline/utils/memory_file_map.py adds what is Python glue over
// these methods: open() (streams over __getitem__ / __setitem__), the live views file_map and meta_map (over
// _store / _meta / _set_meta) and the loaders from_* callable on the class or on a map (over the static
// _load_* and _merge).
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

/// {'mode'?: int, 'mtime'?: float} (or None / {}) -> FileMeta. TypeError / ValueError for anything else.
kf::FileMeta MetaFromPy(py::handle meta) {
  kf::FileMeta out;
  if (meta.is_none()) return out;
  if (!py::isinstance<py::dict>(meta)) throw py::type_error("meta must be a dict {'mode': int, 'mtime': float}");
  for (auto [k, v] : meta.cast<py::dict>()) {
    const std::string key = Utf8(py::str(k), "meta key");
    if (key == "mode") {
      if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) throw py::type_error("meta 'mode' must be an int");
      const long long mode = v.cast<long long>();
      if (mode < 0 || mode > 07777) throw py::value_error("meta 'mode' must be permission bits (0 to 0o7777)");
      out.mode = static_cast<uint32_t>(mode) & 0777u;
    } else if (key == "mtime") {
      if (v.is_none()) continue;
      out.mtime = py::reinterpret_borrow<py::object>(v).cast<double>();
    } else {
      throw py::value_error("unknown meta key '" + key + "' (expected 'mode' and 'mtime')");
    }
  }
  return out;
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
  c.def("_meta", [](const PyFileMap& self, py::handle p) -> py::object {
    const kf::FileMeta* meta = self.ref->Meta(Key(p));
    return meta != nullptr ? py::object(MetaDict(*meta)) : py::object(py::none());
  }, py::arg("path"), "The meta {'mode'?: int, 'mtime'?: float} of a file, or None when none is recorded.");
  c.def("_set_meta", [](const PyFileMap& self, py::handle p, py::handle meta) {
    const std::string key = Key(p);
    if (!self.ref->Contains(key)) throw py::key_error(key);
    self.ref->SetMeta(key, MetaFromPy(meta));
  }, py::arg("path"), py::arg("meta"),
        "Replaces the meta of an existing file with {'mode'?: int, 'mtime'?: float} ({} or None: no meta). "
        "KeyError for a missing file; TypeError / ValueError for other keys or types.");
  c.def("_store", [](const PyFileMap& self, py::handle p, py::handle data) {
    const std::string key = Key(p);
    std::string bytes = Bytes(data, "file content", false);
    const kf::FileMeta* meta = self.ref->Meta(key);
    self.ref->Set(key, std::move(bytes), meta != nullptr ? *meta : kf::FileMeta{});
  }, py::arg("path"), py::arg("data"),
        "Stores bytes and leaves the meta as it is (none for a new file), as assigning the reference's "
        "file_map[path] does.");
  c.def("_merge", [](py::object self, const PyFileMap& other) {
    kf::MemoryFileMap& dst = *self.cast<const PyFileMap&>().ref;
    const MemoryFileMap src = *other.ref;  // a copy: `other` may be a view of `self`
    for (const std::string& path : src.ListFiles()) {
      const kf::FileMeta* meta = src.Meta(path);
      dst.Set(path, *src.Find(path), meta != nullptr ? *meta : kf::FileMeta{});
    }
    return self;
  }, py::arg("other"),
        "Adds every file of `other` with its meta (an existing path is overwritten and keeps its place, as the "
        "reference's loaders fill their map) and returns this map.");
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
  c.def("to_zip", [](const PyFileMap& self) {
    const MemoryFileMap& files = *self.ref;
    std::string out;
    {
      py::gil_scoped_release release;
      out = files.ToArchive(kf::ArchiveFormat::kZip);
    }
    return py::bytes(out);
  }, "The files as a zip archive (bytes): mode in the external attributes (from_zip reads it back), mtime as the "
     "archive's local date and time (2-second steps).");
  c.def("to_disk", [](const PyFileMap& self, py::handle output_dir) {
    const std::string dir = FsPath(output_dir, "output_dir");
    const MemoryFileMap& files = *self.ref;
    py::gil_scoped_release release;
    files.ToDisk(dir);
  }, py::arg("output_dir"),
        "Writes every file under output_dir (created), restoring mode and mtime; paths are checked first. Raises "
        "UnsafeInputError / LimitExceededError / IoError.");

  // The loaders, each returning a new map; memory_file_map.py exposes them as from_* (class or instance).
  c.def_static("_load_archive", [](const py::object& data, const py::object& path, const std::string& data_name,
                                   const std::string& path_name) {
    return FromArchiveArgs(data, path, data_name.c_str(), path_name.c_str());
  }, py::arg("data"), py::arg("path"), py::arg("data_name"), py::arg("path_name"),
               "A zip or tar archive (any compression, format sniffed from the content) from bytes `data` or file "
               "`path`; exactly one must be given (InvalidArgumentError, an AssertionError, otherwise).");
  c.def_static("_load_disk", [](py::handle dir, const py::object& include_extensions) {
    const std::string d = FsPath(dir, "input_dir");
    MemoryFileMap files;
    {
      py::gil_scoped_release release;
      files = MemoryFileMap::FromDisk(d);
    }
    FilterExtensions(files, include_extensions);
    return Own(std::move(files));
  }, py::arg("input_dir"), py::arg("include_extensions") = py::none(),
               "A directory tree (ignored paths skipped; symlinks and special files refused). include_extensions: "
               "keep only these lower-case suffixes, e.g. ['.py', '.cpp'].");
  c.def_static("_load_path", [](py::handle path, const py::object& include_extensions) {
    const std::string p = FsPath(path, "path");
    MemoryFileMap files;
    {
      py::gil_scoped_release release;
      files = MemoryFileMap::FromPath(p);
    }
    FilterExtensions(files, include_extensions);
    return Own(std::move(files));
  }, py::arg("path"), py::arg("include_extensions") = py::none(),
               "A directory (as _load_disk) or an archive file (format sniffed). Raises NotFoundError (a "
               "FileNotFoundError) for a missing path.");
}

}  // namespace kfpy
