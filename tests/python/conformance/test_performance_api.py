"""Conformance: the reference's measurement module (kernelfoundry.utils.performance, documented as
kernelfoundry.eval_pipeline.utils.performance; docs/api/public.rst "Benchmarking"): names, signatures, every call
form of measure_runtime / measure_runtime_torch, detect_profiler and profiler_session, as the reference's code
and docstrings define them."""

from __future__ import annotations

import importlib
import logging
import subprocess
import sys

import numpy as np
import pytest
import torch

from compat_util import FAST, REQUIRED, assert_signature_starts_with, fake_tool, params
from kernelfoundry.utils import performance as perf

MB128 = 128 * 2**20
MEASURE_PARAMS = [("target", REQUIRED), ("sync_fn", REQUIRED), ("args", None), ("kwargs", None),
                  ("warmup_min_time", 1.0), ("warmup_min_iters", 10), ("inner_loop_min_time", 0.01),
                  ("perf_trials_min_iters", 10), ("perf_trials_min_time", 1.0), ("use_itt", False),
                  ("reduce_iterations_for_external_profiler", True), ("auto_replicate_inputs_size", MB128),
                  ("info_str", ""), ("output", None), ("profiler_label", None)]
TORCH_PARAMS = [("target", REQUIRED), ("device", REQUIRED), ("args", None), ("kwargs", None),
                ("warmup_min_time", 1.0), ("warmup_min_iters", 10), ("inner_loop_min_time", 0.01),
                ("perf_trials_min_iters", 10), ("perf_trials_min_time", 1.0), ("use_itt", False),
                ("reduce_iterations_for_external_profiler", True), ("auto_replicate_inputs_size", MB128),
                ("output", None), ("profiler_label", None)]


@pytest.fixture(autouse=True)
def no_profiler(monkeypatch):
    for var in ("KERNELFOUNDRY_PROFILER", "UNITRACE_VERSION", "NV_NSIGHT_INJECTION_PORT_BASE", "UNITRACE_Session",
                "KERNELFOUNDRY_vtune_result_dir", "KERNELFOUNDRY_PROFILE_LABEL"):
        monkeypatch.delenv(var, raising=False)


