"""The function under test in a process of its own (issue 9, item 4): the test process — the checker — owns the
inputs, the clock and the comparison; candidate code never runs in it, so patching the timer, the checker
(``assert_allclose``), the runtimes writer or the result report from candidate code changes nothing there.

    proxy = Executor("kb_sides:candidate", cwd=TASK_DIR)   # "module:factory": factory() returns the callable
    out = proxy(x, w, 3)       # like a local call: tensors copied in, the output copied back (correctness tests)

Transport. Tensor arguments live in shared memory: files in a private temporary directory, mapped by both
processes (``slots``); the checker copies an argument's values into its slot, the executor builds tensors over
the same pages. Commands go over a dedicated pipe pair as JSON lines (never pickle: the executor's replies are
untrusted and must not be able to run code in the checker); the executor's stdout/stderr are the checker's, so
what candidate code prints lands in the test's log, never in the protocol or kf's result pipe (not inherited).

Calls. ``proxy(*args)`` copies every tensor argument into a slot (CPU tensors only; a strided view keeps its
strides, so the callee sees the layout the caller passed) and every numpy array, runs the call, copies the slots
back into the caller's tensors (an input the callee modified is seen modified, as in a local call) and returns a
copy of the output (a tensor, or a list/tuple of tensors). For timing, ``proxy.bind(args,
kwargs)`` returns a ``Bound`` call whose inputs stay resident in the slots: ``bound.inputs`` are the checker's
tensors over those pages (write fresh values into them; read them back to see a mutation), ``bound.call()`` is
one round trip that leaves the output in the executor, ``bound.output()`` copies that output over. A round trip
costs both sides of a paired measurement the same (both sides run in executors), tens of microseconds.

Warm starts. In a test process forked from kf's zygote, executors are forked from that process's fork server
(kernelfoundry.fork_server: a copy of the test process made before any task code ran, so nothing the checker
computed is in an executor's memory) instead of a fresh interpreter: ~0.02 s instead of ~1.5 s each. ``start``
says which ("warm" or "cold"); a refused warm start falls back to cold with a line on stderr.

Work after returning. The executor's CPU time is its kernel CPU clock (``cpu_seconds``); ``settle()`` waits
until the executor is idle — the quiet rule every paired side uses, in C++ (``kernelfoundry._measure.wait_quiet``)
— and returns the CPU it used since the last reply: work left running in a background thread after the reply.

Host executors. ``Executor("@modules", cwd)`` imports nothing until asked: kernelfoundry.isolation imports the
candidate's modules there (``request("import", …)``) and uses their functions, classes and objects through
handles (``invoke``, ``request("attr" | "setattr" | "dir" | "iter", …)``); outputs may then also be dicts,
numpy arrays and scalars, dtypes, devices, and objects (``Executor.make_remote``). The executor's side is
kernelfoundry.executor_serve.

Privileges. Before it imports its target the executor empties its Linux capability sets and enters a Landlock
domain of its own (``drop_capabilities``, kernelfoundry.executor_serve): candidate code cannot ptrace the checker
or open /proc/<checker>/mem, whether the test runs as root or, sandboxed, under the same uid as the checker, and
(Linux 6.12 and later) cannot signal it.

Failure. An exception in the callee raises ``ExecutorError`` with its type and message (a host executor raises
the builtin exception type the callee raised, ValueError or AttributeError say, with its message). When the executor dies
(a crash of candidate code), the checker ends with the same signal — the verdict is the one an in-process crash
gets — after saying so on stderr. ``close()`` (also at exit) kills the executor; it dies with the checker
(PR_SET_PDEATHSIG) and is in the checker's process group (kf's timeouts kill both). A session fixture should
return the Executor without closing it: pytest finalises a parametrised fixture (the candidate side) before the
paired measurement, on the reference side, still calls it.
"""

from __future__ import annotations

import atexit
import builtins
import json
import mmap
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

from . import _measure, fork_server
from . import rng as _rng
from .executor_serve import drop_capabilities, enter_own_landlock_domain  # noqa: F401 — the executor's privilege drop
from .executor_serve import dtype_name as _dtype_name
from .executor_serve import serve as _serve  # noqa: F401 — the executor's entry point (zygote, fork server)

_process_cpu_seconds = _measure.process_cpu_seconds
_wait_quiet = _measure.wait_quiet

