"""The reference MCP server's HTTP calls (kernelfoundry/mcp_server/server.py in server mode), made with Debian's
python3-requests against `kf serve --submit` (ctest SubmitApiReferenceClient):

    zip the task folder (without .kernelfoundry/) -> POST /api/validate_job (file, idsid[, parent_uuid])
    -> poll GET /api/job/{id} -> GET /api/kernels_by_job?job_id= -> GET /api/kernels/{id}/eval_log

with a bearer token, then the refusals a client meets: 401 without or with a wrong token, 404 for another user's
job, 413 for an archive over the limit, 429 beyond the request rate.

    /usr/bin/python3 reference_client.py KF_BIN TASK_DIR WORK_DIR
"""

import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import requests

TERMINAL = {"COMPLETE", "FAIL", "CANCELED", "VALIDATED"}


def zip_folder(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for root, _dirs, files in os.walk(folder):
            if Path(root).relative_to(folder).parts[:1] == (".kernelfoundry",):
                continue
            for name in files:
                p = Path(root) / name
                zf.write(p, arcname=p.relative_to(folder).as_posix())
    return buf.getvalue()


class KfServe:
    """`kf serve --submit` on a free port; stopped (SIGTERM) on exit."""

    def __init__(self, kf, db, *args):
        self.proc = subprocess.Popen([kf, "serve", "--submit", "--db", str(db), "--port", "0", *args],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("kf serve: http"), line
        self.url = line.split()[2].rstrip("/")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def token(kf, db, user):
    return subprocess.run([kf, "token", "add", user, "--db", str(db)], check=True, capture_output=True,
                          text=True).stdout.strip()


def build_and_test(url, user, tok, folder, parent=None):
    """The reference's _run_server_job for /api/validate_job, step by step."""
    headers = {"Authorization": f"Bearer {tok}"}
    data = {"idsid": user, "parent_uuid": parent} if parent else {"idsid": user}
    r = requests.post(f"{url}/api/validate_job", headers=headers, data=data,
                      files={"file": (f"{folder.name}.zip", zip_folder(folder), "application/zip")}, timeout=120)
    assert r.status_code == 200, (r.status_code, r.text)
    job_id = r.json()["job_id"]
    deadline = time.monotonic() + 300
    while True:
        job = requests.get(f"{url}/api/job/{job_id}", headers=headers, timeout=60)
        job.raise_for_status()
        if job.json()["status"] in TERMINAL:
            break
        assert time.monotonic() < deadline, "job did not finish"
        time.sleep(0.5)
    kernels = requests.get(f"{url}/api/kernels_by_job", headers=headers, params={"job_id": job_id}, timeout=60)
    kernels.raise_for_status()
    kernels = kernels.json()["kernels"]
    assert len(kernels) == 1, kernels
    log = requests.get(f"{url}/api/kernels/{kernels[0]['id']}/eval_log", headers=headers, timeout=60)
    assert log.status_code == 200, log.text
    return job_id, job.json()["status"], kernels[0], log.json()


def main():
    kf, task, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    db = work / "kernels.sqlite3"
    alice, bob = token(kf, db, "alice"), token(kf, db, "bob")
    with KfServe(kf, db, "--max-archive-mb", "0.5", "--rpm", "600") as s:
        job, status, kernel, log = build_and_test(s.url, "alice", alice, task)
        print(f"job {job}: {status}, kernel {kernel['uuid']}: {log['status']} speedup {log['speedup']} "
              f"CI {log['speedup_ci']}")
        assert status == "COMPLETE"
        assert log["status"] in ("correct", "noisy"), log["status"]
        assert isinstance(log["speedup"], float) and log["eval_log"] and isinstance(log["runtime_stats"], dict)
        assert kernel["db_user"] == "alice"
        # The next evaluation names the first as its parent, as the reference's client does from kernels.json.
        job2, status2, kernel2, _ = build_and_test(s.url, "alice", alice, task, parent=kernel["uuid"])
        assert status2 == "COMPLETE" and kernel2["parent_uuid"] == kernel["uuid"], kernel2
        # kf results --lineage shows the chain.
        lineage = json.loads(subprocess.run([kf, "results", "--db", str(db), "--lineage", kernel2["uuid"], "--json"],
                                            check=True, capture_output=True, text=True).stdout)
        assert [a["uuid"] for a in lineage["ancestors"]] == [kernel["uuid"]], lineage
        table = subprocess.run([kf, "results", "--db", str(db), "--lineage", kernel2["uuid"]], check=True,
                               capture_output=True, text=True).stdout
        assert "root" in table and "<- this kernel" in table, table
        # Refusals.
        assert requests.get(f"{s.url}/api/job/{job}", timeout=30).status_code == 401
        assert requests.get(f"{s.url}/api/job/{job}", headers={"Authorization": "Bearer kf_nope"},
                            timeout=30).status_code == 401
        bob_h = {"Authorization": f"Bearer {bob}"}
        assert requests.get(f"{s.url}/api/job/{job}", headers=bob_h, timeout=30).status_code == 404
        assert requests.get(f"{s.url}/api/kernels/{kernel['id']}/eval_log", headers=bob_h,
                            timeout=30).status_code == 404
        big = requests.post(f"{s.url}/api/validate_job", headers=bob_h, data={"idsid": "bob"},
                            files={"file": ("big.zip", os.urandom(600 * 1024), "application/zip")}, timeout=60)
        assert big.status_code == 413, (big.status_code, big.text)
    with KfServe(kf, db, "--rpm", "5") as s:
        codes = [requests.get(f"{s.url}/api/whoami", headers={"Authorization": f"Bearer {bob}"},
                              timeout=30).status_code for _ in range(7)]
        assert codes[:5] == [200] * 5 and codes[5:] == [429, 429], codes
    # Beyond loopback the API needs HTTPS or an explicit --insecure.
    r = subprocess.run([kf, "serve", "--submit", "--db", str(db), "--host", "0.0.0.0", "--port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "--insecure" in r.stderr, (r.returncode, r.stderr)
    # HTTPS (cpp-httplib over OpenSSL) with a self-signed certificate.
    cert, key = work / "cert.pem", work / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    with KfServe(kf, db, "--tls-cert", str(cert), "--tls-key", str(key)) as s:
        assert s.url.startswith("https://"), s.url
        r = requests.get(f"{s.url}/api/whoami", headers={"Authorization": f"Bearer {alice}"}, verify=str(cert),
                         timeout=30)
        assert r.status_code == 200 and r.json()["user"] == "alice", r.text
    print("reference client flow against kf serve --submit: ok")


if __name__ == "__main__":
    main()
