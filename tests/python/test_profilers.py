"""kernelfoundry.profilers: perf's control FIFOs (PerfControl) against a real `perf stat`, the timed-phase hooks
driving it from measure_runtime, and the timed-call count the plugin reports (issue 14)."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from conftest import FAST_MEASURE, run_task_pytest, task_env, write_task

from kernelfoundry import measure, profilers

PERF = shutil.which("perf")


def _perf_usable() -> bool:
    if PERF is None:
        return False
    r = subprocess.run([PERF, "stat", "-x", ",", "-e", "task-clock", "--", "true"], capture_output=True, text=True)
    return r.returncode == 0


needs_perf = pytest.mark.skipif(not _perf_usable(), reason="perf is missing or may not count here")


def _fifos(tmp_path: Path) -> tuple[Path, Path]:
    ctl, ack = tmp_path / "ctl", tmp_path / "ack"
    os.mkfifo(ctl)
    os.mkfifo(ack)
    return ctl, ack


def _counters(csv: Path) -> dict:
    out = {}
    for line in csv.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        value, unit, event = line.split(",")[:3]
        out[event] = (value, unit)
    return out


@needs_perf
def test_perf_control_counts_only_between_enable_and_disable(tmp_path):
    ctl, ack = _fifos(tmp_path)
    out = tmp_path / "out.csv"
    perf = subprocess.Popen([PERF, "stat", "-x", ",", "-e", "task-clock", "-D", "-1", "--control",
                             f"fifo:{ctl},{ack}", "-o", str(out), "--", "timeout", "1.5", "sh", "-c",
                             "while :; do :; done"], stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)  # perf has opened its FIFOs by then
    control = profilers.PerfControl(str(ctl), str(ack))
    assert control.enable()
    time.sleep(0.2)
    assert control.disable()
    perf.communicate(timeout=30)
    value, unit = _counters(out)["task-clock"]
    assert unit == "msec"
    # One busy thread counted during the ~0.2 s window only, not its whole 1.5 s.
    assert 0 < float(value) < 450, value


def test_perf_control_without_a_reader_never_blocks(tmp_path):
    ctl, ack = _fifos(tmp_path)
    control = profilers.PerfControl(str(ctl), str(ack), timeout=0.2)
    started = time.monotonic()
    assert control.enable() is False  # ENXIO: nobody reads the control FIFO
    assert control.active is False and time.monotonic() - started < 1.0
    assert profilers.PerfControl("", "").enable() is False


def test_measure_runtime_counts_timed_calls():
    before = profilers.timed_calls()
    samples = measure.measure_runtime(sum, None, args=([1.0] * 8,), warmup_min_time=0.01, perf_trials_min_time=0.02,
                                      inner_loop_min_time=0.0, auto_replicate_inputs_size=0)
    # inner_loop_min_time 0 -> one call per trial: the timed calls are the samples.
    assert profilers.timed_calls() - before == len(samples) > 0


def test_hooks_are_inactive_without_the_environment(monkeypatch):
    monkeypatch.delenv(profilers.PERF_CTL_ENV, raising=False)
    monkeypatch.delenv(profilers.PERF_ACK_ENV, raising=False)
    hooks = profilers.TimedPhaseHooks(None)
    assert hooks.begin is None and hooks.end is None


TASK = textwrap.dedent('''
    import pytest
    from kernelfoundry import TestBase

    class TestPerf(TestBase):
        def test_ok(self):
            assert sum([1, 2]) == 3

        @pytest.mark.performance
        def test_bench(self, measure_runtime):
            measure_runtime(sorted, lambda: None, args=(list(range(2000, 0, -1)),), auto_replicate_inputs_size=0)
''')


@needs_perf
def test_plugin_under_perf_counts_the_timed_phase_and_reports_timed_calls(tmp_path):
    """The whole task-side path: pytest + plugin + measure_runtime's hooks switch perf on for the trials."""
    task = write_task(tmp_path / "task", TASK)
    ctl, ack = _fifos(tmp_path)
    out = tmp_path / "perf.csv"
    env = task_env(KERNELFOUNDRY_MEASURE_OPTIONS=FAST_MEASURE, KF_PERF_CTL_FIFO=str(ctl), KF_PERF_ACK_FIFO=str(ack))
    perf = [PERF, "stat", "-x", ",", "-e", "task-clock,page-faults", "-D", "-1", "--control", f"fifo:{ctl},{ack}",
            "-o", str(out), "--"]
    proc, report = run_task_pytest(task, "-m", "performance", env=env, prefix=perf, merge_output=False)
    stdout, stderr = proc.stdout, proc.stderr
    assert proc.returncode == 0, stdout + stderr
    assert report["timed_calls"] > 0
    counters = _counters(out)
    assert counters["task-clock"][0] not in ("<not counted>", "<not supported>"), out.read_text()
    # perf acknowledged each switch ("Events enabled" / "Events disabled" on its stderr).
    assert "Events enabled" in stderr and "Events disabled" in stderr
