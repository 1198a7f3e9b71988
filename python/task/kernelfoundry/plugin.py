"""KernelFoundry's own pytest hooks: how kf reads a task run, and paired timing. Loaded by name, once, either by
``-p kernelfoundry.plugin`` (what kf passes) or by the task's ``from kernelfoundry.conftest import *`` (whose
``pytest_addhooks`` imports it), so a task that ships the reference's conftest.py itself (its own options and
fixtures, calling ``kernelfoundry.utils.performance``) is read and paired like one that star-imports ours.

Options: ``--kf-result-fd N`` (the result report, below), ``--kf-paired`` with ``--kf-paired-options JSON``.
The task-facing options (``--ref``, ``--performance-out``, ``--itt``, ``--is_templated``, ``--template_params``,
``--runtime_params``) belong to the conftest layer (kernelfoundry.conftest, or the task's own).

Result report (``--kf-result-fd N``, how KernelFoundry reads a run; never a file in the work dir): at
session end one JSON document is written to the inherited descriptor N (a pipe made by kf) and N is closed:
``{"tests": [{"name", "kind", "status", "message"}], "runtimes": {nodeid: [ms, …]}, "elapsed_ms",
"exitstatus", "skipped_reason", "timed_calls"}`` — the same protocol as the native task SDK (``timed_calls``:
kernel calls made in timed trials, which profiler passes divide their counts by). ``name`` is the node id
relative to task.py ("TestX::test_a[512]"); ``status`` is passed, failed, skipped or error (a failing setup
or teardown is an error; an xfail counts as skipped). A run that ends before its session finishes writes
nothing, and kf judges it a test error. ``runtimes`` are the session's store (the ``profile_store`` fixture's
dict) together with any other dict a task's own ``profile_store`` fixture returned.

Isolation (``--kf-isolate``, kernelfoundry.isolation): the candidate's modules are imported into an executor,
never into this process; the report then carries ``candidate_process`` ("executor" or "test process: <why>").

Paired mode (``--kf-paired``, kernelfoundry.paired_plugin): performance tests run once per side (the session
fixture ``use_reference`` is parametrised, whoever defines it) and each measurement is timed against the
reference's in this process (kernelfoundry.paired); measure_runtime called from the test body, through any path,
is captured the same way. The report then also carries ``paired`` ({nodeid: record}), ``reference_runtimes``,
``reference_tests`` and ``conditions``; ``runtimes`` holds the candidate's per-round ms.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from . import device_timing as _device
from . import executor as _executor
from . import integrity as _integrity
from . import isolation as _isolation
from . import measure as _measure
from . import paired as _paired
from . import paired_plugin as _pp
from . import profilers as _profilers
from .build_target import write_json_atomic as _write_json_atomic
from .templates import parse_runtime_params, parse_template_params

STORE = pytest.StashKey[dict]()
PAIRED = pytest.StashKey[dict]()
CALL_REPORT = pytest.StashKey[pytest.TestReport]()
_OUTCOMES = pytest.StashKey[dict]()
_STARTED = pytest.StashKey[float]()
_HEAP = pytest.StashKey[str]()  # where the heap thresholds came from (_steady_heap)
_FOREIGN = pytest.StashKey[list]()  # profile_store dicts of a task's own conftest

# Captured at import, before any candidate code runs: later patches of these names do not reach the plugin.
_os_write, _os_close = os.write, os.close
_json_dumps = __import__("json").dumps
_ACTIVE = _measure.ACTIVE_CAPTURE

_CONFIG: list = [None]


def _option(config, name: str, default: Any = None) -> Any:
    """An option's value, or `default` when no layer defined it (a task conftest without --runtime_params)."""
    try:
        return config.getoption(name, default)
    except ValueError:
        return default


def pytest_addoption(parser):
    group = parser.getgroup("kernelfoundry")
    if any("--kf-result-fd" in opt.names() for opt in getattr(group, "options", [])):
        return  # registered already (the plugin is imported once, but be safe)
    group.addoption("--kf-result-fd", dest="kf_result_fd", type=int, default=None, metavar="N",
                    help="write the run's result report (JSON) to the inherited file descriptor N at session end")
    group.addoption("--kf-paired", dest="kf_paired", action="store_true", default=False,
                    help="time each performance test's candidate against its reference in this process")
    group.addoption("--kf-paired-options", dest="kf_paired_options", default=None, metavar="JSON",
                    help="paired timing options (kernelfoundry.paired.DEFAULTS keys)")
    group.addoption("--kf-isolate", dest="kf_isolate", action="store_true", default=False,
                    help="import the candidate's modules into a process of their own (kernelfoundry.isolation)")


