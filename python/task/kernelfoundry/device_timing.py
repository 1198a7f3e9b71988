"""Timing on an asynchronous device (CUDA through torch): what the timing loops call around a timed window, and
what the report says about the device.

Rules (the same as the native SDK's, include/kernelfoundry/sdk/task_sdk_cuda.hpp):

* **Whole-device synchronisation.** A kernel launch returns before the kernel ran. The loops
  (``kernelfoundry._measure``: the paired loop and the classic one) call the sync function before the first
  timestamp and before the last one of every sample; here that function is the task's own sync (if any) and then
  a synchronisation of every CUDA device in use, **all streams** (``torch.cuda.synchronize(i)``,
  cudaDeviceSynchronize). A candidate that launches on a side stream and returns is charged for that work: a task's
  sync that waits for one stream only (or none: ``lambda: None``) cannot hide it.
* **Cold-cache timing** (``eval_config.timing.l2_flush: true``): before every sample, outside the timed window, a
  buffer of twice the device's L2 size (``torch.cuda.get_device_properties().L2_cache_size``) is overwritten; the
  sync before the first timestamp waits for that write. Each sample is then ONE call (``min_sample_s`` 0), so every
  timed call starts with a cold L2 — and pays one launch and one synchronisation (~10 us on both sides alike, which
  pulls the ratio of very short kernels towards 1).
* **Clock.** Host time (the loop's steady clock) around the whole-device synchronisation, not CUDA events: an
  event pair on one stream would miss work on other streams. ``conditions()`` says so (``timer``).
* **Conditions** recorded in ``timing.conditions.device``: device name, compute capability, L2 size, driver and
  CUDA runtime versions, SM and memory clocks (MHz, from NVML through ``libnvidia-ml.so.1``) before the first and
  after the last measurement, the flush policy.

Which device is used: ``DEVICE[0]``, the torch CUDA device captured by ``capture()`` (called by the plugin once
torch is imported, before candidate code runs, so a candidate that replaces ``torch.cuda.synchronize`` changes
nothing here). Tests put a fake device there (an object with the methods of ``TorchCuda``). A task that never
initialised CUDA before its measurement is a host task: no device synchronisation, no flush.
"""

from __future__ import annotations

import ctypes
import sys
import time
from typing import Any, Callable, Optional

TIMER = "host steady clock; each window ends after the device synchronisation"
SYNC = "every CUDA device in use, all streams (cudaDeviceSynchronize), after the task's own sync"


class TorchCuda:
    """The CUDA device(s) of torch in this process. Functions are captured by ``capture(torch)``."""

    def __init__(self) -> None:
        self.torch = None
        self._nvml: Any = None

    def capture(self, torch: Any) -> None:
        """Keeps torch's CUDA functions (before candidate code can patch them)."""
        if self.torch is not None:
            return
        cuda = torch.cuda
        self.torch = torch
        self._is_initialized = cuda.is_initialized
        self._device_count = cuda.device_count
        self._synchronize = cuda.synchronize
        self._current_device = cuda.current_device
        self._properties = cuda.get_device_properties
        self._empty = torch.empty
        self._uint8 = torch.uint8
        self._zero = torch.Tensor.zero_

    def active(self) -> bool:
        """True when this process uses CUDA (torch initialised it)."""
        return self.torch is not None and bool(self._is_initialized())

    def synchronize(self) -> None:
        """Waits for all work on all streams of every visible device (cudaDeviceSynchronize on each)."""
        for i in range(self._device_count()):
            self._synchronize(i)

    def l2_bytes(self) -> int:
        """The current device's L2 cache size in bytes."""
        return int(self._properties(self._current_device()).L2_cache_size)

    def flush_buffer(self, nbytes: int) -> Any:
        """A device buffer of `nbytes` bytes to overwrite between samples."""
        return self._empty(nbytes, dtype=self._uint8, device=f"cuda:{self._current_device()}")

    def flush(self, buffer: Any) -> None:
        """Overwrites `buffer` (asynchronously; the loop's sync waits for it)."""
        self._zero(buffer)

    def describe(self) -> dict:
        """Name, capability, memory, L2, driver and runtime versions of the current device."""
        p = self._properties(self._current_device())
        out = {"type": "cuda", "name": p.name, "capability": f"{p.major}.{p.minor}",
               "memory_bytes": int(p.total_memory), "l2_bytes": int(p.L2_cache_size),
               "multiprocessors": int(p.multi_processor_count), "uuid": str(getattr(p, "uuid", "")),
               "cuda_runtime": self.torch.version.cuda, "torch": self.torch.__version__}
        nvml = self._nvml_lib()
        if isinstance(nvml, str):
            out["driver"] = None
            out["nvml"] = nvml
        else:
            buf = ctypes.create_string_buffer(96)
            out["driver"] = buf.value.decode() if nvml.nvmlSystemGetDriverVersion(buf, 96) == 0 else None
        return out

    def clocks(self) -> dict:
        """{"sm_mhz", "mem_mhz"} of the current device now (NVML), or {"error": why}."""
        nvml = self._nvml_lib()
        if isinstance(nvml, str):
            return {"error": nvml}
        handle = ctypes.c_void_p()
        uuid = str(getattr(self._properties(self._current_device()), "uuid", ""))
        rc = nvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}".encode(), ctypes.byref(handle)) if uuid else 1
        if rc != 0:
            rc = nvml.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(self._current_device()), ctypes.byref(handle))
        if rc != 0:
            return {"error": f"nvmlDeviceGetHandle failed ({rc})"}
        out = {}
        for key, clock in (("sm_mhz", 1), ("mem_mhz", 2)):  # nvmlClockType_t: NVML_CLOCK_SM 1, NVML_CLOCK_MEM 2
            mhz = ctypes.c_uint()
            rc = nvml.nvmlDeviceGetClockInfo(handle, ctypes.c_int(clock), ctypes.byref(mhz))
            out[key] = int(mhz.value) if rc == 0 else None
        return out

    def _nvml_lib(self) -> Any:
        """The initialised NVML library, or why it is not there (a string)."""
        if self._nvml is None:
            try:
                lib = ctypes.CDLL("libnvidia-ml.so.1")
                rc = lib.nvmlInit_v2()
                self._nvml = lib if rc == 0 else f"nvmlInit_v2 failed ({rc})"
            except (OSError, AttributeError) as e:
                self._nvml = f"NVML unavailable ({e})"
        return self._nvml


