"""Forked children: the one way kernelfoundry starts a process by ``fork()`` instead of a fresh interpreter (a warm
start: a copy of an interpreter whose imports are done). Task side (python/README.md). Used by build children
(kernelfoundry.compiler), the executors' fork server (kernelfoundry.fork_server) and the host side's warm-start
zygote (kernelfoundry.zygote).

A forked child is not a fresh process: it has its parent's descriptors, signal handlers and wakeup descriptor,
Python objects over descriptors, random state and environment. :func:`fork` makes it as close to a fresh start as a
fork can be, in one order every caller gets. In the child:

1. signals: a serving loop's handlers and wakeup descriptor are reset (SIGCHLD, SIGTERM, SIGHUP, SIGQUIT to their
   defaults; SIGINT raises KeyboardInterrupt, as in a fresh interpreter);
2. ``close``: the parent's Python objects over descriptors (sockets, selectors) are closed, so that none is
   collected later over a reused descriptor number;
3. descriptors: the ``keep`` descriptors are moved above 100 and handed to the body; ``fds`` ({target: source}) are
   placed (every source first moved above 100, so that no placement overwrites another's source); with
   ``output_pipe`` stdin is /dev/null and stdout and stderr are one new pipe the parent reads; with
   ``close_others`` every other descriptor but 0, 1 and 2 is closed, as in a process started with ``close_fds``;
4. ``session`` (setsid), ``cwd``, ``env`` (replaces os.environ; glibc's ``MALLOC_*_THRESHOLD_`` are applied with
   mallopt, as glibc reads them at a process start), ``streams`` (new sys.stdout / sys.stderr over descriptors 1
   and 2, for a parent whose Python streams were replaced, e.g. by pytest's capture);
5. a fresh random state (``random``; numpy's global generator when numpy is loaded);
6. ``body(kept)`` runs; its return value (an int; None is 0) or SystemExit's code is the exit status, any other
   exception prints its traceback and exits 1; with ``run_atexit`` the interpreter's exit functions run (what a
   normal interpreter exit runs); stdout and stderr are flushed and the child ends with ``os._exit``: it never
   returns into the parent's code. When a step before the body raises, ``setup_error(kept, exception)`` is called
   (when given) and the child exits with SETUP_FAILED_EXIT.

In the parent, :func:`fork` returns a :class:`Child`, the part of ``subprocess.Popen``'s interface the callers use
(``pid``, ``returncode``, ``stdout``, ``poll()``, ``wait(timeout)``, ``kill()``). A child whose parent is a server
(the fork server, the zygote) is reaped there by a :class:`Reaper`, which reports ``exit <wait status>`` lines on a
stream; :meth:`Child.reported` is the handle of such a child for the process that asked for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Iterable, Mapping, Optional

__all__ = ["fork", "Child", "Reaper", "close_all_but", "SETUP_FAILED_EXIT"]

#: Exit status of a forked child when a step before its body failed.
SETUP_FAILED_EXIT = 126
#: Descriptors moved out of the way are moved to this number or above.
_HIGH_FD = 100
#: glibc's heap thresholds read from the environment at a process start (malloc.h: M_MMAP_THRESHOLD, M_TRIM_THRESHOLD).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": -3, "MALLOC_TRIM_THRESHOLD_": -1}


def close_all_but(keep: Iterable[int]) -> None:
    """Closes every descriptor of this process not in `keep` (as listed by /proc/self/fd)."""
    keep = set(keep)
    for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def apply_malloc_env(env: Mapping[str, str]) -> None:
    """Applies the environment's glibc heap thresholds to this (forked) process, as glibc would at a start."""
    wanted = [(param, env[name]) for name, param in MALLOC_ENV.items() if name in env]
    if not wanted:
        return
    import ctypes  # noqa: PLC0415
    mallopt = ctypes.CDLL(None).mallopt
    for param, value in wanted:
        try:
            mallopt(param, int(value))
        except ValueError:
            pass


def _move_high(fd: int) -> int:
    import fcntl  # noqa: PLC0415
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _HIGH_FD)


def _reset_signals() -> None:
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _place(fds: Mapping[int, int], keep: list, close_others: bool) -> list[int]:
    """Step 3 (see the module doc): returns the kept descriptors' new numbers."""
    kept = []
    for item in keep:  # a descriptor or an object with fileno() and close()
        fd = item if isinstance(item, int) else item.fileno()
        kept.append(_move_high(fd))
        if isinstance(item, int):
            os.close(fd)
        else:
            item.close()
    sources = {target: _move_high(source) for target, source in fds.items()}
    for source in set(fds.values()):
        if source not in fds and source not in sources.values():
            try:
                os.close(source)
            except OSError:
                pass
    for target, source in sources.items():
        os.dup2(source, target, inheritable=True)
    for source in sources.values():
        os.close(source)
    if close_others:
        close_all_but({0, 1, 2} | set(fds) | set(kept))
    return kept


def _reseed() -> None:
    import random  # noqa: PLC0415
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()


def _exit_code(body: Callable[[list[int]], Optional[int]], kept: list[int]) -> int:
    try:
        code = body(kept)
        return 0 if code is None else int(code)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - the parent sees the exit status; the traceback goes to stderr
        import traceback  # noqa: PLC0415
        traceback.print_exc()
        return 1


