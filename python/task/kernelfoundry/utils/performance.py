"""The reference's runtime-measurement module (``kernelfoundry.utils.performance``, also importable as
``kernelfoundry.eval_pipeline.utils.performance``) with its names, signatures and defaults, implemented over
kf's machinery: the timing loop is the C++ one (``kernelfoundry._measure`` through kernelfoundry.measure), the
profiler control is kernelfoundry.profilers, and inside a paired performance test (``kf run``) a call is
captured and timed against the reference's in the same process instead of alone.

Where kf differs from the reference on purpose (docs/reference-compat.md): results are milliseconds under ncu
too (B19); zero-size inputs are never replicated (B17); ``measure_runtime_torch`` on a machine without XPU/CUDA
synchronises nothing instead of raising; mismatched ``args``/``kwargs`` lists raise an error that is both the
reference's AssertionError and a ValueError.

Importing this module is cheap: no torch, no compiled module (the C++ loop is loaded on the first call).
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, Union

from .. import measure as _m
from .. import profilers as _profilers

__all__ = ["measure_runtime", "measure_runtime_torch", "profiler_session", "detect_profiler",
           "MODEL_RUN_LOOP_NAME", "PROFILER_LABEL_ENV_VAR"]

#: The ITT task name of the timed phase (``model run loop::<label>`` with a label).
MODEL_RUN_LOOP_NAME = _profilers.ITT_TASK
#: The environment variable the pytest plugin sets to the running test's node id (the default label).
PROFILER_LABEL_ENV_VAR = "KERNELFOUNDRY_PROFILE_LABEL"
#: Replication target of the reference's default (128 MiB).
_DEFAULT_REPLICATE = 128 * 2**20

logger = logging.getLogger("kernelfoundry.measure")

# The profilers recognised from their own environment variables, in the order they are checked.
_PROFILER_ENV = (("unitrace", ("UNITRACE_VERSION",)), ("ncu", ("NV_NSIGHT_INJECTION_PORT_BASE",)))


def detect_profiler() -> Optional[str]:
    """The external profiler this process runs under: ``$KERNELFOUNDRY_PROFILER`` when set (kf's profiler
    passes set it), else "unitrace" when ``UNITRACE_VERSION`` is set, else "ncu" when
    ``NV_NSIGHT_INJECTION_PORT_BASE`` is set, else None. The same rule as the C++ loop's (kf::DetectProfiler)."""
    name = os.environ.get("KERNELFOUNDRY_PROFILER")
    if name is not None:
        return name
    for profiler, variables in _PROFILER_ENV:
        if any(v in os.environ for v in variables):
            return profiler
    return None


def _get_profiler_label(profiler_label: Optional[str] = None) -> Optional[str]:
    """``profiler_label`` when given, else ``$KERNELFOUNDRY_PROFILE_LABEL`` (None when neither is set)."""
    return profiler_label or os.environ.get(PROFILER_LABEL_ENV_VAR)


def _get_itt_task_name(base_name: str, profiler_label: Optional[str] = None) -> str:
    """``base_name`` or ``base_name::<label>`` (the label as _get_profiler_label finds it)."""
    label = _get_profiler_label(profiler_label)
    return f"{base_name}::{label}" if label else base_name


@contextmanager
def profiler_session(profiler_name: Optional[str], stop_on_exit: bool = False) -> Iterator[None]:
    """Resumes the external profiler's collection on entry and pauses it on exit (stops it when
    ``stop_on_exit``), so that only what runs inside is recorded. "unitrace": ``unitrace --resume/--pause/--stop
    $UNITRACE_Session`` (binary ``$KERNELFOUNDRY_unitrace_cmd``); "vtune": ``vtune -command resume|pause|stop
    -result-dir=$KERNELFOUNDRY_vtune_result_dir`` (``$KERNELFOUNDRY_vtune_cmd``); any other name (None, "ncu",
    "perf") does nothing here. Best effort: a missing tool is logged, never raised. Custom benchmarks wrap
    their timed trials in ``with profiler_session(detect_profiler()):``."""
    control = {"unitrace": _profilers.unitrace_control, "vtune": _profilers.vtune_control}.get(profiler_name or "")
    if control is not None:
        control("resume")
    try:
        yield
    finally:
        if control is not None:
            control("stop" if stop_on_exit else "pause")


def _get_size_in_bytes(obj: Any) -> int:
    """Bytes of the array/tensor data reachable from ``obj`` (kernelfoundry.measure.input_nbytes: tensors,
    numpy arrays, str/bytes by length, mappings' values and sequences recursively; 0 for anything else)."""
    return _m.input_nbytes(obj)


