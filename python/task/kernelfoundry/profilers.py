"""Task-side profiler control around the timed phase (reference spec §4.6 step 7, §4.8).

Profilers start paused; the timed phase resumes them and pauses them again, so only the trials are
recorded. All controls are best effort: a missing tool or a failing command is logged, never raised, so a
benchmark never fails because of profiling.

perf (KernelFoundry's CPU profiler pass, include/kernelfoundry/profile.hpp): the test runs under
``perf stat -D -1 --control fifo:CTL,ACK`` with the FIFO paths in ``KF_PERF_CTL_FIFO`` / ``KF_PERF_ACK_FIFO``;
``PerfControl`` switches the counters on for the timed trials and off after them, and ``timed_calls()``
counts the kernel calls made in timed trials (the plugin reports it as ``timed_calls``).
"""

from __future__ import annotations

import logging
import os
import select
import shutil
import subprocess
import time
from typing import Callable, Optional

__all__ = ["TimedPhaseHooks", "unitrace_control", "vtune_control", "itt_task_name", "PerfControl",
           "add_timed_calls", "timed_calls", "PERF_CTL_ENV", "PERF_ACK_ENV"]

PERF_CTL_ENV = "KF_PERF_CTL_FIFO"
PERF_ACK_ENV = "KF_PERF_ACK_FIFO"

logger = logging.getLogger("kernelfoundry.profilers")

ITT_TASK = "model run loop"


def itt_task_name(label: Optional[str]) -> str:
    """The ITT task name of the timed phase: ``model run loop`` or ``model run loop::<label>``."""
    return f"{ITT_TASK}::{label}" if label else ITT_TASK


def _run(cmd: list[str]) -> None:
    exe = shutil.which(cmd[0])
    if exe is None:
        logger.warning("profiler control: %s not found", cmd[0])
        return
    try:
        subprocess.run([exe] + cmd[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        logger.warning("profiler control %s failed: %s", " ".join(cmd), e)


def unitrace_control(action: str) -> None:
    """``unitrace --<action> <session>`` (resume, pause, stop) for the session in ``UNITRACE_Session``;
    does nothing without a session. The binary is ``KERNELFOUNDRY_unitrace_cmd`` or ``unitrace``."""
    session = os.environ.get("UNITRACE_Session")
    if session:
        _run([os.environ.get("KERNELFOUNDRY_unitrace_cmd") or "unitrace", f"--{action}", session])


def vtune_control(action: str) -> None:
    """``vtune -command <action> -result-dir=<KERNELFOUNDRY_vtune_result_dir>`` (resume, pause); does nothing
    without a result directory."""
    result_dir = os.environ.get("KERNELFOUNDRY_vtune_result_dir")
    if result_dir:
        _run([os.environ.get("KERNELFOUNDRY_vtune_cmd") or "vtune", "-command", action, f"-result-dir={result_dir}"])


class PerfControl:
    """perf stat's control FIFOs (``--control fifo:CTL,ACK``): ``enable()`` / ``disable()`` write the command
    and wait (at most ``timeout`` seconds) for perf's ``ack``. perf opens both FIFOs read-write, so opening
    them never blocks. A control that fails is logged once and switched off; nothing is raised."""

    def __init__(self, ctl: str, ack: str, timeout: float = 5.0):
        self.ctl_path, self.ack_path, self.timeout = ctl, ack, timeout
        self.active = bool(ctl and ack)
        self._ctl: Optional[int] = None
        self._ack: Optional[int] = None
        self._pending = b""

    @classmethod
    def from_env(cls) -> "PerfControl":
        """The control named by KF_PERF_CTL_FIFO / KF_PERF_ACK_FIFO (inactive without them)."""
        return cls(os.environ.get(PERF_CTL_ENV, ""), os.environ.get(PERF_ACK_ENV, ""))

    def enable(self) -> bool:
        """Switches the counters on; True when perf acknowledged."""
        return self._command(b"enable\n")

    def disable(self) -> bool:
        """Switches the counters off; True when perf acknowledged."""
        return self._command(b"disable\n")

    def _fail(self, what: str) -> bool:
        logger.warning("perf control: %s; counting switched off", what)
        self.active = False
        for fd in (self._ctl, self._ack):
            if fd is not None:
                os.close(fd)
        self._ctl = self._ack = None
        return False

    def _command(self, cmd: bytes) -> bool:
        if not self.active:
            return False
        try:
            if self._ctl is None:
                self._ctl = os.open(self.ctl_path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                self._ack = os.open(self.ack_path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            os.write(self._ctl, cmd)
            deadline = time.monotonic() + self.timeout
            while b"ack\n" not in self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return self._fail(f"perf did not acknowledge {cmd.strip().decode()!r}")
                ready, _, _ = select.select([self._ack], [], [], left)
                if not ready:
                    continue
                try:
                    data = os.read(self._ack, 64)
                except BlockingIOError:
                    continue
                if not data:
                    return self._fail("perf closed the acknowledgement FIFO")
                self._pending += data.replace(b"\0", b"")
            self._pending = self._pending.split(b"ack\n", 1)[1]
            return True
        except OSError as e:
            return self._fail(str(e))


_PERF: list = [None]
_TIMED_CALLS = [0]


def _perf_control() -> PerfControl:
    """The process's perf control (created on first use from the environment)."""
    if _PERF[0] is None or _PERF[0].ctl_path != os.environ.get(PERF_CTL_ENV, ""):
        _PERF[0] = PerfControl.from_env()
    return _PERF[0]


def add_timed_calls(n: int) -> None:
    """Counts ``n`` kernel calls made in timed trials (called by measure_runtime after each measurement)."""
    _TIMED_CALLS[0] += int(n)


def timed_calls() -> int:
    """Kernel calls made in timed trials in this process so far (the report's ``timed_calls``)."""
    return _TIMED_CALLS[0]


class TimedPhaseHooks:
    """Begin/end callbacks for the C++ loop's timed phase: profiler resume/pause and an optional ITT task.
    ``begin``/``end`` are None when there is nothing to do (so the loop calls nothing)."""

    def __init__(self, profiler: Optional[str], use_itt: bool = False, label: Optional[str] = None):
        self._profiler = profiler
        self._itt_task = None
        if use_itt:
            try:
                import ittapi  # noqa: PLC0415

                self._itt_task = ittapi.task(itt_task_name(label))
            except Exception as e:  # ittapi missing or broken: annotations are optional
                logger.warning("--itt requested but ittapi is unavailable: %s", e)
        perf = _perf_control()
        self._perf = perf if perf.active else None
        active = self._itt_task is not None or profiler in ("unitrace", "vtune") or self._perf is not None
        self.begin: Optional[Callable[[], None]] = self._begin if active else None
        self.end: Optional[Callable[[], None]] = self._end if active else None

    def _control(self, action: str) -> None:
        if self._profiler == "unitrace":
            unitrace_control(action)
        elif self._profiler == "vtune":
            vtune_control(action)

    def _begin(self) -> None:
        self._control("resume")
        if self._itt_task is not None:
            self._itt_task.begin()
        if self._perf is not None:  # last: counting starts right before the first timed call
            self._perf.enable()

    def _end(self) -> None:
        if self._perf is not None:  # first: counting stops right after the last timed call
            self._perf.disable()
        if self._itt_task is not None:
            self._itt_task.end()
        self._control("pause")
