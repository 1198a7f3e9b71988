"""The executor process of kernelfoundry.executor: the loop that runs candidate code for a checker, and the
privilege drop it makes before importing any of it. The checker side (Executor, Bound, the slots) is in
kernelfoundry.executor, which documents the protocol; this module is what runs in the child.

Targets (argv[2]):

* ``"module:factory"`` — the function under test: ``factory()`` of ``module`` is called once and its result is
  object 0; ``call`` without ``obj`` calls it. Outputs must be tensors (or lists/tuples of them) or plain values.
* ``"@modules"`` — a host for the candidate's modules (kernelfoundry.isolation): nothing is imported until an
  ``import`` request; any object may be held here and used from the checker through a handle.

Requests and replies are JSON lines (see kernelfoundry.executor): ``ready``, ``call`` (``obj``, ``args``,
``kwargs``, ``grad``), ``fetch`` (``path``, ``slot``, ``nbytes``), ``forget``; with ``@modules`` also ``rng``
(``state``: the checker's random generators, kernelfoundry.rng; a reply then carries ``rng`` when the request drew
from them), ``import`` (``name``, ``origin``, ``search``, ``sys_path``), ``attr`` (``obj``, ``name``), ``setattr``,
``dir``, ``iter``.
A reply is ``{"out": description}`` (the value stays here as the last output, its tensors fetched by path), or
``{"error": "Type: message", "type": name}``.
"""

from __future__ import annotations

import builtins
import json
import mmap
import os
import signal
import sys
from typing import Any

from . import rng

#: SYS_capset by machine (asm/unistd.h); elsewhere capabilities are left as they are.
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91, "ppc64le": 184, "s390x": 185}

