"""The KernelFoundry pytest plugin (reference spec §4.5). A task's ``conftest.py`` does
``from kernelfoundry.conftest import *``.

Options: ``--performance-out PATH`` (runtimes JSON), ``--ref`` (test the reference), ``--itt`` (ITT
annotations), ``--is_templated``, ``--template_params`` (JSON list or Python tuple literal; parsed as data,
never eval'd, B21), ``--runtime_params`` (JSON object), ``--kf-result-fd N`` (the result report, below).

Result report (``--kf-result-fd N``, how KernelFoundry reads a run; never a file in the work dir): at
session end one JSON document is written to the inherited descriptor N (a pipe made by kf) and N is closed:
``{"tests": [{"name", "kind", "status", "message"}], "runtimes": {nodeid: [ms, …]}, "elapsed_ms",
"exitstatus", "skipped_reason", "timed_calls"}`` — the same protocol as the native task SDK (``timed_calls``:
kernel calls made in timed trials, which profiler passes divide their counts by). ``name`` is the node id
relative to task.py ("TestX::test_a[512]"); ``status`` is passed, failed, skipped or error (a failing setup
or teardown is an error; an xfail counts as skipped). A run that ends before its session finishes writes
nothing, and kf judges it a test error.

Runtimes file (written at session end, temp + rename, also when empty): ``{nodeid: [ms, …]}``, e.g.
``{"task.py::TestX::test_bench[1024]": [0.41, 0.40, …]}``, one per-call average in milliseconds per timed
trial. A test that requests a measurement fixture but never measures fails at teardown (B18) instead of
leaving an empty list that breaks scoring later.

The environment variable ``KERNELFOUNDRY_MEASURE_OPTIONS`` (a JSON object of measure_runtime keyword
options, e.g. ``{"warmup_min_time": 0.2, "perf_trials_min_time": 0.5}``) changes the defaults of the
measurement fixtures; options passed explicitly by the test still win.
"""

from __future__ import annotations

import functools
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

from . import measure as _measure
from . import profilers as _profilers
from .build_target import write_json_atomic as _write_json_atomic
from .templates import get_runtime_params_from_argv, parse_runtime_params, parse_template_params

__all__ = [
    "pytest_addoption", "pytest_configure", "pytest_runtest_makereport", "pytest_sessionfinish",
    "pytest_sessionstart", "pytest_runtest_logreport", "pytest_collectreport",
    "use_reference", "profile_store", "profiler_test_label", "measure_runtime", "measure_runtime_torch",
    "torch_profile", "template_params", "template_args_wrapper", "runtime_params", "cleanup",
    "_kf_measurements", "get_runtime_params_from_argv", "MEASURE_OPTIONS_ENV",
]

MEASURE_OPTIONS_ENV = "KERNELFOUNDRY_MEASURE_OPTIONS"
_ENV_OPTION_KEYS = {
    "warmup_min_time": float, "warmup_min_iters": int, "inner_loop_min_time": float,
    "perf_trials_min_iters": int, "perf_trials_min_time": float, "auto_replicate_inputs_size": int,
    "reduce_iterations_for_external_profiler": bool,
}

_STORE = pytest.StashKey[dict]()
_OUTCOMES = pytest.StashKey[dict]()
_STARTED = pytest.StashKey[float]()
_MEASURE_DEFAULTS = pytest.StashKey[dict]()
_CALL_REPORT = pytest.StashKey[pytest.TestReport]()


def pytest_addoption(parser):
    group = parser.getgroup("kernelfoundry")
    group.addoption("--performance-out", dest="performance_out", default=None, metavar="PATH",
                    help="write the runtimes of performance tests ({nodeid: [ms, ...]}) to PATH as JSON")
    group.addoption("--ref", dest="ref", action="store_true", default=False, help="test the reference")
    group.addoption("--itt", dest="itt", action="store_true", default=False,
                    help="annotate the timed phase with ITT tasks")
    group.addoption("--is_templated", dest="is_templated", action="store_true", default=False,
                    help="the kernel takes template parameters (see --template_params)")
    group.addoption("--template_params", dest="template_params", default=None,
                    help="template parameter values: a JSON list or a Python tuple literal")
    group.addoption("--runtime_params", dest="runtime_params", default=None,
                    help="runtime hyperparameters as a JSON object")
    group.addoption("--kf-result-fd", dest="kf_result_fd", type=int, default=None, metavar="N",
                    help="write the run's result report (JSON) to the inherited file descriptor N at session end")


