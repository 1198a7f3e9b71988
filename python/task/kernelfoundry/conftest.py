"""The KernelFoundry pytest plugin for task packages (reference spec §4.5). A task's ``conftest.py`` does
``from kernelfoundry.conftest import *``; that also loads kf's own hooks (kernelfoundry.plugin: the result
report, paired timing) through ``pytest_addhooks``.

Options (the reference's): ``--performance-out PATH`` (runtimes JSON), ``--ref`` (test the reference), ``--itt``
(ITT annotations), ``--is_templated``, ``--template_params`` (JSON list or Python tuple literal; parsed as data,
never eval'd, B21), ``--runtime_params`` (JSON object).

Fixtures (the reference's, same names and call forms): ``use_reference``, ``profile_store``,
``profiler_test_label``, ``measure_runtime``, ``measure_runtime_torch``, ``torch_profile`` (deprecated alias),
``measure_runtime_benchdnn``, ``check_correctness_benchdnn``, ``template_args_wrapper``, ``cleanup``; ours
besides: ``template_params``, ``runtime_params``. ``measure_runtime(target, sync_fn, args=None, kwargs=None,
**options)`` and ``measure_runtime_torch(target, device, args=None, kwargs=None, **options)`` are
kernelfoundry.utils.performance's functions with ``use_itt`` from ``--itt`` and ``output`` the test's entry
of the runtimes; ``output=`` given by the test too is extended with the same samples.

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
import warnings
from typing import Any, Callable

import pytest

from . import benchdnn as _benchdnn
from . import measure as _measure
from . import paired_plugin as _pp
from . import plugin as _plugin
from . import profilers as _profilers
from .executor import Executor as _Executor
from .templates import get_runtime_params_from_argv, parse_template_params, parse_runtime_params
from .utils import performance as _performance

__all__ = [
    "pytest_addhooks", "pytest_addoption", "pytest_configure",
    "use_reference", "profile_store", "profiler_test_label", "measure_runtime", "measure_runtime_torch",
    "torch_profile", "measure_runtime_benchdnn", "check_correctness_benchdnn", "template_params",
    "template_args_wrapper", "runtime_params", "cleanup", "_kf_measurements", "get_runtime_params_from_argv",
    "MEASURE_OPTIONS_ENV",
]

MEASURE_OPTIONS_ENV = "KERNELFOUNDRY_MEASURE_OPTIONS"
_ENV_OPTION_KEYS = {
    "warmup_min_time": float, "warmup_min_iters": int, "inner_loop_min_time": float,
    "perf_trials_min_iters": int, "perf_trials_min_time": float, "auto_replicate_inputs_size": int,
    "reduce_iterations_for_external_profiler": bool,
}

# Captured at import, before any candidate code runs: later patches of these names do not reach the plugin.
_MEASURE_RUNTIME = _performance.measure_runtime
_MEASURE_RUNTIME_TORCH = _performance.measure_runtime_torch
_TORCH_SYNC = _measure._torch_sync
_MEASURE_DEFAULTS = pytest.StashKey[dict]()


def pytest_addhooks(pluginmanager):
    """Registers kf's hooks (kernelfoundry.plugin) once, by name: a no-op when ``-p kernelfoundry.plugin`` did."""
    if pluginmanager.get_plugin("kernelfoundry.plugin") is None and not pluginmanager.is_registered(_plugin):
        pluginmanager.register(_plugin, "kernelfoundry.plugin")


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
    config.stash[_MEASURE_DEFAULTS] = _measure_defaults_from_env()


@pytest.fixture(scope="session")
def use_reference(request, pytestconfig) -> bool:
    """True when the run tests the reference (``--ref``); in paired mode, the side this test instance runs."""
    if hasattr(request, "param"):
        return bool(request.param)
    return bool(pytestconfig.getoption("ref"))


@pytest.fixture(scope="session")
def profile_store(pytestconfig) -> dict:
    """The session's runtimes: {nodeid: [ms, …]} (what --performance-out receives). A custom benchmark stores
    its per-call milliseconds under ``request.node.nodeid``."""
    return pytestconfig.stash.setdefault(_plugin.STORE, {})


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
    """Per-test sample list shared by the measurement fixtures. Outside paired mode it is the test's
    profile_store entry from setup on (as the reference's fixtures register ``profile_store[nodeid] = []``), so
    the samples are visible there during the test; an entry still empty at teardown is removed, and a test that
    passed without any runtimes recorded is turned into an error (B18)."""
    nodeid = request.node.nodeid
    paired = _plugin.is_paired_item(request)  # paired items store their pair's record instead
    samples: list = [] if paired else profile_store.setdefault(nodeid, [])
    yield samples
    if samples:
        return
    if not paired and profile_store.get(nodeid) is samples:
        del profile_store[nodeid]
    report = request.node.stash.get(_plugin.CALL_REPORT, None)
    if report is not None and report.passed and not profile_store.get(nodeid):
        pytest.fail(f"{nodeid} requested a measurement fixture (measure_runtime / measure_runtime_torch) but "
                    "never called it: no runtimes were recorded for this benchmark", pytrace=False)


