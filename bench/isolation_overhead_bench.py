#!/usr/bin/python3
"""What isolation costs a whole evaluation (issue 25, deliverable 5: "evaluation overhead within 5 % of today's").

Runs `kf run` as a process on two examples — the native `omp_reduction` (build cache off: the compile runs in the
sandbox every time) and the torch extension `bias_relu` (build cached: the pytest runs) — with isolation on (the
default: sandbox user, Landlock, seccomp) and with KF_ISOLATION=off, in pairs whose order alternates, and prints
min/median/max wall seconds of each and the paired on/off ratio (median and range).

The timed phase does a fixed amount of work here (eval_config.timing: 4 processes, 60 or 40 rounds each, a target
no run reaches): kf's timing is adaptive, so two default runs of one candidate time for different lengths (one
reaches its target in 3 s, the next is noisy and uses its 14 s), and a ratio of default runs measures that, not
isolation (measured 2026-12-04: default omp_reduction runs on/off 1.35, fixed-work runs 1.006).

Usage: /usr/bin/python3 bench/isolation_overhead_bench.py --kf build/kf [--pairs 5]
Not part of the tests (speed goals live in benchmarks; this machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXED_WORK = "    processes: 4\n    max_processes: 4\n    min_rounds: {r}\n    max_rounds: {r}\n" \
             "    target_rel_half_width: 0.0001\n"
CASES = [  # (name, task, candidate, rounds, extra environment)
    ("omp_reduction (native, build cache off)", "omp_reduction", "omp_reduction/fast.cpp", 60, {"KF_BUILD_CACHE": "off"}),
    ("bias_relu (torch extension, build cached)", "bias_relu", "bias_relu/fast.cpp", 40, {}),
]


def fixed_work_copy(task: str, rounds: int, into: Path) -> Path:
    """A copy of examples/tasks/TASK whose timed phase does a fixed amount of work."""
    dst = into / task
    shutil.copytree(ROOT / "examples" / "tasks" / task, dst)
    config = (dst / "config.yaml").read_text()
    timing = "  timing:\n" + FIXED_WORK.format(r=rounds)
    config += timing if "\neval_config:" in config else "eval_config:\n" + timing
    (dst / "config.yaml").write_text(config)
    return dst


def run(kf: str, task: Path, candidate: str, env: dict) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([kf, "run", str(task), "--candidate", str(ROOT / "examples" / "candidates" / candidate),
                        "--no-store", "--no-verdict-cache", "--json", os.devnull],
                       env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t0
    if p.returncode not in (0, 1):  # 1: a verdict that is not correct (here: noisy, the target is unreachable)
        sys.exit(f"kf run failed ({p.returncode}): {p.stderr[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kf", default=str(ROOT / "build" / "kf"))
    ap.add_argument("--pairs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kf-iso-bench-") as tmp:
        for name, task, candidate, rounds, extra in CASES:
            path = fixed_work_copy(task, rounds, Path(tmp))
            on_env, off_env = dict(extra), {**extra, "KF_ISOLATION": "off"}
            run(args.kf, path, candidate, on_env)  # untimed: fills the caches of both modes
            run(args.kf, path, candidate, off_env)
            on, off = [], []
            for i in range(args.pairs):
                first, second = ((on, on_env), (off, off_env)) if i % 2 == 0 else ((off, off_env), (on, on_env))
                for times, env in (first, second):
                    times.append(run(args.kf, path, candidate, env))
            ratios = sorted(a / b for a, b in zip(on, off))
            print(f"{name}: {args.pairs} pairs (seconds, wall)")
            for label, v in (("isolation on ", on), ("KF_ISOLATION=off", off)):
                print(f"  {label:<17} min {min(v):7.2f}  median {statistics.median(v):7.2f}  max {max(v):7.2f}")
            print(f"  on/off ratio      median {statistics.median(ratios):.3f}  range {ratios[0]:.3f}-{ratios[-1]:.3f}"
                  f"  (goal <= 1.05)")


if __name__ == "__main__":
    main()
