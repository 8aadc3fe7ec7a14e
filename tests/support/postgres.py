"""A real PostgreSQL for the tests: its own cluster in a temporary directory, on a loopback port.

The command center can keep its fleet in PostgreSQL; its tests use a server they start themselves,
never one of the machine's: ``initdb`` into a temporary directory, then ``pg_ctl start`` with the
server listening on 127.0.0.1 only, at a free port, with its Unix socket in that directory. A
password (SCRAM) is set at ``initdb``, so another local user on the machine cannot connect. PostgreSQL
refuses to run as root: run as root (as CI is), the cluster is made and run as the ``postgres`` user.

Durability is traded for speed (``fsync``, ``synchronous_commit`` and ``full_page_writes`` off): the
cluster lives only as long as the test run.

    pg = Postgres().start()
    dsn = pg.create_database("center_a")   # postgresql://agent_hooks:...@127.0.0.1:PORT/center_a
    ...
    pg.stop()
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from support.ports import free_port

USER = "agent_hooks"


def bindir() -> str | None:
    """Where PostgreSQL's server programs are (the newest ``/usr/lib/postgresql/N/bin``, else ``pg_config
    --bindir``), or None when there is no server here."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return os.path.dirname(found[-1])
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        if out and os.path.exists(os.path.join(out, "initdb")):
            return out
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


class Postgres:
    """A PostgreSQL cluster of the tests' own (see the module docstring)."""

    def __init__(self) -> None:
        # Its own directory in the system's temporary one, not a test's tmp_path: when run as root, the
        # postgres user must reach it, and pytest's directories are root's only (0700).
        self.root = Path(tempfile.mkdtemp(prefix="agent-hooks-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.password = secrets.token_urlsafe(24)
        self.bin = bindir()
        self._as: list[str] = []

    def _run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*self._as, *argv], capture_output=True, text=True, timeout=timeout, check=False,
                              cwd=str(self.root), env={**os.environ, "PGPASSWORD": self.password, "LC_ALL": "C"})
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}\n"
                               + self.log())
        return done

    def log(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def start(self) -> Postgres:
        if self.bin is None:
            pytest.skip("PostgreSQL's server (initdb) is not installed: apt-get install postgresql")
        if os.geteuid() == 0:  # PostgreSQL will not run as root: the cluster is the postgres user's
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip("running as root, and there is no postgres user to run PostgreSQL as")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as = ["setpriv", f"--reuid={owner.pw_uid}", f"--regid={owner.pw_gid}", "--init-groups", "--"]
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        os.chmod(pwfile, 0o600)
        if self._as:
            os.chown(pwfile, owner.pw_uid, owner.pw_gid)
        self._run(f"{self.bin}/initdb", "-D", str(self.data), "-U", USER, f"--pwfile={pwfile}",
                  "--auth=scram-sha-256", "--encoding=UTF8", "--no-sync")
        pwfile.unlink()
        options = " ".join([
            "-c listen_addresses=127.0.0.1", f"-c port={self.port}", f"-c unix_socket_directories={self.root}",
            "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off", "-c max_connections=200",
        ])
        self._run(f"{self.bin}/pg_ctl", "start", "-D", str(self.data), "-w", "-t", "60", "-o", options,
                  "-l", str(self.root / "server.log"))
        return self

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new, empty database; its DSN."""
        self._run(f"{self.bin}/createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, name)
        return self.dsn(name)

    def sql(self, statement: str, database: str = "postgres") -> str:
        """One statement through psql (unaligned, no headers): its output."""
        return self._run(f"{self.bin}/psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", self.dsn(database),
                         "-c", statement).stdout.strip()

    def halt(self) -> None:
        """Stop the server at once (``-m immediate``), keeping its directory: it is down until started."""
        self._run(f"{self.bin}/pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w", timeout=30)

    def stop(self) -> None:
        """Stop the server (at once: nothing in it is kept) and remove its directory."""
        if self.bin is not None and (self.data / "postmaster.pid").exists():
            try:
                self._run(f"{self.bin}/pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w", timeout=30)
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.root, ignore_errors=True)