def _measure_defaults_from_env() -> dict:
    text = os.environ.get(MEASURE_OPTIONS_ENV, "").strip()
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise pytest.UsageError(f"{MEASURE_OPTIONS_ENV}: not valid JSON ({e})") from None
    if not isinstance(raw, dict):
        raise pytest.UsageError(f"{MEASURE_OPTIONS_ENV}: expected a JSON object")
    out = {}
    for key, value in raw.items():
        if key not in _ENV_OPTION_KEYS:
            raise pytest.UsageError(f"{MEASURE_OPTIONS_ENV}: unknown option {key!r} "
                                    f"(expected one of {sorted(_ENV_OPTION_KEYS)})")
        out[key] = _ENV_OPTION_KEYS[key](value)
    return out


def pytest_configure(config):
    config.addinivalue_line("markers", "performance: a benchmark; run with -m performance to time it")
    # Live logging at INFO unless the user chose a level (the reference does the same).
    if hasattr(config.option, "log_cli_level") and config.option.log_cli_level is None:
        config.option.log_cli_level = "INFO"
    config.stash.setdefault(_STORE, {})
    config.stash[_OUTCOMES] = {}
    config.stash[_STARTED] = time.monotonic()
    config.stash[_MEASURE_DEFAULTS] = _measure_defaults_from_env()
    try:  # fail fast, before any test runs, on malformed parameters
        parse_template_params(config.getoption("template_params", None))
        parse_runtime_params(config.getoption("runtime_params", None))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_CALL_REPORT] = report


def _relative_id(nodeid: str) -> str:
    """"task.py::TestX::test_a[1]" -> "TestX::test_a[1]" (the ids of Task.correctness_tests)."""
    head, sep, rest = nodeid.partition("::")
    return rest if sep and head.endswith(".py") else nodeid


def _record(config, nodeid: str, kind: str, status: str, message: str) -> None:
    outcomes = config.stash.setdefault(_OUTCOMES, {})
    entry = outcomes.setdefault(nodeid, {"name": _relative_id(nodeid), "kind": kind, "status": status,
                                         "message": message})
    # Worst wins: error (setup/teardown) > failed > skipped > passed.
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    if rank[status] >= rank[entry["status"]]:
        entry["status"] = status
        if message or status != "passed":
            entry["message"] = message


def _message(report) -> str:
    """The first line says what failed (pytest's crash message, e.g. "assert [2, 4, 7] == [2, 4, 6]"); then the
    end of the traceback."""
    if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2])
    text = getattr(report, "longreprtext", "") or ""
    crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", "")
    return (crash.splitlines()[0] + "\n" if crash else "") + text[-4000:]


def pytest_runtest_logreport(report):
    config = _CONFIG[0]
    if config is None or config.getoption("kf_result_fd", None) is None:
        return
    kind = "performance" if "performance" in getattr(report, "keywords", {}) else "correctness"
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            status = "skipped" if report.skipped else "passed"
        else:
            status = "passed" if report.passed else "skipped" if report.skipped else "failed"
        _record(config, report.nodeid, kind, status, "" if report.passed else _message(report))
    elif report.failed:  # setup or teardown
        _record(config, report.nodeid, kind, "error", f"{report.when} failed: {_message(report)}")
    elif report.skipped:  # skipped in setup (e.g. pytest.skip in a fixture, skipif)
        _record(config, report.nodeid, kind, "skipped", _message(report))


def pytest_collectreport(report):
    config = _CONFIG[0]
    if config is None or config.getoption("kf_result_fd", None) is None or not report.failed:
        return
    _record(config, report.nodeid or "<collection>", "collection", "error",
            f"collection failed: {_message(report)}")


_CONFIG: list = [None]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG[0] = session.config


def _write_result_report(session, exitstatus) -> None:
    fd = session.config.getoption("kf_result_fd", None)
    if fd is None:
        return
    outcomes = list(session.config.stash.get(_OUTCOMES, {}).values())
    skipped = [o["message"] for o in outcomes if o["status"] == "skipped" and o["message"]]
    doc = {
        "tests": outcomes,
        "runtimes": session.config.stash.get(_STORE, {}),
        "skipped_reason": skipped[0] if skipped else None,
        "elapsed_ms": (time.monotonic() - session.config.stash.get(_STARTED, time.monotonic())) * 1000.0,
        "exitstatus": int(exitstatus),
        "timed_calls": _profilers.timed_calls(),
    }
    data = json.dumps(doc, allow_nan=False, default=str).encode("utf-8")
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)


def pytest_sessionfinish(session, exitstatus):
    _write_result_report(session, exitstatus)
    path = session.config.getoption("performance_out", None)
    if not path:
        return
    store = session.config.stash.setdefault(_STORE, {})
    target = Path(path)
    if not target.is_absolute():
        target = Path(session.config.invocation_params.dir) / target
    _write_json_atomic(target, store)