#: The device the loops synchronise (tests replace DEVICE[0] with a fake).
DEVICE: list = [TorchCuda()]

#: What the measurements of this process saw: device description, clocks before the first / after the last
#: measurement, the flush policy of the last one.
_SEEN: dict = {}


def capture(torch: Any) -> None:
    """Captures torch's CUDA functions into the default device (the plugin calls it before candidate code runs)."""
    if isinstance(DEVICE[0], TorchCuda) and torch is not None:
        DEVICE[0].capture(torch)


def in_use() -> Optional[Any]:
    """The device when this process uses it now, else None (a host task)."""
    dev = DEVICE[0]
    if isinstance(dev, TorchCuda) and dev.torch is None and "torch" in sys.modules:
        dev.capture(sys.modules["torch"])  # measure_runtime used without the plugin (which captures earlier)
    try:
        return dev if dev.active() else None
    except Exception:  # noqa: BLE001 — a broken CUDA runtime: report as no device, the test's own calls fail
        return None


def timed_sync(task_sync: Optional[Callable[[], None]]) -> Optional[Callable[[], None]]:
    """The sync function for the loops: `task_sync` (may be None), then the whole device when one is in use (decided
    now: call it when the measurement's inputs exist). Returns `task_sync` unchanged for a host task."""
    dev = in_use()
    if dev is None:
        return task_sync
    whole = dev.synchronize
    if task_sync is None:
        return whole

    def sync() -> None:
        task_sync()
        whole()
    return sync


def flusher(opts: dict) -> Optional[Callable[[], None]]:
    """With ``opts["l2_flush"]`` and a device in use: a function that overwrites a buffer of twice the L2 size
    (outside the timed window: the loop calls it in its prepare step). None otherwise."""
    if not opts.get("l2_flush"):
        _SEEN["l2_flush"] = {"enabled": False}
        return None
    dev = in_use()
    if dev is None:
        _SEEN["l2_flush"] = {"enabled": False, "why": "no device in use (host task)"}
        return None
    nbytes = 2 * max(int(dev.l2_bytes()), 1)
    buffer = dev.flush_buffer(nbytes)
    _SEEN["l2_flush"] = {"enabled": True, "bytes": nbytes,
                         "when": "before every sample, outside the timed window; one call per sample"}
    return lambda: dev.flush(buffer)


def loop_options(opts: dict) -> dict:
    """The paired loop's options for `opts`: with an L2 flush, one call per sample (min_sample_s 0)."""
    if opts.get("l2_flush") and in_use() is not None:
        return {**opts, "min_sample_s": 0.0}
    return opts


def measurement_started() -> None:
    """Notes the device and its clocks before the first measurement of this process."""
    dev = in_use()
    if dev is None or "clocks_before" in _SEEN:
        return
    try:
        _SEEN["device"] = dev.describe()
        _SEEN["clocks_before"] = dev.clocks()
    except Exception as e:  # noqa: BLE001 — conditions are informative: record why they are missing
        _SEEN["clocks_before"] = {"error": f"{type(e).__name__}: {e}"}


def measurement_ended() -> None:
    """Notes the clocks after the latest measurement."""
    dev = in_use()
    if dev is None:
        return
    try:
        _SEEN["clocks_after"] = dev.clocks()
    except Exception as e:  # noqa: BLE001
        _SEEN["clocks_after"] = {"error": f"{type(e).__name__}: {e}"}
    _SEEN["at"] = time.time()


def conditions() -> dict:
    """``timing.conditions.device`` of the report: {"type": "host"} for a host task, else the device, its clocks
    before/after, the sync and flush policy and the timer."""
    if "device" not in _SEEN:
        return {"type": "host", "timer": "host steady clock", "sync": "the task's own (no device in use)"}
    return {**_SEEN["device"], "clocks_mhz": {"before": _SEEN.get("clocks_before"), "after": _SEEN.get("clocks_after")},
            "timer": TIMER, "sync": SYNC, "l2_flush": _SEEN.get("l2_flush", {"enabled": False})}


def reset() -> None:
    """Forgets what was seen (tests)."""
    _SEEN.clear()
