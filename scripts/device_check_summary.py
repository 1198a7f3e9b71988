"""Summary of scripts/device-check.sh: reads the cases table (name, expectation, exit code, seconds, task) and
each case's `kf run --json` document, judges the expectation and writes summary.txt (a table: status, speedup
with its 95 % interval, time, device conditions) and summary.json. Exit 0 when every case met its expectation.

Usage: device_check_summary.py OUT_DIR CASES_TSV DRY_RUN(yes|no)
Expectations: identical (correct or noisy), faster (correct or noisy, speedup > 1), honest (correct or noisy, and
no faster than the task's fast case x 1.25: the side-stream work was timed), output_changed_under_timing (that
status or detail), no_gain (a cheat that either was caught under timing: output_changed_under_timing or
suspicious, or gained nothing: correct or noisy and honest as above), profiled (correct or noisy, an ncu trace in
test_result.trace_results), valid (exit 0), input (a step that prepares a case's input: exit 0). A case the
check's deadline left no time for has exit code -1 and does not meet its expectation."""

import json
import sys
from pathlib import Path

OK_FAMILY = ("correct", "noisy")


def first_paired(doc: dict) -> dict:
    """The first benchmark's paired record of the first arch (result.timing.paired), or {}."""
    paired = ((doc.get("result") or {}).get("timing") or {}).get("paired") or {}
    return next(iter(paired.values()), {}) if isinstance(paired, dict) else {}


def device_of(doc: dict) -> dict:
    cond = ((doc.get("result") or {}).get("timing") or {}).get("conditions") or {}
    return cond.get("device") or {}


def traces(doc: dict) -> list:
    """The profiler passes of the candidate's run that produced data: "<key> ok" or "<key> failed: why"."""
    out = []
    for key, run in sorted(((doc.get("test_result") or {}).get("trace_results") or {}).items()):
        data = (run or {}).get("output_data") or {}
        good = run.get("returncode") == 0 and data.get("available", True) and len(data) > 0
        out.append(f"{key} ok" if good else f"{key} failed: {str(run.get('message'))[:120]}")
    return out


def judge(row: dict, fast_speedup: dict) -> tuple:
    """(met, why) for one case."""
    expect, status, speedup = row["expect"], row["status"], row["speedup"]
    text = f"{status} {row['detail']}"
    if row["exit"] == -1:
        return False, "not run: the check's deadline was reached"
    if expect in ("valid", "input"):
        return row["exit"] == 0, f"exit {row['exit']}"
    if expect == "output_changed_under_timing":
        return "output_changed_under_timing" in text, status
    if expect == "no_gain" and ("output_changed_under_timing" in text or status == "suspicious"):
        return True, f"caught: {status}"
    if status not in OK_FAMILY:
        return False, f"status {status}"
    if expect == "faster":
        return speedup is not None and speedup > 1.0, f"speedup {speedup}"
    if expect in ("honest", "no_gain"):
        ref = fast_speedup.get(row["task"])
        if ref is None or speedup is None:
            return True, "no fast case to compare with"
        return speedup <= ref * 1.25, f"speedup {speedup:.3f} vs fast {ref:.3f}"
    if expect == "profiled":
        ncu = [t for t in row["traces"] if t.startswith("ncu") and t.endswith(" ok")]
        return bool(ncu), f"traces {row['traces']}"
    return True, status  # identical: correct or noisy; the interval is reported


def main() -> int:
    out, cases, dry = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "yes"
    rows = []
    for line in cases.read_text().splitlines():
        name, expect, rc, seconds, task = line.split("\t")
        doc = {}
        path = out / f"{name}.json"
        if path.exists():
            try:
                doc = json.loads(path.read_text())
            except ValueError as e:
                doc = {"status": f"unreadable json ({e})"}
        rec = first_paired(doc)
        rows.append({"name": name, "expect": expect, "exit": int(rc), "seconds": int(seconds), "task": task,
                     "status": doc.get("status", "-" if expect in ("valid", "input") else "no result"),
                     "detail": str(doc.get("status_detail") or "")[:300], "speedup": rec.get("speedup"),
                     "ci": rec.get("ci"), "rounds": rec.get("rounds"), "traces": traces(doc),
                     "device": device_of(doc)})
    fast = {r["task"]: r["speedup"] for r in rows if r["expect"] == "faster" and r["speedup"] is not None}
    for r in rows:
        r["met"], r["why"] = judge(r, fast)
    lines = [f"device check ({'dry run, CPU tasks' if dry else 'GPU'}): "
             f"{sum(r['met'] for r in rows)} of {len(rows)} cases met their expectation", "",
             f"{'case':24} {'expect':28} {'status':28} {'speedup [95 % CI]':28} {'s':>4}  ok"]
    for r in rows:
        ci = r["ci"]
        sp = f"{r['speedup']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if r["speedup"] is not None and ci else "-"
        lines.append(f"{r['name']:24} {r['expect']:28} {r['status'][:28]:28} {sp:28} {r['seconds']:>4}  "
                     f"{'yes' if r['met'] else 'NO: ' + r['why']}")
    ident = [r["speedup"] for r in rows if r["expect"] == "identical" and r["speedup"] is not None
             and r["task"] == "cuda_bias_relu_torch"]
    if len(ident) > 1:
        lines += ["", f"identical candidate over {len(ident)} runs: speedups {', '.join(f'{s:.3f}' for s in ident)}"
                      f" (spread {max(ident) - min(ident):.3f})"]
    devices = {json.dumps(r["device"], sort_keys=True) for r in rows if r["device"].get("type") not in (None, "host")}
    for d in sorted(devices):
        lines += ["", "device conditions: " + d]
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps({"dry_run": dry, "cases": rows}, indent=1) + "\n")
    print("\n".join(lines))
    return 0 if all(r["met"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
