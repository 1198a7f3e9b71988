"""Warm executors: a fork server made in a warm test process before any task code (issue 15, "warm test processes",
for the executors of kernelfoundry.executor).

A checker that starts an executor cold (``python -c …`` of kernelfoundry.executor) pays the interpreter start and
the torch import again, ~1.5 s per executor on the 2-core machine, and a paired measurement starts several.
Forking executors from the checker itself would be fast but would copy the checker's memory — the reference's
outputs, the inputs' checksums — into the process that runs candidate code. So a worker forked from kf's zygote
(kernelfoundry.zygote), once it has taken the run's containment (session, cgroups, limits, Landlock, environment)
and before it imports any task code, forks this *server*: a pristine copy of itself that only waits for requests.

* ``start()`` (in the worker, by the zygote) forks the server; ``available()`` tells a checker whether one
  serves it; ``spawn(...)`` asks it for an executor.
* A request carries the executor's protocol pipes, the checker's current stdout/stderr (pytest's capture may have
  replaced them), a per-executor status socket and ``{"argv", "cwd", "env"}``. The server forks; the child takes
  the descriptors, working directory and environment and runs ``kernelfoundry.executor._serve(argv)``. The status
  socket gets ``started <pid>`` and later ``exit <wait status>`` (the server is the executor's parent and reaps
  it); ``ForkedProcess`` reads them and acts like the ``subprocess.Popen`` of a cold start (pid, poll, wait, kill).
* Containment is the worker's: the server and its executors are in the run's session, process group and cgroup
  (kf's timeouts and its wait for the cgroup kill them), under its limits and Landlock. The server dies with the
  worker (PR_SET_PDEATHSIG) and every executor with the server; the server's standard descriptors are
  /dev/null and it keeps nothing of kf's (the result descriptor 6 is closed).
* Start-time settings: glibc reads ``MALLOC_*_THRESHOLD_`` at process start, so a forked executor applies the
  request's values with mallopt. Any other difference between the request's environment and the server's could
  matter at a process start (``LD_PRELOAD``, ``OMP_*``, ``PYTHON*``…), except kf's own ``KF_*`` /
  ``KERNELFOUNDRY_*`` names and pytest's ``PYTEST_*`` (PYTEST_CURRENT_TEST, set during every test): ``spawn``
  then refuses and the checker starts that executor cold.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
from typing import Optional

_PR_SET_PDEATHSIG = 1
#: Environment differences a forked executor can apply itself (or that are only read at run time).
_MALLOC = {"MALLOC_MMAP_THRESHOLD_": -3, "MALLOC_TRIM_THRESHOLD_": -1}  # malloc.h: M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
_RUNTIME_PREFIXES = ("KF_", "KERNELFOUNDRY_", "PYTEST_")  # read at run time, if at all

#: (socket to the server, the pid of the process that started it, the server's pid, its environment) or None.
_SERVER: Optional[tuple] = None


class SpawnRefused(RuntimeError):
    """The fork server cannot start this executor (the checker starts it cold)."""


def _prctl_pdeathsig() -> None:
    import ctypes  # noqa: PLC0415
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _mallopt(env: dict) -> None:
    """Applies the environment's glibc heap thresholds to this (forked) process, as glibc would at a start."""
    wanted = [(param, env[name]) for name, param in _MALLOC.items() if name in env]
    if not wanted:
        return
    import ctypes  # noqa: PLC0415
    mallopt = ctypes.CDLL(None).mallopt
    for param, value in wanted:
        try:
            mallopt(param, int(value))
        except ValueError:
            pass


def _env_difference(want: dict, have: dict) -> list[str]:
    """Names whose values differ between two environments and that a forked process cannot take on itself."""
    names = set(want) | set(have)
    return sorted(n for n in names if want.get(n) != have.get(n) and n not in _MALLOC
                  and not n.startswith(_RUNTIME_PREFIXES))


# ------------------------------------------------------------------------------------------------------ server
def close_all_but(keep: set[int]) -> None:
    """Closes every descriptor of this process not in `keep` (as listed by /proc/self/fd)."""
    for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _executor_child(request: dict, fds: list[int]) -> None:
    """In the forked executor: takes the request's descriptors (command pipe, reply pipe, stdout, stderr), cwd and
    environment, keeps no other descriptor of the server, and serves. Never returns."""
    code = 1
    try:
        cmd_r, rep_w, out, err = fds
        os.dup2(out, 1)
        os.dup2(err, 2)
        close_all_but({0, 1, 2, cmd_r, rep_w})
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        env = {str(k): str(v) for k, v in request["env"].items()}
        os.environ.clear()
        os.environ.update(env)
        _mallopt(env)
        os.chdir(request["cwd"])
        import random  # noqa: PLC0415
        random.seed()
        argv = [str(a) for a in request["argv"]]
        argv[0], argv[1] = str(cmd_r), str(rep_w)
        from kernelfoundry.executor import _serve  # noqa: PLC0415
        _serve(argv)
        code = 0
    except BaseException:  # noqa: BLE001 - the checker sees the exit status; the traceback goes to its stderr
        import traceback  # noqa: PLC0415
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _serve_forks(listener: socket.socket, owner: int) -> None:
    """The server's loop: requests on `listener`, one fork each; reaps its children and reports their exits.
    Ends when the worker closes its end (or dies: PR_SET_PDEATHSIG)."""
    sel = selectors.DefaultSelector()
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel.register(listener, selectors.EVENT_READ, "request")
    sel.register(wake_r, selectors.EVENT_READ, "child")
    children: dict[int, socket.socket] = {}
    running = True
    while running or children:
        if os.getppid() != owner:
            break
        for key, _ in sel.select(timeout=1.0):
            if key.data == "child":
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            elif running:
                try:
                    data, fds, _, _ = socket.recv_fds(listener, 1 << 20, 8)
                except InterruptedError:
                    continue
                except OSError:
                    data, fds = b"", []
                if not data:
                    running = False
                    sel.unregister(listener)
                    continue
                if len(fds) != 5:
                    for fd in fds:
                        os.close(fd)
                    continue
                status = socket.socket(fileno=fds[0])
                try:
                    request = json.loads(data)
                    pid = os.fork()
                    if pid == 0:
                        _executor_child(request, fds[1:])
                    children[pid] = status
                    status.sendall(f"started {pid}\n".encode())
                except (OSError, ValueError, KeyError, TypeError) as e:
                    try:
                        status.sendall(f"error {type(e).__name__}: {e}\n".encode("utf-8", "replace"))
                    except OSError:
                        pass
                    status.close()
                finally:
                    for fd in fds[1:]:
                        os.close(fd)
        while children:
            try:
                pid, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(f"exit {wstatus}\n".encode())
                except OSError:
                    pass
                conn.close()