def fork(body: Callable[[list[int]], Optional[int]], *, fds: Optional[Mapping[int, int]] = None,
         keep: Iterable[Any] = (), close: Iterable[Any] = (), output_pipe: bool = False, close_others: bool = False,
         session: bool = False, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
         streams: bool = False, run_atexit: bool = False,
         setup_error: Optional[Callable[[list[int], BaseException], None]] = None) -> "Child":
    """Forks a child that runs ``body(kept)`` and ends (see the module doc for every step and argument); returns the
    parent's handle. Raises OSError when fork (or the output pipe) fails."""
    fds = dict(fds or {})
    keep, close = list(keep), list(close)
    pipe = os.pipe() if output_pipe else None
    pid = os.fork()
    if pid == 0:
        code, kept = SETUP_FAILED_EXIT, []
        try:
            try:
                _reset_signals()
                for obj in close:
                    obj.close()
                if pipe is not None:
                    null = os.open(os.devnull, os.O_RDONLY)
                    fds.update({0: null, 1: pipe[1], 2: pipe[1]})
                    os.close(pipe[0])
                kept = _place(fds, keep, close_others)
                if session:
                    os.setsid()
                if cwd is not None:
                    os.chdir(cwd)
                if env is not None:
                    os.environ.clear()
                    os.environ.update(env)
                    apply_malloc_env(env)
                if streams:
                    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
                    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)
                _reseed()
            except BaseException as e:  # noqa: BLE001 - reported by the caller's hook; the child ends
                if setup_error is not None:
                    setup_error(kept, e)
                else:
                    import traceback  # noqa: PLC0415
                    traceback.print_exc()
                raise
            code = _exit_code(body, kept)
            if run_atexit:
                import atexit  # noqa: PLC0415
                atexit._run_exitfuncs()  # noqa: SLF001 - what interpreter exit runs
        except BaseException:  # noqa: BLE001, S110 - never return into the parent's code
            pass
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    stdout = None
    if pipe is not None:
        os.close(pipe[1])
        stdout = os.fdopen(pipe[0], "rb", buffering=0)
    return Child(pid, stdout=stdout)


class Child:
    """A forked child (see the module doc): ``pid``, ``returncode`` (negative: the signal that ended it),
    ``stdout`` (the output pipe's read end, or None), ``poll()``, ``wait(timeout)``, ``kill()``. Its exit comes from
    waitpid, or for :meth:`reported` children from ``exit <wait status>`` lines on a stream."""

    def __init__(self, pid: int, stdout=None, status=None):
        self.pid, self.stdout, self.returncode = pid, stdout, None
        self._status = status  # a socket with the exit report (reported children), or None: our own child
        self._buf = b""

    @classmethod
    def reported(cls, pid: int, status, buffered: bytes = b"") -> "Child":
        """The handle of child `pid` of another process (a server) that reports its exit on the socket `status`
        (``exit <wait status>``; EOF without one counts as SIGKILL: the server and its children are gone).
        `buffered`: bytes of the report read already."""
        child = cls(pid, status=status)
        child._buf = buffered
        return child

    def _set(self, wstatus: Optional[int]) -> None:
        if wstatus is None:
            self.returncode = -signal.SIGKILL
        elif os.WIFSIGNALED(wstatus):
            self.returncode = -os.WTERMSIG(wstatus)
        else:
            self.returncode = os.waitstatus_to_exitcode(wstatus) if os.WIFEXITED(wstatus) else 1

    def _take_report(self, block: bool) -> None:
        self._status.setblocking(block)
        try:
            while b"\n" not in self._buf:
                chunk = self._status.recv(256)
                if not chunk:
                    self._set(None)
                    break
                self._buf += chunk
        except (BlockingIOError, InterruptedError):
            return
        if self.returncode is None:
            word, _, value = self._buf.partition(b"\n")[0].decode("ascii", "replace").partition(" ")
            ok = word == "exit" and value.strip().lstrip("-").isdigit()
            self._set(int(value) if ok else None)
        self._status.close()

    def poll(self) -> Optional[int]:
        """The return code when the child has ended, else None (does not block)."""
        if self.returncode is not None:
            return self.returncode
        if self._status is not None:
            self._take_report(False)
        else:
            pid, wstatus = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self._set(wstatus)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        """Blocks until the child has ended (at most `timeout` seconds: then subprocess.TimeoutExpired); its
        return code."""
        if self.returncode is None and timeout is None:
            if self._status is not None:
                self._take_report(True)
            else:
                self._set(os.waitpid(self.pid, 0)[1])
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout)
            time.sleep(0.01)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL to the child unless it has ended (and its end was seen)."""
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Reaper:
    """A serving loop's forked children (the fork server's executors, the zygote's workers): SIGCHLD wakes the loop
    (``wake_fd``, for its selector; call ``drain()`` when it is readable), ``reap()`` waits for every ended child
    and reports ``exit <wait status>`` on the socket registered for it, then closes that socket."""

    def __init__(self):
        self.wake_fd, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.children: dict[int, Any] = {}

    def add(self, pid: int, report) -> None:
        """Registers child `pid`, whose exit is reported on socket `report`."""
        self.children[pid] = report

    def drain(self) -> None:
        """Empties the wake pipe."""
        try:
            while os.read(self.wake_fd, 512):
                pass
        except BlockingIOError:
            pass

    def reap(self) -> None:
        """Reaps every ended child and reports its wait status (never blocks)."""
        while self.children:
            try:
                pid, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            report = self.children.pop(pid, None)
            if report is not None:
                try:
                    report.sendall(f"exit {wstatus}\n".encode())
                except OSError:
                    pass
                report.close()
