"""Host side (python/README.md): never on a candidate's path; its workers drop it before they run task code.

Warm starts of pytest test runs (issue 15, "warm test processes"): a pre-initialised Python ("zygote") that
starts each test run by ``fork`` instead of a fresh interpreter, so a phase does not pay the interpreter start and
the torch / numpy / pytest imports again (~1.5-2 s each on the 2-core machine).

Roles (kf's side: src/harness/warm_start.cc):

* **zygote** (``python -u -m kernelfoundry.zygote --socket PATH``), started by kf with the environment of the
  test runs it will serve. It imports the heavy modules (never task or candidate code), listens on a Unix
  socket and prints ``ready <pid>``. Its standard input is a control socket only kf holds: each line is a
  registration ``{"token", "argv", "contain"}`` for one run about to start (``contain``: kf::ChildContainmentRequest,
  what the run's child-side containment asks for). EOF ends the zygote. Clients run as the sandbox user (issue 25):
  the socket is world-connectable (mode 0666, in kf's 0711 directory); the one-use tokens admit a run, and only
  for the process kf started with the token in its environment (``KF_WARM_TOKEN``, never on a command line).
* **client** (``kernelfoundry/warm_client.py``, task side: it runs inside the contained run), the command kf's
  process runner really starts, contained as every test run is (its own session and cgroup, scrubbed environment,
  Landlock, limits). It connects, sends the token with its standard descriptors (0, 1, 2 and the result
  descriptor 6), waits for the worker and exits with the worker's status. When the zygote cannot start a worker
  it runs the original command itself (cold).
* **worker**, forked by the zygote for a registered token (kernelfoundry.forked, the one forked-child helper),
  with the client's descriptors, working directory and environment. Before running anything of the task it takes
  the client's containment on itself through the exec module's own code (the binding kernelfoundry._contain:
  ``ContainLikePeer`` -> ``ContainSelf`` in src/exec/contain.cc, the function the shepherd's child calls before
  exec), from the client's process (peer credentials of the connection), never from the message: a new session,
  the client's cgroups (so the run's cgroup kills, limits and waits for it) and resource limits, then the policy
  kf registered, made by the runner's own code (ChildPolicy): a /dev/shm and IPC namespace of its own (when kf is
  root), the Landlock rules with the read allow-list, the sandbox user — which must be the client's (its uids from
  /proc) — with no capabilities and no_new_privs, and the seccomp filter last (issue 25). Then it leaves the host side: the host
  directory leaves ``sys.path`` and every package's ``__path__``, host modules (this one, the binding) leave
  ``sys.modules`` and ``__main__`` becomes the fresh one a cold start has, so the task's code can import nothing
  of the host side. Then ``pytest.main(args)``, or for a build child ``kernelfoundry.build_target`` run as
  ``__main__``. A test run's worker first forks its executors' fork server (kernelfoundry.fork_server): a copy of
  itself, contained and still free of task code.

Tokens are random, registered by kf over the control socket and used once: a process that connects without a
registered token gets an error and nothing is forked. Connections are accepted only from the zygote's own uid and
the uids its registrations name (each run has a uid of its own when kf is root: src/harness/run_identity.hpp), at
most ``PENDING_PER_UID`` waiting per uid, each closed after ``PENDING_S`` without a token: a candidate of another
run (another kf's, found through /proc) is closed at once and cannot hold the zygote's descriptors (stranger
test, 2026-12-08: 19,989 of them were held open). Lines the zygote or worker send to a client:
``started`` (the worker is contained and runs the tests), ``error <why>`` (no worker ran: the client starts
cold) and ``exit <wait status>`` (the worker ended).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import selectors
import shutil
import socket
import struct
import sys
import time
import types

from kernelfoundry import executor, fork_server, forked

#: Modules imported once in the zygote (optional ones may be missing). Task side only (the worker keeps them), never
#: kernelfoundry.conftest: pytest rewrites the asserts of every conftest.py it imports, which must happen in the
#: run as in a cold start.
PRELOAD = ("numpy", "torch", "torch.utils.cpp_extension", "pytest", "_pytest.python", "_pytest.fixtures",
           "kernelfoundry.measure", "kernelfoundry.paired", "kernelfoundry.executor", "kernelfoundry.fork_server",
           "kernelfoundry.forked", "kernelfoundry.profilers", "kernelfoundry.testing", "kernelfoundry.templates",
           "kernelfoundry.compiler", "kernelfoundry.build_target", "kernelfoundry.isolation")

#: The modules a worker may run (``python -u -m MODULE ARGS…``): test runs and build children.
MODULES = ("pytest", "kernelfoundry.build_target")

#: Connections of one uid that may wait for their token at once, and how long one may wait (seconds): a client
#: sends its token right after connecting.
PENDING_PER_UID = 8
PENDING_S = 5.0

#: The host side's directory (the sys.path entry holding this package portion).
HOST_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------------------------------- the host side
def _is_host(path) -> bool:
    if not isinstance(path, str) or not path:
        return False
    full = os.path.abspath(path)
    return full == HOST_ROOT or full.startswith(HOST_ROOT + os.sep)


def leave_host_side(module: str) -> None:
    """Drops the host side from this process (a worker about to run `module`, "pytest" or a build child's): the host
    directory leaves ``sys.path`` (the task side's root takes its place when it is not there) and every package's
    ``__path__``, modules loaded from it leave ``sys.modules``, and ``__main__`` (this module, run with ``-m``)
    becomes a fresh module like the one a cold ``python -m MODULE`` start has. Afterwards ``import
    kernelfoundry.zygote`` or ``kernelfoundry.eval_pipeline._core`` fails as in a candidate's cold process."""
    task_root = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["kernelfoundry"].__file__)))
    entries = []
    for entry in sys.path:
        if _is_host(entry):
            entry = task_root
        if entry not in entries:
            entries.append(entry)
    sys.path[:] = entries
    for name, mod in list(sys.modules.items()):
        if _is_host(getattr(mod, "__file__", None)) or name == "__main__":
            del sys.modules[name]
            continue
        path = getattr(mod, "__path__", None)
        if isinstance(path, list) and any(_is_host(p) for p in path):
            mod.__path__ = [p for p in path if not _is_host(p)]
    for key in [k for k in sys.path_importer_cache if _is_host(k)]:
        del sys.path_importer_cache[key]
    importlib.invalidate_caches()
    main = types.ModuleType("__main__")
    spec = importlib.util.find_spec("pytest.__main__" if module == "pytest" else module)
    if spec is not None:
        main.__spec__, main.__file__, main.__loader__ = spec, spec.origin, spec.loader
        main.__package__ = spec.parent
    sys.modules["__main__"] = main


