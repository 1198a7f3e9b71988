"""Timing on an asynchronous device (kernelfoundry.device_timing) with a fake device: the paired loop synchronises
the whole device before each sample stops (so work a candidate left on a side stream is counted), the L2 flush
runs outside the timed windows, and the conditions name the device, its clocks before and after, the policy and
the timer. The fake stands in for CUDA, which this machine does not have; scripts/device-check.sh runs the same
paths on a GPU."""

from __future__ import annotations

import time

import numpy as np
import pytest

from kernelfoundry import device_timing, paired

WORK_S = 0.002  # what one kernel call keeps the fake device busy for


class FakeDevice:
    """A device whose work runs asynchronously: ``launch(s)`` queues work that ends s seconds after the queue is
    free and returns at once (a launch on a side stream); ``synchronize()`` waits until the queue is empty, as
    cudaDeviceSynchronize waits for every stream. Every call is logged in ``events``."""

    def __init__(self, l2_bytes: int = 1 << 20, flush_s: float = 0.0):
        self.events: list[str] = []
        self.busy_until = 0.0
        self.l2 = l2_bytes
        self.flush_s = flush_s
        self.flush_bytes = 0

    def active(self) -> bool:
        return True

    def launch(self, seconds: float) -> None:
        self.busy_until = max(self.busy_until, time.monotonic()) + seconds

    def synchronize(self) -> None:
        self.events.append("sync")
        delay = self.busy_until - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def l2_bytes(self) -> int:
        return self.l2

    def flush_buffer(self, nbytes: int):
        self.flush_bytes = nbytes
        return bytearray(1)

    def flush(self, buffer) -> None:
        self.events.append("flush")
        self.launch(self.flush_s)

    def describe(self) -> dict:
        return {"type": "fake", "name": "Fake GPU", "l2_bytes": self.l2, "driver": "0.0"}

    def clocks(self) -> dict:
        return {"sm_mhz": 1980, "mem_mhz": 3201}


@pytest.fixture
def fake():
    saved = device_timing.DEVICE[0]
    device_timing.reset()
    dev = FakeDevice()
    device_timing.DEVICE[0] = dev
    yield dev
    device_timing.DEVICE[0] = saved
    device_timing.reset()


def _pair(dev, opts: dict) -> dict:
    """A candidate that launches WORK_S of device work on a "side stream" and returns at once, against a reference
    that launches the same work; both pass a sync that waits for nothing (``lambda: None``)."""
    def candidate(x):
        dev.events.append("call")
        dev.launch(WORK_S)
        return None

    def reference(x):
        dev.events.append("call")
        dev.launch(WORK_S)
        return None

    x = np.ones(64, dtype=np.float32)
    cand = paired.Capture(candidate, lambda: None, (x,), None, {})
    ref = paired.Capture(reference, lambda: None, (x,), None, {})
    return paired.measure_pair(cand, ref, {**paired.DEFAULTS, "budget_s": 0.4, "min_rounds": 6, **opts})


def _windows_end_with_sync(events: list[str]) -> bool:
    """True when every run of calls (a timed window's calls) is followed directly by a sync (before t1)."""
    for i, e in enumerate(events):
        if e == "call" and (i + 1 >= len(events) or events[i + 1] not in ("call", "sync")):
            return False
    return events[-1] != "call"


def test_side_stream_work_is_counted_by_the_whole_device_sync(fake):
    record = _pair(fake, {})
    assert record["paired"] and record["rounds"] >= 6
    # Each call queued 2 ms the task's own sync never waits for; the loop's device sync does.
    assert min(record["candidate_ms"]) >= WORK_S * 1000 * 0.999
    assert min(record["reference_ms"]) >= WORK_S * 1000 * 0.999
    assert _windows_end_with_sync(fake.events)


def test_without_a_device_in_use_the_work_would_be_missed(fake):
    """The counter-test: the same pair on a host task (no device in use) times only the launches."""
    class Idle(FakeDevice):
        def active(self) -> bool:
            return False

    idle = Idle()
    device_timing.DEVICE[0] = idle
    record = _pair(idle, {})
    assert max(record["candidate_ms"]) < WORK_S * 1000 / 2
    assert "sync" not in idle.events


def test_l2_flush_runs_before_every_sample_outside_the_window(fake):
    fake.flush_s = 0.005  # a slow flush: were it inside a window, that sample would take > 5 ms per call
    record = _pair(fake, {"l2_flush": True})
    assert record["paired"] and record["calls_per_sample"] == 1
    assert fake.flush_bytes == 2 * fake.l2
    events = fake.events
    flushes = [i for i, e in enumerate(events) if e == "flush"]
    assert len(flushes) >= 4 * record["rounds"]  # one per sample: two samples per side and round
    for i in flushes:  # flush, then the sync before t0 (waits for it), then the window's call
        assert events[i + 1] == "sync" and events[i + 2] == "call", events[i - 2:i + 4]
    assert _windows_end_with_sync(events)
    assert np.median(record["candidate_ms"]) < 5.0
    cond = device_timing.conditions()
    assert cond["l2_flush"] == {"enabled": True, "bytes": 2 * fake.l2,
                                "when": "before every sample, outside the timed window; one call per sample"}


def test_conditions_name_the_device_clocks_sync_and_timer(fake):
    assert device_timing.conditions()["type"] == "host"  # nothing measured yet
    _pair(fake, {})
    cond = device_timing.conditions()
    assert cond["name"] == "Fake GPU" and cond["driver"] == "0.0"
    assert cond["clocks_mhz"] == {"before": {"sm_mhz": 1980, "mem_mhz": 3201},
                                  "after": {"sm_mhz": 1980, "mem_mhz": 3201}}
    assert cond["timer"] == device_timing.TIMER and cond["sync"] == device_timing.SYNC
    assert cond["l2_flush"] == {"enabled": False}


def test_unpaired_measure_runtime_syncs_the_whole_device(fake):
    from kernelfoundry import measure

    def kernel():
        fake.events.append("call")
        fake.launch(WORK_S)

    samples = measure.measure_runtime(kernel, None, warmup_min_time=0.01, warmup_min_iters=2,
                                      inner_loop_min_time=0.001, perf_trials_min_iters=3, perf_trials_min_time=0.01,
                                      auto_replicate_inputs_size=0)
    assert min(samples) >= WORK_S * 1000 * 0.999
    assert _windows_end_with_sync(fake.events)