def test_both_documented_paths_are_one_module_without_the_compiled_core():
    code = ("import sys, kernelfoundry.eval_pipeline.utils.performance as a, kernelfoundry.utils.performance as b;"
            "assert a is b, (a, b);"
            "assert 'kernelfoundry.eval_pipeline._core' not in sys.modules, 'the core was loaded';"
            "assert 'torch' not in sys.modules, 'torch was imported';"
            "assert 'kernelfoundry._measure' not in sys.modules, 'the C++ loop was loaded at import'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ep = importlib.import_module("kernelfoundry.eval_pipeline.utils.performance")
    for name in ("measure_runtime", "measure_runtime_torch", "profiler_session", "detect_profiler",
                 "MODEL_RUN_LOOP_NAME", "PROFILER_LABEL_ENV_VAR"):
        assert getattr(ep, name) is getattr(perf, name)


def test_signatures_are_the_references():
    assert params(perf.measure_runtime) == MEASURE_PARAMS
    assert params(perf.measure_runtime_torch) == TORCH_PARAMS
    assert params(perf.profiler_session) == [("profiler_name", REQUIRED), ("stop_on_exit", False)]
    assert params(perf.detect_profiler) == []
    assert perf.MODEL_RUN_LOOP_NAME == "model run loop"
    assert perf.PROFILER_LABEL_ENV_VAR == "KERNELFOUNDRY_PROFILE_LABEL"
    # kernelfoundry.measure (kf's own entry point) accepts the same call forms.
    from kernelfoundry import measure
    assert_signature_starts_with(measure.measure_runtime, MEASURE_PARAMS)


class Recorder:
    """A target recording the positional and keyword arguments of every call."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return len(self.calls)


def test_returns_milliseconds_one_per_trial_and_extends_output():
    out = [123.0]
    samples = perf.measure_runtime(lambda: sum(range(200)), lambda: None, output=out, **FAST)
    assert isinstance(samples, list) and len(samples) >= 10 and all(isinstance(v, float) for v in samples)
    assert out == [123.0] + samples
    assert all(1e-5 < v < 50 for v in samples)  # per-call ms of a ~5 µs call


@pytest.mark.parametrize("args, expected", [((1, 2), (1, 2)), ([1, 2], (1, 2)), (None, ()), ((), ())],
                         ids=["tuple", "list", "none", "empty"])
def test_single_input_set_positional_forms(args, expected):
    rec = Recorder()
    perf.measure_runtime(rec, lambda: None, args=args, auto_replicate_inputs_size=0, **FAST)
    assert rec.calls and all(a == expected and k == {} for a, k in rec.calls)


def test_kwargs_only_and_args_with_kwargs():
    rec = Recorder()
    perf.measure_runtime(rec, lambda: None, kwargs={"k": 3}, **FAST)
    assert {(a, tuple(k.items())) for a, k in rec.calls} == {((), (("k", 3),))}
    rec = Recorder()
    perf.measure_runtime(rec, lambda: None, (7,), {"k": 3}, **FAST)  # positional args and kwargs
    assert {(a, tuple(k.items())) for a, k in rec.calls} == {((7,), (("k", 3),))}


def test_lists_of_input_sets_rotate_in_order():
    rec = Recorder()
    sets = [(1,), (2,), (3,)]
    perf.measure_runtime(rec, lambda: None, args=sets, kwargs=[{}, {"w": 10}, {}], **FAST)
    seen = [(a, k) for a, k in rec.calls]
    period = [((1,), {}), ((2,), {"w": 10}), ((3,), {})]
    start = period.index(seen[0])
    assert seen[:9] == (period[start:] + period * 3)[:9]  # round robin, whatever set the loop starts at
    assert {a for a, _ in seen} == {(1,), (2,), (3,)}
    # Entries may be lists; the documented `kwargs=len(args) * [{}]`.
    rec = Recorder()
    perf.measure_runtime(rec, None, args=[[1, 2], [3, 4]], kwargs=2 * [{}], **FAST)
    assert {a for a, _ in rec.calls} == {(1, 2), (3, 4)}


def test_list_inputs_are_never_replicated():
    x = [np.zeros(8), np.zeros(8)]  # 128 bytes, far below the default target
    seen = set()
    perf.measure_runtime(lambda a: seen.add(id(a)), None, args=[(x[0],), (x[1],)], kwargs=[{}, {}], **FAST)
    assert seen == {id(x[0]), id(x[1])}


def test_mismatched_lists_raise_the_references_assertion_error():
    for args, kwargs in (([(1,), (2,)], [{}]), ((1,), [{}, {}])):
        with pytest.raises(AssertionError, match="If args and kwargs are lists, they must have the same length"):
            perf.measure_runtime(lambda *a: None, None, args=args, kwargs=kwargs, **FAST)
        with pytest.raises(ValueError):  # kf: also a ValueError
            perf.measure_runtime(lambda *a: None, None, args=args, kwargs=kwargs, **FAST)


def test_info_str_goes_into_the_performance_log_line(caplog):
    with caplog.at_level(logging.INFO):
        perf.measure_runtime(lambda: None, lambda: None, info_str="Using device: cpu,", **FAST)
    lines = [r.getMessage() for r in caplog.records if "[Performance test]" in r.getMessage()]
    assert any(line.startswith("[Performance test] Using device: cpu, warm up") for line in lines), lines
    assert any("Avg:" in line and "Median:" in line for line in lines), lines


def test_measure_runtime_torch_on_the_cpu_synchronises_nothing():
    x = torch.randn(64)
    for device in ("cpu", torch.device("cpu"), torch.device, None):
        out: list = []
        samples = perf.measure_runtime_torch(torch.relu, device, args=(x,), output=out, **FAST)
        assert samples == out and len(samples) >= 10
    with pytest.raises(ValueError, match="CUDA is not available"):
        perf.measure_runtime_torch(torch.relu, "cuda", args=(x,), **FAST)


def test_external_profilers_reduce_the_loop(monkeypatch):
    monkeypatch.setenv("KERNELFOUNDRY_PROFILER", "unitrace")
    assert len(perf.measure_runtime(lambda: None, None, **FAST)) == 1  # one trial of 5..20 calls
    assert len(perf.measure_runtime(lambda: None, None, reduce_iterations_for_external_profiler=False,
                                    **FAST)) >= 10
    monkeypatch.setenv("KERNELFOUNDRY_PROFILER", "ncu")
    calls = []
    out = perf.measure_runtime(lambda: calls.append(1), None, **FAST)
    assert len(calls) == 1 and len(out) == 1 and out[0] > 1e-5  # milliseconds (the reference: seconds, B19)


def test_detect_profiler_rules(monkeypatch):
    assert perf.detect_profiler() is None
    monkeypatch.setenv("UNITRACE_VERSION", "2.1")
    assert perf.detect_profiler() == "unitrace"
    monkeypatch.delenv("UNITRACE_VERSION")
    monkeypatch.setenv("NV_NSIGHT_INJECTION_PORT_BASE", "49152")
    assert perf.detect_profiler() == "ncu"
    monkeypatch.setenv("KERNELFOUNDRY_PROFILER", "vtune")  # ours wins over the profilers' own variables
    assert perf.detect_profiler() == "vtune"
    monkeypatch.setenv("KERNELFOUNDRY_PROFILER", "")
    assert perf.detect_profiler() == ""


def test_profiler_label_and_itt_task_name(monkeypatch):
    assert perf._get_itt_task_name(perf.MODEL_RUN_LOOP_NAME) == "model run loop"
    assert perf._get_itt_task_name("model run loop", "lbl") == "model run loop::lbl"
    monkeypatch.setenv("KERNELFOUNDRY_PROFILE_LABEL", "task.py::T::t")
    assert perf._get_itt_task_name("model run loop") == "model run loop::task.py::T::t"
    assert perf._get_itt_task_name("model run loop", "mine") == "model run loop::mine"


def test_use_itt_without_ittapi_still_measures(caplog):
    if importlib.util.find_spec("ittapi") is not None:
        pytest.skip("ittapi is installed here")
    with caplog.at_level(logging.WARNING):
        samples = perf.measure_runtime(lambda: None, None, use_itt=True, profiler_label="x", **FAST)
    assert len(samples) >= 10 and "ittapi is unavailable" in caplog.text


@pytest.mark.parametrize("stop_on_exit, last", [(False, "--pause S1"), (True, "--stop S1")])
def test_profiler_session_unitrace(tmp_path, monkeypatch, stop_on_exit, last):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("KERNELFOUNDRY_unitrace_cmd", str(fake_tool(tmp_path / "unitrace", log)))
    monkeypatch.setenv("UNITRACE_Session", "S1")
    with perf.profiler_session("unitrace", stop_on_exit=stop_on_exit):
        assert log.read_text().splitlines() == ["--resume S1"]
    assert log.read_text().splitlines() == ["--resume S1", last]
    with pytest.raises(RuntimeError):  # paused/stopped on the way out of an exception too
        with perf.profiler_session("unitrace"):
            raise RuntimeError("in the timed trials")
    assert log.read_text().splitlines()[-1] == "--pause S1"


def test_profiler_session_vtune_and_others(tmp_path, monkeypatch):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("KERNELFOUNDRY_vtune_cmd", str(fake_tool(tmp_path / "vtune", log)))
    monkeypatch.setenv("KERNELFOUNDRY_vtune_result_dir", "/r")
    with perf.profiler_session("vtune", stop_on_exit=True):
        pass
    assert log.read_text().splitlines() == ["-command resume -result-dir=/r", "-command stop -result-dir=/r"]
    for name in (None, "ncu", "perf", "unitrace"):  # unitrace without a session: nothing to control
        with perf.profiler_session(name):
            pass
    assert len(log.read_text().splitlines()) == 2


def test_measure_runtime_resumes_and_pauses_unitrace_around_the_timed_trials(tmp_path, monkeypatch):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("KERNELFOUNDRY_unitrace_cmd", str(fake_tool(tmp_path / "unitrace", log)))
    monkeypatch.setenv("UNITRACE_Session", "S2")
    monkeypatch.setenv("KERNELFOUNDRY_PROFILER", "unitrace")
    perf.measure_runtime(lambda: None, None, **FAST)
    assert log.read_text().splitlines() == ["--resume S2", "--pause S2"]


def test_list_mode_details_where_kf_is_lenient():
    # kf: with a list of kwargs and no args, each call gets no positional arguments (the reference asserted).
    rec = Recorder()
    perf.measure_runtime(rec, None, kwargs=[{"a": 1}, {"a": 2}], **FAST)
    assert {(a, k["a"]) for a, k in rec.calls} == {((), 1), ((), 2)}
    # kf: a per-call entry that is not a tuple/list is that call's one argument (the reference unpacked it).
    x0, x1 = torch.zeros(3), torch.ones(3)
    seen = []
    perf.measure_runtime(lambda t: seen.append(float(t.sum())), None, args=[x0, x1], kwargs=[{}, {}], **FAST)
    assert set(seen) == {0.0, 3.0}


def test_inside_a_paired_test_the_call_is_captured_and_timed_as_a_pair():
    # What a test sees from measure_runtime inside a paired kf run (kernelfoundry.paired_plugin.capture_fn): []
    # on the candidate side (nothing is timed yet), the reference's per-round ms on the reference side, where the
    # pair is timed.
    from kernelfoundry import paired, paired_plugin
    state = paired_plugin.new_state(True, '{"budget_s": 1.0, "min_rounds": 4, "target_rel_half_width": 0.5}',
                                    ValueError)
    store: dict = {}
    x = torch.randn(4096)
    paired.TORCH.capture()
    out: list = []
    cand = paired_plugin.capture_fn(state, store, "task.py::T::t[kf-candidate]", [], lambda s: s)
    assert cand(torch.relu, None, (x,), None, output=out) == [] and out == []
    ref = paired_plugin.capture_fn(state, store, "task.py::T::t[kf-reference]", [], lambda s: s)
    got = ref(lambda t: torch.clamp_min(t, 0.0), None, [x], None, output=out)
    rec = state["records"]["task.py::T::t"]
    assert rec["paired"] is True and got == rec["reference_ms"] == out and store["task.py::T::t"] == rec["candidate_ms"]
    assert rec["ci"][0] <= rec["speedup"] <= rec["ci"][1]
