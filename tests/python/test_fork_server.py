"""Warm executors (kernelfoundry.fork_server): a test process forked from kf's zygote starts its executors by fork
from a pristine copy of itself. Each case runs a small checker script (a fresh Python that calls
fork_server.start(_serve) as a zygote worker does) and checks what its executors see: the checker's memory is not in
them (a plain fork of the checker is the negative control), calls and crashes behave as in a cold start, the
environment, cwd and output descriptors are the checker's, no kf descriptor leaks, start-time settings that a fork
cannot take fall back to cold, and everything dies with the checker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import TASK_PYTHON_DIR as PYTHON_DIR  # the checker is a task process: the task side only

pytest.importorskip("torch")

PROBE = textwrap.dedent('''
    import ctypes, os

    def _anon_regions():
        """(start, end) of this process's readable anonymous memory: heap, stack and anonymous mappings."""
        out = []
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if "r" not in parts[1] or (len(parts) > 5 and not parts[5].startswith("[")):
                    continue
                if len(parts) > 5 and parts[5] not in ("[heap]", "[stack]"):
                    continue
                lo, hi = (int(v, 16) for v in parts[0].split("-"))
                out.append((lo, hi))
        return out

    def count(key_hex):
        """How many copies of bytes.fromhex(key_hex) * 64 this process's anonymous memory holds, not counting the
        search pattern itself and the read buffer."""
        pattern = bytes.fromhex(key_hex) * 64
        own = id(pattern) + 32  # CPython bytes: data after a 32-byte header (ob_refcnt, type, size, hash)
        buf = bytearray(1 << 20)
        buf_lo = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))
        hits = 0
        fd = os.open("/proc/self/mem", os.O_RDONLY)
        try:
            for lo, hi in _anon_regions():
                pos = lo
                while pos < hi:
                    n = min(len(buf), hi - pos)
                    try:
                        got = os.preadv(fd, [memoryview(buf)[:n]], pos)
                    except OSError:
                        break
                    view = bytes(buf[:got])
                    at = view.find(pattern)
                    while at >= 0:
                        addr = pos + at
                        if not (own - 64 <= addr <= own + 64 or buf_lo <= addr < buf_lo + len(buf)):
                            hits += 1
                        at = view.find(pattern, at + 1)
                    del view
                    pos += max(got, 1) if got else hi
        finally:
            os.close(fd)
        return hits

    def info(checker_pid):
        fds = {}
        for n in os.listdir("/proc/self/fd"):
            try:
                fds[n] = os.readlink(f"/proc/self/fd/{n}")
            except OSError:  # the listing's own descriptor, closed by now
                pass
        try:
            with open(f"/proc/{checker_pid}/mem", "r+b"):
                checker_mem = "opened"
        except OSError as e:
            checker_mem = e.errno
        with open("/proc/self/status") as f:
            capeff = [line.split()[1] for line in f if line.startswith("CapEff:")][0]
        return {"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
                "cwd": os.getcwd(), "env": os.environ.get("PROBE_VAR"), "fds": fds, "capeff": capeff,
                "checker_mem": checker_mem}

    def big_alloc_in_heap(_):
        """Whether a fresh 64 MiB malloc comes from the brk heap (glibc's mmap threshold raised) or a mapping."""
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        p = libc.malloc(64 << 20)
        with open("/proc/self/maps") as f:
            heap = [tuple(int(v, 16) for v in l.split()[0].split("-")) for l in f if l.rstrip().endswith("[heap]")]
        inside = any(lo <= p < hi for lo, hi in heap)
        libc.free(ctypes.c_void_p(p))
        return inside

    def crash(_):
        os.kill(os.getpid(), 11)

    def dispatch():
        table = {"count": count, "info": info, "heap": big_alloc_in_heap, "crash": crash}
        return lambda op, arg: json_reply(table[op](arg))

    def json_reply(value):
        import json
        return json.dumps(value)