# ------------------------------------------------------------------------------------------------------- worker
def _peer_cwd_and_env(peer: int) -> tuple[str, dict]:
    """The client's working directory and environment (from /proc: the process, not its message)."""
    cwd = os.readlink(f"/proc/{peer}/cwd")
    with open(f"/proc/{peer}/environ", "rb") as f:
        raw = f.read()
    env = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return cwd, env


def _worker_body(reg: dict, peer: int):
    """The worker's work (the forked child's body; kept[0] is its connection to the client): contain, leave the
    host side, report ``started`` (or ``error <why>``: the client then starts cold), run the tests."""
    def body(kept: list[int]) -> int:
        conn = socket.socket(fileno=kept[0])
        module, args = reg["argv"][3], list(reg["argv"][4:])
        try:
            from kernelfoundry import _contain  # noqa: PLC0415 - host side, loaded in the zygote already
            _contain.contain_like(peer, json.dumps(reg.get("contain") or {}))
            leave_host_side(module)
            if module == "pytest":
                sys.argv = [os.path.join(os.path.dirname(sys.modules["pytest"].__file__), "__main__.py"), *args]
            else:
                sys.argv = [importlib.util.find_spec(module).origin, *args]
            sys.path[0] = os.getcwd()
            if module == "pytest":  # executors of this run fork from a pristine copy of this worker
                fork_server.start(executor._serve)  # noqa: SLF001 - the executor's entry point
            fork_server.WARM = True
        except BaseException as e:  # noqa: BLE001 - any failure before the tests: the client starts cold
            conn.sendall(f"error {type(e).__name__}: {e}\n".encode("utf-8", "replace"))
            return forked.SETUP_FAILED_EXIT
        conn.sendall(b"started\n")
        conn.close()
        if module == "pytest":
            import pytest  # noqa: PLC0415
            return int(pytest.main(args))
        import runpy  # noqa: PLC0415
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    return body


