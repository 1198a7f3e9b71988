"""Paired timing in the pytest plugin (``--kf-paired``): the candidate and the reference timed in the same
process, interleaved, on the same fresh inputs, with the timed outputs checked against the reference's.

How a performance test becomes paired:

* the session fixture ``use_reference`` is parametrised ``[kf-candidate, kf-reference]``: a performance test that
  uses it runs once per side, and its measurement fixture does not time — it *captures* the call (target, sync,
  inputs);
* once the reference side captured the same measurement, the pair is timed by the C++ loop
  (``kernelfoundry._measure.measure_paired``, include/kernelfoundry/paired.hpp): rounds in random order, the speedup
  as the median of per-round ratios with a 95 % confidence interval, until the interval is narrow enough or the
  time budget is spent;
* before every sample both sides get the same fresh input values, written into their own input buffers outside the
  timed window: a value set from a small pool (the originals and perturbed copies of the floating-point tensors)
  times a window of a table of factors at an offset drawn per load (``_Values``), so every sample's values are new:
  an output cache keyed on input pointers returns stale values, one keyed on contents never hits, and one that keeps
  every output grows the process, which the checks report as suspicious;
* in checked rounds the candidate's outputs are compared with the reference's for the same inputs, and its inputs
  with the values that were put into them — in C++ on raw buffers (``_measure.compare``/``equal``), not with
  functions candidate code could patch;
* the loop charges CPU that other threads use after a call returned to that side (work left running in a
  background thread) and cross-checks its clock against a raw system-call clock; the verdict (correct, noisy,
  suspicious, or the problem a check found) is the C++ policy's (``_measure.judge_paired``,
  include/kernelfoundry/paired_record.hpp), which also has a speedup above the suspicious threshold measured again
  with new values and seeds: the result must hold.

The per-benchmark record (``measure_pair()``) goes into the result report the plugin writes to kf's pipe. Functions this
module relies on are captured when it is imported, before any candidate code is: later patches of ``os``, ``json``,
``time``, ``kernelfoundry.measure`` or ``torch`` attributes do not reach it.
"""

from __future__ import annotations

import math
import os
import random
import sys
from typing import Any, Callable, Optional

from . import _measure
from . import device_timing as _device
from . import integrity as _integrity
from .measure import input_sets as _input_sets

try:
    from .executor import Executor as _Executor
except ImportError:  # pragma: no cover — the executor module ships with this package
    _Executor = None

_measure_paired = _measure.measure_paired
_judge_paired = _measure.judge_paired
_compare = _measure.compare
_equal = _measure.equal
_readable = _measure.readable
_measure_loop = _measure.measure
_isnan = math.isnan
_os_open, _os_read, _os_close, _O_RDONLY = os.open, os.read, os.close, os.O_RDONLY
_PAGE = os.sysconf("SC_PAGE_SIZE")

#: Memory the test process may gain while a pair is timed before the measurement is suspicious (bytes; at least, and
#: 16x the inputs of one side).
_RETAINED_MIN = 512 << 20


def _resident_bytes() -> int:
    """This process's resident memory (/proc/self/statm, read with functions captured at import)."""
    fd = _os_open("/proc/self/statm", _O_RDONLY)
    try:
        return int(_os_read(fd, 128).split()[1]) * _PAGE
    finally:
        _os_close(fd)

#: Default knobs; eval_config.timing (JSON via --kf-paired-options) overrides them. The one table of the keys, their
#: defaults and what each does is C++'s (include/kernelfoundry/timing_keys.hpp); kf checks a config against it.
DEFAULTS = _measure.timing_defaults()


class _Torch:
    """torch functions, captured when torch is first seen (before candidate code runs: see conftest)."""

    def __init__(self) -> None:
        self.mod = None

    def capture(self) -> None:
        torch = sys.modules.get("torch")
        if torch is None or self.mod is not None:
            return
        t = torch.Tensor
        self.mod = torch
        self.tensor_type = t
        self.detach, self.cpu, self.contiguous, self.numpy = t.detach, t.cpu, t.contiguous, t.numpy
        self.float, self.clone, self.copy_, self.mul_ = t.float, t.clone, t.copy_, t.mul_
        self.mul, self.empty_like = torch.mul, torch.empty_like
        self.is_floating_point = t.is_floating_point
        self.bfloat16 = torch.bfloat16
        self.generator = torch.Generator
        self.rand = torch.rand
        self.no_grad = torch.no_grad
        _device.capture(torch)


