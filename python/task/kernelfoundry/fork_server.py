"""Warm executors: a fork server made in a warm test process before any task code (issue 15, "warm test processes",
for the executors of kernelfoundry.executor).

A checker that starts an executor cold (``python -c …`` of kernelfoundry.executor) pays the interpreter start and
the torch import again, ~1.5 s per executor on the 2-core machine, and a paired measurement starts several.
Forking executors from the checker itself would be fast but would copy the checker's memory — the reference's
outputs, the inputs' checksums — into the process that runs candidate code. So a worker forked from kf's zygote
(kernelfoundry.zygote), once it has taken the run's containment (session, cgroups, limits, Landlock, environment)
and before it imports any task code, forks this *server*: a pristine copy of itself that only waits for requests.

* ``start(serve)`` (in the worker, by the zygote, with ``kernelfoundry.executor._serve``: this module imports
  nothing of the executor's) forks the server; ``available()`` tells a checker whether one serves it;
  ``spawn(...)`` asks it for an executor.
* A request carries the executor's protocol pipes, the checker's current stdout/stderr (pytest's capture may have
  replaced them), a per-executor status socket and ``{"argv", "cwd", "env"}``. The server forks
  (kernelfoundry.forked: the one forked-child helper); the child takes the descriptors, working directory and
  environment and runs ``serve(argv)``. The status socket gets ``started <pid>`` and later ``exit <wait status>``
  (the server is the executor's parent and reaps it); the checker's handle (``forked.Child.reported``) reads them
  and acts like the ``subprocess.Popen`` of a cold start (pid, poll, wait, kill).
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
from typing import Callable, Optional

from . import forked

_PR_SET_PDEATHSIG = 1
#: Environment differences a forked executor can apply itself (or that are only read at run time).
_RUNTIME_PREFIXES = ("KF_", "KERNELFOUNDRY_", "PYTEST_")  # read at run time, if at all

#: (socket to the server, the pid of the process that started it, the server's pid, its environment) or None.
_SERVER: Optional[tuple] = None

#: True in a test process or build child that kf's zygote started by fork (a warm start; set by the zygote's
#: worker); the pytest plugin reports it as the timing condition ``start``.
WARM = False


class SpawnRefused(RuntimeError):
    """The fork server cannot start this executor (the checker starts it cold)."""


def _prctl_pdeathsig() -> None:
    import ctypes  # noqa: PLC0415
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _env_difference(want: dict, have: dict) -> list[str]:
    """Names whose values differ between two environments and that a forked process cannot take on itself."""
    names = set(want) | set(have)
    return sorted(n for n in names if want.get(n) != have.get(n) and n not in forked.MALLOC_ENV
                  and not n.startswith(_RUNTIME_PREFIXES))


# ------------------------------------------------------------------------------------------------------ server
def _fork_executor(serve: Callable[[list], None], request: dict, fds: list[int], close: list) -> forked.Child:
    """Forks an executor: the request's descriptors (command pipe, reply pipe: kept; stdout, stderr: placed), cwd
    and environment, no other descriptor of the server; it runs ``serve(argv)`` with argv[0:2] the numbers its
    pipes got."""
    cmd_r, rep_w, out, err = fds
    env = {str(k): str(v) for k, v in request["env"].items()}
    argv = [str(a) for a in request["argv"]]

    def body(kept: list[int]) -> int:
        argv[0], argv[1] = str(kept[0]), str(kept[1])
        serve(argv)
        return 0

    return forked.fork(body, fds={1: out, 2: err}, keep=[cmd_r, rep_w], close=close, close_others=True,
                       cwd=request["cwd"], env=env)


def _serve_forks(listener: socket.socket, owner: int, serve: Callable[[list], None]) -> None:
    """The server's loop: requests on `listener`, one fork each; reaps its children and reports their exits.
    Ends when the worker closes its end (or dies: PR_SET_PDEATHSIG)."""
    sel = selectors.DefaultSelector()
    reaper = forked.Reaper()
    sel.register(listener, selectors.EVENT_READ, "request")
    sel.register(reaper.wake_fd, selectors.EVENT_READ, "child")
    running = True
    while running or reaper.children:
        if os.getppid() != owner:
            break
        for key, _ in sel.select(timeout=1.0):
            if key.data == "child":
                reaper.drain()
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
                    child = _fork_executor(serve, request, fds[1:], [listener, sel, status, *reaper.children.values()])
                    reaper.add(child.pid, status)
                    status.sendall(f"started {child.pid}\n".encode())
                except (OSError, ValueError, KeyError, TypeError) as e:
                    try:
                        status.sendall(f"error {type(e).__name__}: {e}\n".encode("utf-8", "replace"))
                    except OSError:
                        pass
                    status.close()
                finally:
                    for fd in fds[1:]:
                        os.close(fd)
        reaper.reap()


def start(serve: Callable[[list], None]) -> None:
    """Forks the fork server from this process (a zygote worker that has taken its run's containment and has not
    yet run task code); its executors run ``serve(argv)`` (kernelfoundry.executor._serve). Afterwards
    ``available()`` is true in this process. Raises OSError when the fork fails."""
    global _SERVER
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    owner = os.getpid()

    def body(kept: list[int]) -> int:
        _prctl_pdeathsig()
        if os.getppid() != owner:
            return 0
        # In the run's session and process group (kf's timeouts reach it); nothing of kf's (the result
        # descriptor 6) or of the worker's; its standard descriptors are /dev/null.
        _serve_forks(socket.socket(fileno=kept[0]), owner, serve)
        return 0

    null = os.open(os.devnull, os.O_RDWR)
    try:
        server = forked.fork(body, fds={0: null, 1: null, 2: null}, keep=[theirs], close=[mine], close_others=True)
    finally:
        os.close(null)
    theirs.close()
    _SERVER = (mine, owner, server.pid, dict(os.environ))


def available() -> bool:
    """True in the process that started a fork server (not in processes it forks or starts later)."""
    return _SERVER is not None and _SERVER[1] == os.getpid()


def spawn(argv: list, cwd: str, pass_fds: tuple[int, int]) -> forked.Child:
    """Asks the fork server for an executor running ``serve(argv)`` (see ``start``) with argv[0:2] replaced
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
        return forked.Child.reported(int(value), mine, rest)  # `rest`: an exit reported in the same read
    except BaseException:
        mine.close()
        if theirs.fileno() >= 0:
            theirs.close()
        raise
