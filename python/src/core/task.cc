// Task for Python (reference spec §1.2, §3.4) — a Python object owning one kf::Task
// (include/kernelfoundry/task.hpp). Fields follow the seed document's dataclass; every method calls the C++
// implementation. Task.create uses the pytest test collector with the shared discovery cache.
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "convert.hpp"
#include "kernelfoundry/harness.hpp"
#include "objects.hpp"

namespace kfpy {
namespace {

using kf::Json;
using kf::Task;

PyTask OwnTask(Task t) { return PyTask{std::make_shared<Task>(std::move(t))}; }

std::vector<std::string> StringList(py::handle obj, const char* field) {
  if (py::isinstance<py::str>(obj) || py::isinstance<py::bytes>(obj))
    throw py::type_error(std::string(field) + " must be a list of str");
  std::vector<std::string> out;
  for (py::handle item : py::iter(obj)) out.push_back(Utf8(item, field));
  return out;
}

/// The seed's hyperparameters_buildtime / _runtime fields are the two halves of the wire format's
/// "hyperparameters" {buildtime, runtime} (null when both are None).
Json Hyperparameters(const std::optional<Json>& buildtime, const std::optional<Json>& runtime) {
  if (!buildtime && !runtime) return nullptr;
  Json h = Json::object();
  h["buildtime"] = buildtime.value_or(nullptr);
  h["runtime"] = runtime.value_or(nullptr);
  return h;
}

py::object HyperHalf(const Task& t, const char* key) {
  if (t.hyperparameters.is_object() && t.hyperparameters.contains(key)) return ToPy(t.hyperparameters[key]);
  return py::none();
}

void SetHyperHalf(Task& t, const char* key, py::handle value) {
  std::optional<Json> bt = t.hyperparameters.is_object() && t.hyperparameters.contains("buildtime")
                               ? std::optional<Json>(t.hyperparameters["buildtime"]) : std::nullopt;
  std::optional<Json> rt = t.hyperparameters.is_object() && t.hyperparameters.contains("runtime")
                               ? std::optional<Json>(t.hyperparameters["runtime"]) : std::nullopt;
  (std::string(key) == "buildtime" ? bt : rt) = ToOptionalJson(value);
  if (bt && bt->is_null()) bt.reset();
  if (rt && rt->is_null()) rt.reset();
  t.hyperparameters = Hyperparameters(bt, rt);
}

/// The object to_database_task() returns: the reference's `tasks` row (db.Task) as attributes.
struct DatabaseTask {
  Json row;
};

void RegisterDatabaseTask(py::module_& m) {
  py::class_<DatabaseTask> c(m, "DatabaseTask",
                             "A row of the `tasks` table (the reference's db.Task): attributes id (SHA-256 hash id, "
                             "64 hex chars), task_name, Op_ID (None), task_origin, config, Level_ID (None), task_data, "
                             "has_build_step, correctness_tests, profile_tests, evolve_block, reference_block, "
                             "user_instructions_block, hyperparameters_buildtime, hyperparameters_runtime.");
  c.attr("__tablename__") = "tasks";
  c.def("__getattr__", [](const DatabaseTask& d, const std::string& name) -> py::object {
    if (d.row.contains(name)) return ToPy(d.row[name]);
    if (name == "Op_ID" || name == "Level_ID") return py::none();  // the reference leaves them unset
    throw py::attribute_error("DatabaseTask has no column '" + name + "'");
  });
  c.def("to_dict", [](const DatabaseTask& d) { return ToPy(d.row); },
        "The row as a dict {column: value} (Op_ID and Level_ID are not set, as in the reference).");
  c.def("__dir__", [](const DatabaseTask& d) {
    std::vector<std::string> names = {"Op_ID", "Level_ID", "to_dict"};
    for (const auto& [k, v] : d.row.items()) names.push_back(k);
    return names;
  });
  c.def("__repr__", [](const DatabaseTask& d) {
    return "DatabaseTask(id='" + d.row.value("id", std::string()) + "', task_name=" + d.row["task_name"].dump() + ")";
  });
}

std::string TaskRepr(const Task& t) {
  std::string keys;
  for (const auto& [k, v] : t.blocks) keys += (keys.empty() ? "'" : ", '") + k + "'";
  const std::string name = t.config.is_object() && t.config.contains("task_name")
                               ? Utf8(py::repr(ToPy(t.config["task_name"])), "repr") : "None";
  return "Task(task_name=" + name + ", files=" + std::to_string(t.task_data.size()) + ", blocks=[" + keys +
         "], correctness_tests=" + std::to_string(t.correctness_tests.size()) +
         ", profile_tests=" + std::to_string(t.profile_tests.size()) + ")";
}

/// Task.decode input: the reference's dict; the newer reference's separate hyperparameters_buildtime /
/// _runtime keys are folded into "hyperparameters" when that key is absent.
Json DecodeInput(py::handle data) {
  Json j = ToJson(data);
  if (j.is_object() && !j.contains("hyperparameters") &&
      (j.contains("hyperparameters_buildtime") || j.contains("hyperparameters_runtime"))) {
    auto half = [&](const char* key) {
      return j.contains(key) && !j[key].is_null() ? std::optional<Json>(j[key]) : std::nullopt;
    };
    j["hyperparameters"] = Hyperparameters(half("hyperparameters_buildtime"), half("hyperparameters_runtime"));
  }
  return j;
}

template <typename W, typename C>
void DefResultField(py::class_<PyTask>& c, const char* name, std::optional<C> Task::*member, const char* type_name,
                    const char* doc) {
  c.def_property(name, [member, type_name](const PyTask& s) { return MemberView<W>(TaskRef(s), member, type_name); },
                 [member, name, type_name](const PyTask& s, py::handle v) { SetMember<W>(TaskRef(s), member, v, name, type_name); },
                 doc);
}

}  // namespace

const kf::TaskCreateOptions& CreateOptions() {
  static const kf::TaskCreateOptions options = [] {
    kf::TaskCreateOptions o;
    o.kinds = kf::HarnessTaskKinds();
    return o;
  }();
  return options;
}

void RegisterTask(py::module_& m) {
  RegisterDatabaseTask(m);
  py::class_<PyTask> c(m, "Task",
                       "A kernel-generation problem: the package files, its tests, config, blocks and (once evaluated) "
                       "its build and test results (reference spec §3.4). Fields read the C++ Task; dict and list "
                       "fields return copies (assign the attribute to change them), result fields return views.");
  c.def(py::init([](py::handle task_data, bool has_build_step, bool has_reference_build_step, py::handle correctness,
                    py::handle profile, py::handle config, py::handle blocks, py::handle extract, py::handle build,
                    py::handle build_ref, py::handle test, py::handle test_ref, py::handle hp_build, py::handle hp_run) {
          Task t;
          auto files = OptionalValue<PyFileMap>(task_data, "task_data", "MemoryFileMap");
          if (!files) throw py::type_error("task_data must be a MemoryFileMap");
          t.task_data = std::move(*files);
          t.has_build_step = has_build_step;
          t.has_reference_build_step = has_reference_build_step;
          t.correctness_tests = StringList(correctness, "correctness_tests");
          t.profile_tests = StringList(profile, "profile_tests");
          t.config = ToJson(config);
          if (!blocks.is_none()) t.blocks = kf::BlocksFromJson(ToJson(blocks), "blocks");
          t.extract_code_result = OptionalValue<PyProcessResult>(extract, "extract_code_result", "ProcessResult");
          t.build_result = OptionalValue<PyBuildResult>(build, "build_result", "BuildResult");
          t.build_result_reference = OptionalValue<PyBuildResult>(build_ref, "build_result_reference", "BuildResult");
          t.test_result = OptionalValue<PyTestResult>(test, "test_result", "TestResult");
          t.test_result_reference = OptionalValue<PyTestResult>(test_ref, "test_result_reference", "TestResult");
          t.hyperparameters = Hyperparameters(ToOptionalJson(hp_build), ToOptionalJson(hp_run));
          return OwnTask(std::move(t));
        }),
        py::arg("task_data"), py::arg("has_build_step"), py::arg("has_reference_build_step"),
        py::arg("correctness_tests"), py::arg("profile_tests"), py::arg("config"), py::arg("blocks") = py::none(),
        py::arg("extract_code_result") = py::none(), py::arg("build_result") = py::none(),
        py::arg("build_result_reference") = py::none(), py::arg("test_result") = py::none(),
        py::arg("test_result_reference") = py::none(), py::arg("hyperparameters_buildtime") = py::none(),
        py::arg("hyperparameters_runtime") = py::none(),
        "Keyword construction like the reference's dataclass (blocks defaults to {}). Values are copied in.");

  c.def_property("task_data", [](const PyTask& s) {
    return PyFileMap{TaskRef(s).Child<kf::MemoryFileMap>([](Task& t) { return &t.task_data; }, "MemoryFileMap")};
  }, [](const PyTask& s, py::handle v) {
    auto files = OptionalValue<PyFileMap>(v, "task_data", "MemoryFileMap");
    if (!files) throw py::type_error("task_data must be a MemoryFileMap");
    s->task_data = std::move(*files);
  }, "The package files (a live view: writing to it changes this task).");
  c.def_property("has_build_step", [](const PyTask& s) { return s->has_build_step; },
                 [](const PyTask& s, bool v) { s->has_build_step = v; });
  c.def_property("has_reference_build_step", [](const PyTask& s) { return s->has_reference_build_step; },
                 [](const PyTask& s, bool v) { s->has_reference_build_step = v; });
  c.def_property("correctness_tests", [](const PyTask& s) { return s->correctness_tests; },
                 [](const PyTask& s, py::handle v) { s->correctness_tests = StringList(v, "correctness_tests"); },
                 "Test ids relative to task.py, e.g. 'TestX::test_a[512]' (a copy).");
  c.def_property("profile_tests", [](const PyTask& s) { return s->profile_tests; },
                 [](const PyTask& s, py::handle v) { s->profile_tests = StringList(v, "profile_tests"); },
                 "The @pytest.mark.performance test ids (a copy).");
  c.def_property("config", [](const PyTask& s) { return ToPy(s->config); },
                 [](const PyTask& s, py::handle v) { s->config = ToJson(v); },
                 "The task's config.yaml as a dict (a copy: assign task.config to change it).");
  c.def_property("blocks", [](const PyTask& s) { return ToPy(kf::BlocksToJson(s->blocks)); },
                 [](const PyTask& s, py::handle v) { s->blocks = kf::BlocksFromJson(ToJson(v), "blocks"); },
                 "{KEY: {path: [content, ...]}} for KEY in REFERENCE, EVOLVE, USER_INSTRUCTIONS (a copy).");
  DefResultField<PyProcessResult>(c, "extract_code_result", &Task::extract_code_result, "ProcessResult",
                                  "Set by with_blocks: returncode 0 (blocks replaced) or 1 (a block was None).");
  DefResultField<PyBuildResult>(c, "build_result", &Task::build_result, "BuildResult", "The candidate's build, or None.");
  DefResultField<PyBuildResult>(c, "build_result_reference", &Task::build_result_reference, "BuildResult",
                                "The reference's build, or None.");
  DefResultField<PyTestResult>(c, "test_result", &Task::test_result, "TestResult", "The candidate's tests, or None.");
  DefResultField<PyTestResult>(c, "test_result_reference", &Task::test_result_reference, "TestResult",
                               "The reference's tests, or None.");
  c.def_property("hyperparameters_buildtime", [](const PyTask& s) { return HyperHalf(*s, "buildtime"); },
                 [](const PyTask& s, py::handle v) { SetHyperHalf(*s, "buildtime", v); },
                 "Keyword arguments of the build hooks (config hyperparameters.buildtime), or None.");
  c.def_property("hyperparameters_runtime", [](const PyTask& s) { return HyperHalf(*s, "runtime"); },
                 [](const PyTask& s, py::handle v) { SetHyperHalf(*s, "runtime", v); },
                 "Passed to pytest as --runtime_params=<json> (config hyperparameters.runtime), or None.");
  c.def_property("hyperparameters", [](const PyTask& s) { return ToPy(s->hyperparameters); },
                 [](const PyTask& s, py::handle v) { s->hyperparameters = ToJson(v); },
                 "The wire format's {'buildtime': ..., 'runtime': ...} or None (encode() key 'hyperparameters').");

  c.def_static("create", [](py::handle path_or_bytes) {
    std::pair<Task, Json> created;
    if (PyBytes_Check(path_or_bytes.ptr()) || PyByteArray_Check(path_or_bytes.ptr()) ||
        PyMemoryView_Check(path_or_bytes.ptr())) {
      const std::string bytes = Bytes(path_or_bytes, "path_or_bytes", false);
      py::gil_scoped_release release;
      created = Task::CreateFromBytes(bytes, CreateOptions());
    } else {
      const std::string path = FsPath(path_or_bytes, "path_or_bytes");
      py::gil_scoped_release release;
      created = Task::Create(path, CreateOptions());
    }
    return py::make_tuple(OwnTask(std::move(created.first)), ToPy(created.second));
  }, py::arg("path_or_bytes"),
               "Loads a task package: a directory, a zip/tar file (format sniffed) or the bytes of one (spec §1.2). "
               "Returns (Task, metadata) with metadata {'overrides': {...}} when the package has an overrides.yml. "
               "Test discovery runs pytest once per package content (cached in $KF_CACHE_DIR). Raises NotFoundError "
               "(FileNotFoundError: no such path, no config.yaml), ParseError (ValueError: YAML, block markers), "
               "InvalidArgumentError (ValueError/RuntimeError: no performance test, tests that do not collect).");
  c.def("validate", [](const PyTask& s) { s->Validate(kf::HarnessTaskKinds()); },
        "Checks the structure like the reference (files, task.py, conftest.py, >= 1 correctness and >= 1 "
        "performance test, an EVOLVE block, task_name and job_name in config). Raises InvalidArgumentError (an "
        "AssertionError, as the reference's asserts) listing every problem.");
  c.def("print_info", [](const PyTask& s, py::object print_fn) {
    if (print_fn.is_none()) print_fn = py::module_::import("builtins").attr("print");
    s->PrintInfo([&](const std::string& line) { print_fn(Str(line)); });
  }, py::arg("print_fn") = py::none(),
        "Prints the build flags, tests, config and block files as YAML, one call of print_fn (default print) per "
        "line.");
  c.def("with_blocks", [](const PyTask& s, py::handle blocks, bool keep) {
    kf::BlockUpdate update = kf::BlockUpdateFromJson(ToJson(blocks), "blocks");
    return OwnTask(s->WithBlocks(update, keep));
  }, py::arg("blocks"), py::arg("keep_test_result_reference") = false,
        "A new Task with blocks replaced; this task is not changed. blocks: {KEY: content} (the task must have "
        "exactly one KEY block) or {KEY: {path: [content, ...]}}. A None anywhere ({'EVOLVE': None}, a None per "
        "path or inside a list: B11 fixed) gives a task without files whose extract_code_result has returncode 1. "
        "Build and test results are dropped; keep_test_result_reference keeps the reference's build and test "
        "results. Raises NotFoundError (KeyError: no such block key; AssertionError: block index out of range), "
        "InvalidArgumentError (ValueError: shorthand for a key with several blocks), ParseError (ValueError: "
        "malformed markers).");
  c.def("encode", [](const PyTask& s) { return ToPy(s->Encode()); },
        "The reference's Task.encode() dict: task_data, has_build_step, has_reference_build_step, "
        "correctness_tests, profile_tests, config, blocks, extract_code_result, build_result, "
        "build_result_reference, test_result, test_result_reference, hyperparameters (in that order).");
  c.def_static("decode", [](py::handle data) { return OwnTask(Task::Decode(DecodeInput(data))); }, py::arg("data"),
               "From an encode() dict (task_data, has_build_step, correctness_tests, profile_tests, config and "
               "blocks required; has_reference_build_step defaults to False). Raises ParseError (a ValueError) "
               "naming the key, UnsafeInputError for a path outside the task.");
  c.def("to_database_task", [](const PyTask& s) -> py::object {
    const Json row = s->ToDatabaseTask();
    py::object model;
    try {  // the reference's SQLAlchemy model, when SQLAlchemy is installed
      model = py::module_::import("kernelfoundry.eval_pipeline.database.tables").attr("Task");
    } catch (const py::error_already_set& e) {
      if (!e.matches(PyExc_ImportError)) throw;
      return py::cast(DatabaseTask{row});
    }
    py::dict kwargs = ToPy(row);
    return model(**kwargs);
  },
        "The `tasks` row of this task (id = hash_id()): the reference's SQLAlchemy model database.tables.Task (ready "
        "for database.add_ignore_errors) when SQLAlchemy is installed, else a DatabaseTask with the same attributes. "
        "Raises NotFoundError (a KeyError) when config lacks task_name or task_origin.");
  c.def("hash_id", [](const PyTask& s) { return s->HashId(); },
        "The reference's generate_hash_id: SHA-256 over the base64 contents in sorted path order, config.yaml/.yml "
        "excluded (64 lower-case hex characters).");
  c.def("apply_config", [](const PyTask& s, py::handle config) { s->ApplyConfig(ToJson(config)); }, py::arg("config"),
        "Sets config and copies has_build_step / has_reference_build_step / hyperparameters from it when present.");
  c.def("__eq__", [](const PyTask& s, py::handle o) -> py::object {
    if (!py::isinstance<PyTask>(o)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    return py::bool_(s->Encode() == o.cast<const PyTask&>()->Encode());
  });
  c.attr("__hash__") = py::none();
  c.def("__repr__", [](const PyTask& s) { return TaskRepr(*s); });
  c.def("__copy__", [](const PyTask& s) { return OwnTask(*s); });
  c.def("__deepcopy__", [](const PyTask& s, py::handle) { return OwnTask(*s); }, py::arg("memo"));
  c.def(py::pickle([](const PyTask& s) { return ToPy(s->Encode()); },
                   [](const py::object& st) { return OwnTask(Task::Decode(ToJson(st))); }));
}

}  // namespace kfpy