def start() -> None:
    """Forks the fork server from this process (a zygote worker that has taken its run's containment and has not
    yet run task code). Afterwards ``available()`` is true in this process. Raises OSError when the fork fails."""
    global _SERVER
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    owner = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            mine.close()
            _prctl_pdeathsig()
            if os.getppid() != owner:
                os._exit(0)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
            close_all_but({0, 1, 2, theirs.fileno()})  # nothing of kf's (the result descriptor 6) or the worker's
            _serve_forks(theirs, owner)  # in the run's session and process group: kf's timeouts reach it
        finally:
            os._exit(0)
    theirs.close()
    _SERVER = (mine, owner, pid, dict(os.environ))


def available() -> bool:
    """True in the process that started a fork server (not in processes it forks or starts later)."""
    return _SERVER is not None and _SERVER[1] == os.getpid()


class ForkedProcess:
    """An executor forked by the server, with the part of ``subprocess.Popen``'s interface an Executor uses:
    ``pid``, ``returncode`` (negative: the signal that ended it), ``poll()``, ``wait()``, ``kill()``."""

    def __init__(self, status: socket.socket, pid: int):
        self.pid, self.returncode = pid, None
        self._status = status
        self._buf = b""

    def _take(self, block: bool) -> None:
        if self.returncode is not None:
            return
        self._status.setblocking(block)
        try:
            while b"\n" not in self._buf:
                chunk = self._status.recv(256)
                if not chunk:  # the server is gone: so is its child (PR_SET_PDEATHSIG)
                    self.returncode = -signal.SIGKILL
                    return
                self._buf += chunk
        except (BlockingIOError, InterruptedError):
            return
        finally:
            if self.returncode is not None:
                self._status.close()
        word, _, value = self._buf.partition(b"\n")[0].decode("ascii", "replace").partition(" ")
        wstatus = int(value) if word == "exit" and value.strip().lstrip("-").isdigit() else None
        if wstatus is None:
            self.returncode = -signal.SIGKILL
        elif os.WIFSIGNALED(wstatus):
            self.returncode = -os.WTERMSIG(wstatus)
        else:
            self.returncode = os.waitstatus_to_exitcode(wstatus) if os.WIFEXITED(wstatus) else 1
        self._status.close()

    def poll(self) -> Optional[int]:
        """The return code when the executor has ended, else None (does not block)."""
        self._take(False)
        return self.returncode

    def wait(self) -> int:
        """Blocks until the executor has ended; its return code."""
        self._take(True)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL to the executor unless it has ended (its exit has not been reported)."""
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def spawn(argv: list, cwd: str, pass_fds: tuple[int, int]) -> ForkedProcess:
    """Asks the fork server for an executor running ``kernelfoundry.executor._serve(argv)`` with argv[0:2] replaced
    by the numbers its copies of ``pass_fds`` (command pipe, reply pipe) get, in `cwd`, with this process's
    environment and current stdout/stderr. Raises SpawnRefused when no server serves this process, when the
    environment differs from the server's in a name a fork cannot take on, or when the server fails to fork."""
    if not available():
        raise SpawnRefused("no fork server in this process")
    sock, _, _, server_env = _SERVER
    env = dict(os.environ)
    differ = _env_difference(env, server_env)
    if differ:
        raise SpawnRefused("the environment differs from the fork server's in " + ", ".join(differ[:5]))
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        payload = json.dumps({"argv": [str(a) for a in argv], "cwd": cwd, "env": env}).encode()
        try:
            socket.send_fds(sock, [payload], [theirs.fileno(), pass_fds[0], pass_fds[1], 1, 2])
        except OSError as e:
            raise SpawnRefused(f"the fork server is gone ({e})") from None
        theirs.close()
        buf = b""
        while b"\n" not in buf:
            chunk = mine.recv(256)
            if not chunk:
                raise SpawnRefused("the fork server closed the request")
            buf += chunk
        line, _, rest = buf.partition(b"\n")
        word, _, value = line.decode("utf-8", "replace").strip().partition(" ")
        if word != "started" or not value.isdigit():
            raise SpawnRefused(f"the fork server said {line.decode('utf-8', 'replace').strip()!r}")
        proc = ForkedProcess(mine, int(value))
        proc._buf = rest  # noqa: SLF001 - an exit reported in the same read
        return proc
    except BaseException:
        mine.close()
        if theirs.fileno() >= 0:
            theirs.close()
        raise