def _split_call(args: tuple, kwargs: dict) -> tuple[Any, Any, Any, Any, dict]:
    """(target, sync_or_device, inputs args, inputs kwargs, options) of a measurement call in any form."""
    rest = list(args[2:])
    call_args = rest.pop(0) if rest else kwargs.pop("args", None)
    call_kwargs = rest.pop(0) if rest else kwargs.pop("kwargs", None)
    if rest:
        raise TypeError("measure_runtime: give the options after args/kwargs by keyword")
    target = args[0] if args else kwargs.pop("target")
    second = args[1] if len(args) > 1 else kwargs.pop("sync_fn", kwargs.pop("device", None))
    return target, second, call_args, call_kwargs, kwargs


def _executor_call(target: Any, call_args: Any, call_kwargs: Any) -> tuple[Callable, Any, Any]:
    """An executor target with resident inputs: one bound call per input set; rotating sets become a dispatcher
    over their index (so the loop's list mode rotates them)."""
    args_list, kwargs_list = _measure.input_sets(call_args, call_kwargs)
    bounds = [target.bind(a, k) for a, k in zip(args_list, kwargs_list)]
    if len(bounds) == 1:
        return bounds[0].call, None, None
    return (lambda k: bounds[k].call()), [(k,) for k in range(len(bounds))], [{} for _ in bounds]


def _bind(fn: Callable, samples: list, defaults: dict, store: dict, nodeid: str) -> Callable:
    """The fixture's measurement function: `fn` with the defaults and ``output`` = the test's samples (its
    profile_store entry; made that again should the test have replaced or removed it)."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> list:
        user_output = kwargs.pop("output", None)
        target, second, call_args, call_kwargs, options = _split_call(args, kwargs)
        if isinstance(target, _Executor):  # the function under test in its own process: inputs resident
            target, call_args, call_kwargs = _executor_call(target, call_args, call_kwargs)
        result = fn(target, second, call_args, call_kwargs, **{**defaults, **options}, output=samples)
        if store.get(nodeid) is not samples:
            store.setdefault(nodeid, []).extend(result)
        if user_output is not None:
            user_output.extend(result)
        return result

    return run


def _defaults(request) -> dict:
    if _MEASURE_DEFAULTS not in request.config.stash:  # a task conftest replaced our pytest_configure
        request.config.stash[_MEASURE_DEFAULTS] = _measure_defaults_from_env()
    return {"use_itt": bool(request.config.getoption("itt", False)), **request.config.stash[_MEASURE_DEFAULTS]}


def _store(request) -> dict:
    return request.config.stash.setdefault(_plugin.STORE, {})


def _capture(request, samples: list, sync_for: Callable) -> Callable:
    """The fixture's measurement function in a paired item (kernelfoundry.paired_plugin.capture_fn)."""
    state = request.config.stash[_plugin.PAIRED]
    fn = _pp.capture_fn(state, _store(request), request.node.nodeid, samples, sync_for)

    def run(*args: Any, **kwargs: Any) -> list:
        output = kwargs.pop("output", None)
        target, second, call_args, call_kwargs, options = _split_call(args, kwargs)
        return fn(target, second, call_args, call_kwargs, output=output, **options)

    return run


@pytest.fixture
def measure_runtime(request, _kf_measurements) -> Callable:
    """``measure_runtime(target, sync_fn, args=None, kwargs=None, **options)`` (kernelfoundry.utils.performance),
    with the samples recorded under this test's node id. In paired mode: the call is captured and timed against
    the reference's (kernelfoundry.paired)."""
    if _plugin.is_paired_item(request):
        return _capture(request, _kf_measurements, lambda sync_fn: sync_fn)
    return _bind(_MEASURE_RUNTIME, _kf_measurements, _defaults(request), _store(request), request.node.nodeid)


@pytest.fixture
def measure_runtime_torch(request, _kf_measurements) -> Callable:
    """``measure_runtime_torch(target, device, args=None, kwargs=None, **options)``: torch device
    synchronisation (XPU/CUDA; none on the CPU), samples recorded under this test's node id."""
    if _plugin.is_paired_item(request):
        return _capture(request, _kf_measurements, _TORCH_SYNC)
    return _bind(_MEASURE_RUNTIME_TORCH, _kf_measurements, _defaults(request), _store(request),
                 request.node.nodeid)


@pytest.fixture
def torch_profile(request, _kf_measurements) -> Callable:
    """Deprecated alias of measure_runtime_torch."""
    warnings.warn("the torch_profile fixture is deprecated; use measure_runtime_torch", DeprecationWarning)
    if _plugin.is_paired_item(request):
        return _capture(request, _kf_measurements, _TORCH_SYNC)
    return _bind(_MEASURE_RUNTIME_TORCH, _kf_measurements, _defaults(request), _store(request),
                 request.node.nodeid)


@pytest.fixture
def measure_runtime_benchdnn(request, profile_store) -> Callable:
    """``measure_runtime_benchdnn(benchdnn_bin, driver, test_shape, ...)`` (kernelfoundry.benchdnn): oneDNN's
    benchdnn in performance mode; its ``avg_time`` (ms) is recorded under this test's node id."""
    nodeid = request.node.nodeid

    def run(*args: Any, **kwargs: Any) -> list:
        return _benchdnn.measure_runtime_benchdnn(*args, **kwargs, output=profile_store.setdefault(nodeid, []))

    return run


@pytest.fixture
def check_correctness_benchdnn() -> Callable:
    """``check_correctness_benchdnn(benchdnn_bin, driver, test_shape, ...) -> bool`` (kernelfoundry.benchdnn)."""
    return _benchdnn.check_correctness_benchdnn


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