def _replicate_inputs(args: Any, kwargs: Any, target_size: int, max_repeats: int = _m.MAX_REPLICAS
                      ) -> tuple[list, list]:
    """The reference's replication of ONE input set: ``[original] + int(target_size / size)`` deep copies (at
    most ``max_repeats``) when the inputs are smaller than ``target_size`` bytes, else ``[original]``; never
    for zero-size inputs (B17). Returns (list of args tuples, list of kwargs dicts)."""
    args_list, kwargs_list = _m.input_sets(args, kwargs)
    if _m.is_list_mode(kwargs):
        return args_list, kwargs_list
    return _m._replicate(args_list[0], kwargs_list[0], int(target_size or 0), count_original=False,
                         max_copies=max_repeats)


def measure_runtime(
    target: Callable,
    sync_fn: Callable,
    args: Union[list, tuple, None] = None,
    kwargs: Union[list, dict, None] = None,
    warmup_min_time: float = 1.0,
    warmup_min_iters: int = 10,
    inner_loop_min_time: float = 0.01,
    perf_trials_min_iters: int = 10,
    perf_trials_min_time: float = 1.0,
    use_itt: bool = False,
    reduce_iterations_for_external_profiler: bool = True,
    auto_replicate_inputs_size: int = _DEFAULT_REPLICATE,
    info_str: str = "",
    output: Optional[list] = None,
    profiler_label: Optional[str] = None,
) -> list[float]:
    """Times ``target`` and returns one sample per timed trial, in milliseconds per call.

    ``sync_fn()`` synchronises the device (``lambda: None`` or None on the CPU). Inputs: ``args`` a tuple (or
    list) of positional arguments and ``kwargs`` a dict, for every call; or ``kwargs`` a LIST of dicts and
    ``args`` the list of per-call argument tuples of the same length (``kwargs=[{}] * len(args)`` without
    keyword arguments): the sets are used round-robin, never replicated. One input set smaller than
    ``auto_replicate_inputs_size`` bytes (0: off) is deep-copied ``int(size_target / size)`` times (at most
    10000) and the copies are used round-robin. Loop: 5 test trials, warm-up (``warmup_min_time`` s,
    ``warmup_min_iters``), trials of ``max(1, inner_loop_min_time / t)`` calls, at least
    ``perf_trials_min_iters`` trials and ``perf_trials_min_time`` s; under an external profiler
    (detect_profiler) one trial of 5-20 calls, under ncu one call. ``use_itt``: an ITT task
    ``model run loop[::profiler_label]`` around the timed trials. ``info_str`` goes into the log line.
    ``output``: extended with the samples. In a paired ``kf run`` the call is timed against the reference's.
    Raises ValueError (also an AssertionError for mismatched lists) for bad inputs; the target's exceptions
    propagate."""
    loop = _m.loop_options(warmup_min_time, warmup_min_iters, inner_loop_min_time, perf_trials_min_iters,
                           perf_trials_min_time)
    if _m.ACTIVE_CAPTURE[0] is not None:  # inside a paired performance test of kf run
        return _m.ACTIVE_CAPTURE[0](target, sync_fn, args, kwargs, output=output, **loop)
    return _m._measure(target, sync_fn, args, kwargs, loop, use_itt=use_itt,
                       reduce=reduce_iterations_for_external_profiler,
                       replicate_bytes=int(auto_replicate_inputs_size or 0), info_str=info_str, output=output,
                       label=profiler_label, count_original=False)


def measure_runtime_torch(
    target: Callable,
    device: Union[str, "torch.device", None],  # noqa: F821 - torch is not imported here
    args: Union[list, tuple, None] = None,
    kwargs: Union[list, dict, None] = None,
    warmup_min_time: float = 1.0,
    warmup_min_iters: int = 10,
    inner_loop_min_time: float = 0.01,
    perf_trials_min_iters: int = 10,
    perf_trials_min_time: float = 1.0,
    use_itt: bool = False,
    reduce_iterations_for_external_profiler: bool = True,
    auto_replicate_inputs_size: int = _DEFAULT_REPLICATE,
    output: Optional[list] = None,
    profiler_label: Optional[str] = None,
) -> list[float]:
    """measure_runtime with torch's device synchronisation: XPU when ``torch.xpu`` is available (a warning
    when CUDA is too), else CUDA; a ``device`` of type "cpu", or any device on a machine with neither (kf:
    the reference raised ValueError there), synchronises nothing. ``device``: a string, a ``torch.device``, a
    CUDA index, None or the ``torch.device`` class (the current device). Raises ValueError for a device type
    that is requested but not available. Other arguments as measure_runtime."""
    return measure_runtime(target, _m._torch_sync(device), args=args, kwargs=kwargs,
                           warmup_min_time=warmup_min_time, warmup_min_iters=warmup_min_iters,
                           inner_loop_min_time=inner_loop_min_time, perf_trials_min_iters=perf_trials_min_iters,
                           perf_trials_min_time=perf_trials_min_time, use_itt=use_itt,
                           reduce_iterations_for_external_profiler=reduce_iterations_for_external_profiler,
                           auto_replicate_inputs_size=auto_replicate_inputs_size,
                           info_str=f"Using device: {device},", output=output, profiler_label=profiler_label)
