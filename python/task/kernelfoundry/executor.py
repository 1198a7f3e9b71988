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

Calls. ``proxy(*args)`` copies every tensor argument into a slot (contiguous; CPU tensors only), runs the call,
copies the slots back into the caller's tensors (an input the callee modified is seen modified, as in a local
call) and returns a copy of the output (a tensor, or a list/tuple of tensors). For timing, ``proxy.bind(args,
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

Privileges. Before it imports its target the executor empties its Linux capability sets and enters a Landlock
domain of its own (``drop_capabilities``): candidate code cannot ptrace the checker or open /proc/<checker>/mem,
whether the test runs as root or, sandboxed, under the same uid as the checker.

Failure. An exception in the callee raises ``ExecutorError`` with its type and message. When the executor dies
(a crash of candidate code), the checker ends with the same signal — the verdict is the one an in-process crash
gets — after saying so on stderr. ``close()`` (also at exit) kills the executor; it dies with the checker
(PR_SET_PDEATHSIG) and is in the checker's process group (kf's timeouts kill both). A session fixture should
return the Executor without closing it: pytest finalises a parametrised fixture (the candidate side) before the
paired measurement, on the reference side, still calls it.
"""

from __future__ import annotations

import atexit
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


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


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

    def tensor(self, shape: tuple, dtype: Any):
        torch = _torch()
        count = 1
        for d in shape:
            count *= int(d)
        flat = torch.frombuffer(self.map, dtype=torch.uint8, count=self.nbytes)
        itemsize = torch.empty((), dtype=dtype).element_size()
        return flat[: count * itemsize].view(dtype).view(shape)


class Bound:
    """A call whose tensor arguments are resident in shared memory (see the module comment)."""

    def __init__(self, executor: "Executor", spec: list, kwspec: dict, inputs: list):
        self._ex = executor
        self._line = (json.dumps({"op": "call", "args": spec, "kwargs": kwspec}) + "\n").encode()
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
    """A callable whose calls run in a child process (see the module comment). `target` is "module:factory";
    the executor imports `module` (with `cwd` first on sys.path) and calls `factory()` once for the callable."""

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
        if "error" in reply:
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
        torch = _torch()
        if torch.is_tensor(value):
            if value.device.type != "cpu":
                raise ExecutorError(f"executor: only CPU tensors can be shared (got one on {value.device})")
            t = value.detach()
            index = self._take(t.numel() * t.element_size())
            view = self._slots[index].tensor(tuple(t.shape), t.dtype)
            view.copy_(t)
            taken.append((index, view, value))
            return {"slot": self._slots[index].path, "shape": list(t.shape), "dtype": _dtype_name(t.dtype)}
        if isinstance(value, (list, tuple)):
            return {"seq": [self._arg_spec(v, taken) for v in value], "tuple": isinstance(value, tuple)}
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"value": value}
        raise ExecutorError(f"executor: cannot pass an argument of type {type(value).__name__}")

    def _bind(self, args: tuple, kwargs: Optional[dict]) -> tuple[Bound, list]:
        taken: list = []
        spec = [self._arg_spec(a, taken) for a in args]
        kwspec = {str(k): self._arg_spec(v, taken) for k, v in (kwargs or {}).items()}
        return Bound(self, spec, kwspec, [view for _, view, _ in taken]), taken

    def bind(self, args: tuple, kwargs: Optional[dict] = None) -> Bound:
        """The arguments copied into slots of their own that stay resident (see Bound)."""
        return self._bind(args, kwargs)[0]

    def _fetch(self, meta: Any, path: tuple = ()) -> Any:
        torch = _torch()
        if not isinstance(meta, dict):
            raise ExecutorError("executor: malformed output description")
        if meta.get("kind") == "seq":
            items = [self._fetch(m, path + (i,)) for i, m in enumerate(meta.get("items", []))]
            return tuple(items) if meta.get("tuple") else items
        if meta.get("kind") == "value":
            return meta.get("value")
        shape = tuple(int(d) for d in meta["shape"])
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
        bound, taken = self._bind(args, kwargs)
        try:
            bound.call()
            torch = _torch()
            with torch.no_grad():
                for _, view, original in taken:
                    if not torch.equal(view, original.detach()):
                        original.detach().copy_(view)  # the callee modified its input: so does the caller's
            return bound.output()
        finally:
            self._request({"op": "forget"})
            for index, _, _ in taken:
                self._give(index)

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


# ---- the executor process ----

#: SYS_capset by machine (asm/unistd.h); elsewhere capabilities are left as they are.
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91, "ppc64le": 184, "s390x": 185}


def drop_capabilities() -> bool:
    """Empties this process's Linux capability sets and bounding set and sets no_new_privs, as the native SDK's
    executor does (kernelfoundry/sdk/remote.hpp): candidate code then cannot ptrace the checker or open
    /proc/<checker>/mem even as root (the kernel's ptrace check wants the tracer's capabilities to cover the
    target's), nor regain privileges through a set-uid program. Returns whether the sets were emptied."""
    import ctypes  # noqa: PLC0415
    import platform  # noqa: PLC0415
    import struct  # noqa: PLC0415

    number = _SYS_CAPSET.get(platform.machine())
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP; fails harmlessly past the last capability
    done = False
    if number is not None:
        header = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0), 8)  # _LINUX_CAPABILITY_VERSION_3
        data = ctypes.create_string_buffer(24)  # two {effective, permitted, inheritable}, all zero
        done = libc.syscall(ctypes.c_long(number), header, data) == 0
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    enter_own_landlock_domain()
    return done