def pytest_configure(config):
    config.addinivalue_line("markers", "performance: a benchmark; run with -m performance to time it")
    config.stash.setdefault(STORE, {})
    config.stash[PAIRED] = _pp.new_state(_option(config, "kf_paired", False), _option(config, "kf_paired_options"),
                                         pytest.UsageError)
    config.stash[_OUTCOMES] = {}
    config.stash[_STARTED] = time.monotonic()
    config.stash[_FOREIGN] = []
    # An executor whose callee crashed ends this process with the signal: let its last words out of the capture.
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        _executor.BEFORE_FATAL[:] = [lambda: capman.suspend_global_capture(in_=False)]
    config.stash[_HEAP] = _steady_heap()
    if _option(config, "kf_isolate", False):  # before collection: task.py may import the candidate at its top
        _isolation.install(str(config.invocation_params.dir), [a.split("::")[0] for a in config.args])
    try:  # fail fast, before any test runs, on malformed parameters
        parse_template_params(_option(config, "template_params"))
        parse_runtime_params(_option(config, "runtime_params"))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[CALL_REPORT] = report


def _relative_id(nodeid: str) -> str:
    """"task.py::TestX::test_a[1]" -> "TestX::test_a[1]" (the ids of Task.correctness_tests)."""
    head, sep, rest = nodeid.partition("::")
    return rest if sep and head.endswith(".py") else nodeid


def _record(config, nodeid: str, kind: str, status: str, message: str) -> None:
    side = _pp.side_of(nodeid)
    if side is not None:  # paired mode: the reference side's outcomes are kept apart, under the plain id
        state = config.stash[PAIRED]
        outcomes = state["reference_outcomes"] if side else config.stash.setdefault(_OUTCOMES, {})
        nodeid = _pp.pair_key(nodeid)
    else:
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
    if config is None or _option(config, "kf_result_fd") is None:
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
    if config is None or _option(config, "kf_result_fd") is None or not report.failed:
        return
    _record(config, report.nodeid or "<collection>", "collection", "error",
            f"collection failed: {_message(report)}")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG[0] = session.config


def runtimes(config) -> dict:
    """The session's runtimes: our store, with what a task's own profile_store dicts hold merged in."""
    store = config.stash.setdefault(STORE, {})
    for foreign in config.stash.get(_FOREIGN, []):
        for key, values in foreign.items():
            if isinstance(values, (list, tuple)) and key not in store:
                store[key] = [float(v) for v in values]
    return store


def _write_result_report(session, exitstatus) -> None:
    fd = _option(session.config, "kf_result_fd")
    if fd is None:
        return
    store = runtimes(session.config)
    outcomes = list(session.config.stash.get(_OUTCOMES, {}).values())
    skipped = [o["message"] for o in outcomes if o["status"] == "skipped" and o["message"]]
    doc = {
        "tests": outcomes,
        "runtimes": store,
        "skipped_reason": skipped[0] if skipped else None,
        "elapsed_ms": (time.monotonic() - session.config.stash.get(_STARTED, time.monotonic())) * 1000.0,
        "exitstatus": int(exitstatus),
        "timed_calls": _profilers.timed_calls(),
    }
    where = _isolation.report()
    if where is not None:
        doc["candidate_process"] = where
    state = session.config.stash.get(PAIRED, None)
    if state and state["enabled"]:
        _pp.finish_unpaired(state, store)
        _pp.fold_side_entries(state, store)
        doc["paired"] = state["records"]
        doc["reference_runtimes"] = state["reference_runtimes"]
        doc["reference_tests"] = list(state["reference_outcomes"].values())
        doc["conditions"] = _conditions(session.config)
    data = _json_dumps(doc, allow_nan=False, default=str).encode("utf-8")
    try:
        view = memoryview(data)
        while view:
            written = _os_write(fd, view)
            view = view[written:]
    finally:
        _os_close(fd)


def pytest_sessionfinish(session, exitstatus):
    _write_result_report(session, exitstatus)
    path = _option(session.config, "performance_out")
    if not path:
        return
    target = Path(path)
    if not target.is_absolute():
        target = Path(session.config.invocation_params.dir) / target
    _write_json_atomic(target, runtimes(session.config))


# ---- paired mode (kernelfoundry.paired_plugin) ----