def _report_setup_error(kept: list[int], e: BaseException) -> None:
    if kept:
        os.write(kept[0], f"error {type(e).__name__}: {e}\n".encode("utf-8", "replace"))


# ------------------------------------------------------------------------------------------------------- zygote
class Zygote:
    """The serving loop: registrations from kf (stdin), clients on the socket, workers reaped on SIGCHLD."""

    def __init__(self, path: str):
        self.sel = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        os.chmod(path, 0o666)  # clients run as the sandbox user (issue 25); tokens, not the mode, admit a run
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.control = socket.socket(fileno=os.dup(0))
        self.control.setblocking(False)
        self.control_buf = b""
        self.reaper = forked.Reaper()
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(self.control, selectors.EVENT_READ, "control")
        self.sel.register(self.reaper.wake_fd, selectors.EVENT_READ, "child")
        self.registrations: dict[str, dict] = {}
        self.pending: dict[socket.socket, tuple[int, float]] = {}  # accepted, no token yet: (peer uid, when)
        self.running = True

    def serve(self) -> None:
        while self.running or self.reaper.children:
            self._expire_pending()
            for key, _ in self.sel.select(timeout=1.0):
                what = key.data
                if what == "accept":
                    self._accept()
                elif what == "control":
                    self._control()
                elif what == "child":
                    self.reaper.drain()
                else:
                    self._client(key.fileobj)
            self.reaper.reap()

    def _admitted_uids(self) -> set[int]:
        """The zygote's own uid and every uid a registration's containment names (its sandbox user)."""
        uids = {os.getuid()}
        for reg in self.registrations.values():
            user = ((reg.get("contain") or {}).get("sandbox") or {}).get("user") if isinstance(reg, dict) else None
            if isinstance(user, dict) and isinstance(user.get("uid"), int):
                uids.add(user["uid"])
        return uids

    def _expire_pending(self) -> None:
        now = time.monotonic()
        for conn, (_, since) in list(self.pending.items()):
            if now - since > PENDING_S:
                self._drop(conn)

    def _accept(self) -> None:
        if self.running:
            self._control()  # a run's registration is written before its client starts: read it first
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. EMFILE: the pending connections are served or expire first
                return
            try:
                uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
            except OSError:
                conn.close()
                continue
            if uid not in self._admitted_uids() or \
                    sum(1 for u, _ in self.pending.values() if u == uid) >= PENDING_PER_UID:
                conn.close()
                continue
            conn.setblocking(False)
            self.pending[conn] = (uid, time.monotonic())
            self.sel.register(conn, selectors.EVENT_READ, "client")

    def _control(self) -> None:
        try:
            data = self.control.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        if not data:  # kf is gone: serve the running workers' exits, start nothing new
            self.running = False
            self.sel.unregister(self.control)
            self.sel.unregister(self.listener)
            self.listener.close()
            return
        self.control_buf += data
        while b"\n" in self.control_buf:
            line, self.control_buf = self.control_buf.split(b"\n", 1)
            try:
                reg = json.loads(line)
                self.registrations[str(reg["token"])] = reg
            except (ValueError, KeyError, TypeError):
                continue

    def _drop(self, conn: socket.socket) -> None:
        self.pending.pop(conn, None)
        try:
            self.sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def _client(self, conn: socket.socket) -> None:
        try:
            msg, fds, _, _ = socket.recv_fds(conn, 256, 8)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        self.sel.unregister(conn)
        self.pending.pop(conn, None)
        conn.setblocking(True)
        try:
            token = msg.decode("ascii", "replace").strip()
            reg = self.registrations.get(token)
            argv = reg.get("argv") if reg else None
            if reg is None:
                conn.sendall(b"error the token is not registered\n")
            elif not (isinstance(argv, list) and len(argv) >= 4 and argv[1:3] == ["-u", "-m"] and argv[3] in MODULES):
                self.registrations.pop(token, None)
                conn.sendall(b"error only `python -u -m pytest|kernelfoundry.build_target ...` runs start warm\n")
            elif len(fds) not in (3, 4):
                self.registrations.pop(token, None)
                conn.sendall(b"error expected the client's descriptors 0, 1, 2 (and 6)\n")
            else:
                peer = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
                try:
                    cwd, env = _peer_cwd_and_env(peer)
                except OSError as e:
                    conn.sendall(f"error cannot read the client's process: {e}\n".encode("utf-8", "replace"))
                    return
                if env.pop("KF_WARM_TOKEN", None) != token:
                    # Only the process kf started with this token has it in its environment; the registration
                    # stays for it (a process that saw the token elsewhere cannot use it up).
                    conn.sendall(b"error the client is not the process kf started for this token\n")
                    return
                del self.registrations[token]
                targets = {0: fds[0], 1: fds[1], 2: fds[2], **({6: fds[3]} if len(fds) > 3 else {})}
                closing = [self.listener, self.control, self.sel, *(c for c in self.pending if c is not conn),
                           *self.reaper.children.values()]
                child = forked.fork(_worker_body(reg, peer), fds=targets, keep=[conn], close=closing,
                                    close_others=True, cwd=cwd, env=env, run_atexit=True,
                                    setup_error=_report_setup_error)
                self.reaper.add(child.pid, conn)
                conn = None
        except OSError:
            pass
        finally:
            for fd in fds:
                os.close(fd)
            if conn is not None:
                conn.close()


