"""kernelfoundry.measure: input replication (B17), list mode, torch helpers, B19."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import golden
from kernelfoundry import measure as m

FAST = dict(warmup_min_time=0.01, inner_loop_min_time=0.001, perf_trials_min_time=0.02)


def test_input_nbytes_numpy_nested_and_torch_1_13():
    probes = golden("probes")["measure_runtime"]
    assert m.input_nbytes(((np.zeros(5),), {})) == probes["size_numpy"] == 40
    assert m.input_nbytes({"a": [np.zeros(2), (np.zeros(3),)], "s": ""}) == probes["size_nested"] == 40
    # torch 1.13 has no Tensor.nbytes: element_size() * nelement()
    assert m.input_nbytes((torch.zeros(4, 3, dtype=torch.float32),)) == 48
    assert m.input_nbytes(("abcd", b"xy", 3, None)) == 6
    shared = np.zeros(10)
    loop: list = [shared]
    loop.append(loop)  # cycles do not recurse forever
    assert m.input_nbytes(loop) == 80


def test_zero_size_inputs_are_not_replicated_B17():
    # The reference raised ZeroDivisionError here (probes.json measure_runtime.zero_size_inputs_B17).
    assert "ZeroDivisionError" in str(golden("probes")["measure_runtime"]["zero_size_inputs_B17"])
    out: list = []
    samples = m.measure_runtime(lambda: None, lambda: None, output=out, **FAST)  # no args at all
    assert samples == out and len(samples) >= 10
    samples = m.measure_runtime(len, None, args=(np.zeros(0),), **FAST)  # zero-size array
    assert len(samples) >= 10
    assert len(m._call_inputs((np.zeros(0),), None, m.DEFAULT_REPLICATE_BYTES)[0]) == 1


def test_replication_makes_distinct_copies_round_robin():
    x = np.arange(1024, dtype=np.float64)  # 8 KiB
    args_list, kwargs_list = m._call_inputs((x,), {"k": 1}, 64 * 1024)
    assert len(args_list) == len(kwargs_list) == 8
    assert args_list[0][0] is x and all(a[0] is not x for a in args_list[1:])
    assert all(np.array_equal(a[0], x) for a in args_list)
    seen = []
    m.measure_runtime(lambda a, k: seen.append(id(a)), None, args=(x,), kwargs={"k": 1},
                      auto_replicate_inputs_size=64 * 1024, **FAST)
    assert len(set(seen)) == 8
    # Big enough inputs or a 0 target are used as they are.
    assert len(m._call_inputs((x,), None, 8 * 1024)[0]) == 1
    assert len(m._call_inputs((x,), None, 0)[0]) == 1
    # At most 10000 copies.
    assert len(m._call_inputs(("a",), None, 10**9)[0]) == m.MAX_REPLICAS


def test_torch_replication_under_no_grad():
    x = torch.ones(16, requires_grad=True)
    args_list, _ = m._call_inputs((x,), None, 16 * 4 * 3)
    assert len(args_list) == 3 and all(torch.equal(a[0], x) for a in args_list)


def test_list_mode_and_mismatched_lists():
    probes = golden("probes")["measure_runtime"]
    assert probes["list_mode"]["n_trials"] == 10
    seen = []
    out: list = []
    m.measure_runtime(lambda v, w=0: seen.append(v + w), None, args=[(1,), (2,)], kwargs=[{}, {"w": 10}],
                      output=out, **FAST)
    assert seen[:4] == [1, 12, 1, 12] and len(out) >= 10 and all(v > 0 for v in out)
    with pytest.raises(ValueError, match="If args and kwargs are lists, they must have the same length"):
        m.measure_runtime(lambda v: None, None, args=[(1,), (2,)], kwargs=[{}])


def test_measure_runtime_torch_on_cpu_is_allowed():
    # The reference raised AttributeError (no torch.xpu) on a CPU-only torch; we synchronise nothing.
    assert "AttributeError" in str(golden("probes")["measure_runtime"]["measure_runtime_torch_on_cpu"])
    x = torch.randn(256)
    assert len(m.measure_runtime_torch(torch.relu, "cpu", args=(x,), **FAST)) >= 10
    assert len(m.measure_runtime_torch(torch.relu, None, args=(x,), **FAST)) >= 10
    with pytest.raises(ValueError, match="CUDA is not available"):
        m.measure_runtime_torch(torch.relu, "cuda", args=(x,))


def test_under_ncu_returns_milliseconds_B19(monkeypatch):
    # The reference returned one value in seconds (1.5e-06) under ncu; we return milliseconds.
    monkeypatch.setenv("NV_NSIGHT_INJECTION_PORT_BASE", "49152")
    calls = []
    out = m.measure_runtime(lambda: calls.append(1), None)
    assert len(calls) == 1 and len(out) == 1
    assert out[0] > 1e-5  # a Python call takes well over 10 ns; in seconds it would be ~1e-6


def test_sampling_profiler_reduces_iterations(monkeypatch):
    monkeypatch.setenv("KERNELFOUNDRY_PROFILER", "unitrace")
    monkeypatch.delenv("UNITRACE_Session", raising=False)
    assert len(m.measure_runtime(lambda: None, None, **FAST)) == 1
    assert len(m.measure_runtime(lambda: None, None, reduce_iterations_for_external_profiler=False, **FAST)) >= 10


def test_pti_collection_flag_is_reset(monkeypatch):
    monkeypatch.delenv("PTI_ENABLE_COLLECTION", raising=False)
    seen = []
    import os

    m.measure_runtime(lambda: seen.append(os.environ.get("PTI_ENABLE_COLLECTION")), None, **FAST)
    assert set(seen) == {"1"} and os.environ["PTI_ENABLE_COLLECTION"] == "0"
