// Read access to stored results (the reference's tables, include/kernelfoundry/store.hpp) for Python.
//
// OpenResultStore is the one place that turns a database URL into a Store: kf::OpenStore, read-only — plain
// paths, "sqlite:///relative/path", "sqlite:////absolute/path" (SQLAlchemy URLs, as the reference's
// paths.kernels_db_path) and "postgresql://user[:password]@host[:port]/db".
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "convert.hpp"
#include "kernelfoundry/store.hpp"
#include "objects.hpp"

namespace kfpy {
namespace {

std::unique_ptr<kf::Store> OpenResultStore(const std::string& url) {
  return kf::OpenStore(url, kf::StoreOptions{.read_only = true});
}

struct PyStore {
  std::shared_ptr<kf::Store> store;
  std::string url;
  kf::Store& Get() const {
    if (!store) throw kf::Error(kf::ErrorKind::kInvalidArgument, "the result store is closed", url);
    return *store;
  }
};

}  // namespace

void RegisterStore(py::module_& m) {
  py::class_<PyStore> c(m, "ResultStore",
                        "A results database opened read-only (tables kernels, jobs, tasks of reference spec §5.6). "
                        "Rows are dicts keyed by column; JSON columns come back parsed; timestamps are UTC text "
                        "'YYYY-MM-DD HH:MM:SS.ffffff'.");
  c.def_property_readonly("url", [](const PyStore& s) { return s.url; });
  c.def("kernels", [](const PyStore& s, py::handle task_name, py::handle job_id, int64_t last, py::handle columns) {
    kf::KernelQuery q;
    if (!task_name.is_none()) q.task_name = Utf8(task_name, "task_name");
    if (!job_id.is_none()) q.job_id = job_id.cast<int64_t>();
    q.last_n = last;
    if (!columns.is_none()) {
      for (py::handle col : columns) q.columns.push_back(Utf8(col, "columns entry"));
    }
    kf::Store& store = s.Get();
    std::vector<kf::Json> rows;
    {
      py::gil_scoped_release release;
      rows = store.ListKernels(q);
    }
    py::list out;
    for (const kf::Json& row : rows) out.append(ToPy(row));
    return out;
  }, py::kw_only(), py::arg("task_name") = py::none(), py::arg("job_id") = py::none(), py::arg("last") = 0,
        py::arg("columns") = py::none(),
        "Rows of `kernels` (oldest first) matching the filters, each with the requested columns (default all) "
        "plus 'job_status'. last: only the newest N rows (0 = all). Raises InvalidArgumentError for an unknown "
        "column.");
  c.def("job", [](const PyStore& s, int64_t id) {
    kf::Store& store = s.Get();
    kf::Json row;
    {
      py::gil_scoped_release release;
      row = store.GetJob(id);
    }
    return ToPy(row);
  }, py::arg("job_id"), "The `jobs` row (every column). Raises NotFoundError (a KeyError) for an unknown id.");
  c.def("task", [](const PyStore& s, const std::string& id) -> py::object {
    kf::Store& store = s.Get();
    std::optional<kf::Json> row;
    {
      py::gil_scoped_release release;
      row = store.GetTask(id);
    }
    return row ? ToPy(*row) : py::none();
  }, py::arg("task_id"), "The `tasks` row with this hash id (Task.hash_id()), or None.");
  c.def("close", [](PyStore& s) { s.store.reset(); }, "Closes the database (further calls raise).");
  c.def("__enter__", [](py::object self) { return self; });
  c.def("__exit__", [](PyStore& s, py::handle, py::handle, py::handle) { s.store.reset(); });
  c.def("__repr__", [](const PyStore& s) { return "ResultStore('" + s.url + "')"; });

  m.def("open_store", [](py::handle url) {
    std::string u = url.is_none() ? kf::DefaultStoreUrl() : FsPath(url, "url");
    std::unique_ptr<kf::Store> store;
    {
      py::gil_scoped_release release;
      store = OpenResultStore(u);
    }
    return PyStore{std::shared_ptr<kf::Store>(std::move(store)), kf::RedactStoreUrl(u)};  // no password in repr
  }, py::arg("url") = py::none(),
        "Opens a results database read-only: a path, 'sqlite:///relative/path', 'sqlite:////absolute/path' or "
        "'postgresql://user[:password]@host[:port]/db'; None = $KF_DB, else runs/kernels.sqlite3 (as `kf results`). "
        "Raises NotFoundError (a FileNotFoundError) for a missing file or database, InvalidArgumentError for a stale "
        "schema or an unknown URL scheme, IoError (an OSError) when the server cannot be reached.");
}

}  // namespace kfpy
