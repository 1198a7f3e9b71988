#!/usr/bin/python3
"""`kf encode` + `kf decode` end to end, as whole processes with their file I/O, against CPython doing the same
(os.walk + base64 + json to encode; json + base64 + per-file write/chmod/utime to decode) in the same run.

The task: a generated 50 MB package of 1,200 files (half text, half random bytes, in 16 folders) plus the
config.yaml/task.py/kernel.py of a pytest task, the size issue 24 names. Each round runs the four processes
(kf encode, python encode, kf decode, python decode) in a rotating order, each decode into a fresh directory, and
the page cache is warm for all of them (one untimed round first); before each process the previous one's
dirty pages are written back (os.sync), so each is timed with its own I/O only. Printed: min/median/max seconds of each, and
the paired ratio python/kf per round (median and range), for encode, decode and both together.
Goal (issue 24, item 6): kf encode + decode >= 3x faster than the same-run CPython baseline.

Usage: /usr/bin/python3 bench/codec_cli_bench.py --kf build/kf [--rounds 7] [--files 1200] [--mb 50]
Not part of the tests (speed goals live in benchmarks; this machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY_ENCODE = r"""
import base64, json, os, sys
root, out = sys.argv[1], sys.argv[2]
files = {}
for d, dirs, names in os.walk(root):
    dirs.sort()
    for n in sorted(names):
        p = os.path.join(d, n)
        st = os.stat(p)
        with open(p, "rb") as f:
            files[os.path.relpath(p, root)] = {"content": base64.b64encode(f.read()).decode("ascii"),
                                               "mode": st.st_mode & 0o777, "mtime": st.st_mtime}
with open(out, "w") as f:
    json.dump({"task_data": files}, f)
"""

PY_DECODE = r"""
import base64, json, os, sys
src, root = sys.argv[1], sys.argv[2]
with open(src) as f:
    doc = json.load(f)
for rel, e in doc["task_data"].items():
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(base64.b64decode(e["content"]))
    os.chmod(p, e.get("mode") or 0o644)
    if e.get("mtime"):
        os.utime(p, (e["mtime"], e["mtime"]))
"""

TASK_PY = b"""import pytest
from kernelfoundry import TestBase
from kernel import f


class TestBig(TestBase):
    @pytest.mark.parametrize('v', [1, 2])
    def test_f(self, v):
        assert f(v) == v + 1

    @pytest.mark.performance
    def test_benchmark(self, measure_runtime):
        measure_runtime(f, lambda: None, args=(1,))
"""


def make_task(root: Path, n_files: int, total_mb: int) -> None:
    """Writes the generated package (deterministic: seed 42)."""
    def write(rel: str, data: bytes) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    write("config.yaml", b"task_name: big\njob_name: big_bench\ntask_origin: custom\nlanguage: python\n"
                         b"gpu_arch: cpu\nhas_build_step: false\nhas_reference_build_step: false\n")
    write("kernel.py", b"# [EVOLVE_START]\ndef f(x):\n    return x + 1\n# [EVOLVE_END]\n")
    write("task.py", TASK_PY)
    rng = random.Random(42)
    each = total_mb * 1_000_000 // n_files
    for i in range(n_files - 3):
        if i % 2 == 0:
            b = bytearray(rng.choices(b"abcdefghijklmnopqrstuvwxyz", k=each))
            b[80::81] = b"\n" * len(b[80::81])
            data = bytes(b)
        else:
            data = rng.randbytes(each)
        write(f"data/{i % 16:02d}/blob_{i:04d}.{'txt' if i % 2 == 0 else 'bin'}", data)


def timed(argv: list[str]) -> float:
    """Wall seconds of one process; raises when it fails. Dirty pages left by the previous step are written back
    first (os.sync), so no process pays for another's writeback."""
    os.sync()
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.decode(errors='replace')[-2000:]}")
    return took


def same_tree(a: Path, b: Path) -> bool:
    """True when both trees hold the same files with the same bytes."""
    def files(root: Path):
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    fa, fb = files(a), files(b)
    return fa == fb and all((a / r).read_bytes() == (b / r).read_bytes() for r in fa)


def summary(xs: list[float]) -> str:
    return f"min {min(xs):7.3f}  median {statistics.median(xs):7.3f}  max {max(xs):7.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kf", required=True, help="the kf binary")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--files", type=int, default=1200)
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--python", default="/usr/bin/python3")
    args = ap.parse_args()
    kf = str(Path(args.kf).resolve())
    work = Path(tempfile.mkdtemp(prefix="kf-codec-bench-"))
    try:
        task = work / "task"
        make_task(task, args.files, args.mb)
        enc_py, dec_py = work / "enc.py", work / "dec.py"
        enc_py.write_text(PY_ENCODE)
        dec_py.write_text(PY_DECODE)
        kf_json, py_json = work / "kf.json", work / "py.json"
        steps = {
            "kf encode": lambda r: timed([kf, "encode", str(task), "-o", str(kf_json)]),
            "py encode": lambda r: timed([args.python, str(enc_py), str(task), str(py_json)]),
            "kf decode": lambda r: timed([kf, "decode", str(kf_json), "-o", str(work / f"kf-out-{r}")]),
            "py decode": lambda r: timed([args.python, str(dec_py), str(py_json), str(work / f"py-out-{r}")]),
        }
        order = list(steps)
        times: dict[str, list[float]] = {k: [] for k in order}
        for r in range(args.rounds + 1):
            # encodes first (the decodes read their output), the pair order alternating per round
            enc = order[:2] if r % 2 == 0 else order[1::-1]
            dec = order[2:] if r % 2 == 0 else order[:1:-1]
            for name in enc + dec:
                t = steps[name](r)
                if r > 0:  # round 0 warms the page cache
                    times[name].append(t)
            if r == 0 and not (same_tree(task, work / "kf-out-0") and same_tree(task, work / "py-out-0")):
                raise SystemExit("a decode did not restore the task's files exactly")
            for side in ("kf", "py"):
                shutil.rmtree(work / f"{side}-out-{r}")
        print(f"codec end to end: {args.files} files, {args.mb} MB, {args.rounds} rounds (seconds, wall)")
        for name in order:
            print(f"  {name:10s} {summary(times[name])}")
        for what, keys in (("encode", ["encode"]), ("decode", ["decode"]), ("encode+decode", ["encode", "decode"])):
            ratios = [sum(times[f"py {k}"][i] for k in keys) / sum(times[f"kf {k}"][i] for k in keys)
                      for i in range(args.rounds)]
            print(f"  python/kf {what:14s} median {statistics.median(ratios):5.2f}x  "
                  f"range {min(ratios):5.2f}x-{max(ratios):5.2f}x")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
