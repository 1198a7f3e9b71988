// evaluate() for Python — what `kf run` does (src/cli/cmd_run.cc): load/validate the task, apply overrides,
// kf::Evaluate (include/kernelfoundry/evaluate.hpp), and return the Evaluation; with db=URL the run is
// recorded as `kf run --db URL` records it (job, tasks, kernels and job_logs rows, the lineage columns when
// given), else nothing is stored (`kf run --no-store`). Both go through the record module's
// kf::EvaluateWithVerdictCache, as kf run does; verdict_cache=True uses the verdict cache (default off).
//
// GIL policy: the evaluation runs on a worker thread with the GIL released; the progress / output callbacks
// arrive on the pipeline's threads and take the GIL for the call. The calling thread waits without the GIL
// and every 50 ms takes it to run Python's signal handlers: a KeyboardInterrupt (Ctrl-C) requests
// EvaluateOptions::stop (the pipeline kills the running child tree and starts no further phase), the call
// waits for the evaluation to wind down and then re-raises the KeyboardInterrupt. An exception raised by a
// callback also requests the stop and is re-raised after the evaluation ended.
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>

#include "convert.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/evaluate.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/store.hpp"
#include "kernelfoundry/verdict_cache.hpp"
#include "objects.hpp"

namespace kfpy {
namespace {

using kf::Json;

struct PyEvaluation {
  std::shared_ptr<kf::Evaluation> ev;
  std::optional<kf::RecordedRun> recorded{};  ///< set when evaluate(db=...) stored the run
};

/// The lineage keyword arguments of evaluate() (None = unset) as a kf::Lineage, checked by LineageFromJson.
kf::Lineage LineageArgs(const py::dict& kwargs) {
  kf::Json j = kf::Json::object();
  for (const char* key : kf::kLineageKeys) {
    if (kwargs.contains(key) && !kwargs[key].is_none()) j[key] = ToJson(kwargs[key]);
  }
  return kf::LineageFromJson(j, "evaluate()");
}

/// A Python callable shared with the pipeline's threads: copies of the shared_ptr never touch Python
/// reference counts; the last release takes the GIL.
struct Callable {
  py::object fn;
  explicit Callable(py::object f) : fn(std::move(f)) {}
  ~Callable() {
    py::gil_scoped_acquire gil;
    fn = py::object();
  }
};

/// What the callbacks share with the waiting thread: the first exception a callback raised.
struct CallbackState {
  std::mutex mu;
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  std::stop_source stop;

  void Fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu);
    if (!error) error = std::move(e);
    failed = true;
    stop.request_stop();
  }
};

py::dict EventDict(const kf::PhaseEvent& e) {
  py::dict d;
  d["phase"] = kf::PhaseName(e.phase);
  d["variant"] = Str(e.variant);
  d["gpu_arch"] = Str(e.gpu_arch);
  d["finished"] = e.finished;
  d["ok"] = e.ok;
  d["elapsed_s"] = e.elapsed_s;
  d["note"] = Str(e.note);
  return d;
}

/// The task to evaluate: a copy of a Task object, or a package path/bytes loaded as `kf run` does (the
/// package's overrides.yml applies unless `overrides` is given).
kf::Task ResolveTask(py::handle task_arg, py::handle* overrides, py::object* metadata_overrides) {
  if (py::isinstance<PyTask>(task_arg)) return *task_arg.cast<const PyTask&>().task;
  const kf::TaskCreateOptions& options = CreateOptions();
  std::pair<kf::Task, Json> created;
  if (PyBytes_Check(task_arg.ptr()) || PyByteArray_Check(task_arg.ptr())) {
    const std::string bytes = Bytes(task_arg, "task", false);
    py::gil_scoped_release release;
    created = kf::Task::CreateFromBytes(bytes, options);
  } else {
    const std::string path = FsPath(task_arg, "task");
    py::gil_scoped_release release;
    created = kf::Task::Create(path, options);
  }
  if (overrides->is_none() && created.second.is_object() && created.second.contains("overrides")) {
    *metadata_overrides = ToPy(created.second["overrides"]);
    *overrides = *metadata_overrides;
  }
  return std::move(created.first);
}