_MAX_REPLY = 1 << 20  # bytes of one JSON reply line

#: Executors this process started, by how they started ("warm": forked by the fork server; "cold": a fresh
#: interpreter); the test report's timing conditions carry it.
STARTS = {"warm": 0, "cold": 0}

#: Called before the checker ends itself with the executor's fatal signal (the pytest plugin suspends its output
#: capture here, so that the message reaches the log).
BEFORE_FATAL: list = []


class ExecutorError(RuntimeError):
    """The callee raised, or the executor broke the protocol."""


def _torch():
    import torch  # noqa: PLC0415 — the executor is for torch tasks; import on first use
    return torch


def _numpy_array(value: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.ndarray)


def _strided_span(t: Any) -> Optional[int]:
    """None for a contiguous tensor; else the number of elements from its first to its last one in memory (torch
    strides are never negative), which the slot then holds, the callee seeing the same strides."""
    if t.is_contiguous():
        return None
    span = 1
    for size, stride in zip(t.shape, t.stride()):
        if size == 0:
            return 0
        span += (size - 1) * stride
    return span


class _Slot:
    """A shared-memory file of at least `nbytes` bytes, mapped here."""

    def __init__(self, directory: str, index: int, nbytes: int):
        self.path = os.path.join(directory, f"slot{index}")
        self.nbytes = max(int(nbytes), 1)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, self.nbytes)
            self.map = mmap.mmap(fd, self.nbytes)
        finally:
            os.close(fd)

    def tensor(self, shape: tuple, dtype: Any, stride: Optional[tuple] = None, span: int = 0):
        """A tensor over the slot's bytes: contiguous, or with `stride` over `span` elements."""
        torch = _torch()
        count = span
        if stride is None:
            count = 1
            for d in shape:
                count *= int(d)
        flat = torch.frombuffer(self.map, dtype=torch.uint8, count=self.nbytes)
        itemsize = torch.empty((), dtype=dtype).element_size()
        view = flat[: count * itemsize].view(dtype)
        return view.view(shape) if stride is None else view.as_strided(shape, stride)

    def array(self, shape: tuple, dtype: Any):
        """A numpy array over the slot's bytes."""
        np = sys.modules["numpy"]
        count = 1
        for d in shape:
            count *= int(d)
        return np.frombuffer(self.map, dtype=dtype, count=count).reshape(shape)


class Bound:
    """A call whose tensor arguments are resident in shared memory (see the module comment)."""

    def __init__(self, executor: "Executor", spec: list, kwspec: dict, inputs: list, obj: Optional[int] = None,
                 grad: Optional[bool] = None):
        self._ex = executor
        message: dict = {"op": "call", "args": spec, "kwargs": kwspec}
        if obj is not None:
            message["obj"] = obj
        if grad is not None:
            message["grad"] = grad
        self._line = (json.dumps(message) + "\n").encode()
        self.inputs = inputs  # the checker's tensors over the argument slots, in argument order
        self._out_meta: Any = None

    def call(self) -> None:
        """One call in the executor; its output stays there."""
        self._out_meta = self._ex._send(self._line)["out"]

    def output(self) -> Any:
        """A copy of the last call's output (tensor, or list/tuple of tensors)."""
        if self._out_meta is None:
            raise ExecutorError("no call has been made")
        return self._ex._fetch(self._out_meta)


