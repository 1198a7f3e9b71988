#!/usr/bin/python3
"""kernelfoundry.eval_pipeline from Python: with_blocks, encode/decode and cached Task.create, timed in one run
against two baselines, printed as ratios:
  * the Python reference's recorded micro timings (shared/fixtures/golden/micro_timings.json, its machine);
  * a pure-Python equivalent of the same operation measured here, in this interpreter (dicts of bytes, base64 +
    json, line-based block rewriting and re-extraction, os.walk + PyYAML, a JSON test-list cache).
Goal (issue 12): with_blocks at least 5x faster than the reference's 0.30 ms.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/py_api_bench.py [--shared ../shared] [--quick]
Not part of the tests.
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from kernelfoundry.eval_pipeline.task import Task

# ------------------------------------------------------------------ pure-Python equivalents (baseline only)
KEYS = ("REFERENCE", "EVOLVE", "USER_INSTRUCTIONS")
BLOCK_EXT = (".sycl", ".cu", ".cpp", ".cxx", ".cc", ".c", ".hpp", ".hxx", ".hh", ".h", ".inl", ".py", ".md", ".txt",
             ".cl", ".yml", ".yaml", ".sh", ".ps1", ".json", ".toml", ".ini", ".cfg", ".cmake", ".bat", ".cmd")


def py_get_block(text: str, key: str) -> list:
    start, end = f"[{key}_START]", f"[{key}_END]"
    blocks, cur = [], None
    for line in text.splitlines(keepends=True):
        if start in line:
            if cur is not None:
                raise ValueError(f"Nested {start}")
            cur = []
        elif end in line:
            if cur is None:
                raise ValueError(f"{end} found without matching {start}")
            while cur and not cur[0].strip():
                cur.pop(0)
            while cur and not cur[-1].strip():
                cur.pop()
            blocks.append("".join(cur))
            cur = None
        elif cur is not None:
            cur.append(line)
    return blocks


def py_all_blocks(files: dict) -> dict:
    out = {}
    texts = {p: files[p]["data"].decode() for p in sorted(files) if p.endswith(BLOCK_EXT)}
    for key in KEYS:
        per = {p: b for p, t in texts.items() if (b := py_get_block(t, key))}
        if per:
            out[key] = per
    return out


def py_update_block(files: dict, key: str, path: str, content: str, index: int) -> None:
    lines = files[path]["data"].decode().splitlines(keepends=True)
    start, end = f"[{key}_START]", f"[{key}_END]"
    spans, i = [], 0
    while i < len(lines):
        if start in lines[i]:
            j = next(k for k in range(i + 1, len(lines)) if end in lines[k])
            spans.append((i, j))
            i = j
        i += 1
    s, e = spans[index]
    new = "".join(lines[:s + 1]) + content + ("" if content.endswith("\n") else "\n") + "".join(lines[e:])
    files[path] = {**files[path], "data": new.encode(), "mtime": time.time()}


def py_with_blocks(task: dict, blocks: dict) -> dict:
    files = dict(task["files"])
    for key, value in blocks.items():
        if isinstance(value, str):
            (path,) = task["blocks"][key]
            py_update_block(files, key, path, value, 0)
        else:
            for path, contents in value.items():
                for i, c in enumerate(contents):
                    py_update_block(files, key, path, c, i)
    out = {k: v for k, v in task.items() if k not in ("files", "blocks")}
    out.update(files=files, blocks=py_all_blocks(files), extract_code_result={
        "returncode": 0, "stdout": "", "stderr": "", "message": "Code blocks have been modified successfully.",
        "output_data": None})
    return out


def py_encode(task: dict) -> str:
    data = {p: {"content": base64.b64encode(f["data"]).decode(), "mode": f["mode"], "mtime": f["mtime"]}
            for p, f in task["files"].items()}
    enc = {"task_data": data, **{k: v for k, v in task.items() if k not in ("files",)}}
    return json.dumps(enc)


def py_decode(text: str) -> dict:
    enc = json.loads(text)
    files = {p: {"data": base64.b64decode(e["content"]), "mode": e.get("mode"), "mtime": e.get("mtime")}
             for p, e in enc.pop("task_data").items()}
    return {"files": files, **enc}


def py_create(root: Path, cache_dir: Path) -> dict:
    files = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", ".git"))
        for name in sorted(filenames):
            p = Path(dirpath) / name
            st = p.stat()
            files[p.relative_to(root).as_posix()] = {"data": p.read_bytes(), "mode": st.st_mode & 0o777,
                                                     "mtime": st.st_mtime}
    config = yaml.safe_load(files["config.yaml"]["data"])
    for old, new in (("run_name", "job_name"), ("Op_Name", "task_name")):
        if old in config and new not in config:
            config[new] = config.pop(old)
    key = hashlib.sha256(b"".join(p.encode() + f["data"] for p, f in files.items() if p.endswith(".py"))).hexdigest()
    cached = cache_dir / f"{key}.json"
    if not cached.exists():
        raise RuntimeError("the pure-Python baseline expects a warm test-list cache")
    tests = json.loads(cached.read_text())
    return {"files": files, "config": config, "blocks": py_all_blocks(files), **tests,
            "has_build_step": config.get("has_build_step", True),
            "has_reference_build_step": config.get("has_reference_build_step", True)}


# ------------------------------------------------------------------ timing
def median_s(fn, n: int) -> float:
    fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def copy_fixture(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    for dirpath, dirs, files in os.walk(dest):
        os.chmod(dirpath, 0o755)
        for f in files:
            os.chmod(Path(dirpath) / f, 0o644)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    repo = Path(__file__).resolve().parents[1]
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("KF_SHARED_DIR") or repo.parent / "shared"))
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    golden = args.shared / "fixtures" / "golden"
    ref = json.loads((golden / "micro_timings.json").read_text())
    scale = 0.2 if args.quick else 1.0
    n_fast, n_create = max(20, int(1000 * scale)), max(5, int(50 * scale))

    tmp = Path(tempfile.mkdtemp(prefix="kf_py_api_bench_"))
    try:
        relu_dir = copy_fixture(args.shared / "fixtures" / "tasks" / "relu_cpu", tmp / "relu_cpu")
        relu, _ = Task.create(relu_dir)  # the first create collects the tests (cached afterwards)
        multi = Task.decode(json.loads((golden / "multi_block.json").read_text())["encode"])
        wb = json.loads((golden / "with_blocks.json").read_text())
        relu_arg = wb["relu_string_evolve"]["blocks_arg"]
        multi_arg = wb["multi_block_dict"]["blocks_arg"]

        relu_py = py_decode(json.dumps(relu.encode()))
        multi_py = py_decode(json.dumps(multi.encode()))
        cache = tmp / "py_cache"
        cache.mkdir()
        py_files = {p: relu.task_data[p] for p in relu.task_data.list_files()}
        key = hashlib.sha256(b"".join(p.encode() + d for p, d in py_files.items() if p.endswith(".py"))).hexdigest()
        (cache / f"{key}.json").write_text(json.dumps({"correctness_tests": relu.correctness_tests,
                                                       "profile_tests": relu.profile_tests}))
        relu_json = json.dumps(relu.encode())
        relu_py_json = py_encode(relu_py)
        # sanity: the baselines do the same work
        assert py_with_blocks(relu_py, relu_arg)["blocks"] == relu.with_blocks(relu_arg).blocks
        assert py_with_blocks(multi_py, multi_arg)["blocks"] == multi.with_blocks(multi_arg).blocks
        assert py_create(relu_dir, cache)["blocks"] == relu.blocks

        rows = [
            ("with_blocks(relu_cpu, string)", "with_blocks(relu_cpu, string)",
             lambda: relu.with_blocks(relu_arg), lambda: py_with_blocks(relu_py, relu_arg), n_fast),
            ("with_blocks(multi_block, dict)", "with_blocks(multi_block, dict)",
             lambda: multi.with_blocks(multi_arg), lambda: py_with_blocks(multi_py, multi_arg), n_fast),
            ("encode+json.dumps(relu_cpu)", "encode+json.dumps(relu_cpu)",
             lambda: json.dumps(relu.encode()), lambda: py_encode(relu_py), n_fast),
            ("json.loads+Task.decode(relu_cpu)", "json.loads+Task.decode(relu_cpu)",
             lambda: Task.decode(json.loads(relu_json)), lambda: py_decode(relu_py_json), n_fast),
            ("Task.create(relu_cpu), tests cached", "Task.create(relu_cpu)",
             lambda: Task.create(relu_dir), lambda: py_create(relu_dir, cache), n_create),
        ]
        print(f"kernelfoundry.eval_pipeline from Python {sys.version.split()[0]} — median times; "
              f"reference = its recorded timings (micro_timings.json, {ref['machine']}); "
              "pure Python = the same operation in plain Python, measured now")
        header = f"{'operation':38} {'ours':>10} {'reference':>10} {'ref/ours':>9} {'pure Py':>10} {'py/ours':>8}"
        print(header)
        print("-" * len(header))
        results = {}
        for label, ref_key, ours_fn, py_fn, n in rows:
            ours = median_s(ours_fn, n)
            pure = median_s(py_fn, n)
            reference = ref[ref_key]["median_s"]
            results[label] = (ours, reference, pure)
            print(f"{label:38} {fmt(ours):>10} {fmt(reference):>10} {reference / ours:8.1f}x {fmt(pure):>10} "
                  f"{pure / ours:7.1f}x")
        ours, reference, _ = results["with_blocks(relu_cpu, string)"]
        goal = reference / ours >= 5.0
        print(f"\ngoal with_blocks >= 5x faster than the reference's {reference * 1e3:.2f} ms: "
              f"{'met' if goal else 'NOT met'} ({reference / ours:.1f}x)")
        return 0 if goal else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fmt(seconds: float) -> str:
    if seconds >= 0.1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-4:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


if __name__ == "__main__":
    sys.exit(main())
