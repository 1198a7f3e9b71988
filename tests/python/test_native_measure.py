"""kernelfoundry._measure: the C++ loop and statistics seen from Python."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import golden
from kernelfoundry import _measure

FAST = dict(warmup_min_time=0.01, inner_loop_min_time=0.001, perf_trials_min_time=0.02)


def test_defaults_are_the_reference_defaults():
    # spec §4.6 "Defaults" line
    assert _measure.DEFAULTS == {"warmup_min_time": 1.0, "warmup_min_iters": 10, "inner_loop_min_time": 0.01,
                                 "perf_trials_min_iters": 10, "perf_trials_min_time": 1.0, "test_trials": 5}


def test_timing_stats_match_numpy_population_std():
    rng = np.random.default_rng(1)
    for n in (1, 2, 3, 10, 151):
        v = rng.uniform(0.1, 2.0, n).tolist()
        s = _measure.timing_stats(v)
        assert s["num_trials"] == n
        assert s["mean"] == pytest.approx(np.mean(v), rel=1e-12)
        assert s["std"] == pytest.approx(np.std(v), rel=1e-9, abs=1e-15)  # population (ddof=0)
        assert s["median"] == pytest.approx(np.median(v), rel=1e-12)
        assert (s["min"], s["max"]) == (min(v), max(v))


def test_timing_stats_rounded_match_golden_scoring():
    scoring = golden("probes")["scoring"]
    assert _measure.timing_stats([1.0, 2.0, 3.0, 4.0, 10.0], 3) == {
        k: v for k, v in scoring["get_timing_stats"].items() if k not in ("speedup", "ref_speed")}
    case = scoring["correct_with_reference"]
    runtimes = case["test_result"]["performance_result"]["output_data"]["runtimes"]
    for nodeid, samples in runtimes.items():
        expected = case["exec_result"]["runtime_stats"][nodeid]
        got = _measure.timing_stats(samples, round_digits=3)
        for key in ("mean", "std", "min", "max", "median", "num_trials"):
            assert got[key] == expected[key], (nodeid, key)


def test_round_significant_is_python_g3():
    for x in (9.999e10, 2.675, 0.0001235, -1234567.0, 1.0066666666666666, 0.10000000000000009, 1.5e-06, 0.0):
        assert _measure.round_significant(x) == float(f"{x:.3g}")
    assert _measure.round_significant(123456.0, 5) == 123460.0


def test_empty_samples_raise_B18():
    with pytest.raises(ValueError, match="never measured"):
        _measure.timing_stats([])


def test_measure_returns_ms_per_trial_and_plan():
    calls = []
    r = _measure.measure(lambda: calls.append(1), None, **FAST)
    assert r["trials"] == len(r["trials_ms"]) >= 10
    assert all(ms > 0 for ms in r["trials_ms"])
    assert len(calls) == 5 + r["warmup_iters"] + r["trials"] * r["inner_iters"]
    assert r["profiler_mode"] == "none"


def test_measure_cycles_through_inputs_and_calls_sync():
    seen, syncs = [], []
    r = _measure.measure(lambda x, scale=1: seen.append(x * scale), lambda: syncs.append(1),
                         args_list=[(1,), (2,), (3,)], kwargs_list=[{}, {"scale": 10}, {}], test_trials=2,
                         warmup_min_time=0, warmup_min_iters=1, inner_loop_min_time=0, perf_trials_min_iters=1,
                         perf_trials_min_time=0)
    assert seen == [1, 20, 3, 1]  # 2 probes, 1 warm-up call, 1 trial of 1 call
    assert r["warmup_iters"] == 1 and r["inner_iters"] == 1 and r["trials"] == 1
    assert len(syncs) == 2 * 2 + 1 + 2


def test_measure_errors():
    with pytest.raises(ValueError, match="test_trials"):
        _measure.measure(lambda: None, None, test_trials=0)
    with pytest.raises(ValueError, match="same length"):
        _measure.measure(lambda *a: None, None, args_list=[(1,), (2,)], kwargs_list=[{}])
    with pytest.raises(TypeError):
        _measure.measure(42, None)
    with pytest.raises(ValueError, match="profiler_mode"):
        _measure.measure(lambda: None, None, profiler_mode="turbo")

    def boom():
        raise KeyError("kernel exploded")

    with pytest.raises(KeyError, match="kernel exploded"):
        _measure.measure(boom, None)


def test_timed_phase_hooks_wrap_the_trials():
    events = []
    n = []
    _measure.measure(lambda: n.append(1), None, on_timed_begin=lambda: events.append(("begin", len(n))),
                     on_timed_end=lambda: events.append(("end", len(n))), **FAST)
    assert [e[0] for e in events] == ["begin", "end"]
    assert events[0][1] < events[1][1] == len(n)


def test_profiler_detection_and_modes(monkeypatch):
    for key in ("KERNELFOUNDRY_PROFILER", "UNITRACE_VERSION", "NV_NSIGHT_INJECTION_PORT_BASE"):
        monkeypatch.delenv(key, raising=False)
    assert _measure.detect_profiler() is None
    monkeypatch.setenv("UNITRACE_VERSION", "2.1")
    assert _measure.detect_profiler() == "unitrace"
    monkeypatch.setenv("KERNELFOUNDRY_PROFILER", "vtune")
    assert _measure.detect_profiler() == "vtune"
    assert _measure.profiler_mode_for("ncu") == "replay"
    assert _measure.profiler_mode_for("vtune") == "sampling"
    assert _measure.profiler_mode_for(None) == "none"

    r = _measure.measure(lambda: None, None, profiler_mode="sampling", **FAST)
    assert r["trials"] == 1 and 5 <= r["inner_iters"] <= 20 and len(r["trials_ms"]) == 1
    calls = []
    r = _measure.measure(lambda: calls.append(1), None, profiler_mode="replay")
    assert len(calls) == 1 and len(r["trials_ms"]) == 1


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_compare_reads_each_float_type_in_place(dtype):
    # The element type is dispatched once per comparison (it was looked up by string per element: 45 ms for
    # 16 MB, 2026-12-05); every float type must still be read as itself.
    expected = np.linspace(-3.0, 5.0, 1001).astype(dtype)
    assert _measure.compare(expected.copy(), expected) is None
    wrong = expected.copy()
    wrong[7] = dtype(40.0)
    wrong[500] = dtype(np.nan)
    problem = _measure.compare(wrong, expected, 1e-2, 1e-3, 0.999)
    assert problem is not None and problem.startswith("2 of 1001 values differ")
    assert "first at index 7: 40 vs" in problem and "1 NaN/Inf where the reference is finite" in problem
    # Within rtol of the reference: agrees; a dtype or shape difference is named.
    assert _measure.compare((expected * dtype(1.001)).astype(dtype), expected, 1e-2, 1e-3, 1.0) is None
    other = np.float32 if dtype != np.float32 else np.float64
    assert "dtype" in _measure.compare(expected.astype(other), expected)
    assert "shape" in _measure.compare(expected[:10], expected)