def pytest_generate_tests(metafunc):
    state = metafunc.config.stash.get(PAIRED, None)
    if not state or not state["enabled"] or "use_reference" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("performance") is None:
        return
    metafunc.parametrize("use_reference", [False, True], ids=list(_pp.SIDE_IDS), indirect=True, scope="session")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A task's own ``use_reference`` fixture (the reference's conftest returns ``--ref``) gets the side of a
    paired item instead: each side must test what it says."""
    outcome = yield
    if fixturedef.argname != "use_reference" or not hasattr(request, "param"):
        return
    if getattr(fixturedef.func, "__module__", "") == "kernelfoundry.conftest" or outcome.excinfo is not None:
        return
    value = bool(request.param)
    cached = fixturedef.cached_result
    if cached is not None:
        fixturedef.cached_result = (value,) + tuple(cached[1:2]) + (None,) * (len(cached) - 2)
    outcome.force_result(value)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session):
    # A collection-only session (kf's test discovery, python -m kernelfoundry.collect) runs no test: nothing to
    # capture, and touching torch would load it, which the deferred imports of collection avoid.
    if session.config.option.collectonly:
        return
    # The task module (and torch) are imported now; candidate code is not yet (it loads in fixtures).
    _paired.TORCH.capture()
    state = session.config.stash.get(PAIRED, None)
    if state and state["enabled"]:  # what the reference calls, before candidate code can change it
        _integrity.take(list({id(m): m for m in (getattr(i, "module", None) for i in session.items)}.values()))
    threads = os.environ.get("KF_THREADS")
    if threads and _paired.TORCH.mod is not None:
        _paired.TORCH.mod.set_num_threads(int(threads))


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """Around a test function: remembers a task's own profile_store dict; in a paired performance test, routes
    module-level measure_runtime calls to the pair's capture and pairs a custom benchmark by test calls."""
    config = pyfuncitem.config
    foreign = pyfuncitem.funcargs.get("profile_store") if hasattr(pyfuncitem, "funcargs") else None
    store = config.stash.setdefault(STORE, {})
    if isinstance(foreign, dict) and foreign is not store and all(foreign is not f for f in config.stash[_FOREIGN]):
        config.stash[_FOREIGN].append(foreign)
    state = config.stash.get(PAIRED, None)
    nodeid = pyfuncitem.nodeid
    paired = _pp.is_paired(state, nodeid) and pyfuncitem.get_closest_marker("performance") is not None
    if paired:
        _ACTIVE[0] = _pp.capture_fn(state, store, nodeid, [], lambda sync: sync)
    try:
        outcome = yield
    finally:
        _ACTIVE[0] = None
    if not paired or outcome.excinfo is not None:
        return
    names = pyfuncitem._fixtureinfo.argnames
    testargs = {name: pyfuncitem.funcargs[name] for name in names}
    function = pyfuncitem.obj
    target = foreign if isinstance(foreign, dict) else store
    _pp.note_custom_run(state, target, nodeid, lambda: function(**testargs))


def is_paired_item(request) -> bool:
    """True when the requesting test is one side of a paired performance test."""
    return _pp.is_paired(request.config.stash.get(PAIRED, None), request.node.nodeid)


# The heap thresholds kf gives every test process (src/pipeline/test_stage.cc, TimedConditions).
_HEAP_ENV = {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "1073741824"}


def _steady_heap() -> str:
    """Gives this process and its children (executors) the steady heap kf's test stage gives them, when pytest was
    started without it: glibc's mmap and trim thresholds fixed at 1 GiB (mallopt here, the MALLOC_*_THRESHOLD_
    environment for children). With the dynamic thresholds, a call allocating 8 MB temporaries page-faults on
    every call or on none depending on the process's allocation history (6,112 vs 0 minor faults per call
    measured for torch.relu(x + b) * s at 1024x2048), so timings flip between ~2 and ~7 ms in runs of rounds
    (seen 2026-12-01: one executor pair of an identical candidate scored 2.25x). Returns where the heap settings
    came from: "environment" (kf or the user set them; left alone), "plugin" (set here), or "unchanged" (no glibc
    mallopt: another C library)."""
    if "MALLOC_TRIM_THRESHOLD_" in os.environ or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return "environment"
    try:
        import ctypes  # noqa: PLC0415
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "unchanged"
    # malloc.h: M_TRIM_THRESHOLD = -1, M_MMAP_THRESHOLD = -3; mallopt returns 1 on success.
    if not (mallopt(-3, 1 << 30) and mallopt(-1, 1 << 30)):
        return "unchanged"
    os.environ.update(_HEAP_ENV)
    return "plugin"


def _conditions(config) -> dict:
    torch = _paired.TORCH.mod
    return {
        "threads": torch.get_num_threads() if torch is not None else None,
        "heap": config.stash.get(_HEAP, "environment"),
        # "warm": forked from kf's zygote (host side; its worker sets kernelfoundry.fork_server.WARM), "cold": a
        # fresh interpreter.
        "start": "warm" if getattr(sys.modules.get("kernelfoundry.fork_server"), "WARM", False) else "cold",
        "executor_starts": dict(_executor.STARTS),  # executors started warm (fork server) and cold
        # The device (name, driver, clocks before/after, sync and L2-flush policy, timer) or {"type": "host"}.
        "device": _device.conditions(),
        "env": {k: os.environ.get(k) for k in ("KF_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY",
                                                "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MALLOC_MMAP_THRESHOLD_",
                                                "MALLOC_TRIM_THRESHOLD_", "MALLOC_CONF", "LD_PRELOAD")},
    }
