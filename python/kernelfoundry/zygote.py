"""Warm starts of pytest test runs (issue 15, "warm test processes"): a pre-initialised Python ("zygote") that
starts each test run by ``fork`` instead of a fresh interpreter, so a phase does not pay the interpreter start and
the torch / numpy / pytest imports again (~1.5-2 s each on the 2-core machine).

Roles (kf's side: src/harness/warm_start.cc):

* **zygote** (``python -u -m kernelfoundry.zygote --socket PATH``), started by kf with the environment of the
  test runs it will serve. It imports the heavy modules (never task or candidate code), listens on a Unix
  socket and prints ``ready <pid>``. Its standard input is a control socket only kf holds: each line is a
  registration ``{"token", "argv", "sandbox"}`` for one run about to start (``sandbox``: kf::ChildSandboxPlan, the
  process runner's own child-side plan). EOF ends the zygote.
* **client** (``kernelfoundry/warm_client.py``), the command kf's process runner really starts, contained as
  every test run is (its own session and cgroup, scrubbed environment, Landlock, limits). It connects, sends the
  token with its standard descriptors (0, 1, 2 and the result descriptor 6), waits for the worker and exits
  with the worker's status. When the zygote cannot start a worker it runs the original command itself (cold).
* **worker**, forked by the zygote for a registered token. Before running anything of the task it takes the
  client's containment on itself, from the client's process (peer credentials of the connection), never from
  the message: the client's cgroups (so the run's cgroup kills, limits and waits for it), resource limits,
  working directory and environment; then kf's registered sandbox plan (the process runner's Landlock rules, the
  sandbox user — which must be the client's — no capabilities, no_new_privs, the seccomp filter; issue 25) and the
  client's descriptors. Then ``pytest.main(args)``, or for a build child
  ``kernelfoundry.build_target`` run as ``__main__``. A test run's worker first forks its executors' fork server
  (kernelfoundry.fork_server): a copy of itself, contained and still free of task code.

Tokens are random, registered by kf over the control socket and used once: a process that connects without a
registered token gets an error and nothing is forked. Lines the zygote or worker send to a client:
``started`` (the worker is contained and runs the tests), ``error <why>`` (no worker ran: the client starts
cold) and ``exit <wait status>`` (the worker ended).
"""
from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import selectors
import signal
import socket
import stat
import struct
import sys

from kernelfoundry.fork_server import close_all_but

#: Modules imported once in the zygote (optional ones may be missing). Not kernelfoundry.conftest: pytest
#: rewrites the asserts of every conftest.py it imports, which must happen in the run as in a cold start.
PRELOAD = ("numpy", "torch", "torch.utils.cpp_extension", "pytest", "_pytest.python", "_pytest.fixtures",
           "kernelfoundry.measure", "kernelfoundry.paired", "kernelfoundry.executor", "kernelfoundry.fork_server",
           "kernelfoundry.profilers", "kernelfoundry.testing", "kernelfoundry.templates", "kernelfoundry.compiler", "kernelfoundry.build_target")

#: The modules a worker may run (``python -u -m MODULE ARGS…``): test runs and build children.
MODULES = ("pytest", "kernelfoundry.build_target")

#: True in a worker (a test process started by fork from the zygote); kernelfoundry.conftest reports it.
WARM = False


