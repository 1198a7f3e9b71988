"""Load of kf serve's submission API (issue 26): N users submit M task packages each to one `kf serve --submit`
on 127.0.0.1 as fast as the server lets them (a 429 is answered by waiting its Retry-After), then every job is
polled to its end. Bounded: gives up after --deadline seconds (then exits 1). Checks that every accepted job is
accounted for (ends COMPLETE with exactly one kernel of its user), that no user ever had more jobs active than
--max-active (the server answered 429 instead), and that users cannot read each other's jobs. Prints
submissions/s, the 429 count and the time from the first submission to the last verdict.

Each user submits the test task tests/mcp/py_sum_squares with a candidate of its own (timed alone, without the
reference), so the verdict cache (kf run's) serves all but the first evaluations per user: the bench measures
the API, queue and pool around the evaluations, not the evaluations.

    /usr/bin/python3 bench/submit_load.py --kf build/kf [--users 4] [--per-user 50] [--max-active 10]
"""

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import requests

TERMINAL = {"COMPLETE", "FAIL", "CANCELED", "VALIDATED"}
TASK = Path(__file__).resolve().parent.parent / "tests" / "mcp" / "py_sum_squares"


def package(user_index):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in sorted(TASK.iterdir()):
            text = p.read_text()
            if p.name == "kernel.py":  # a candidate per user (the same value, a different program)
                text = text.replace("total = 0.0", f"total = 0.0 * {user_index + 1}")
            if p.name == "config.yaml":  # the candidate timed alone: a verdict that is never "noisy", so cached
                text = text.replace("test_reference: true", "test_reference: false")
            zf.writestr(p.name, text)
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kf", required=True)
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--per-user", type=int, default=50)
    ap.add_argument("--max-active", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--deadline", type=float, default=900)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kf_submit_load_"))
    db = work / "kernels.sqlite3"
    users = [f"user{i}" for i in range(a.users)]
    tokens = {u: subprocess.run([a.kf, "token", "add", u, "--db", str(db)], check=True, capture_output=True,
                                text=True).stdout.strip() for u in users}
    env = dict(os.environ, KF_CACHE_DIR=str(work / "cache"))
    server = subprocess.Popen([a.kf, "serve", "--submit", "--db", str(db), "--port", "0", "-j", str(a.jobs),
                               "--max-active", str(a.max_active), "--rpm", "100000"],
                              stdout=subprocess.PIPE, stderr=open(work / "serve.log", "w"), text=True, env=env)
    url = server.stdout.readline().split()[2].rstrip("/")
    deadline = time.monotonic() + a.deadline
    jobs = {u: [] for u in users}
    refused = {u: 0 for u in users}
    errors = []

    def submitter(i, user):
        h = {"Authorization": f"Bearer {tokens[user]}"}
        zip_bytes = package(i)
        while len(jobs[user]) < a.per_user and time.monotonic() < deadline:
            r = requests.post(f"{url}/api/validate_job", headers=h, data={"idsid": user},
                              files={"file": ("task.zip", zip_bytes, "application/zip")}, timeout=120)
            if r.status_code == 429:
                refused[user] += 1
                time.sleep(min(float(r.headers.get("Retry-After", "1")), 2.0))
                continue
            if r.status_code != 200:
                errors.append(f"{user}: HTTP {r.status_code}: {r.text[:200]}")
                return
            jobs[user].append(r.json()["job_id"])

    t0 = time.monotonic()
    threads = [threading.Thread(target=submitter, args=(i, u)) for i, u in enumerate(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t_submitted = time.monotonic()
    ok = not errors
    status = {}
    for user in users:
        h = {"Authorization": f"Bearer {tokens[user]}"}
        for job in jobs[user]:
            while True:
                s = requests.get(f"{url}/api/job/{job}", headers=h, timeout=60).json()["status"]
                if s in TERMINAL or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            status[job] = s
            k = requests.get(f"{url}/api/kernels_by_job", headers=h, params={"job_id": job}, timeout=60).json()
            if s != "COMPLETE" or len(k["kernels"]) != 1 or k["kernels"][0]["db_user"] != user:
                errors.append(f"job {job} of {user}: {s}, {len(k['kernels'])} kernel(s)")
    t_done = time.monotonic()
    # Isolation: one user asks for another's first job.
    if len(users) > 1 and jobs[users[0]]:
        r = requests.get(f"{url}/api/job/{jobs[users[0]][0]}", headers={"Authorization": f"Bearer {tokens[users[1]]}"},
                         timeout=30)
        if r.status_code != 404:
            errors.append(f"{users[1]} read {users[0]}'s job: HTTP {r.status_code}")
    server.terminate()
    server.wait(timeout=60)
    shutil.rmtree(work, ignore_errors=True)
    total = sum(len(v) for v in jobs.values())
    want = a.users * a.per_user
    print(f"submissions: {total}/{want} accepted in {t_submitted - t0:.1f} s ({total / max(t_submitted - t0, 1e-9):.1f}/s), "
          f"429 answers: {sum(refused.values())} (max active per user {a.max_active})")
    print(f"all {total} jobs ended after {t_done - t0:.1f} s: "
          + ", ".join(f"{s} {list(status.values()).count(s)}" for s in sorted(set(status.values()))))
    if total != want:
        errors.append(f"only {total} of {want} submissions were accepted before the deadline")
    for e in errors[:20]:
        print("ERROR:", e)
    print("submit load: " + ("ok" if not errors else f"{len(errors)} problem(s)"))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
