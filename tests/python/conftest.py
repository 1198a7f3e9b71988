"""Helpers for the Python package tests. Run (from the repository root, after building):
    PYTHONPATH=build/python /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python
The package under test is the one the build assembled, in its two directories (python/README.md): the host side
PYTHON_DIR ($KF_PYTHON_HOST_DIR, else the sys.path entry holding kernelfoundry/eval_pipeline/_core*.so
(PYTHONPATH), else <repo>/build/python) — what this test process imports, as a host program does — and the task
side TASK_PYTHON_DIR ($KF_PYTHON_DIR, else PYTHON_DIR's sibling python-task) — what task processes started here get
on PYTHONPATH (task_env), as kf gives them. `kf` is looked up beside them (<build dir>/kf) unless $KF_BIN names it.

Torch extensions are cached under ``$KF_CACHE_DIR`` (default here: ``<repo>/.cache/kernelfoundry-tests``),
so only the first run compiles relu_cpu's kernel.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _python_dir() -> Path:
    if os.environ.get("KF_PYTHON_HOST_DIR"):
        return Path(os.environ["KF_PYTHON_HOST_DIR"]).resolve()
    for entry in sys.path:
        if entry and list((Path(entry) / "kernelfoundry" / "eval_pipeline").glob("_core*.so")):
            return Path(entry).resolve()
    return REPO / "build" / "python"


PYTHON_DIR = _python_dir()
TASK_PYTHON_DIR = Path(os.environ.get("KF_PYTHON_DIR") or PYTHON_DIR.parent / "python-task").resolve()
KF_BIN = Path(os.environ.get("KF_BIN") or PYTHON_DIR.parent / "kf")
SHARED = Path(os.environ.get("KF_SHARED_DIR") or REPO.parent / "shared").resolve()
FIXTURES = SHARED / "fixtures" / "tasks"
GOLDEN = SHARED / "fixtures" / "golden"
CACHE_DIR = Path(os.environ.get("KF_CACHE_DIR") or REPO / ".cache" / "kernelfoundry-tests")
#: Short measurement loops for tests that only need some samples (explicit task options still win).
FAST_MEASURE = json.dumps({"warmup_min_time": 0.02, "perf_trials_min_time": 0.05, "inner_loop_min_time": 0.001})

# Both sides, the task side first (its package; the host side joins it), as kf's zygote has them.
for _entry in (str(PYTHON_DIR), str(TASK_PYTHON_DIR)):
    if _entry not in sys.path:
        sys.path.insert(0, _entry)


def pytest_configure(config):
    for directory, module in ((TASK_PYTHON_DIR, "kernelfoundry/_measure*.so"),
                              (PYTHON_DIR, "kernelfoundry/_contain*.so"),
                              (PYTHON_DIR, "kernelfoundry/eval_pipeline/_core*.so")):
        if not list(directory.glob(module)):
            raise pytest.UsageError(f"{directory}/{module} is missing: build the project (`ninja -C <build dir>`) "
                                    "and run with PYTHONPATH=<build dir>/python")


@pytest.fixture
def tmp_path(tmp_path: Path) -> Path:
    """pytest's tmp_path, made reachable by kf's sandbox user: evaluations started by a root test process run
    candidates as that user (README, trust model), and pytest makes every directory on the way (/tmp/pytest-of-root,
    its numbered dirs, tmp_path itself) 0700, so a work dir, task copy or candidate under tmp_path would be refused
    ("the sandbox user kf-sandbox cannot reach ..."). Adds search permission only (o+x, no listing) to the
    directories pytest created, from tmp_path up to pytest-of-<user>; nothing outside pytest's temp root changes."""
    if os.geteuid() == 0:
        root = next((p for p in (tmp_path, *tmp_path.parents) if p.name.startswith("pytest-of-")), None)
        if root is not None:
            for directory in (tmp_path, *tmp_path.parents):
                directory.chmod(directory.stat().st_mode | stat.S_IXGRP | stat.S_IXOTH)
                if directory == root:
                    break
    return tmp_path


def golden(name: str):
    return json.loads((GOLDEN / f"{name}.json").read_text())


def copy_fixture(name: str, dest_parent: Path) -> Path:
    """A writable copy of shared/fixtures/tasks/<name> (the originals are read-only)."""
    dest = dest_parent / name
    shutil.copytree(FIXTURES / name, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for root, dirs, files in os.walk(dest):
        for n in dirs + files:
            p = Path(root) / n
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    dest.chmod(dest.stat().st_mode | stat.S_IWUSR)
    return dest


def task_env(**extra: str) -> dict:
    env = dict(os.environ)
    # A task process gets the task side only, as under kf (the host directory of this test process is left out).
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != PYTHON_DIR]
    env["PYTHONPATH"] = os.pathsep.join([str(TASK_PYTHON_DIR), *rest])
    env["KF_CACHE_DIR"] = str(CACHE_DIR)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for key in ("KERNELFOUNDRY_PROFILER", "UNITRACE_VERSION", "NV_NSIGHT_INJECTION_PORT_BASE",
                "KERNELFOUNDRY_MEASURE_OPTIONS"):
        env.pop(key, None)
    env.update(extra)
    return env


def run_py(args: list, cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """Runs /usr/bin/python3 (this interpreter) with args in cwd; text output, never raises on failure."""
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=task_env(**env), capture_output=True,
                          text=True, timeout=timeout)


def run_task_pytest(task: Path, *args: str, env: dict, prefix: tuple = (), merge_output: bool = True,
                       timeout: float = 300) -> tuple[subprocess.CompletedProcess, dict | None]:
    """Runs ``[*prefix, python -m pytest --color=no -p no:cacheprovider --kf-result-fd=N *args task.py]`` in
    `task` with `env`, N being the write end of a pipe read here (kf's result pipe). Returns the finished
    process (stdout text; stderr merged into it when `merge_output`, else separate) and the report the plugin
    wrote on the pipe (None when it wrote nothing)."""
    read_fd, write_fd = os.pipe()
    argv = [*map(str, prefix), sys.executable, "-m", "pytest", "--color=no", "-p", "no:cacheprovider",
            f"--kf-result-fd={write_fd}", *args, "task.py"]
    try:
        proc = subprocess.Popen(argv, cwd=task, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT if merge_output else subprocess.PIPE, text=True,
                                pass_fds=(write_fd,))
        os.close(write_fd)
        data = b""
        while chunk := os.read(read_fd, 1 << 16):
            data += chunk
        out, err = proc.communicate(timeout=timeout)
    finally:
        os.close(read_fd)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), (json.loads(data) if data else None)


def collect_json(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("KF_COLLECT_JSON:")]
    assert len(lines) == 1, stdout
    return json.loads(lines[0][len("KF_COLLECT_JSON:"):])


def write_task(dest: Path, task_py: str, files: dict | None = None) -> Path:
    """A minimal reference-format task directory with the given task.py (and extra {relative path: text})."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "conftest.py").write_text("from kernelfoundry.conftest import *\n")
    (dest / "task.py").write_text(task_py)
    for name, text in (files or {}).items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text(text)
    return dest
