"""kernelfoundry.zygote and warm_client.py (warm starts of test runs, issue 15) without kf: a zygote started as kf
starts it, registrations written to its control socket, clients started as kf's runner would start them. The
client and the zygote share this test's cgroup here, so the cgroup step is a no-op (the kf end-to-end test,
tests/pipeline/warm_start_test.cc, covers a run cgroup)."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import PYTHON_DIR, TASK_PYTHON_DIR

CLIENT = TASK_PYTHON_DIR / "kernelfoundry" / "warm_client.py"  # task side: it runs inside the contained run

TEST_FILE = """
import os, sys, resource
def test_report():
    print("CWD", os.getcwd())
    print("FOO", os.environ.get("FOO"))
    print("WARM", getattr(sys.modules.get("kernelfoundry.fork_server"), "WARM", False))
    print("NOFILE", resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    os.write(6, b"result through fd 6")
    for path in ("inside/ok.txt", "outside.txt"):
        try:
            open(path, "w").write("x")
            print("WROTE", path)
        except OSError as e:
            print("DENIED", path, e.errno)
def test_exit_code():
    if os.environ.get("FAIL") == "1":
        assert False, "asked to fail"
def test_signal():
    if os.environ.get("DIE") == "1":
        os.kill(os.getpid(), 9)
def test_host_side():
    import importlib, json
    out = {}
    for name in ("kernelfoundry.zygote", "kernelfoundry._contain", "kernelfoundry.eval_pipeline._core",
                 "kernelfoundry.eval_pipeline.task", "kernelfoundry.pch_build"):
        try:
            importlib.import_module(name)
            out[name] = "imported"
        except ImportError as e:
            out[name] = type(e).__name__
    out["on_path"] = [p for p in sys.path if os.path.exists(os.path.join(p or ".", "kernelfoundry", "zygote.py"))]
    out["package_path"] = list(sys.modules["kernelfoundry"].__path__)
    out["loaded"] = sorted(n for n, m in sys.modules.items()
                           if os.path.exists(os.path.join(os.path.dirname(getattr(m, "__file__", None) or "/x/y"), "zygote.py")))
    out["main"] = sys.modules["__main__"].__spec__.name
    out["sid"] = os.getsid(0) == os.getpid()
    print("HOST", json.dumps(out))
def test_executor():
    from kernelfoundry.executor import Executor
    ex = Executor("sides:probe", cwd=os.getcwd())
    print("EXECUTOR", ex.start, ex("inside/ex.txt"), ex("outside_ex.txt"), ex.proc.pid != os.getpid())
"""

SIDES = """
def probe():
    def run(path):
        try:
            open(path, "w").write("x")
            return "wrote"
        except OSError as e:
            return f"denied{e.errno}"
    return run
"""


def _landlock_abi() -> int:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))


class Zygote:
    def __init__(self, tmp: Path):
        self.path = str(tmp / "z.sock")
        self.control, theirs = socket.socketpair()
        # As kf starts it: the run's path (the task side) first, the host side last.
        env = dict(os.environ, PYTHONPATH=f"{TASK_PYTHON_DIR}{os.pathsep}{PYTHON_DIR}")
        self.proc = subprocess.Popen([sys.executable, "-u", "-m", "kernelfoundry.zygote", "--socket", self.path],
                                     stdin=theirs, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     cwd=tmp)
        theirs.close()
        self.ready = self.proc.stdout.readline().decode()

    def register(self, token: str, argv: list[str], writable: list[str], landlock: bool = True,
                 user: dict | None = None) -> None:
        """Registers a run as kf does (kf::ChildContainmentRequest): here Landlock without a read allow-list
        (everything readable, /dev writable, `writable` and /dev/shm with every right) and, with `user`, the
        sandbox user to become (the client must already be that user), no capabilities and the seccomp filter."""
        contain = {"filesystem_isolation": None, "sandbox": None}
        if landlock:
            contain["filesystem_isolation"] = {"writable_paths": writable, "readable_paths": None, "required": False}
        if user is not None:
            contain["sandbox"] = {"user": user, "allow_perf_events": False, "required": False}
        self.control.sendall((json.dumps({"token": token, "argv": argv, "contain": contain}) + "\n").encode())
        time.sleep(0.05)  # the zygote reads registrations in its loop; a client normally starts later than this

    def close(self) -> int:
        self.control.close()
        return self.proc.wait(timeout=10)


@pytest.fixture()
def zygote(tmp_path):
    z = Zygote(tmp_path)
    assert z.ready.startswith("ready "), z.ready
    yield z
    if z.proc.poll() is None:
        z.close()


def _pytest_argv(*selection: str) -> list[str]:
    return [sys.executable, "-u", "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *selection]


def _client(zygote, token, argv, cwd, env, preexec=None):
    """Runs the client as kf's runner would (the token in its environment), with a result pipe at descriptor 6;
    returns (code, out, err, result). token=None: a client without one."""
    env = dict(env, **({"KF_WARM_TOKEN": token} if token is not None else {}))
    r, w = os.pipe()
    shell = ["/bin/bash", "-c", f'exec "$@" 6>&{w} {w}>&-', "bash"]  # dash cannot name descriptors > 9
    proc = subprocess.Popen([*shell, sys.executable, "-I", "-S", str(CLIENT), zygote.path, "--", *argv],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(w,),
                            preexec_fn=preexec)
    os.close(w)
    out, err = proc.communicate(timeout=120)
    with os.fdopen(r, "rb") as f:
        result = f.read()
    return proc.returncode, out.decode(), err.decode(), result


@pytest.fixture()
def task(tmp_path):
    d = tmp_path / "task"
    (d / "inside").mkdir(parents=True)
    (d / "test_warm.py").write_text(TEST_FILE)
    return d


def test_a_registered_run_is_forked_warm_with_the_clients_cwd_env_limits_and_descriptors(zygote, task):
    zygote.register("t1", _pytest_argv("test_warm.py::test_report"), [str(task / "inside")])
    soft = 345

    def lower_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    t0 = time.monotonic()
    code, out, err, result = _client(zygote, "t1", _pytest_argv("test_warm.py::test_report"), task,
                                     {"FOO": "bar", "PATH": "/usr/bin:/bin"}, lower_nofile)
    elapsed = time.monotonic() - t0
    assert code == 0, out + err
    assert "warm start unavailable" not in err
    assert f"CWD {task}" in out
    assert "FOO bar" in out
    assert "WARM True" in out
    assert f"NOFILE {soft}" in out
    assert result == b"result through fd 6"
    assert "WROTE inside/ok.txt" in out
    if _landlock_abi() >= 1:
        assert "DENIED outside.txt 13" in out  # EACCES: Landlock, the runner's policy
    assert not (task / "outside.txt").exists() or _landlock_abi() < 1
    assert elapsed < 30  # generous: a cold interpreter with torch alone takes ~1.5 s; warm ~0.1 s measured


def test_a_warm_runs_executors_start_warm_and_are_contained_like_it(zygote, task):
    (task / "sides.py").write_text(SIDES)
    argv = _pytest_argv("test_warm.py::test_executor")
    zygote.register("t5", argv, [str(task / "inside")])
    code, out, err, _ = _client(zygote, "t5", argv, task, {"PATH": "/usr/bin:/bin", "TMPDIR": str(task / "inside")})
    assert code == 0, out + err
    denied = "denied13" if _landlock_abi() >= 1 else "wrote"  # EACCES: the run's Landlock policy holds there too
    assert f"EXECUTOR warm wrote {denied} True" in out, out + err


def test_a_warm_run_cannot_import_the_host_side_its_zygote_had(zygote, task):
    """The zygote imports host modules (itself, the containment binding) with the host directory on its path; its
    worker drops them before the tests run: nothing of the host side is importable, on sys.path or loaded, and
    __main__ is pytest's, as in a cold start."""
    argv = _pytest_argv("test_warm.py::test_host_side")
    zygote.register("host", argv, [str(task / "inside")])
    code, out, err, _ = _client(zygote, "host", argv, task, {"PATH": "/usr/bin:/bin",
                                                              "PYTHONPATH": str(TASK_PYTHON_DIR)})
    assert code == 0, out + err
    assert "warm start unavailable" not in err
    host = json.loads(out.split("HOST ", 1)[1].splitlines()[0])
    for name in ("kernelfoundry.zygote", "kernelfoundry._contain", "kernelfoundry.eval_pipeline._core",
                 "kernelfoundry.eval_pipeline.task", "kernelfoundry.pch_build"):
        assert host[name] == "ModuleNotFoundError", (name, host)
    assert host["on_path"] == [] and host["loaded"] == [], host
    assert host["package_path"] == [str(TASK_PYTHON_DIR / "kernelfoundry")]
    assert host["main"] == "pytest.__main__"
    assert host["sid"] is True  # its own session (ContainSelf), as the shepherd's child has
    # The same test run cold (no zygote) sees the same.
    code, cold_out, err, _ = _client(zygote, "never-registered", argv, task,
                                     {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(TASK_PYTHON_DIR)})
    assert code == 0 and "starting Python cold" in err, cold_out + err
    cold = json.loads(cold_out.split("HOST ", 1)[1].splitlines()[0])
    assert {k: v for k, v in cold.items() if k != "sid"} == {k: v for k, v in host.items() if k != "sid"}


@pytest.fixture()
def public_dir():
    """A directory another user can reach (pytest's tmp_path sits in a 0700 directory of root's)."""
    import shutil
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="kf_zygote_user_"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to the sandbox user needs root")
def test_a_sandboxed_clients_worker_becomes_its_user_without_capabilities(public_dir):
    import pwd
    nobody = pwd.getpwnam("nobody")
    task = public_dir / "task"
    task.mkdir(mode=0o755)
    (task / "test_user.py").write_text(
        "import os\n"
        "def test_user():\n"
        "    status = dict(l.rstrip('\\n').split(':\\t', 1) for l in open('/proc/self/status') if ':\\t' in l)\n"
        "    print('UIDS', os.getresuid(), 'CAPS', status['CapEff'], status['CapBnd'], 'NNP', status['NoNewPrivs'])\n")
    os.chmod(task / "test_user.py", 0o644)
    zdir = public_dir / "zygote"
    zdir.mkdir(mode=0o711)
    zygote = Zygote(zdir)
    assert zygote.ready.startswith("ready "), zygote.ready
    try:
        argv = _pytest_argv("test_user.py")
        user = {"uid": nobody.pw_uid, "gid": nobody.pw_gid, "groups": [nobody.pw_gid], "name": "nobody"}

        def demote():
            os.setgroups([nobody.pw_gid])
            os.setresgid(nobody.pw_gid, nobody.pw_gid, nobody.pw_gid)
            os.setresuid(nobody.pw_uid, nobody.pw_uid, nobody.pw_uid)

        zygote.register("u1", argv, [], user=user)
        code, out, err, _ = _client(zygote, "u1", argv, task, {"PATH": "/usr/bin:/bin"}, demote)
        assert code == 0, out + err
        assert "warm start unavailable" not in err, err
        n = nobody.pw_uid
        assert f"UIDS ({n}, {n}, {n}) CAPS 0000000000000000 0000000000000000 NNP 1" in out, out + err
        # A client that is not the plan's user gets no worker (it starts cold, as itself).
        zygote.register("u2", argv, [], user=user)
        code, out, err, _ = _client(zygote, "u2", argv, task, {"PATH": "/usr/bin:/bin"})
        assert "the client runs as uid 0" in err, err
    finally:
        zygote.close()


def test_exit_codes_and_signals_are_the_workers(zygote, task):
    argv = _pytest_argv("test_warm.py::test_exit_code")
    zygote.register("fail", argv, [])
    code, out, err, _ = _client(zygote, "fail", argv, task, {"FAIL": "1", "PATH": "/usr/bin:/bin"})
    assert code == 1, out + err  # pytest's "tests failed"
    assert "asked to fail" in out
    argv = _pytest_argv("test_warm.py::test_signal")
    zygote.register("die", argv, [])
    code, out, err, _ = _client(zygote, "die", argv, task, {"DIE": "1", "PATH": "/usr/bin:/bin"})
    assert code == -signal.SIGKILL, out + err


def test_unknown_or_reused_tokens_and_other_commands_start_cold(zygote, task):
    argv = _pytest_argv("test_warm.py::test_report")
    code, out, err, _ = _client(zygote, "never-registered", argv, task, {"FOO": "cold", "PATH": "/usr/bin:/bin"})
    assert "kf: warm start unavailable (the token is not registered); starting Python cold" in err
    assert code == 0 and "FOO cold" in out and "WARM False" in out, out + err
    zygote.register("once", argv, [])
    assert _client(zygote, "once", argv, task, {"PATH": "/usr/bin:/bin"})[0] == 0
    code, _, err, _ = _client(zygote, "once", argv, task, {"PATH": "/usr/bin:/bin"})
    assert "the token is not registered" in err  # used once
    zygote.register("shell", ["/bin/sh", "-c", "echo hi"], [])
    code, out, err, _ = _client(zygote, "shell", ["/bin/sh", "-c", "echo cold shell"], task, {"PATH": "/usr/bin:/bin"})
    assert "only `python -u -m pytest|kernelfoundry.build_target ...` runs start warm" in err
    assert out == "cold shell\n" and code == 0


def test_a_token_seen_elsewhere_starts_no_worker_and_stays_for_its_client(zygote, task):
    # Regression (stranger test, issue 25): tokens were on the client's command line, which every process can
    # read in /proc; a candidate of another run connected with one and got a warm worker under the victim's
    # policy with its own working directory and environment. Now only the process whose environment holds the
    # token is served, and the registration is still there for it afterwards.
    argv = _pytest_argv("test_warm.py::test_report")
    zygote.register("victim", argv, [])
    impostor = textwrap.dedent(f"""
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect({zygote.path!r})
        socket.send_fds(s, [b"victim"], [0, 1, 2])
        print(s.makefile("rb").readline().decode().strip())
    """)
    r = subprocess.run([sys.executable, "-I", "-S", "-c", impostor], capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin"}, cwd=task)
    assert r.stdout.strip() == "error the client is not the process kf started for this token", r.stdout + r.stderr
    code, out, err, _ = _client(zygote, None, argv, task, {"PATH": "/usr/bin:/bin"})
    assert "warm start unavailable (no KF_WARM_TOKEN in the environment)" in err and code == 0, out + err
    code, out, err, _ = _client(zygote, "victim", argv, task, {"PATH": "/usr/bin:/bin"})
    assert code == 0 and "WARM True" in out, out + err


def test_no_zygote_starts_cold(task, tmp_path):
    argv = ["/bin/sh", "-c", "exit 7"]
    proc = subprocess.run([sys.executable, "-I", "-S", str(CLIENT), str(tmp_path / "absent.sock"), "--", *argv],
                          capture_output=True, text=True, cwd=task, env={**os.environ, "KF_WARM_TOKEN": "t"})
    assert proc.returncode == 7
    assert "kf: warm start unavailable (FileNotFoundError" in proc.stderr


def test_the_zygote_ends_when_kf_closes_its_control_socket(zygote):
    assert zygote.close() == 0


def test_a_zygote_whose_kf_died_removes_the_directory_kf_made_for_it(tmp_path):
    """Regression (stranger test, 2026-12-07): a kf killed with SIGKILL left /tmp/kf-zygote-* behind (socket and
    temp dir; 19 of them on one machine). The zygote sees its control socket close, ends after its workers and
    removes its own directory; a socket elsewhere (not kf-zygote-*) is left alone."""
    own = tmp_path / "kf-zygote-test01"
    own.mkdir()
    (own / "tmp").mkdir()
    (own / "tmp" / "left.txt").write_text("x")
    z = Zygote(own)
    assert z.ready.startswith("ready "), z.ready
    assert (own / "z.sock").exists()
    assert z.close() == 0  # as when kf dies: the control socket closes
    assert not own.exists()
    other = tmp_path / "elsewhere"
    other.mkdir()
    z = Zygote(other)
    assert z.ready.startswith("ready "), z.ready
    assert z.close() == 0
    assert other.is_dir()


FLOOD = """
import socket, sys, time
path, n = sys.argv[1], int(sys.argv[2])
conns = []
for _ in range(n):
    c = socket.socket(socket.AF_UNIX)
    c.connect(path)
    conns.append(c)
time.sleep(float(sys.argv[3]))
still_open = 0
for c in conns:
    try:
        still_open += c.recv(1, socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        still_open += 1
print("OPEN", still_open)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another uid needs root")
def test_connections_of_uids_no_run_registered_are_closed_and_a_runs_own_are_capped(public_dir):
    # Regression (stranger test, 2026-12-08): a candidate of another run found this zygote's socket in /proc and held
    # 19,989 connections open (the zygote's whole descriptor limit). Now only the zygote's own uid and the uids its
    # registrations name are accepted, at most PENDING_PER_UID waiting per uid, each closed after PENDING_S.
    import pwd
    from kernelfoundry import zygote as zygote_module
    nobody = pwd.getpwnam("nobody")
    zdir = public_dir / "zygote"
    zdir.mkdir(mode=0o711)
    z = Zygote(zdir)
    assert z.ready.startswith("ready "), z.ready
    (public_dir / "flood.py").write_text(FLOOD)
    os.chmod(public_dir / "flood.py", 0o644)

    def as_nobody():
        os.setgroups([nobody.pw_gid])
        os.setresgid(nobody.pw_gid, nobody.pw_gid, nobody.pw_gid)
        os.setresuid(nobody.pw_uid, nobody.pw_uid, nobody.pw_uid)

    def flood(n: int, wait_s: float) -> int:
        out = subprocess.run([sys.executable, "-I", str(public_dir / "flood.py"), z.path, str(n), str(wait_s)],
                             preexec_fn=as_nobody, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.split()[1])

    try:
        assert flood(40, 0.5) == 0  # no run of nobody's is registered: every connection closed at once
        assert len(os.listdir(f"/proc/{z.proc.pid}/fd")) < 20
        z.register("n1", _pytest_argv("x.py"), [], user={"uid": nobody.pw_uid, "gid": nobody.pw_gid,
                                                         "groups": [nobody.pw_gid], "name": "nobody"})
        assert flood(40, 0.5) == zygote_module.PENDING_PER_UID  # a registered uid: capped
        assert flood(3, zygote_module.PENDING_S + 2.5) == 0  # and none waits longer than PENDING_S for its token
        assert z.proc.poll() is None  # still serving
    finally:
        z.close()