''')

CHECKER = textwrap.dedent('''
    import json, os, sys, time
    sys.path.insert(0, sys.argv[1])
    os.chdir(sys.argv[2])
    mode = sys.argv[3]
    from kernelfoundry import fork_server
    from kernelfoundry.executor import Executor, _serve
    import torch  # preloaded, as in kf's zygote
    out = {}
    decoy_r, decoy_w = os.pipe()  # stands for kf's result descriptor 6 of a test run
    os.dup2(decoy_w, 6)
    out["fd6"] = os.readlink("/proc/self/fd/6")
    if mode != "cold":
        fork_server.start(_serve)
    # What the checker computes from here on (the reference's outputs, in a real run) is its own.
    key = os.urandom(16)
    secret = bytearray(key * 64)
    def call(ex, op, arg=None):
        return json.loads(ex(op, arg))
    if mode in ("warm", "cold"):
        ex = Executor("probe:dispatch", cwd=sys.argv[2])
        out["start"] = ex.start
        out["copies"] = call(ex, "count", key.hex())
        out["info"] = call(ex, "info", os.getpid())
        out["checker"] = {"pid": os.getpid(), "pgid": os.getpgid(0), "server": fork_server._SERVER[2] if fork_server._SERVER else None}
        ex.close()
        out["closed_code"] = ex.proc.returncode
    elif mode == "plain_fork":  # the negative control: what forking the checker would leak
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            sys.path.insert(0, sys.argv[2])
            import probe
            os.write(w, str(probe.count(key.hex())).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        out["copies"] = int(os.read(r, 100))
    elif mode == "crash":
        ex = Executor("probe:dispatch", cwd=sys.argv[2])
        out["start"] = ex.start
        try:
            ex("crash", None)
        except BaseException as e:
            out["error"] = repr(e)
    elif mode == "heap":
        os.environ["MALLOC_MMAP_THRESHOLD_"] = "1073741824"
        os.environ["MALLOC_TRIM_THRESHOLD_"] = "1073741824"
        ex = Executor("probe:dispatch", cwd=sys.argv[2])
        out["start"] = ex.start
        out["in_heap"] = call(ex, "heap")
        del os.environ["MALLOC_MMAP_THRESHOLD_"], os.environ["MALLOC_TRIM_THRESHOLD_"]
        ex2 = Executor("probe:dispatch", cwd=sys.argv[2])
        out["in_heap_default"] = call(ex2, "heap")
    elif mode == "env_differs":
        os.environ["OMP_NUM_THREADS"] = "7"
        ex = Executor("probe:dispatch", cwd=sys.argv[2])
        out["start"] = ex.start
        out["info"] = call(ex, "info", os.getpid())
    elif mode == "orphan":
        ex = Executor("probe:dispatch", cwd=sys.argv[2])
        print(json.dumps({"executor": ex.proc.pid, "server": fork_server._SERVER[2]}), flush=True)
        os._exit(0)  # no close(): the executor and the server must die with this process
    print(json.dumps(out), flush=True)
''')


@pytest.fixture()
def probe_dir(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "checker.py").write_text(CHECKER)
    return tmp_path


def run_checker(probe_dir, mode: str, **env) -> tuple[dict, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "OMP_"))}
    full.update(PROBE_VAR="from-the-checker", PYTHONPATH=str(PYTHON_DIR), **env)
    proc = subprocess.run([sys.executable, str(probe_dir / "checker.py"), str(PYTHON_DIR), str(probe_dir), mode],
                          cwd="/", env=full, capture_output=True, text=True, timeout=300, pass_fds=())
    assert proc.returncode == 0 or mode == "crash", proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return (json.loads(lines[-1]) if lines else {}), proc.stderr


def test_a_warm_executor_holds_nothing_the_checker_computed_where_a_plain_fork_would(probe_dir):
    warm, err = run_checker(probe_dir, "warm")
    assert warm["start"] == "warm", err
    assert warm["copies"] == 0
    fork, _ = run_checker(probe_dir, "plain_fork")
    assert fork["copies"] >= 1  # the check finds the checker's secret when it is there
    cold, _ = run_checker(probe_dir, "cold")
    assert cold["start"] == "cold" and cold["copies"] == 0


def test_a_warm_executor_is_the_servers_child_in_the_checkers_group_with_its_env_cwd_and_output(probe_dir):
    out, err = run_checker(probe_dir, "warm")
    info, checker = out["info"], out["checker"]
    assert info["ppid"] == checker["server"] != checker["pid"]
    assert info["pgid"] == checker["pgid"]  # kf's timeouts (the run's process group) reach it
    assert info["env"] == "from-the-checker" and info["cwd"] == str(probe_dir)
    fds = info["fds"]
    assert fds["0"] == "/dev/null" and fds["1"].startswith("pipe:")  # stdout: the checker's (captured), not /dev/null
    assert out["fd6"] not in fds.values()  # nothing of kf's: the result descriptor is not inherited
    others = sorted(v for k, v in fds.items() if k not in ("0", "1", "2"))
    assert len(others) == 2 and all(v.startswith("pipe:") for v in others), fds  # its command and reply pipes
    assert out["closed_code"] == -9


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_an_executor_has_no_capabilities_and_cannot_open_the_checkers_memory(probe_dir, mode):
    out, err = run_checker(probe_dir, mode)
    assert out["start"] == mode, err
    assert int(out["info"]["capeff"], 16) == 0
    assert out["info"]["checker_mem"] in (1, 13), out["info"]  # EPERM / EACCES, even when this runs as root


def test_a_crash_in_a_warm_executor_ends_the_checker_with_its_signal(probe_dir):
    full = {k: v for k, v in os.environ.items()}
    full["PYTHONPATH"] = str(PYTHON_DIR)
    proc = subprocess.run([sys.executable, str(probe_dir / "checker.py"), str(PYTHON_DIR), str(probe_dir), "crash"],
                          env=full, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -11, proc.stderr
    assert "died of signal 11 (SIGSEGV)" in proc.stderr


def test_the_steady_heap_of_the_checkers_environment_is_applied_to_a_forked_executor(probe_dir):
    out, err = run_checker(probe_dir, "heap")
    assert out["start"] == "warm", err
    assert out["in_heap"] is True  # mmap threshold 1 GiB: a 64 MiB block comes from the heap
    assert out["in_heap_default"] is False  # glibc's default: above its 32 MiB maximum, a mapping


def test_an_environment_a_fork_cannot_take_on_starts_the_executor_cold(probe_dir):
    out, err = run_checker(probe_dir, "env_differs")
    assert out["start"] == "cold"
    assert "warm start unavailable (the environment differs from the fork server's in OMP_NUM_THREADS)" in err
    assert out["info"]["env"] == "from-the-checker"


def test_the_server_and_its_executors_die_with_the_checker(probe_dir):
    out, err = run_checker(probe_dir, "orphan")
    deadline = time.monotonic() + 10
    alive = [out["executor"], out["server"]]
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if os.path.exists(f"/proc/{p}") and "Z" not in _state(p)]
        time.sleep(0.05)
    assert alive == [], err


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
        return text[text.rfind(")") + 2]
    except OSError:
        return "Z"