#: landlock_ruleset_attr.scoped: LANDLOCK_SCOPE_SIGNAL (Landlock ABI 6, Linux 6.12).
_LANDLOCK_SCOPE_SIGNAL = 1 << 1


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
    /proc/<checker>/mem, environ or fd. Where the kernel has Landlock's scopes (ABI 6), the domain is also
    scoped for signals: candidate code cannot stop, continue or kill the checker (SIGSTOP during the checker's
    timed windows would slow the side it times). The layer restricts nothing else (it only forbids making block
    devices, which nothing may). Needs no_new_privs. Returns whether the layer was added (False without
    Landlock)."""
    import ctypes  # noqa: PLC0415
    import struct  # noqa: PLC0415

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fs_make_block = 1 << 11  # LANDLOCK_ACCESS_FS_MAKE_BLOCK
    fd = -1
    for attr in (struct.pack("=QQQ", fs_make_block, 0, _LANDLOCK_SCOPE_SIGNAL), struct.pack("=Q", fs_make_block)):
        buf = ctypes.create_string_buffer(attr, len(attr))
        fd = libc.syscall(444, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))  # landlock_create_ruleset
        if fd >= 0:
            break
    if fd < 0:
        return False
    try:
        return libc.syscall(446, ctypes.c_int(fd), ctypes.c_uint32(0)) == 0  # landlock_restrict_self
    finally:
        os.close(fd)


def dtype_name(dtype: Any) -> str:
    """torch.float32 -> "float32"."""
    return str(dtype).replace("torch.", "")


def _numpy() -> Any:
    import numpy  # noqa: PLC0415 — only for tasks that pass arrays
    return numpy


class _Process:
    """The state of one executor process: the slot mappings, the objects the checker holds handles of, the last
    output (what ``fetch`` copies from) and the parsed arguments of the last call line (a timed call is the same
    line again: parsed once)."""

    def __init__(self, generic: bool):
        self.generic = generic  # "@modules": any object may be described (as a handle)
        self.maps: dict = {}
        self.objects: list = []
        self.handle_of: dict = {}  # id(object) -> handle, so one object is one handle
        self.out: Any = None
        self.built: dict = {}

    @staticmethod
    def torch() -> Any:
        import torch  # noqa: PLC0415 — imported once a tensor is seen (numpy-only tasks never pay for it)
        return torch

    def handle(self, obj: Any) -> int:
        h = self.handle_of.get(id(obj))
        if h is None or self.objects[h] is not obj:
            h = len(self.objects)
            self.objects.append(obj)
            self.handle_of[id(obj)] = h
        return h

    # ---- arguments: a description (kernelfoundry.executor.Executor.arg_spec) -> a value here ----
    def _slot(self, path: str) -> mmap.mmap:
        if path not in self.maps:
            fd = os.open(path, os.O_RDWR)
            try:
                self.maps[path] = mmap.mmap(fd, os.fstat(fd).st_size)
            finally:
                os.close(fd)
        return self.maps[path]

    def build(self, spec: Any) -> Any:
        if not isinstance(spec, dict):
            raise TypeError("malformed argument description")
        if "slot" in spec:
            m = self._slot(spec["slot"])
            shape = tuple(int(d) for d in spec["shape"])
            if "np" in spec:
                np = _numpy()
                dtype = np.dtype(spec["np"])
                count = 1
                for d in shape:
                    count *= d
                return np.frombuffer(m, dtype=dtype, count=count).reshape(shape)
            torch = self.torch()
            dtype = getattr(torch, spec["dtype"])
            itemsize = torch.empty((), dtype=dtype).element_size()
            stride = spec.get("stride")
            count = int(spec.get("span", 0)) if stride is not None else 1
            if stride is None:
                for d in shape:
                    count *= d
            flat = torch.frombuffer(m, dtype=torch.uint8, count=len(m))[: count * itemsize].view(dtype)
            return flat.view(shape) if stride is None else flat.as_strided(shape, tuple(int(s) for s in stride))
        if "seq" in spec:
            items = [self.build(s) for s in spec["seq"]]
            return tuple(items) if spec.get("tuple") else items
        if "dict" in spec:
            return {k: self.build(v) for k, v in zip(spec["dict"]["keys"], spec["dict"]["items"])}
        if "dtype" in spec:
            return getattr(self.torch(), spec["dtype"])
        if "device" in spec:
            return self.torch().device(spec["device"])
        if "handle" in spec:
            return self.objects[int(spec["handle"])]
        return spec.get("value")

    # ---- outputs: a value here -> a description the checker rebuilds (kernelfoundry.executor.Executor.fetch) ----
    def describe(self, out: Any) -> dict:
        torch = sys.modules.get("torch")
        if torch is not None and torch.is_tensor(out):
            if out.device.type != "cpu":
                raise TypeError(f"the output is on {out.device}; only CPU outputs are supported")
            return {"kind": "tensor", "shape": list(out.shape), "dtype": dtype_name(out.dtype)}
        np = sys.modules.get("numpy")
        if np is not None and isinstance(out, np.ndarray) and self.generic:
            return {"kind": "ndarray", "shape": list(out.shape), "dtype": out.dtype.str}
        if np is not None and isinstance(out, np.generic) and self.generic:
            return {"kind": "npscalar", "dtype": out.dtype.str, "value": out.item()}
        if isinstance(out, (list, tuple)):
            return {"kind": "seq", "items": [self.describe(o) for o in out], "tuple": isinstance(out, tuple)}
        if out is None or isinstance(out, (bool, int, float, str)):
            return {"kind": "value", "value": out}
        if self.generic:
            if isinstance(out, dict) and all(isinstance(k, (str, int)) for k in out):
                return {"kind": "dict", "keys": list(out), "items": [self.describe(v) for v in out.values()]}
            if torch is not None and isinstance(out, torch.dtype):
                return {"kind": "dtype", "name": dtype_name(out)}
            if torch is not None and isinstance(out, torch.device):
                return {"kind": "device", "name": str(out)}
            return {"kind": "object", "handle": self.handle(out), "callable": callable(out),
                    "type": type(out).__name__, "module": type(out).__name__ == "module"}
        raise TypeError(f"the output is a {type(out).__name__}; a tensor (or a list/tuple of them) is expected")

    def value_at(self, path: list) -> Any:
        value = self.out
        for key in path:
            value = value[key] if not isinstance(value, dict) else list(value.values())[int(key)]
        return value

    def fetch(self, msg: dict) -> None:
        value = self.value_at(msg["path"])
        np = sys.modules.get("numpy")
        if np is not None and isinstance(value, np.ndarray):
            dst = np.frombuffer(self._slot(msg["slot"]), dtype=value.dtype, count=value.size).reshape(value.shape)
            dst[...] = value
            return
        dst = self.build({"slot": msg["slot"], "shape": list(value.shape), "dtype": dtype_name(value.dtype)})
        dst.copy_(value.detach())

    # ---- requests ----
    def call(self, msg: dict, line: bytes) -> dict:
        if line not in self.built:
            self.built = {line: ([self.build(a) for a in msg["args"]],
                                 {k: self.build(v) for k, v in msg["kwargs"].items()})}
        args, kwargs = self.built[line]
        fn = self.objects[int(msg.get("obj", 0))]
        self.out = None
        if "grad" in msg and "torch" in sys.modules:
            with self.torch().set_grad_enabled(bool(msg["grad"])):
                self.out = fn(*args, **kwargs)
        else:
            self.out = fn(*args, **kwargs)
        return {"out": self.describe(self.out)}

    def import_module(self, msg: dict) -> dict:
        import importlib.util  # noqa: PLC0415

        for entry in reversed(msg.get("sys_path") or []):
            if isinstance(entry, str) and entry not in sys.path:
                sys.path.insert(0, entry)
        name = msg["name"]
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, msg["origin"],
                                                          submodule_search_locations=msg.get("search"))
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot import {name} from {msg['origin']}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
        self.out = module
        return {"out": self.describe(module)}

    def serve_one(self, msg: dict, line: bytes) -> dict:
        op = msg["op"]
        if op == "call":
            return self.call(msg, line)
        if op == "fetch":
            self.fetch(msg)
            return {}
        if op == "forget":
            self.out = None
            self.built = {}
            return {}
        if not self.generic:
            return {"error": f"unknown op {op!r}"}
        if op == "import":
            return self.import_module(msg)
        obj = self.objects[int(msg["obj"])]
        if op == "attr":
            self.out = getattr(obj, msg["name"])
            return {"out": self.describe(self.out)}
        if op == "setattr":
            setattr(obj, msg["name"], self.build(msg["value"]))
            return {}
        if op == "dir":
            return {"names": [n for n in dir(obj) if isinstance(n, str)]}
        if op == "iter":
            self.out = list(obj)
            return {"out": self.describe(self.out)}
        return {"error": f"unknown op {op!r}"}


def _error(e: BaseException) -> dict:
    name = type(e).__name__
    # The checker re-raises builtin exception types by name (so `pytest.raises(ValueError)` and hasattr() work);
    # nothing else of the executor's exception crosses over.
    builtin = isinstance(getattr(builtins, name, None), type) and issubclass(getattr(builtins, name), BaseException)
    return {"error": f"{name}: {e}", "type": name if builtin else "", "message": str(e)}


def serve(argv: list) -> None:
    """The executor's main loop: argv = [command fd, reply fd, target, cwd, threads]."""
    cmd_fd, rep_fd, target, cwd, threads = int(argv[0]), int(argv[1]), argv[2], argv[3], int(argv[4])
    try:  # die with the checker
        import ctypes  # noqa: PLC0415
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        return
    drop_capabilities()
    os.environ["KF_EXECUTOR"] = "1"  # kernelfoundry.isolation never proxies an import in an executor
    sys.path.insert(0, cwd)
    import importlib  # noqa: PLC0415

    generic = target == "@modules"
    if not generic or "torch" in sys.modules:
        torch = _Process.torch()
        if threads > 0:
            torch.set_num_threads(threads)
    state = _Process(generic)

    def reply(message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(rep_fd, data):]

    generators = None  # @modules: the random generators' state as the checker last knew it (kernelfoundry.rng)
    for line in os.fdopen(cmd_fd, "rb"):
        try:
            msg = json.loads(line)
            if msg["op"] == "ready":
                if not generic:
                    module, _, factory = target.partition(":")
                    state.objects.append(getattr(importlib.import_module(module), factory)())
                answer = {}
            elif msg["op"] == "rng" and generic:
                rng.restore(msg["state"])
                answer, generators = {}, rng.capture()
            else:
                answer = state.serve_one(msg, line)
        except BaseException as e:  # noqa: BLE001 — every failure of the callee is the checker's to judge
            answer = _error(e)
        if generators is not None and (now := rng.capture()) != generators:
            answer["rng"], generators = now, now  # the request drew random numbers: the checker's draws follow on
        try:
            reply(answer)
        except (TypeError, ValueError):  # a message that is not JSON-safe
            reply({"error": answer.get("error", "a reply that is not JSON"), "type": ""})