@pytest.fixture(scope="session")
def use_reference(pytestconfig) -> bool:
    """True when the run tests the reference (``--ref``)."""
    return bool(pytestconfig.getoption("ref"))


@pytest.fixture(scope="session")
def profile_store(pytestconfig) -> dict:
    """The session's runtimes: {nodeid: [ms, …]} (what --performance-out receives)."""
    return pytestconfig.stash.setdefault(_STORE, {})


@pytest.fixture(autouse=True)
def profiler_test_label(request):
    """Sets KERNELFOUNDRY_PROFILE_LABEL to the test's node id while it runs (profiler segment labels)."""
    old = os.environ.get("KERNELFOUNDRY_PROFILE_LABEL")
    os.environ["KERNELFOUNDRY_PROFILE_LABEL"] = request.node.nodeid
    yield request.node.nodeid
    if old is None:
        os.environ.pop("KERNELFOUNDRY_PROFILE_LABEL", None)
    else:
        os.environ["KERNELFOUNDRY_PROFILE_LABEL"] = old


@pytest.fixture
def _kf_measurements(request, profile_store):
    """Per-test sample list shared by the measurement fixtures; at teardown the samples go to the store, and
    a test that passed without measuring anything is turned into an error (B18)."""
    samples: list = []
    yield samples
    nodeid = request.node.nodeid
    if samples:
        profile_store.setdefault(nodeid, []).extend(samples)
        return
    report = request.node.stash.get(_CALL_REPORT, None)
    if report is not None and report.passed:
        pytest.fail(f"{nodeid} requested a measurement fixture (measure_runtime / measure_runtime_torch) but "
                    "never called it: no runtimes were recorded for this benchmark", pytrace=False)


def _bind(fn: Callable, samples: list, defaults: dict) -> Callable:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> list:
        user_output = kwargs.pop("output", None)
        result = fn(*args, **{**defaults, **kwargs}, output=samples)
        if user_output is not None:
            user_output.extend(result)
        return result

    return run


def _defaults(request) -> dict:
    if _MEASURE_DEFAULTS not in request.config.stash:  # a task conftest replaced our pytest_configure
        request.config.stash[_MEASURE_DEFAULTS] = _measure_defaults_from_env()
    return {"use_itt": bool(request.config.getoption("itt")), **request.config.stash[_MEASURE_DEFAULTS]}


@pytest.fixture
def measure_runtime(request, _kf_measurements) -> Callable:
    """``measure_runtime(target, sync_fn, args=None, kwargs=None, **options)`` (kernelfoundry.measure), with
    the samples recorded under this test's node id."""
    return _bind(_measure.measure_runtime, _kf_measurements, _defaults(request))


@pytest.fixture
def measure_runtime_torch(request, _kf_measurements) -> Callable:
    """``measure_runtime_torch(target, device, args=None, kwargs=None, **options)``: torch device
    synchronisation (CUDA/XPU; no-op on the CPU), samples recorded under this test's node id."""
    return _bind(_measure.measure_runtime_torch, _kf_measurements, _defaults(request))


@pytest.fixture
def torch_profile(request, _kf_measurements) -> Callable:
    """Deprecated alias of measure_runtime_torch."""
    warnings.warn("the torch_profile fixture is deprecated; use measure_runtime_torch", DeprecationWarning)
    return _bind(_measure.measure_runtime_torch, _kf_measurements, _defaults(request))


@pytest.fixture(scope="session")
def template_params(pytestconfig):
    """The ``--template_params`` values as a tuple of Python values, or None when not templated."""
    params = parse_template_params(pytestconfig.getoption("template_params"))
    if params is None and pytestconfig.getoption("is_templated"):
        raise pytest.UsageError("--is_templated given without --template_params")
    return params


@pytest.fixture(scope="session")
def template_args_wrapper(template_params) -> Callable[[Callable], Callable]:
    """``wrap(fn)``: when the run is templated, a function calling ``fn(*args, *template_params, **kwargs)``;
    otherwise ``fn`` itself."""
    def wrap(fn: Callable) -> Callable:
        if not template_params:
            return fn

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, *template_params, **kwargs)

        return call

    return wrap


@pytest.fixture(scope="session")
def runtime_params(pytestconfig) -> dict:
    """The ``--runtime_params`` JSON object ({} when absent)."""
    return parse_runtime_params(pytestconfig.getoption("runtime_params"))


@pytest.fixture(scope="session", autouse=True)
def cleanup():
    """At session end, stops the unitrace session named in UNITRACE_Session (if any)."""
    yield
    if os.environ.get("UNITRACE_Session"):
        _profilers.unitrace_control("stop")