TORCH = _Torch()


def _np():
    import numpy  # noqa: PLC0415 — numpy is imported by torch anyway; tasks without numpy never pair arrays
    return numpy


def _is_tensor(x: Any) -> bool:
    return TORCH.mod is not None and isinstance(x, TORCH.tensor_type)


def _is_array(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def leaves(obj: Any, out: Optional[list] = None) -> list:
    """The tensors and arrays reachable from args/kwargs, in a deterministic order (the inputs to refresh)."""
    out = [] if out is None else out
    if _is_tensor(obj) or _is_array(obj):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            leaves(v, out)
    elif isinstance(obj, dict):
        for v in obj.values():
            leaves(v, out)
    return out


def _as_buffer(x: Any):
    """A contiguous numpy view (or copy) of a tensor/array, for the C++ comparisons."""
    if _is_tensor(x):
        t = TORCH.cpu(TORCH.detach(x))
        if t.dtype == TORCH.bfloat16:
            t = TORCH.float(t)
        return TORCH.numpy(TORCH.contiguous(t))
    return _np().ascontiguousarray(x)


def _signature(x: Any) -> tuple:
    return (tuple(x.shape), str(x.dtype), str(getattr(x, "device", "cpu")))


def compare_outputs(actual: Any, expected: Any, opts: dict, path: str = "output") -> Optional[str]:
    """None when the candidate's output agrees with the reference's (structure, dtype, shape, values), else why."""
    if _is_tensor(expected) or _is_array(expected):
        if not (_is_tensor(actual) or _is_array(actual)):
            return f"{path}: a {type(actual).__name__} where the reference returns an array"
        return _compare(_as_buffer(actual), _as_buffer(expected), opts["output_rtol"], opts["output_atol_rms"],
                        opts["output_min_ok"])
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return f"{path}: structure differs from the reference's ({type(actual).__name__})"
        for i, (a, e) in enumerate(zip(actual, expected)):
            problem = compare_outputs(a, e, opts, f"{path}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        if _isnan(expected):
            return None if _isnan(actual) else f"{path}: {actual} where the reference gives nan"
        ok = abs(actual - expected) <= opts["output_rtol"] * abs(expected) + 1e-12
        return None if ok else f"{path}: {actual} where the reference gives {expected}"
    if type(actual) is not type(expected) or actual != expected:
        return f"{path}: {actual!r} where the reference gives {expected!r}"
    return None


class Capture:
    """One measurement call of one side, held until its pair arrives. ``args``/``kwargs`` are measure_runtime's
    forms (kernelfoundry.measure.input_sets): one input set, or lists of per-call sets that rotate — call k of a
    sample uses set k mod n (``rewind()`` restarts at set 0), ``last`` is the set the latest call used, and
    ``inputs`` are the arrays of every set (all of them get the round's values). A target that is a
    kernelfoundry.executor.Executor (the function under test in a process of its own) is bound once per set:
    its inputs are the shared-memory tensors the executor reads, a call is one round trip, and the output is
    copied over only when it is compared."""

    def __init__(self, target: Callable, sync: Optional[Callable], args: Any, kwargs: Any, options: dict):
        self.args_list, self.kwargs_list = _input_sets(args, kwargs)
        self.args, self.kwargs = self.args_list[0], self.kwargs_list[0]
        self.target, self.sync, self.options = target, sync, options
        self.remote = None
        self._next = 0
        self.last = -1
        if _Executor is not None and isinstance(target, _Executor):
            self.remote = target
            self.bounds = self.bind_sets(target)
            self.inputs = [x for b in self.bounds for x in b.inputs]
        else:
            self.bounds = []
            self.inputs = leaves((self.args_list, self.kwargs_list))
        self._out: Any = None
        self._out_stale = False

    @property
    def sets(self) -> int:
        """How many input sets the calls rotate over."""
        return len(self.args_list)

    def bind_sets(self, executor: Any) -> list:
        """One kernelfoundry.executor.Bound per input set, in `executor`."""
        return [executor.bind(a, k) for a, k in zip(self.args_list, self.kwargs_list)]

    def rewind(self) -> None:
        """The next call uses input set 0 (called before every sample)."""
        self._next = 0

    def call(self) -> None:
        """One call with the next input set."""
        i = self._next
        self._next = i + 1 if i + 1 < len(self.args_list) else 0
        self.last = i
        if self.remote is not None:
            self.bounds[i].call()
            self._out_stale = True
        else:
            self._out = self.target(*self.args_list[i], **self.kwargs_list[i])

    def call_set(self, index: int) -> None:
        """One call with input set `index` (outside timed windows: to compare outputs of the same set)."""
        self._next = index
        self.call()

    @property
    def out(self) -> Any:
        """The last call's output (fetched from the executor on first use after a call)."""
        if self._out_stale:
            self._out = self.bounds[self.last].output()
            self._out_stale = False
        return self._out


#: Length of the multiplier table that makes every load's values fresh (a prime, so that the table's period does not
#: line up with a row length).
_TABLE = 65521
#: Inputs whose element count has a divisor from _PERIOD_MIN to _TABLE (and holds two such periods) get a window of
#: that many factors repeated along them: a broadcast multiply reads the table from cache instead of a second stream
#: as long as the input (the README example's 16 MB input: 0.94 -> 0.62 ms per load, 2026-12-05). Every load still has
#: its own window (one of _TABLE offsets) of a table whose period (_TABLE, a prime) differs from the input's.
_PERIOD_MIN = 16384


class _Values:
    """The input values of each load of the paired loop (two per round: each side's first and second sample,
    include/kernelfoundry/paired.hpp). A pool of value sets — set 0 the original values, the others perturbed
    copies of the floating-point inputs (other inputs keep their values) — and, per load, a set (never the same one
    twice in a row) multiplied element-wise by a window of a table of factors 1 ± perturbation at an offset drawn
    per load: every load's floating-point values are new, so an output cache keyed on input values (all of them or
    a sample) does not hit. Without it the values repeated every few loads (4 sets), and a candidate that cached its
    outputs by 64 sampled input values on every other call scored 4.97x where its kernel scores 2.5x (stranger
    test, 2026-12-05). The multiply is outside the timed window; for a large input its factors repeat along it
    (_PERIOD_MIN), so it costs about one copy and a half. Perturbation 0 turns it off."""

    def __init__(self, inputs: list, opts: dict, seed: int):
        self.sets = [[self._copy(x) for x in inputs]]
        size = sum(int(getattr(x, "nbytes", 0) or x.element_size() * x.nelement()) if _is_tensor(x)
                   else int(x.nbytes) for x in inputs)
        wanted = max(1, int(opts["value_sets"]))
        if size > 0:
            wanted = max(1, min(wanted, int(opts["value_sets_max_bytes"] // max(size, 1))))
        self.p = float(opts["perturbation"])
        for k in range(1, wanted):
            self.sets.append([self._perturbed(x, seed + k, self.p) for x in inputs])
        self.perturbable = any(self._is_float(x) for x in inputs)
        self._rng = random.Random(seed)
        self._seed = seed
        self._plan: dict = {}
        self._last = -1
        self._factors: dict = {}  # (dtype, device, length) -> table of factors tiled to length + _TABLE
        self._periods: dict = {}  # element count -> its period (0: none), _period()
        self._scratch: dict = {}  # (kind, dtype, device, shape) -> buffer a check writes the expected values into

    @staticmethod
    def _is_float(x: Any) -> bool:
        if _is_tensor(x):
            return bool(TORCH.is_floating_point(x))
        return _is_array(x) and x.dtype.kind == "f"

    @staticmethod
    def _copy(x: Any) -> Any:
        if _is_tensor(x):
            with TORCH.no_grad():
                return TORCH.clone(TORCH.detach(x))
        return x.copy()

    def _perturbed(self, x: Any, seed: int, p: float) -> Any:
        y = self._copy(x)
        if not self._is_float(x) or p <= 0:
            return y
        if _is_tensor(y):
            gen = TORCH.generator(device=y.device).manual_seed(seed)
            with TORCH.no_grad():
                noise = TORCH.rand(y.shape, generator=gen, device=y.device, dtype=y.dtype)
                TORCH.mul_(y, (noise * 2 - 1) * p + 1)
            return y
        rng = _np().random.default_rng(seed)
        y *= (1 + p * (2 * rng.random(y.shape) - 1)).astype(y.dtype)
        return y

    def _period(self, dst: Any, src: Any) -> int:
        """The period of the factors of an input (dst filled from src): the largest divisor of its element count in
        [_PERIOD_MIN, _TABLE] when it holds at least two such periods and both buffers are contiguous, else 0 (the
        factors are as long as the input)."""
        n = int(src.numel()) if _is_tensor(src) else int(src.size)
        contiguous = (lambda x: x.is_contiguous()) if _is_tensor(src) else (lambda x: x.flags.c_contiguous)
        if n < 2 * _PERIOD_MIN or not (contiguous(dst) and contiguous(src)):
            return 0
        if n not in self._periods:
            self._periods[n] = next((d for d in range(min(_TABLE, n // 2), _PERIOD_MIN - 1, -1) if n % d == 0), 0)
        return self._periods[n]

    def _window(self, x: Any, offset: int, length: int) -> Any:
        """`length` factors for `x` (its dtype, device): the table's elements from `offset` on (a flat window)."""
        key = (str(x.dtype), str(getattr(x, "device", "cpu")), length)
        table = self._factors.get(key)
        if table is None:
            reps = length // _TABLE + 2
            if _is_tensor(x):
                gen = TORCH.generator(device=x.device).manual_seed(self._seed + 104729)
                with TORCH.no_grad():
                    one = TORCH.rand((_TABLE,), generator=gen, device=x.device, dtype=x.dtype)
                    one = one * (2 * self.p) + (1 - self.p)
                    table = one.repeat(reps)
            else:
                rng = _np().random.default_rng(self._seed + 104729)
                one = (1 - self.p + 2 * self.p * rng.random(_TABLE)).astype(x.dtype)
                table = _np().tile(one, reps)
            self._factors[key] = table
        return table[offset:offset + length]

    def plan(self, load: int) -> tuple:
        """(value set, table offset) of `load`."""
        if load not in self._plan:
            n = len(self.sets)
            k = self._rng.randrange(n)
            if n > 1 and k == self._last:
                k = (k + 1) % n
            self._plan[load] = (k, self._rng.randrange(_TABLE))
            self._last = k
        return self._plan[load]

    def _put(self, dst: Any, src: Any, offset: int) -> None:
        """dst = src, times the factors at `offset` where src is floating-point and the perturbation is on."""
        fresh = self.p > 0 and self._is_float(src)
        period = self._period(dst, src) if fresh else 0
        if _is_tensor(dst):
            with TORCH.no_grad():
                if period:  # the window repeated along the rows of a (n / period, period) view: one read stream less
                    TORCH.mul(src.view(-1, period), self._window(src, offset, period), out=dst.view(-1, period))
                elif fresh:
                    TORCH.mul(src, self._window(src, offset, int(src.numel())).view(src.shape), out=dst)
                else:
                    TORCH.copy_(dst, src)
        elif period:
            _np().multiply(src.reshape(-1, period), self._window(src, offset, period), out=dst.reshape(-1, period))
        elif fresh:
            _np().multiply(src, self._window(src, offset, int(src.size)).reshape(src.shape), out=dst)
        else:
            _np().copyto(dst, src)

    def load(self, capture: Capture, load: int) -> None:
        k, offset = self.plan(load)
        for dst, src in zip(capture.inputs, self.sets[k]):
            self._put(dst, src, offset)

    def unchanged(self, capture: Capture, load: int) -> Optional[int]:
        """The index of the first input of `capture` that no longer holds the values of `load`, or None."""
        k, offset = self.plan(load)
        for i, (x, v) in enumerate(zip(capture.inputs, self.sets[k])):
            key = (_is_tensor(v), str(v.dtype), str(getattr(v, "device", "cpu")), tuple(v.shape))
            expected = self._scratch.get(key)
            if expected is None:
                expected = self._scratch[key] = TORCH.empty_like(v) if _is_tensor(v) else _np().empty_like(v)
            self._put(expected, v, offset)
            if not _equal(_as_buffer(x), _as_buffer(expected)):
                return i
        return None


def _same_values(a: list, b: list) -> bool:
    """Whether the arrays of `a` hold the same bytes as those of `b`, pairwise."""
    return all(_equal(_as_buffer(x), _as_buffer(y)) for x, y in zip(a, b))


def _extent(x: Any) -> tuple:
    """(address, bytes) of the memory a CPU tensor or array spans (its strides included); bytes 0 when empty or not
    in this process's memory (a device tensor)."""
    if _is_tensor(x):
        if x.device.type != "cpu" or x.numel() == 0:
            return 0, 0
        span = 1 + sum((n - 1) * st for n, st in zip(x.shape, x.stride()))  # torch strides are never negative
        return x.data_ptr(), span * x.element_size()
    if x.size == 0:
        return 0, 0
    low, high = _np().byte_bounds(x)
    return low, high - low


def _unreadable_output(out: Any) -> Optional[str]:
    """Why an output of the candidate cannot be read without a fault, or None. An output whose pages were not
    readable and got computed by a fault handler on first read did its work in the check, outside every timed call
    (stranger test, 2026-12-05: PROT_NONE pages and a SIGSEGV handler, 9.07x for a 2.7x kernel, `noisy`)."""
    for i, x in enumerate(leaves(out)):
        address, size = _extent(x)
        if size and not _readable(address, size):
            return (f"suspicious: output {i} of the candidate was not readable memory when it was checked (pages "
                    "without read permission or not mapped): an output computed when first read is computed outside "
                    "the timed calls")
    return None


def _inputs_match(cand: Capture, ref: Capture) -> Optional[str]:
    if len(cand.inputs) != len(ref.inputs):
        return f"the two sides pass {len(cand.inputs)} and {len(ref.inputs)} arrays"
    for i, (a, b) in enumerate(zip(cand.inputs, ref.inputs)):
        if _signature(a) != _signature(b):
            return f"input {i}: {_signature(a)} vs {_signature(b)}"
    return None


def _measure_once(cand: Capture, ref: Capture, opts: dict, seed: int) -> dict:
    """One paired measurement with value sets drawn from `seed`: its record, not judged yet (a problem a check found
    is its status already)."""
    values = _Values(cand.inputs, opts, seed)
    # Memory retained while timing: a candidate that keeps its outputs across calls (an output cache, now that every
    # load's values are new) grew the process by ~16 MB per call and slowed the memory-bound reference from 3.3 to
    # 6-9 ms per call — 5.6x for a kernel that scores 2.5x (stranger test, 2026-12-05). A kernel's own workspace is
    # allocated once, in the correctness run or the warm-up.
    inputs_bytes = sum(int(x.element_size() * x.nelement()) if _is_tensor(x) else int(x.nbytes) for x in cand.inputs)
    retained_limit = max(_RETAINED_MIN, 16 * inputs_bytes)
    resident_start = _resident_bytes()

    def prepare(capture: Capture) -> Callable[[int], None]:
        def run(load: int) -> None:
            values.load(capture, load)
            capture.rewind()
        return run

    def check(load: int) -> Optional[str]:
        changed = _integrity.problem(full=load == 1)  # the probe round (load 1) also compares the dispatcher
        if changed:
            return f"suspicious: {changed}"
        grown = _resident_bytes() - resident_start
        if grown > retained_limit:
            return (f"suspicious: the test process grew by {grown >> 20} MiB while the pair was timed (more than "
                    f"{retained_limit >> 20} MiB): memory kept across calls, e.g. an output cache, slows the other "
                    "side and is not the kernel's cost")
        # Inputs first: a candidate that writes into its inputs also returns wrong outputs whenever a sample calls
        # it twice on one input set (rotating sets), and the cause is the better verdict (regression, 2026-12-04:
        # with a shorter warm-up the first checked sample drew such a call count, output_changed_under_timing).
        # Both sides' inputs got this load's values before their last sample, so they are equal unless a side wrote
        # into its own: only then is each compared with the values it should hold, to find the side (both writing
        # the same is not the candidate's doing). One comparison instead of two multiplies and two comparisons.
        if not _same_values(cand.inputs, ref.inputs):
            changed = values.unchanged(cand, load)
            if changed is not None and values.unchanged(ref, load) is None:
                return f"input_mutated: input {changed} was written by the candidate during a timed call"
        unreadable = _unreadable_output(cand.out)
        if unreadable:
            return unreadable
        if ref.last != cand.last and cand.last >= 0:  # rotating sets: the reference's output for the same set
            ref.call_set(cand.last)
        problem = compare_outputs(cand.out, ref.out, opts)
        if problem:
            return f"output_changed_under_timing: {problem}"
        return None

    flush = _device.flusher(opts)  # cold-cache timing: outside the window, before every sample

    def side(capture: Capture) -> tuple:
        load = prepare(capture) if capture.inputs or capture.sets > 1 else None
        if flush is not None:
            def prep(key: int, load=load) -> None:
                if load is not None:
                    load(key)
                flush()
        else:
            prep = load
        # The window ends after the whole device is synchronised (all streams): side-stream work is counted.
        return (prep, capture.call, _device.timed_sync(capture.sync),
                (lambda: capture.remote.settle(opts["quiesce_max_s"])) if capture.remote is not None else None)

    _device.measurement_started()
    try:
        record = _measure_paired(side(cand), side(ref), {**_device.loop_options(opts), "seed": seed}, check)
    finally:
        _device.measurement_ended()
    changed = _integrity.problem(full=True)  # a change after the last checked round
    if changed and record.get("status") in ("correct", "noisy"):
        record["status"], record["detail"] = "suspicious", changed
    record["value_sets"] = len(values.sets) if values.perturbable else 1
    return record


def measure_pair(cand: Capture, ref: Capture, opts: dict) -> dict:
    """Times a captured pair and returns the benchmark's record for the report, judged by the C++ policy
    (kernelfoundry._measure.judge_paired; include/kernelfoundry/paired_record.hpp has its fields): a speedup above
    opts["suspicious_speedup"] is measured again with new seeds and values."""
    mismatch = _inputs_match(cand, ref)
    if mismatch:
        return unpaired_record(cand, opts, f"the sides' inputs differ ({mismatch})")
    seed = int(opts["seed"])
    return _judge_paired(_measure_once(cand, ref, opts, seed), opts,
                         lambda: _measure_once(cand, ref, opts, seed + 7919))


_LOOP_OPTIONS = ("warmup_min_time", "warmup_min_iters", "inner_loop_min_time", "perf_trials_min_iters",
                 "perf_trials_min_time")


def time_alone(cap: Capture, loop: dict) -> list:
    """The capture's target timed alone by the classic loop (its input sets rotating; an executor side as one round
    trip per call with resident inputs): per-call ms, one per trial."""
    target, args_list, kwargs_list = cap.target, cap.args_list, cap.kwargs_list
    if cap.remote is not None:
        bounds = cap.bounds
        target, args_list, kwargs_list = (lambda k: bounds[k].call()), [(k,) for k in range(len(bounds))], \
            [{} for _ in bounds]
    r = _measure_loop(target, _device.timed_sync(cap.sync), args_list=args_list if any(args_list) else None,
                      kwargs_list=kwargs_list if any(kwargs_list) else None,
                      **{k: v for k, v in loop.items() if k in _LOOP_OPTIONS})
    return list(r["trials_ms"])


def unpaired_record(cand: Capture, opts: dict, why: str) -> dict:
    """The candidate timed alone (the classic loop with the test's knobs) when the pair cannot be formed."""
    return {"paired": False, "status": "correct", "detail": f"not paired: {why}",
            "candidate_ms": time_alone(cand, cand.options)}
