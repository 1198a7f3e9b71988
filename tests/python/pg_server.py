"""A throwaway PostgreSQL server for the Python tests, as tests/store/pg_server.hpp starts one for the C++
tests: initdb + postgres from $KF_PG_BIN or the newest /usr/lib/postgresql/<v>/bin (run as user `postgres`
when this process is root), state in a temp dir, a free port on 127.0.0.1, password authentication
(scram-sha-256), fsync off; stopped (fast shutdown) by stop() or at interpreter exit.

    server = PgServer.start()          # raises PgUnavailable with the reason when it cannot run here
    url = server.url(server.new_database())
"""

from __future__ import annotations

import atexit
import ctypes
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional


class PgUnavailable(RuntimeError):
    """PostgreSQL cannot run here (no binaries, no postgres user, the server did not start)."""


def _bin_dir() -> Optional[Path]:
    if os.environ.get("KF_PG_BIN"):
        return Path(os.environ["KF_PG_BIN"])
    versions = sorted((p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()),
                      key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else -1)
    return versions[-1] if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One running server; databases are created on it with new_database()."""

    def __init__(self, base: Path, bin_dir: Path, user: Optional[pwd.struct_passwd]) -> None:
        self.base = base
        self.bin_dir = bin_dir
        self.password = "pw" + secrets.token_hex(8)
        self.port = 0
        self._user = user
        self._proc: Optional[subprocess.Popen] = None
        self._databases = 0

    def _demote(self):
        """preexec_fn of the server's processes: run as `postgres` (when root), die with this process."""
        uid_gid = (self._user.pw_uid, self._user.pw_gid) if self._user is not None else None

        def prepare():
            if uid_gid is not None:
                os.setgid(uid_gid[1])
                os.setuid(uid_gid[0])
            ctypes.CDLL(None).prctl(1, signal.SIGQUIT)  # PR_SET_PDEATHSIG (after setuid, which clears it)
        return prepare

    @classmethod
    def start(cls) -> "PgServer":
        bin_dir = _bin_dir()
        if bin_dir is None or not (bin_dir / "postgres").exists():
            raise PgUnavailable("PostgreSQL server binaries not found (apt-get install postgresql, or set KF_PG_BIN)")
        user = None
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError as e:
                raise PgUnavailable("running as root and there is no 'postgres' user to run the server as") from e
        base = Path(tempfile.mkdtemp(prefix="kf_pypg_"))
        server = cls(base, bin_dir, user)
        try:
            server._init_and_run()
        except Exception:
            server.stop()
            raise
        atexit.register(server.stop)
        return server

    def _init_and_run(self) -> None:
        if self._user is not None:
            os.chown(self.base, self._user.pw_uid, self._user.pw_gid)
        pwfile = self.base / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self._user is not None:
            os.chown(pwfile, self._user.pw_uid, self._user.pw_gid)
        r = subprocess.run([str(self.bin_dir / "initdb"), "-D", str(self.base / "data"), "-U", "postgres",
                            "-A", "scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8", "--no-locale", "--no-sync"],
                           capture_output=True, text=True, preexec_fn=self._demote(), cwd=self.base, timeout=120)
        if r.returncode != 0:
            raise PgUnavailable("initdb failed: " + (r.stdout + r.stderr)[-2000:])
        for _ in range(3):
            self.port = _free_port()
            log = open(self.base / "server.log", "ab")
            self._proc = subprocess.Popen(
                [str(self.bin_dir / "postgres"), "-D", str(self.base / "data"), "-p", str(self.port), "-k",
                 str(self.base), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c",
                 "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=100"],
                stdout=log, stderr=log, preexec_fn=self._demote(), cwd=self.base)
            log.close()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self._proc.poll() is None:
                if self._ready():
                    return
                time.sleep(0.05)
            self._kill()
        raise PgUnavailable("the server did not start: " + (self.base / "server.log").read_text()[-2000:])

    def _ready(self) -> bool:
        import psycopg2
        try:
            psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", password=self.password,
                             dbname="postgres", connect_timeout=2).close()
            return True
        except psycopg2.OperationalError:
            return False

    def url(self, database: str, driver: str = "") -> str:
        """postgresql[+driver]://postgres:<password>@127.0.0.1:<port>/<database>"""
        scheme = "postgresql+" + driver if driver else "postgresql"
        return f"{scheme}://postgres:{self.password}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """Creates a fresh database and returns its name."""
        import psycopg2
        self._databases += 1
        name = f"kf_py_{self._databases}"
        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", password=self.password,
                                dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {name}")
        conn.close()
        return name

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self._proc.wait(15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def stop(self) -> None:
        """Stops the server and removes its directory (idempotent)."""
        self._kill()
        shutil.rmtree(self.base, ignore_errors=True)
