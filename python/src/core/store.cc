// Access to stored results (the reference's tables, include/kernelfoundry/store.hpp) for Python.
//
// OpenResultStore is the one place that turns a database URL into a Store: kf::OpenStore, read-only unless
// asked — plain paths, "sqlite:///relative/path", "sqlite:////absolute/path" (SQLAlchemy URLs, as the
// reference's paths.kernels_db_path) and "postgresql[+driver]://user[:password]@host[:port]/db". A writable
// store is what kernelfoundry.eval_pipeline.database opens first (our store creates, checks and migrates the
// schema) and where its job lifecycle updates go (kf::Store::UpdateJob).
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "convert.hpp"
#include "kernelfoundry/store.hpp"
#include "objects.hpp"

namespace kfpy {
namespace {

std::unique_ptr<kf::Store> OpenResultStore(const std::string& url, bool writable) {
  return kf::OpenStore(url, kf::StoreOptions{.read_only = !writable});
}

/// The UTC text of a DATETIME column ("YYYY-MM-DD HH:MM:SS.ffffff") from a datetime (naive = UTC, as the
/// reference's SQLite rows hold it) or from such a string.
std::optional<std::string> Timestamp(py::handle value, const char* field) {
  if (value.is_none()) return std::nullopt;
  if (py::isinstance<py::str>(value)) return Utf8(value, field);
  py::module_ dt = py::module_::import("datetime");
  if (!py::isinstance(value, dt.attr("datetime"))) {
    throw py::type_error(std::string(field) + " must be a datetime or None");
  }
  py::object utc = dt.attr("timezone").attr("utc");
  py::object v = py::reinterpret_borrow<py::object>(value);
  if (!v.attr("tzinfo").is_none()) v = v.attr("astimezone")(utc).attr("replace")(py::arg("tzinfo") = py::none());
  return Utf8(v.attr("strftime")("%Y-%m-%d %H:%M:%S.%f"), field);
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
                        "A results database (tables kernels, jobs, tasks of reference spec §5.6), opened read-only unless "
                        "open_store(..., writable=True). "
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
  c.def("job_logs", [](const PyStore& s, int64_t job_id) {
    kf::Store& store = s.Get();
    std::vector<kf::Json> rows;
    {
      py::gil_scoped_release release;
      rows = store.ListJobLogs(job_id);
    }
    py::list out;
    for (const kf::Json& row : rows) out.append(ToPy(row));
    return out;
  }, py::arg("job_id"), "The `job_logs` rows of a job, oldest first (every column; extra parsed).");
  c.def("task", [](const PyStore& s, const std::string& id) -> py::object {
    kf::Store& store = s.Get();
    std::optional<kf::Json> row;
    {
      py::gil_scoped_release release;
      row = store.GetTask(id);
    }
    return row ? ToPy(*row) : py::none();
  }, py::arg("task_id"), "The `tasks` row with this hash id (Task.hash_id()), or None.");
  c.def("update_job", [](const PyStore& s, int64_t id, py::handle status, py::handle progress, py::handle task_id,
                         py::handle config, py::handle started_at, py::handle finished_at, bool started) {
    kf::JobUpdate u;
    if (!status.is_none()) u.status = kf::ParseJobStatus(Utf8(status, "status"));
    if (!progress.is_none()) u.progress = progress.cast<double>();
    if (!task_id.is_none()) u.task_id = Utf8(task_id, "task_id");
    if (!config.is_none()) u.config = ToJson(config);
    u.started_at = Timestamp(started_at, "started_at");
    u.finished_at = Timestamp(finished_at, "finished_at");
    u.started = started;
    kf::Store& store = s.Get();
    kf::JobUpdateOutcome outcome;
    {
      py::gil_scoped_release release;
      outcome = store.UpdateJob(id, u);
    }
    return outcome == kf::JobUpdateOutcome::kUpdated;
  }, py::arg("job_id"), py::kw_only(), py::arg("status") = py::none(), py::arg("progress") = py::none(),
        py::arg("task_id") = py::none(), py::arg("config") = py::none(), py::arg("started_at") = py::none(),
        py::arg("finished_at") = py::none(), py::arg("started") = false,
        "Applies the job lifecycle (kf::Store::UpdateJob, store.hpp): a terminal status (COMPLETE, FAIL, CANCELED, "
        "VALIDATED) sets finished_at when it is empty, COMPLETE sets progress 1.0, progress is clamped to [0, 1]; "
        "started_at / finished_at (datetime, naive = UTC) are written as given; started=True sets started_at now "
        "once. Returns False, writing nothing, when the job is CANCELED. Raises NotFoundError (a KeyError) for an "
        "unknown job, InvalidArgumentError for an unknown status or NaN progress, IoError when opened read-only.");
  c.def("close", [](PyStore& s) { s.store.reset(); }, "Closes the database (further calls raise).");
  c.def("__enter__", [](py::object self) { return self; });
  c.def("__exit__", [](PyStore& s, py::handle, py::handle, py::handle) { s.store.reset(); });
  c.def("__repr__", [](const PyStore& s) { return "ResultStore('" + s.url + "')"; });

  m.def("open_store", [](py::handle url, bool writable) {
    std::string u = url.is_none() ? kf::DefaultStoreUrl() : FsPath(url, "url");
    std::unique_ptr<kf::Store> store;
    {
      py::gil_scoped_release release;
      store = OpenResultStore(u, writable);
    }
    return PyStore{std::shared_ptr<kf::Store>(std::move(store)), kf::RedactStoreUrl(u)};  // no password in repr
  }, py::arg("url") = py::none(), py::kw_only(), py::arg("writable") = false,
        "Opens a results database, read-only unless writable=True: a path, 'sqlite:///relative/path', "
        "'sqlite:////absolute/path' or 'postgresql://user[:password]@host[:port]/db'; None = $KF_DB, else "
        "runs/kernels.sqlite3 (as `kf results`). Writable: the file or database and missing tables are created and an "
        "older database is migrated (store.hpp). Raises NotFoundError (a FileNotFoundError) for a missing file or "
        "database (read-only), InvalidArgumentError for a stale schema or an unknown URL scheme, IoError (an OSError) "
        "when the server cannot be reached.");
}

}  // namespace kfpy
