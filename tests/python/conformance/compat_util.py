"""Helpers of the reference-conformance tests (tests/python/conformance): signatures, fake profiler/benchdnn
binaries, and running `kf run` on a task directory with its JSON verdict."""

from __future__ import annotations

import inspect
import json
import subprocess
from pathlib import Path
from typing import Any, Callable

from conftest import KF_BIN, task_env

#: Parameters without a default (inspect.Parameter.empty, shortened).
REQUIRED = inspect.Parameter.empty

#: Short loop knobs for calls that only need a few samples.
FAST = dict(warmup_min_time=0.01, inner_loop_min_time=0.001, perf_trials_min_time=0.02)


def params(fn: Callable) -> list[tuple[str, Any]]:
    """[(name, default)] of fn's parameters in order (REQUIRED for none)."""
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


def assert_signature_starts_with(fn: Callable, expected: list[tuple[str, Any]]) -> None:
    """fn's parameters begin with `expected` (names, order, defaults); any of ours after them are keyword-only
    or have defaults, so every reference call form still binds."""
    got = params(fn)
    assert got[:len(expected)] == expected, f"{fn.__qualname__}{inspect.signature(fn)}"
    for p in list(inspect.signature(fn).parameters.values())[len(expected):]:
        assert p.kind is inspect.Parameter.KEYWORD_ONLY or p.default is not REQUIRED, (fn.__qualname__, p)


def fake_tool(path: Path, log: Path, stdout: str = "", exit_code: int = 0) -> Path:
    """An executable shell script at `path` that appends its arguments (one line per call) to `log`, prints
    `stdout` and exits with `exit_code`."""
    path.write_text("#!/bin/sh\n"
                    f"echo \"$@\" >> '{log}'\n"
                    f"cat <<'KF_EOF'\n{stdout}\nKF_EOF\n"
                    f"exit {exit_code}\n")
    path.chmod(0o755)
    return path


def kf_run(task: Path, tmp_path: Path, *extra: str, timeout: float = 900, **env: str) -> tuple[int, dict, str]:
    """`kf run TASK --json OUT --no-store --no-verdict-cache` with the tests' environment. Returns (exit code, the
    JSON verdict ({} when none was written), stdout + stderr)."""
    out = tmp_path / f"verdict_{task.name}.json"
    r = subprocess.run([str(KF_BIN), "run", str(task), "--json", str(out), "--no-store", "--no-verdict-cache",
                        *extra], capture_output=True, text=True, timeout=timeout, env=task_env(**env))
    verdict = json.loads(out.read_text()) if out.is_file() else {}
    return r.returncode, verdict, r.stdout + r.stderr


def benchmark_rows(verdict: dict) -> list[dict]:
    """The verdict's per-benchmark rows (result.benchmarks: name, speedup, speedup_ci, paired, ...)."""
    result = verdict.get("result", verdict)
    return list(result.get("benchmarks", []))