#: The prefix of the directory kf makes for a zygote (src/harness/warm_start.cc: /tmp/kf-zygote-XXXXXX).
_OWN_DIR_PREFIX = "kf-zygote-"


def remove_own_directory(socket_path: str) -> bool:
    """Removes the directory kf made for this zygote (its socket and temp dir) when it is one (named
    ``kf-zygote-*``): called when the zygote ends, after its last worker, so that a kf that was killed (SIGKILL:
    nothing of kf runs afterwards) does not leave it in /tmp. kf removes it too once the zygote has ended. Returns
    whether it was such a directory."""
    directory = os.path.dirname(os.path.abspath(socket_path))
    if not os.path.basename(directory).startswith(_OWN_DIR_PREFIX):
        return False
    shutil.rmtree(directory, ignore_errors=True)
    return True


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -u -m kernelfoundry.zygote --socket PATH`` (started by kf; see the module doc)."""
    parser = argparse.ArgumentParser(prog="kernelfoundry.zygote")
    parser.add_argument("--socket", required=True, help="the Unix socket path to listen on (in a private directory)")
    args = parser.parse_args(argv)
    try:  # host side: what the workers contain themselves with
        importlib.import_module("kernelfoundry._contain")
    except ImportError as e:
        sys.stdout.write(f"error the containment binding kernelfoundry._contain is missing ({e})\n")
        return 1
    loaded = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception:  # noqa: BLE001 - optional: a task that needs it imports it in the run
            pass
    zygote = Zygote(args.socket)
    sys.stdout.write(f"ready {os.getpid()} {','.join(loaded)}\n")
    sys.stdout.flush()
    zygote.serve()
    remove_own_directory(args.socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