class Executor:
    """A callable whose calls run in a child process (see the module comment). `target` is "module:factory":
    the executor imports `module` (with `cwd` first on sys.path) and calls `factory()` once for the callable; or
    "@modules": a host for the candidate's modules (kernelfoundry.isolation), where any object can be held and
    used through a handle (``request``, ``invoke``; outputs that are not data come back as
    ``make_remote(executor, description)``)."""

    #: Builds the checker's stand-in for an object held in the executor (set by kernelfoundry.isolation).
    make_remote: Any = None

    def __init__(self, target: str, cwd: Optional[str] = None, threads: Optional[int] = None):
        self.target, self._cwd, self._threads = target, cwd, threads
        self._closed = False
        self._dir = tempfile.mkdtemp(prefix="kf_exec_")
        self._slots: dict[int, _Slot] = {}
        self._pool: dict[int, list[int]] = {}  # free output slots by size
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        boot = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from kernelfoundry.executor import _serve; "
                "sys.path.pop(0); _serve(sys.argv[1:])")
        argv = [sys.executable, "-c", boot, package_parent, str(cmd_r), str(rep_w), target, cwd or os.getcwd(),
                str(threads or os.environ.get("KF_THREADS") or 0)]
        try:
            self.start = "cold"  # "warm": forked by the fork server of a warm test process (fork_server)
            self.proc = None
            if fork_server.available():
                try:
                    self.proc = fork_server.spawn(argv[4:], cwd or os.getcwd(), (cmd_r, rep_w))
                    self.start = "warm"
                except fork_server.SpawnRefused as e:
                    sys.stderr.write(f"kernelfoundry.executor: warm start unavailable ({e}); starting Python cold\n")
            if self.proc is None:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, pass_fds=(cmd_r, rep_w), close_fds=True,
                                             cwd=cwd)
            STARTS[self.start] += 1
        finally:
            os.close(cmd_r)
            os.close(rep_w)
        self._cmd = cmd_w
        self._rep = os.fdopen(rep_r, "rb", buffering=0)
        self._buf = b""
        self._cpu_mark = 0.0
        self._carry_rng = target == "@modules"  # candidate modules share the checker's generators (kernelfoundry.rng)
        self._rng_known: Optional[dict] = None  # the generators' state the executor has
        atexit.register(self.close)
        self._request({"op": "ready"})
        self._cpu_mark = self.cpu_seconds()

    # ---- protocol ----
    def _readline(self) -> bytes:
        while b"\n" not in self._buf:
            chunk = self._rep.read(65536)
            if not chunk:
                self._died()
            self._buf += chunk
            if len(self._buf) > _MAX_REPLY and b"\n" not in self._buf:
                raise ExecutorError(f"executor {self.target}: a reply longer than {_MAX_REPLY} bytes")
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _request(self, message: dict) -> dict:
        return self._send((json.dumps(message) + "\n").encode())

    def _send(self, line: bytes) -> dict:
        if self._carry_rng:  # the executor draws from the checker's generators (kernelfoundry.rng)
            now = _rng.capture()
            if now != self._rng_known:
                self._exchange((json.dumps({"op": "rng", "state": now}) + "\n").encode())
                self._rng_known = now
        return self._exchange(line)

    def _exchange(self, line: bytes) -> dict:
        try:
            while line:
                line = line[os.write(self._cmd, line):]
        except OSError:
            self._died()
        raw = self._readline()
        self._cpu_mark = self.cpu_seconds()  # the executor's CPU when it replied (see settle)
        try:
            reply = json.loads(raw)
        except ValueError as e:
            raise ExecutorError(f"executor {self.target}: reply is not JSON ({e})") from None
        if not isinstance(reply, dict):
            raise ExecutorError(f"executor {self.target}: reply is not an object")
        if self._carry_rng and "rng" in reply:  # the request drew random numbers there: so does the checker
            try:
                _rng.restore(reply["rng"])
            except ValueError as e:
                raise ExecutorError(f"executor {self.target}: {e}") from None
            self._rng_known = _rng.capture()
        if "error" in reply:
            kind = getattr(builtins, str(reply.get("type") or ""), None) if self.target == "@modules" else None
            if isinstance(kind, type) and issubclass(kind, Exception) and kind.__module__ == "builtins":
                raise kind(str(reply.get("message", ""))[:4000])  # a builtin type only: no code of theirs runs here
            raise ExecutorError(str(reply["error"])[:4000])
        return reply

    def _died(self) -> None:
        code = self.proc.wait()
        if self._closed:
            raise ExecutorError(f"executor {self.target} was closed")
        if code < 0:  # killed by a signal: end the checker the same way (an in-process crash's verdict)
            for hook in BEFORE_FATAL:
                try:
                    hook()
                except Exception:  # noqa: BLE001 — best effort: the signal below is the verdict
                    pass
            sys.stderr.write(f"kernelfoundry.executor: the process running {self.target} died of signal "
                             f"{-code} ({signal.Signals(-code).name}); ending the test run with it\n")
            sys.stderr.flush()
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
            time.sleep(1)
        raise ExecutorError(f"the process running {self.target} exited with status {code} during a call")

    # ---- slots ----
    def _take(self, nbytes: int) -> int:
        """A free slot of exactly `nbytes` (reused) or a new one."""
        free = self._pool.get(max(int(nbytes), 1))
        if free:
            return free.pop()
        index = len(self._slots)
        self._slots[index] = _Slot(self._dir, index, nbytes)
        return index

    def _give(self, index: int) -> None:
        self._pool.setdefault(self._slots[index].nbytes, []).append(index)

    def _arg_spec(self, value: Any, taken: list) -> Any:
        """The description of one argument (kernelfoundry.executor_serve rebuilds it): tensors and numpy arrays
        copied into slots of their own (a strided tensor with its strides), containers by item, torch dtypes and
        devices by name, objects of this executor by handle, plain values as they are. `taken` gets (slot,
        view, original) for each copy, to copy a write of the callee back."""
        torch = sys.modules.get("torch")
        if torch is not None and torch.is_tensor(value):
            if value.device.type != "cpu":
                raise ExecutorError(f"executor: only CPU tensors can be shared (got one on {value.device})")
            t = value.detach()
            span = _strided_span(t)
            count = t.numel() if span is None else span
            index = self._take(count * t.element_size())
            stride = None if span is None else tuple(t.stride())
            view = self._slots[index].tensor(tuple(t.shape), t.dtype, stride, count)
            view.copy_(t)
            taken.append((index, view, value))
            spec = {"slot": self._slots[index].path, "shape": list(t.shape), "dtype": _dtype_name(t.dtype)}
            if stride is not None:
                spec.update(stride=list(stride), span=count)
            return spec
        if _numpy_array(value):
            index = self._take(value.nbytes)
            view = self._slots[index].array(value.shape, value.dtype)
            view[...] = value
            taken.append((index, view, value))
            return {"slot": self._slots[index].path, "shape": list(value.shape), "np": value.dtype.str}
        if getattr(type(value), "_kf_remote", False) and value._kf_executor is self:
            return {"handle": value._kf_handle}
        if isinstance(value, (list, tuple)):
            return {"seq": [self._arg_spec(v, taken) for v in value], "tuple": isinstance(value, tuple)}
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"value": value}
        if isinstance(value, dict) and all(isinstance(k, (str, int)) for k in value):
            return {"dict": {"keys": list(value), "items": [self._arg_spec(v, taken) for v in value.values()]}}
        if torch is not None and isinstance(value, torch.dtype):
            return {"dtype": _dtype_name(value)}
        if torch is not None and isinstance(value, torch.device):
            return {"device": str(value)}
        raise ExecutorError(f"executor: cannot pass an argument of type {type(value).__name__} to the process "
                            "running the candidate (tensors, numpy arrays, numbers, strings, lists, tuples, dicts)")

    def _bind(self, args: tuple, kwargs: Optional[dict], obj: Optional[int] = None,
              grad: Optional[bool] = None) -> tuple[Bound, list]:
        taken: list = []
        spec = [self._arg_spec(a, taken) for a in args]
        kwspec = {str(k): self._arg_spec(v, taken) for k, v in (kwargs or {}).items()}
        return Bound(self, spec, kwspec, [view for _, view, _ in taken], obj, grad), taken

    def bind(self, args: tuple, kwargs: Optional[dict] = None, obj: Optional[int] = None) -> Bound:
        """The arguments copied into slots of their own that stay resident (see Bound); `obj`: the executor's
        object to call (None: the target's callable)."""
        return self._bind(args, kwargs, obj)[0]

    def _fetch(self, meta: Any, path: tuple = ()) -> Any:
        """The checker's copy of the executor's last output (or the part of it at `path`), from its
        description: tensors and arrays copied over through a slot, containers by item, other objects as
        make_remote's stand-ins (host executors only)."""
        if not isinstance(meta, dict):
            raise ExecutorError("executor: malformed output description")
        kind = meta.get("kind")
        if kind == "seq":
            items = [self._fetch(m, path + (i,)) for i, m in enumerate(meta.get("items", []))]
            return tuple(items) if meta.get("tuple") else items
        if kind == "value":
            return meta.get("value")
        generic = self.target == "@modules"
        if generic and kind == "dict":
            return {k: self._fetch(m, path + (i,)) for i, (k, m) in enumerate(zip(meta["keys"], meta["items"]))}
        if generic and kind in ("dtype", "device"):
            torch = _torch()
            value = getattr(torch, str(meta["name"]), None) if kind == "dtype" else torch.device(str(meta["name"]))
            if kind == "dtype" and not isinstance(value, torch.dtype):
                raise ExecutorError(f"executor: unknown dtype {meta['name']!r}")
            return value
        if generic and kind == "npscalar":
            return sys.modules["numpy"].dtype(str(meta["dtype"])).type(meta.get("value"))
        if generic and kind == "object" and Executor.make_remote is not None:
            return Executor.make_remote(self, meta)
        shape = tuple(int(d) for d in meta["shape"])
        if generic and kind == "ndarray":
            np = sys.modules["numpy"]
            dtype = np.dtype(str(meta["dtype"]))
            nbytes = dtype.itemsize
            for d in shape:
                nbytes *= d
            index = self._take(nbytes)
            try:
                self._request({"op": "fetch", "path": list(path), "slot": self._slots[index].path, "nbytes": nbytes})
                return self._slots[index].array(shape, dtype).copy()
            finally:
                self._give(index)
        if kind != "tensor":
            raise ExecutorError(f"executor: an output of kind {kind!r} is not supported here")
        torch = _torch()
        dtype = getattr(torch, str(meta["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ExecutorError(f"executor: unknown output dtype {meta['dtype']!r}")
        count = 1
        for d in shape:
            count *= d
        nbytes = count * torch.empty((), dtype=dtype).element_size()
        index = self._take(nbytes)
        try:
            self._request({"op": "fetch", "path": list(path), "slot": self._slots[index].path, "nbytes": nbytes})
            return self._slots[index].tensor(shape, dtype).clone()
        finally:
            self._give(index)

    # ---- calls ----
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.invoke(None, args, kwargs)

    def invoke(self, obj: Optional[int], args: tuple, kwargs: dict) -> Any:
        """Calls the executor's object `obj` (None: the target's callable) like a local call: arguments copied
        in, a write of the callee into an argument copied back into the caller's, the output copied over. Under
        torch, the call runs with the checker's grad mode."""
        torch = sys.modules.get("torch")
        grad = bool(torch.is_grad_enabled()) if torch is not None and self.target == "@modules" else None
        bound, taken = self._bind(args, kwargs, obj, grad)
        try:
            bound.call()
            for _, view, original in taken:
                if _numpy_array(original):
                    if not (view == original).all():
                        original[...] = view
                    continue
                with torch.no_grad():
                    if not torch.equal(view, original.detach()):
                        original.detach().copy_(view)  # the callee modified its input: so does the caller's
            return bound.output()
        finally:
            self._request({"op": "forget"})
            for index, _, _ in taken:
                self._give(index)

    def request(self, op: str, **fields: Any) -> dict:
        """One request of the protocol (executor_serve) and its reply; raises as a call does."""
        return self._request({"op": op, **fields})

    def output(self, meta: Any) -> Any:
        """The checker's copy of the last output, described by `meta` (a reply's "out")."""
        return self._fetch(meta)

    # ---- CPU after returning ----
    def cpu_seconds(self) -> float:
        """CPU seconds used so far by all threads of the executor (its kernel CPU clock); 0 once it is gone."""
        return _process_cpu_seconds(self.proc.pid)

    def settle(self, max_s: float = 0.05) -> float:
        """Waits until the executor is idle and returns the CPU seconds it used after its last reply: work left
        running after returning (a background thread). The quiet rule is the C++ one every side uses
        (kf::WaitQuiet, include/kernelfoundry/paired.hpp: less than 50 µs of CPU per 200 µs slice and no thread
        running or waiting for a CPU, two slices in a row, at most `max_s`)."""
        last = _wait_quiet(self.proc.pid, max_s)
        used, self._cpu_mark = max(0.0, last - self._cpu_mark), last
        return used

    def close(self) -> None:
        """Stops the executor and removes its shared-memory files (idempotent). The mappings stay while tensors
        over them are alive (unmapping under a live tensor would crash the checker); a later call raises
        ExecutorError."""
        self._closed = True
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        try:
            for name in os.listdir(self._dir):
                os.unlink(os.path.join(self._dir, name))
            os.rmdir(self._dir)
        except OSError:
            pass