# ----------------------------------------------------------------------------------------------------- sandbox
# kf's child-side sandbox, applied from the plan kf registers (kf::ChildSandboxPlan, src/exec/sandbox_plan.cc): the
# Landlock rules the process runner computes, the sandbox user, the seccomp program. The policy lives in kf (one
# place); this only applies it, in the process runner's order (src/exec/shepherd.cc): the Landlock ruleset is made
# while every path can still be opened, then privileges go, then restrict_self and the seccomp filter.
# Syscall numbers are the generic ones shared by x86_64 and aarch64 (landlock) or per machine (capset, seccomp).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1, 4


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _landlock_prepare(plan: dict | None) -> int:
    """Creates the ruleset of a Landlock plan and adds its rules (paths that do not exist are skipped, rules on
    files keep only the file rights). Returns the ruleset descriptor, or -1 for no plan; raises OSError."""
    if not plan:
        return -1
    libc = _libc()
    abi = int(plan["abi"])
    attr = struct.pack("=QQQ", int(plan["handled_fs"]), 0, int(plan["scoped"]))
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    buf = ctypes.create_string_buffer(attr, 24)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, buf, ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path, access in plan["rules"]:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except (FileNotFoundError, NotADirectoryError):
                continue
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    access &= int(plan["file_rights"])
                rule = ctypes.create_string_buffer(struct.pack("=Qi", access, fd), 12)
                if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint32(0)) != 0:
                    raise OSError(ctypes.get_errno(), "landlock_add_rule " + path)
            finally:
                os.close(fd)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def _landlock_restrict(ruleset: int) -> None:
    """Restricts this process (and what it starts) to a prepared ruleset and closes it (-1: nothing)."""
    if ruleset < 0:
        return
    libc = _libc()
    try:
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _drop_privileges(user: dict | None, peer_uid: int) -> None:
    """Becomes the plan's sandbox user (when given; the client must be that user) with no capabilities and
    no_new_privs, as src/exec/privileges.cc does; raises OSError when a step fails or anything is left."""
    import platform  # noqa: PLC0415

    libc = _libc()
    if user:
        uid, gid = int(user["uid"]), int(user["gid"])
        if uid == 0 or peer_uid != uid:
            raise OSError(errno.EPERM, f"the client runs as uid {peer_uid}, the plan's sandbox user is uid {uid}")
        for cap in range(64):
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability
        os.setgroups([int(g) for g in user.get("groups", [])])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    number = _SYS_CAPSET.get(platform.machine())
    if number is not None:
        header = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0), 8)  # _LINUX_CAPABILITY_VERSION_3
        data = ctypes.create_string_buffer(24)
        if libc.syscall(number, header, data) != 0:
            raise OSError(ctypes.get_errno(), "capset")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    with open("/proc/self/status", encoding="ascii") as f:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    if any(int(status.get(k, "0"), 16) for k in ("CapInh", "CapPrm", "CapEff")) or 0 in os.getresuid():
        raise OSError(errno.EPERM, "privileges are left after dropping them")


def _install_seccomp(program_b64: str | None) -> None:
    """Installs the plan's seccomp program (base64 of struct sock_filter[]), as src/exec/seccomp.cc does."""
    if not program_b64:
        return
    import base64  # noqa: PLC0415
    import platform  # noqa: PLC0415

    number = _SYS_SECCOMP.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, "no seccomp system-call number for " + platform.machine())
    code = base64.b64decode(program_b64)
    libc = _libc()
    buf = ctypes.create_string_buffer(code, len(code))
    prog = struct.pack("=HxxxxxxQ", len(code) // 8, ctypes.addressof(buf))  # struct sock_fprog (64-bit)
    pbuf = ctypes.create_string_buffer(prog, len(prog))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    for flags in (_SECCOMP_FILTER_FLAG_SPEC_ALLOW, 0):
        if libc.syscall(number, ctypes.c_uint(_SECCOMP_SET_MODE_FILTER), ctypes.c_uint(flags), pbuf) == 0:
            return
        if ctypes.get_errno() != errno.EINVAL:
            break
    raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER)")


def apply_sandbox(plan: dict, peer_uid: int) -> None:
    """Applies kf's sandbox plan to this process (see above); raises OSError when a step fails."""
    ruleset = _landlock_prepare(plan.get("landlock"))
    try:
        if plan.get("drop_privileges"):
            _drop_privileges(plan.get("user"), peer_uid)
    except BaseException:
        if ruleset >= 0:
            os.close(ruleset)
        raise
    _landlock_restrict(ruleset)
    _install_seccomp(plan.get("seccomp"))


# ---------------------------------------------------------------------------------------- the client's containment
def _cgroup_lines(pid: int | str) -> dict[str, str]:
    """{hierarchy key: path} from /proc/PID/cgroup ("4:memory:/a" -> {"4:memory": "/a"})."""
    out = {}
    with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
        for line in f:
            key, _, path = line.rstrip("\n").rpartition(":")
            out[key] = path
    return out


def _cgroup_mounts() -> dict[str, tuple[str, str]]:
    """{hierarchy key ("" for cgroup2, else the controller list as /proc/self/cgroup names it): (mount root,
    mount point)} from /proc/self/mountinfo."""
    out: dict[str, tuple[str, str]] = {}
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            head, _, tail = line.partition(" - ")
            fields, extra = head.split(), tail.split()
            if len(fields) < 5 or len(extra) < 3:
                continue
            root, point = fields[3], fields[4].replace("\\040", " ")
            if extra[0] == "cgroup2":
                out.setdefault("", (root, point))
            elif extra[0] == "cgroup":
                opts = extra[2].split(",")
                names = [o for o in opts if o.startswith("name=")]
                known = ("cpuset", "cpu", "cpuacct", "blkio", "memory", "devices", "freezer", "net_cls", "perf_event",
                         "net_prio", "hugetlb", "pids", "rdma", "misc")
                controllers = ",".join(o for o in opts if o in known)
                out.setdefault(names[0] if names else controllers, (root, point))
    return out


