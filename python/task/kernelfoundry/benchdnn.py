"""oneDNN's ``benchdnn`` as a benchmark and a correctness check (the reference's ``measure_runtime_benchdnn`` and
``check_correctness_benchdnn`` fixtures; the reference kept these helpers in eval_pipeline/utils/benchdnn_helper).

A task that optimises a oneDNN primitive points these at a benchdnn binary: the correctness run is
``benchdnn --mode=c <driver> --reset --perf-template=csv --global-impl=sycl:ref:any <shape…>`` and passes when
its one ``__REPRO:`` line says PASSED; the performance run is ``--mode=p`` (``--global-impl=sycl:ref:any`` only
with ``use_custom_kernel``) and reports the ``avg_time`` column (ms) of its two ``perf,`` CSV lines. The custom
kernel is injected with ``LD_PRELOAD`` and enabled by ``DNNL_USE_CUSTOM_KERNEL=1``; ``ONEDNN_VERBOSE`` is the
verbosity. The binary runs with this process's environment plus those variables (it is the task's own tool).
"""

from __future__ import annotations

import csv
import logging
import os
import re
import subprocess
from typing import Optional

__all__ = ["check_correctness_benchdnn", "measure_runtime_benchdnn", "parse_benchdnn_correctness_check",
           "parse_benchdnn_perf_stats"]

logger = logging.getLogger("kernelfoundry.benchdnn")

_REPRO_STATUS = re.compile(r"^\d+:([A-Z_]+)\b")


def _env(ld_preload: Optional[str], use_custom_kernel: bool, verbosity: int) -> dict:
    env = dict(os.environ)
    if ld_preload is not None:
        env["LD_PRELOAD"] = ld_preload
    env["DNNL_USE_CUSTOM_KERNEL"] = "1" if use_custom_kernel else "0"
    env["ONEDNN_VERBOSE"] = str(int(verbosity))
    return env


def parse_benchdnn_correctness_check(stdout: str) -> bool:
    """True when benchdnn's single ``<case>:<STATUS> … __REPRO: …`` line has status PASSED. Raises ValueError
    when there is not exactly one such line or it has no ``<case>:<STATUS>`` prefix."""
    lines = [line.strip() for line in stdout.splitlines() if "__REPRO:" in line]
    if len(lines) != 1:
        raise ValueError(f"benchdnn correctness output: expected exactly 1 __REPRO line, got {len(lines)}")
    match = _REPRO_STATUS.match(lines[0].split("__REPRO:", 1)[0].strip())
    if not match:
        raise ValueError(f"benchdnn correctness output: malformed __REPRO line (expected '<case>:<STATUS> ... "
                         f"__REPRO: ...'): {lines[0]}")
    return match.group(1) == "PASSED"


def parse_benchdnn_perf_stats(stdout: str) -> dict:
    """{"avg_time": float} from benchdnn's two ``perf,`` CSV lines (header, values). Raises ValueError when
    there are not exactly two, their lengths differ, ``avg_time`` is missing or not a number."""
    rows = [line.strip() for line in stdout.splitlines() if line.strip().startswith("perf,")]
    if len(rows) != 2:
        raise ValueError(f"benchdnn performance output: expected 2 'perf,' lines (header and values), got {len(rows)}")
    headers = next(csv.reader([rows[0]]))
    values = next(csv.reader([rows[1]]))
    if len(headers) != len(values):
        raise ValueError(f"benchdnn performance output: {len(headers)} headers but {len(values)} values")
    if "avg_time" not in headers:
        raise ValueError(f"benchdnn performance output: no 'avg_time' column in {headers}")
    text = values[headers.index("avg_time")].strip()
    try:
        return {"avg_time": float(text)}
    except ValueError:
        raise ValueError(f"benchdnn performance output: avg_time {text!r} is not a number") from None


def _run(benchdnn_bin: str, mode: str, driver: str, test_shape: Optional[str], impl: list, env: dict,
         log_stdout: bool, what: str) -> str:
    if not test_shape:
        raise ValueError(f"{what} requires a non-empty test_shape")
    cmd = [benchdnn_bin, f"--mode={mode}", driver, "--reset", "--perf-template=csv", *impl, *test_shape.split()]
    r = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
    if log_stdout:
        logger.info("[benchdnn] stdout:\n%s", r.stdout)
    if r.returncode != 0:
        raise RuntimeError(f"{what}: benchdnn exited with code {r.returncode}; cmd={cmd}; stderr={r.stderr.strip()}")
    return r.stdout


def check_correctness_benchdnn(benchdnn_bin: str, driver: str, test_shape: Optional[str] = None,
                               ld_preload: Optional[str] = None, use_custom_kernel: bool = False,
                               verbosity_level: int = 0, log_stdout: bool = False) -> bool:
    """Runs benchdnn in correctness mode (module comment) and returns whether it passed. Raises ValueError for
    an empty ``test_shape`` or unparsable output, RuntimeError when benchdnn exits non-zero."""
    out = _run(benchdnn_bin, "c", driver, test_shape, ["--global-impl=sycl:ref:any"],
               _env(ld_preload, use_custom_kernel, verbosity_level), log_stdout, "check_correctness_benchdnn")
    return parse_benchdnn_correctness_check(out)


def measure_runtime_benchdnn(benchdnn_bin: str, driver: str, test_shape: Optional[str] = None,
                             ld_preload: Optional[str] = None, use_custom_kernel: bool = False,
                             verbosity_level: int = 0, log_stdout: bool = False,
                             output: Optional[list] = None) -> list[float]:
    """Runs benchdnn in performance mode (module comment) and returns ``[avg_time]`` in ms (also extended into
    ``output``). Raises ValueError for an empty ``test_shape`` or unparsable output, RuntimeError when benchdnn
    exits non-zero."""
    impl = ["--global-impl=sycl:ref:any"] if use_custom_kernel else []
    out = _run(benchdnn_bin, "p", driver, test_shape, impl, _env(ld_preload, use_custom_kernel, verbosity_level),
               log_stdout, "measure_runtime_benchdnn")
    runtimes = [float(parse_benchdnn_perf_stats(out)["avg_time"])]
    if output is not None:
        output.extend(runtimes)
    return runtimes