def enter_own_landlock_domain() -> bool:
    """Puts this process in a Landlock domain of its own, nested in the checker's: the kernel then refuses it
    ptrace access to every process outside that domain — the checker included, under the same uid (issue 25:
    test processes run as the sandbox user, so capabilities no longer tell the two apart) — so it cannot open
    /proc/<checker>/mem, environ or fd. The layer restricts nothing else (it only forbids making block devices,
    which nothing may). Needs no_new_privs. Returns whether the layer was added (False without Landlock)."""
    import ctypes  # noqa: PLC0415
    import struct  # noqa: PLC0415

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attr = ctypes.create_string_buffer(struct.pack("=Q", 1 << 11), 8)  # LANDLOCK_ACCESS_FS_MAKE_BLOCK
    fd = libc.syscall(444, attr, ctypes.c_size_t(8), ctypes.c_uint32(0))  # landlock_create_ruleset
    if fd < 0:
        return False
    try:
        return libc.syscall(446, ctypes.c_int(fd), ctypes.c_uint32(0)) == 0  # landlock_restrict_self
    finally:
        os.close(fd)


def _build(spec: Any, maps: dict, torch: Any) -> Any:
    if "slot" in spec:
        path = spec["slot"]
        if path not in maps:
            fd = os.open(path, os.O_RDWR)
            try:
                maps[path] = mmap.mmap(fd, os.fstat(fd).st_size)
            finally:
                os.close(fd)
        m = maps[path]
        dtype = getattr(torch, spec["dtype"])
        shape = tuple(spec["shape"])
        count = 1
        for d in shape:
            count *= int(d)
        itemsize = torch.empty((), dtype=dtype).element_size()
        return torch.frombuffer(m, dtype=torch.uint8, count=len(m))[: count * itemsize].view(dtype).view(shape)
    if "seq" in spec:
        items = [_build(s, maps, torch) for s in spec["seq"]]
        return tuple(items) if spec.get("tuple") else items
    return spec.get("value")


def _describe(out: Any, torch: Any) -> dict:
    if torch.is_tensor(out):
        if out.device.type != "cpu":
            raise ExecutorError(f"the output is on {out.device}; only CPU outputs are supported")
        return {"kind": "tensor", "shape": list(out.shape), "dtype": _dtype_name(out.dtype)}
    if isinstance(out, (list, tuple)):
        return {"kind": "seq", "items": [_describe(o, torch) for o in out], "tuple": isinstance(out, tuple)}
    if out is None or isinstance(out, (bool, int, float, str)):
        return {"kind": "value", "value": out}
    raise ExecutorError(f"the output is a {type(out).__name__}; a tensor (or a list/tuple of them) is expected")


def _serve(argv: list) -> None:
    cmd_fd, rep_fd, target, cwd, threads = int(argv[0]), int(argv[1]), argv[2], argv[3], int(argv[4])
    try:  # die with the checker
        import ctypes  # noqa: PLC0415
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        return
    drop_capabilities()
    sys.path.insert(0, cwd)
    import importlib  # noqa: PLC0415

    torch = _torch()
    if threads > 0:
        torch.set_num_threads(threads)
    maps: dict = {}
    built: dict = {}
    fn = None
    out: Any = None

    def reply(message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(rep_fd, data):]

    for line in os.fdopen(cmd_fd, "rb"):
        try:
            msg = json.loads(line)
            op = msg["op"]
            if op == "ready":
                module, _, factory = target.partition(":")
                fn = getattr(importlib.import_module(module), factory)()
                reply({})
            elif op == "call":
                if line not in built:
                    built = {line: ([_build(a, maps, torch) for a in msg["args"]],
                                    {k: _build(v, maps, torch) for k, v in msg["kwargs"].items()})}
                args, kwargs = built[line]
                out = None
                out = fn(*args, **kwargs)
                reply({"out": _describe(out, torch)})
            elif op == "fetch":
                value = out
                for i in msg["path"]:
                    value = value[i]
                dst = _build({"slot": msg["slot"], "shape": list(value.shape),
                              "dtype": _dtype_name(value.dtype)}, maps, torch)
                dst.copy_(value.detach())
                reply({})
            elif op == "forget":
                out = None
                built = {}
                reply({})
            else:
                reply({"error": f"unknown op {op!r}"})
        except BaseException as e:  # noqa: BLE001 — every failure of the callee is the checker's to judge
            reply({"error": f"{type(e).__name__}: {e}"})

