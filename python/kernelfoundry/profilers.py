"""Task-side profiler control around the timed phase (reference spec §4.6 step 7, §4.8).

Profilers start paused; the timed phase resumes them and pauses them again, so only the trials are
recorded. All controls are best effort: a missing tool or a failing command is logged, never raised, so a
benchmark never fails because of profiling.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from typing import Callable, Optional

__all__ = ["TimedPhaseHooks", "unitrace_control", "vtune_control", "itt_task_name"]

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
        active = self._itt_task is not None or profiler in ("unitrace", "vtune")
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

    def _end(self) -> None:
        if self._itt_task is not None:
            self._itt_task.end()
        self._control("pause")