def _join_cgroups_of(peer: int) -> None:
    """Moves this process into every cgroup `peer` is in (where it differs from ours); raises OSError when one
    cannot be joined or the result differs from the peer's."""
    want = _cgroup_lines(peer)
    mine = _cgroup_lines("self")
    mounts = _cgroup_mounts()
    for key, path in want.items():
        if mine.get(key) == path:
            continue
        controllers = key.partition(":")[2]
        if controllers not in mounts:
            raise OSError(errno.ENOENT, f"no mount of the cgroup hierarchy '{controllers or 'cgroup2'}'")
        root, point = mounts[controllers]
        rel = os.path.relpath(path, root) if root != "/" else path.lstrip("/")
        with open(os.path.join(point, rel, "cgroup.procs"), "w", encoding="ascii") as f:
            f.write(str(os.getpid()))
    if _cgroup_lines("self") != want:
        raise OSError(errno.EPERM, "the worker's cgroups differ from the client's after joining")


#: The limits a worker takes from its client, by their names in /proc/PID/limits.
_LIMITS = {"Max cpu time": "RLIMIT_CPU", "Max file size": "RLIMIT_FSIZE", "Max data size": "RLIMIT_DATA",
           "Max stack size": "RLIMIT_STACK", "Max core file size": "RLIMIT_CORE", "Max open files": "RLIMIT_NOFILE",
           "Max address space": "RLIMIT_AS", "Max processes": "RLIMIT_NPROC", "Max locked memory": "RLIMIT_MEMLOCK"}


def _limits_of(peer: int) -> dict[str, tuple[int, int]]:
    """{"RLIMIT_…": (soft, hard)} of `peer`, read from /proc/PID/limits (readable for every process, unlike
    prlimit(2) on a process of another uid, which needs CAP_SYS_RESOURCE: clients run as the sandbox user)."""
    import resource  # noqa: PLC0415

    out = {}
    with open(f"/proc/{peer}/limits", encoding="ascii") as f:
        for line in f:
            for label, name in _LIMITS.items():
                if line.startswith(label + " "):
                    words = line[len(label):].split()
                    soft, hard = (resource.RLIM_INFINITY if w == "unlimited" else int(w) for w in words[:2])
                    out[name] = (soft, hard)
    if len(out) != len(_LIMITS):
        raise OSError(errno.EINVAL, f"/proc/{peer}/limits lacks some of {sorted(_LIMITS)}")
    return out


def _take_containment(peer: int, peer_uid: int, reg: dict) -> None:
    """The worker becomes contained like the client `peer`: session, cgroups, limits, cwd, environment, and the
    registration's sandbox plan (``sandbox``: Landlock rules, the sandbox user, the seccomp program)."""
    import resource  # noqa: PLC0415

    os.setsid()
    _join_cgroups_of(peer)
    for name, limits in _limits_of(peer).items():
        res = getattr(resource, name, None)
        if res is not None:
            resource.setrlimit(res, limits)
    cwd = os.readlink(f"/proc/{peer}/cwd")
    with open(f"/proc/{peer}/environ", "rb") as f:
        raw = f.read()
    env = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[os.fsdecode(name)] = os.fsdecode(value)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    apply_sandbox(reg.get("sandbox") or {}, peer_uid)