/// Runs `body` (which must not throw) on a worker thread while this thread waits without the GIL, taking it
/// every 50 ms to run Python's signal handlers: an exception a handler raises (KeyboardInterrupt on Ctrl-C)
/// requests state.stop and is returned once `body` has finished; null when none was raised.
std::exception_ptr RunReleasingGil(const std::function<void()>& body, CallbackState& state) {
  std::exception_ptr interrupt;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  py::gil_scoped_release release;
  std::thread worker([&] {
    body();
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  while (!done) {
    cv.wait_for(lock, std::chrono::milliseconds(50));
    if (done || interrupt) continue;
    lock.unlock();
    {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {  // a handler raised (KeyboardInterrupt on Ctrl-C)
        try {
          throw py::error_already_set();
        } catch (...) {
          interrupt = std::current_exception();
        }
        state.stop.request_stop();
      }
    }
    lock.lock();
  }
  lock.unlock();
  worker.join();
  return interrupt;
}

std::optional<kf::BlockUpdate> Candidate(py::handle candidate) {
  if (candidate.is_none()) return std::nullopt;
  if (PyUnicode_Check(candidate.ptr())) return kf::BlockUpdate{kf::BlockUpdateShort{{"EVOLVE", Utf8(candidate, "candidate")}}};
  return kf::BlockUpdateFromJson(ToJson(candidate), "candidate");
}

PyEvaluation Evaluate(py::handle task_arg, py::handle candidate, py::handle gpu_arch, bool test_reference,
                      py::handle overrides, py::handle progress, py::handle on_output_line, bool keep_workdir,
                      py::handle work_root, py::handle db, bool verdict_cache, const py::dict& lineage_args) {
  const kf::Lineage lineage = LineageArgs(lineage_args);
  if (db.is_none() && !kf::LineageToJson(lineage).empty()) {
    throw kf::Error(kf::ErrorKind::kInvalidArgument, "lineage columns are stored with the run: pass db=URL too",
                    "evaluate()", "db");
  }
  std::unique_ptr<kf::Store> store;
  if (!db.is_none()) {
    const std::string url = FsPath(db, "db");
    py::gil_scoped_release release;
    store = kf::OpenStore(url);  // before anything runs: a bad URL fails fast
  }
  py::object metadata_overrides;
  kf::Task task = ResolveTask(task_arg, &overrides, &metadata_overrides);
  task.Validate(kf::HarnessTaskKinds());
  if (!overrides.is_none()) task.ApplyConfig(kf::MergeConfig(task.config, ToJson(overrides)));
  const std::optional<kf::BlockUpdate> update = Candidate(candidate);

  auto state = std::make_shared<CallbackState>();
  kf::EvaluateOptions eo;
  if (!gpu_arch.is_none()) eo.gpu_arch = Utf8(gpu_arch, "gpu_arch");
  eo.test_reference = test_reference;
  eo.keep_workdir = keep_workdir;
  if (!work_root.is_none()) eo.work_root = FsPath(work_root, "work_root");
  eo.stop = state->stop.get_token();
  if (!progress.is_none()) {
    auto cb = std::make_shared<Callable>(py::reinterpret_borrow<py::object>(progress));
    eo.progress = [cb, state](const kf::PhaseEvent& e) {
      if (state->failed) return;
      py::gil_scoped_acquire gil;
      try {
        cb->fn(EventDict(e));
      } catch (...) {
        state->Fail(std::current_exception());
      }
    };
  }
  if (!on_output_line.is_none()) {
    auto cb = std::make_shared<Callable>(py::reinterpret_borrow<py::object>(on_output_line));
    eo.on_output_line = [cb, state](bool is_stderr, const std::string& line) {
      if (state->failed) return;
      py::gil_scoped_acquire gil;
      try {
        cb->fn(is_stderr, Str(line));
      } catch (...) {
        state->Fail(std::current_exception());
      }
    };
  }

  auto ev = std::make_shared<kf::Evaluation>();
  std::optional<kf::RecordedRun> recorded;
  std::exception_ptr eval_error;
  std::exception_ptr interrupt = RunReleasingGil([&] {
    try {
      // The record module's one way to evaluate (and record, with db=URL), through the verdict cache when asked.
      kf::RecordedEvaluation run = kf::EvaluateWithVerdictCache(task, update, eo, store.get(),
                                                                kf::RecordOptions{.lineage = lineage}, verdict_cache);
      *ev = std::move(run.ev);
      recorded = std::move(run.recorded);
    } catch (...) {
      eval_error = std::current_exception();
    }
  }, *state);
  if (interrupt) std::rethrow_exception(interrupt);
  if (state->error) std::rethrow_exception(state->error);
  if (eval_error) std::rethrow_exception(eval_error);
  return PyEvaluation{std::move(ev), std::move(recorded)};
}

py::list Logs(const kf::Evaluation& ev, const std::shared_ptr<kf::Evaluation>& owner) {
  py::list out;
  for (size_t i = 0; i < ev.logs.size(); ++i) {
    kf::ProcessLog* log = &owner->logs[i];
    py::dict d;
    d["name"] = Str(log->name);
    d["result"] = PyProcessResult{Ref<kf::ProcessResult>(owner, [log] { return &log->result; }, "ProcessResult")};
    d["worker_info"] = ToPy(log->worker_info);
    out.append(d);
  }
  return out;
}

}  // namespace

void RegisterEvaluate(py::module_& m) {
  py::class_<PyEvaluation> c(m, "Evaluation",
                             "The outcome of evaluate(): the evaluated task with its build and test results, the "
                             "verdict (typed status, the reference's perf_score 0-5, speedup) and the process logs.");
  auto ev = [](const PyEvaluation& e) -> const kf::Evaluation& { return *e.ev; };
  c.def_property_readonly("task", [](const PyEvaluation& e) {
    return PyTask{std::shared_ptr<kf::Task>(e.ev, &e.ev->task)};
  }, "The candidate task with build_result(_reference) and test_result(_reference) set.");
  c.def_property_readonly("status", [ev](const PyEvaluation& e) { return std::string(kf::EvalStatusName(ev(e).result.status)); },
                          "Typed status: 'correct', 'no_reference', 'value_mismatch', 'build_error', "
                          "'extraction_failed', ... (stable names, see include/kernelfoundry/scoring.hpp).");
  c.def_property_readonly("reference_status", [ev](const PyEvaluation& e) { return std::string(ev(e).result.ReferenceStatus()); },
                          "The reference's status string: 'correct', 'compiled' or 'error'.");
  c.def_property_readonly("status_detail", [ev](const PyEvaluation& e) { return Str(ev(e).result.status_detail); });
  c.def_property_readonly("perf_score", [ev](const PyEvaluation& e) { return ev(e).result.perf_score; },
                          "The reference's scale: 5 correct, 4 value mismatch, 3 tests failed, 2 crash/timeout, 1 not "
                          "compiled, 0 extraction failed/error.");
  c.def_property_readonly("correct", [ev](const PyEvaluation& e) {
    return ev(e).result.perf_score == 5 && ev(e).result.correctness;
  }, "True when the candidate passed its correctness tests (perf_score 5), as `kf run`'s exit code 0.");
  c.def_property_readonly("speedup", [ev](const PyEvaluation& e) { return ev(e).result.runtime_improvement; },
                          "Reference time / candidate time (geometric mean over benchmarks and archs); -1 or the "
                          "reference's 9.999e-10 when there is none.");
  c.def_property_readonly("runtime_ms", [ev](const PyEvaluation& e) { return ev(e).result.runtime; },
                          "Candidate runtime in ms (mean of the benchmarks' means); -1 when not measured.");
  c.def_property_readonly("combined_score", [ev](const PyEvaluation& e) { return ev(e).combined_score; },
                          "compute_performance_score: perf_score + speedup (or + 1/runtime); -1 when not evaluated.");
  c.def_property_readonly("eval_result", [ev](const PyEvaluation& e) { return ToPy(ev(e).result.ToReferenceJson()); },
                          "The reference's EvalResult dict (compiled, correctness, metadata, runtime, runtime_stats, "
                          "runtime_improvement, improve_over_compile, perf_score, profiler_data, template_results).");
  c.def_property_readonly("result", [ev](const PyEvaluation& e) { return ToPy(ev(e).result.ToJson()); },
                          "eval_result plus eval_log, status, status_detail, reference_status and benchmarks "
                          "[{arch, name, reference_mean_ms, candidate_mean_ms, speedup, num_trials}].");
  c.def_property_readonly("eval_log", [ev](const PyEvaluation& e) { return Str(ev(e).result.eval_log); });
  c.def_property_readonly("archs", [ev](const PyEvaluation& e) { return ev(e).archs; }, "The GPU archs tested.");
  c.def_property_readonly("input_code", [ev](const PyEvaluation& e) { return Str(ev(e).input_code); },
                          "The task's EVOLVE code before the candidate was put in (blocks_to_str).");
  c.def_property_readonly("output_code", [ev](const PyEvaluation& e) { return Str(ev(e).output_code); },
                          "The EVOLVE code evaluated.");
  c.def_property_readonly("logs", [](const PyEvaluation& e) { return Logs(*e.ev, e.ev); },
                          "Every build/test process in run order: [{name, result: ProcessResult, worker_info}].");
  c.def_property_readonly("timings", [ev](const PyEvaluation& e) {
    const kf::Evaluation& v = ev(e);
    py::dict d;
    d["build_s"] = v.build_s;
    d["test_s"] = v.test_s;
    d["wall_s"] = v.wall_s;
    py::list phases;
    for (const kf::PhaseTiming& p : v.timings) phases.append(py::make_tuple(Str(p.name), p.seconds));
    d["phases"] = phases;
    return d;
  }, "Wall seconds: {build_s, test_s, wall_s, phases: [(name, seconds), ...]}.");
  c.def_property_readonly("work_dirs", [ev](const PyEvaluation& e) {
    std::vector<std::string> dirs;
    for (const auto& d : ev(e).kept_dirs) dirs.push_back(d.string());
    return dirs;
  }, "Work directories left on disk (keep_workdir=True).");
  auto recorded = [](const PyEvaluation& e, auto field) -> py::object {
    if (!e.recorded) return py::none();
    return py::cast(field(*e.recorded));
  };
  c.def_property_readonly("job_id", [recorded](const PyEvaluation& e) {
    return recorded(e, [](const kf::RecordedRun& r) { return r.job_id; });
  }, "jobs.id of the recorded run (evaluate(db=...)), else None.");
  c.def_property_readonly("kernel_id", [](const PyEvaluation& e) -> py::object {
    if (!e.recorded || e.recorded->kernel_id == 0) return py::none();
    return py::cast(e.recorded->kernel_id);
  }, "kernels.id of the stored row, else None (not recorded, or the job was canceled).");
  c.def_property_readonly("kernel_uuid", [](const PyEvaluation& e) -> py::object {
    if (!e.recorded || e.recorded->kernel_uuid.empty()) return py::none();
    return Str(e.recorded->kernel_uuid);
  }, "kernels.uuid of the stored row (the parent_uuid of candidates derived from this one), else None.");
  c.def_property_readonly("cached", [](const PyEvaluation& e) -> py::object {
    if (e.ev->cached.is_null()) return py::none();
    return ToPy(e.ev->cached);
  }, "The verdict cache entry this verdict was reused from ({'key', 'job_id', 'created_at'}; "
     "evaluate(verdict_cache=True)), else None (a fresh evaluation).");
  c.def_property_readonly("canceled", [](const PyEvaluation& e) { return e.recorded && e.recorded->canceled; },
                          "True when the recorded job was CANCELED (from outside) before or while it ran.");
  c.def("__repr__", [ev](const PyEvaluation& e) {
    const kf::EvalResult& r = ev(e).result;
    return "Evaluation(status='" + std::string(kf::EvalStatusName(r.status)) + "', perf_score=" +
           std::to_string(r.perf_score) + ", speedup=" + std::to_string(r.runtime_improvement) + ")";
  });

  m.def("evaluate",
        [](py::handle task, py::handle candidate, py::handle gpu_arch, bool test_reference, py::handle overrides,
           py::handle progress, py::handle on_output_line, bool keep_workdir, py::handle work_root, py::handle db,
           bool verdict_cache, py::handle parent_uuid, py::handle trial, py::handle version, py::handle prompt, py::handle answer,
           py::handle language_model, py::handle agent_session_id, py::handle db_user) {
          py::dict lineage;
          lineage["parent_uuid"] = parent_uuid;
          lineage["trial"] = trial;
          lineage["version"] = version;
          lineage["prompt"] = prompt;
          lineage["answer"] = answer;
          lineage["language_model"] = language_model;
          lineage["agent_session_id"] = agent_session_id;
          lineage["db_user"] = db_user;
          return Evaluate(task, candidate, gpu_arch, test_reference, overrides, progress, on_output_line, keep_workdir,
                          work_root, db, verdict_cache, lineage);
        },
        py::arg("task"), py::arg("candidate") = py::none(), py::arg("gpu_arch") = py::none(), py::kw_only(),
        py::arg("test_reference") = true, py::arg("overrides") = py::none(), py::arg("progress") = py::none(),
        py::arg("on_output_line") = py::none(), py::arg("keep_workdir") = false, py::arg("work_root") = py::none(),
        py::arg("db") = py::none(), py::arg("verdict_cache") = false, py::arg("parent_uuid") = py::none(), py::arg("trial") = py::none(),
        py::arg("version") = py::none(), py::arg("prompt") = py::none(), py::arg("answer") = py::none(),
        py::arg("language_model") = py::none(), py::arg("agent_session_id") = py::none(),
        py::arg("db_user") = py::none(),
        "Evaluates a candidate end to end (what `kf run` does): build, correctness, performance, score; with db=URL "
        "the run is recorded there (job, tasks, kernels with the lineage columns given, job_logs), else nothing is "
        "stored. verdict_cache=True reuses an identical earlier verdict as `kf run` does (Evaluation.cached).");
}

}  // namespace kfpy
