"""Runtime measurement for task benchmarks (reference spec §4.6).

``measure_runtime`` prepares the inputs (replication, list mode), the profiler hooks and the environment;
the timing loop itself is the C++ one in ``kernelfoundry._measure`` (include/kernelfoundry/measure.hpp),
so Python and native tasks are timed identically. Results are always per-call milliseconds (bug B19).
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import warnings
from collections.abc import Mapping
from typing import Any, Callable, Optional

from . import profilers

__all__ = ["measure_runtime", "measure_runtime_torch", "input_nbytes", "DEFAULT_REPLICATE_BYTES"]

logger = logging.getLogger("kernelfoundry.measure")

#: Inputs smaller than this are replicated to defeat caches (spec §4.6 defaults: 128 MiB).
DEFAULT_REPLICATE_BYTES = 128 * 1024 * 1024
#: At most this many input copies (spec §4.6 step 2).
MAX_REPLICAS = 10000


def _native():
    try:
        from . import _measure  # noqa: PLC0415 — imported lazily so collection works without the build
    except ImportError as e:  # pragma: no cover - depends on the build
        raise ImportError(
            "kernelfoundry._measure is not built or not on the path: build the project (the build assembles "
            f"the package with _measure*.so in <build dir>/python; use PYTHONPATH=<build dir>/python) — {e}") from e
    return _measure


def input_nbytes(obj: Any, _seen: Optional[set] = None) -> int:
    """Total byte size of the array/tensor data reachable from ``obj`` (spec §4.6 step 2): torch tensors
    count ``element_size() * nelement()`` (works on torch 1.13, which has no ``Tensor.nbytes``), other
    objects their ``nbytes``; str/bytes count their length; mappings (values) and lists/tuples/sets are
    walked recursively; anything else counts 0."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen:
        return 0
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return int(obj.element_size() * obj.nelement())
    if isinstance(obj, (str, bytes, bytearray)):
        return len(obj)
    if isinstance(obj, memoryview):
        return obj.nbytes
    nbytes = getattr(obj, "nbytes", None)
    if isinstance(nbytes, int) and not isinstance(nbytes, bool):
        return nbytes
    if isinstance(obj, Mapping):
        seen.add(id(obj))
        return sum(input_nbytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        seen.add(id(obj))
        return sum(input_nbytes(v, seen) for v in obj)
    return 0


def _replicate(args: tuple, kwargs: dict, target_bytes: int) -> tuple[list, list]:
    """Round-robin input copies so that each call sees cold data (spec §4.6 step 2, B17 fixed: inputs of
    size 0 are never replicated). Returns (args_list, kwargs_list)."""
    size = input_nbytes((args, kwargs))
    if not target_bytes or size <= 0 or size >= target_bytes:
        return [args], [kwargs]
    copies = min(MAX_REPLICAS, int(target_bytes // size))
    if copies <= 1:
        return [args], [kwargs]
    torch = sys.modules.get("torch")
    try:
        if torch is not None:
            with torch.no_grad():
                replicas = [copy.deepcopy((args, kwargs)) for _ in range(copies - 1)]
        else:
            replicas = [copy.deepcopy((args, kwargs)) for _ in range(copies - 1)]
    except Exception as e:  # an input that cannot be deep-copied: time without replication
        warnings.warn(f"measure_runtime: inputs cannot be replicated ({e}); timing without replication")
        return [args], [kwargs]
    return [args] + [r[0] for r in replicas], [kwargs] + [r[1] for r in replicas]


def _call_inputs(args: Any, kwargs: Any, target_bytes: int) -> tuple[list, list]:
    """Normalises args/kwargs into parallel per-call lists (list mode or single call + replication)."""
    if isinstance(args, list) or isinstance(kwargs, list):
        n = len(args) if isinstance(args, list) else len(kwargs)
        args_list = args if isinstance(args, list) else [args if args is not None else ()] * n
        kwargs_list = kwargs if isinstance(kwargs, list) else [kwargs if kwargs is not None else {}] * n
        if len(args_list) != len(kwargs_list):
            raise ValueError("If args and kwargs are lists, they must have the same length "
                             f"(got {len(args_list)} and {len(kwargs_list)})")
        if n == 0:
            raise ValueError("args/kwargs lists must not be empty")
        args_list = [a if isinstance(a, tuple) else tuple(a) if isinstance(a, list) else (a,) for a in args_list]
        kwargs_list = [dict(k or {}) for k in kwargs_list]
        return args_list, kwargs_list
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = dict(kwargs or {})
    return _replicate(args, kwargs, target_bytes)


def measure_runtime(target: Callable, sync_fn: Optional[Callable], args: Any = None, kwargs: Any = None,
                    warmup_min_time: float = 1.0, warmup_min_iters: int = 10, inner_loop_min_time: float = 0.01,
                    perf_trials_min_iters: int = 10, perf_trials_min_time: float = 1.0, use_itt: bool = False,
                    reduce_iterations_for_external_profiler: bool = True,
                    auto_replicate_inputs_size: int = DEFAULT_REPLICATE_BYTES,
                    output: Optional[list] = None, label: Optional[str] = None) -> list[float]:
    """Times ``target(*args, **kwargs)`` and returns one sample per timed trial in milliseconds per call.

    - ``sync_fn``: called before every timestamp (device synchronisation); None or ``lambda: None`` on CPU.
    - ``args`` (tuple) / ``kwargs`` (dict) for every call; or lists of equal length used round-robin as they
      are. Single inputs smaller than ``auto_replicate_inputs_size`` bytes (0 disables) are deep-copied
      ``min(10000, size_target // size)`` times and used round-robin; zero-size inputs are not replicated.
    - Loop knobs (seconds / counts) as in spec §4.6; under an external profiler (KERNELFOUNDRY_PROFILER,
      UNITRACE_VERSION, NV_NSIGHT_INJECTION_PORT_BASE) the inner loop is clamped to [5, 20] with one trial
      (when ``reduce_iterations_for_external_profiler``), and under ncu a single call is timed.
    - ``use_itt``: wrap the timed phase in an ITT task ``model run loop[::label]`` (needs ``ittapi``).
    - ``output``: a list that is extended with the samples (used by the pytest plugin).
    Raises ValueError for bad options; exceptions of target/sync propagate."""
    native = _native()
    args_list, kwargs_list = _call_inputs(args, kwargs, int(auto_replicate_inputs_size or 0))
    profiler = native.detect_profiler()
    if profiler == "ncu":
        mode = "replay"
    elif reduce_iterations_for_external_profiler:
        mode = native.profiler_mode_for(profiler)
    else:
        mode = "none"
    if label is None:
        label = os.environ.get("KERNELFOUNDRY_PROFILE_LABEL")
    hooks = profilers.TimedPhaseHooks(profiler, use_itt=use_itt, label=label)

    os.environ["PTI_ENABLE_COLLECTION"] = "1"
    try:
        result = native.measure(
            target, sync_fn,
            args_list=args_list if any(args_list) else None,
            kwargs_list=kwargs_list if any(kwargs_list) else None,
            warmup_min_time=float(warmup_min_time), warmup_min_iters=int(warmup_min_iters),
            inner_loop_min_time=float(inner_loop_min_time), perf_trials_min_iters=int(perf_trials_min_iters),
            perf_trials_min_time=float(perf_trials_min_time), profiler_mode=mode,
            on_timed_begin=hooks.begin, on_timed_end=hooks.end)
    finally:
        os.environ["PTI_ENABLE_COLLECTION"] = "0"
    # Kernel calls made in timed trials (profiler passes divide their counts by it; profilers.timed_calls).
    profilers.add_timed_calls(result["trials"] * result["inner_iters"] if result["inner_iters"]
                              else len(result["trials_ms"]))
    samples = list(result["trials_ms"])
    if output is not None:
        output.extend(samples)
    stats = native.timing_stats(samples)
    logger.info("[Performance test]  warm up %d, trials %d (%d passes each)%s", result["warmup_iters"],
                result["trials"], result["inner_iters"],
                f", {len(args_list)} input copies" if len(args_list) > 1 else "")
    logger.info("[Performance test] Avg: %.3f ms, Min: %.3f ms, Max: %.3f ms, Median: %.3f ms", stats["mean"],
                stats["min"], stats["max"], stats["median"])
    return samples


def _torch_sync(device: Any) -> Optional[Callable[[], None]]:
    """The synchronisation function for a torch device: None (no-op) for the CPU."""
    import torch  # noqa: PLC0415

    xpu = getattr(torch, "xpu", None)
    xpu_ok = xpu is not None and xpu.is_available()
    if device is None:
        if xpu_ok:
            if torch.cuda.is_available():
                warnings.warn("both XPU and CUDA are available; synchronising XPU")
            return xpu.synchronize
        if torch.cuda.is_available():
            return torch.cuda.synchronize
        return None
    kind = torch.device(device).type
    if kind == "cpu":
        return None
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"measure_runtime_torch: device {device!r} requested but CUDA is not available")
        return torch.cuda.synchronize
    if kind == "xpu":
        if not xpu_ok:
            raise ValueError(f"measure_runtime_torch: device {device!r} requested but XPU is not available")
        return xpu.synchronize
    raise ValueError(f"measure_runtime_torch: unsupported device type {kind!r} (cpu, cuda or xpu)")


def measure_runtime_torch(target: Callable, device: Any = None, args: Any = None, kwargs: Any = None,
                          **options: Any) -> list[float]:
    """measure_runtime with torch device synchronisation: ``device`` "cuda"/"xpu" synchronises that device,
    "cpu" does nothing; None picks XPU, else CUDA, else the CPU (no-op). Raises ValueError for a device that
    is not available. Other keyword options as for measure_runtime."""
    return measure_runtime(target, _torch_sync(device), args=args, kwargs=kwargs, **options)