# ------------------------------------------------------------------------------------------------------- worker
def _worker(reg: dict, conn: socket.socket, fds: list[int], peer: int, peer_uid: int, closing: list) -> None:
    """In the forked child: takes the client's containment and descriptors, runs pytest, exits. Never returns."""
    global WARM
    code = 1
    try:
        import fcntl  # noqa: PLC0415

        # Every descriptor this worker keeps is moved above 100 first, so no dup2 below can overwrite one
        # (a received descriptor or the connection may have any low number, e.g. 6).
        high = fcntl.fcntl(conn.fileno(), fcntl.F_DUPFD_CLOEXEC, 100)
        conn.close()
        conn = socket.socket(fileno=high)
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds]
        for fd in fds:
            os.close(fd)
        fds = moved
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for obj in closing:  # the zygote's listener, selector and other connections: closed, never collected later
            obj.close()
        _take_containment(peer, peer_uid, reg)
        for target, fd in zip((0, 1, 2, 6), fds):
            os.dup2(fd, target, inheritable=True)
        for fd in fds:
            os.close(fd)
        close_all_but({0, 1, 2, conn.fileno()} | ({6} if len(fds) > 3 else set()))
        module, args = reg["argv"][3], list(reg["argv"][4:])
        if module == "pytest":
            sys.argv = [os.path.join(os.path.dirname(sys.modules["pytest"].__file__), "__main__.py"), *args]
        else:
            import importlib.util  # noqa: PLC0415
            sys.argv = [importlib.util.find_spec(module).origin, *args]
        sys.path[0] = os.getcwd()
        import random  # noqa: PLC0415
        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        if module == "pytest":  # executors of this run fork from a pristine copy of this worker (fork_server)
            sys.modules["kernelfoundry.fork_server"].start()
        WARM = True
        # Run as `-m kernelfoundry.zygote` this module is __main__: make `import kernelfoundry.zygote` find it.
        sys.modules.setdefault("kernelfoundry.zygote", sys.modules[__name__])
    except BaseException as e:  # noqa: BLE001 - any failure before the tests: the client starts cold
        try:
            conn.sendall(f"error {type(e).__name__}: {e}\n".encode("utf-8", "replace"))
        finally:
            os._exit(126)
    conn.sendall(b"started\n")
    conn.close()
    try:
        if module == "pytest":
            import pytest  # noqa: PLC0415
            code = int(pytest.main(args))
        else:
            import runpy  # noqa: PLC0415
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001
        import traceback  # noqa: PLC0415
        traceback.print_exc()
        code = 1
    try:
        import atexit  # noqa: PLC0415
        atexit._run_exitfuncs()  # noqa: SLF001 - what interpreter exit runs in a cold start
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


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
        rfd, wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wake_r = rfd
        signal.set_wakeup_fd(wfd)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(self.control, selectors.EVENT_READ, "control")
        self.sel.register(rfd, selectors.EVENT_READ, "child")
        self.registrations: dict[str, dict] = {}
        self.pending: set[socket.socket] = set()
        self.workers: dict[int, socket.socket] = {}
        self.running = True

    def serve(self) -> None:
        while self.running or self.workers:
            for key, _ in self.sel.select(timeout=1.0):
                what = key.data
                if what == "accept":
                    self._accept()
                elif what == "control":
                    self._control()
                elif what == "child":
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                else:
                    self._client(key.fileobj)
            self._reap()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            self.pending.add(conn)
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
        self.pending.discard(conn)
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
        self.pending.discard(conn)
        conn.setblocking(True)
        try:
            reg = self.registrations.pop(msg.decode("ascii", "replace").strip(), None)
            argv = reg.get("argv") if reg else None
            if reg is None:
                conn.sendall(b"error the token is not registered\n")
            elif not (isinstance(argv, list) and len(argv) >= 4 and argv[1:3] == ["-u", "-m"] and argv[3] in MODULES):
                conn.sendall(b"error only `python -u -m pytest|kernelfoundry.build_target ...` runs start warm\n")
            elif len(fds) not in (3, 4):
                conn.sendall(b"error expected the client's descriptors 0, 1, 2 (and 6)\n")
            else:
                peer, peer_uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
                closing = [self.listener, self.control, self.sel, *self.pending,
                           *(c for c in self.workers.values())]
                pid = os.fork()
                if pid == 0:
                    os.close(self.wake_r)
                    _worker(reg, conn, fds, peer, peer_uid, closing)
                self.workers[pid] = conn
                conn = None
        except OSError:
            pass
        finally:
            for fd in fds:
                os.close(fd)
            if conn is not None:
                conn.close()

    def _reap(self) -> None:
        while self.workers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.workers.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(f"exit {status}\n".encode())
                except OSError:
                    pass
                conn.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -u -m kernelfoundry.zygote --socket PATH`` (started by kf; see the module doc)."""
    parser = argparse.ArgumentParser(prog="kernelfoundry.zygote")
    parser.add_argument("--socket", required=True, help="the Unix socket path to listen on (in a private directory)")
    args = parser.parse_args(argv)
    loaded = []
    import importlib  # noqa: PLC0415
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
