"""`agent-hook doctor`'s "center" lines: where the command center keeps the fleet ([center] database).

Against a real PostgreSQL the tests start (support/postgres.py) and a real command center on it: the
database reachable, then not (its server stopped); a migration missing, named; the running server's
listener connected (its /status), then not; and a password in a config.toml others can read, with
doctor run as an ordinary user (nobody, when the tests run as root) and the password moved to a 0600
file as the warning says. doctor runs as the installed console script.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from agent_hooks import schema
from agent_hooks.center import fleetstore

from support.center import Center
from support.postgres import Postgres
from support.scripts import BIN
from support.servers import NOBODY, unreachable_by_others
from support.waiting import wait_for


def doctor(env: dict[str, str], prefix: list[str] | None = None) -> tuple[list[dict[str, Any]], str]:
    """doctor's "center" lines (--json, no synthetic run), and everything it printed."""
    proc = subprocess.run([*(prefix or []), str(BIN / "agent-hook"), "doctor", "--json", "--no-run"],
                          capture_output=True, text=True, env=env, timeout=120)
    report = json.loads(proc.stdout)
    return [c for c in report["checks"] if c["area"] == "center"], proc.stdout + proc.stderr


def plain_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
    (tmp_path / "user").mkdir(exist_ok=True)
    env.update(HOME=str(tmp_path / "user"), AGENT_HOOKS_HOME=str(tmp_path / "state"), **extra)
    return env


def test_without_a_database_one_line_says_the_embedded_sqlite_store(tmp_path: Path) -> None:
    env = plain_env(tmp_path)
    [line], _ = doctor(env)
    assert line["status"] == "ok" and "the fleet is in the embedded SQLite store" in line["summary"]
    assert str(tmp_path / "state" / "store.db") in line["summary"]
    # A value that is not PostgreSQL's is not quietly taken for the embedded store.
    # It says what config load says (which refuses it), and what the command center does meanwhile.
    proc = subprocess.run([str(BIN / "agent-hook"), "doctor", "--json", "--no-run"], capture_output=True, text=True,
                          env={**env, "AGENT_HOOKS__CENTER__DATABASE": "mysql://fleet@db/fleet"}, timeout=120)
    checks = json.loads(proc.stdout)["checks"]
    refused = ("center.database must be empty (the host's SQLite store) or a postgresql:// or postgres:// URL,"
               " got 'mysql://fleet@db/fleet'")
    [line] = [c for c in checks if c["area"] == "center"]
    assert line["status"] == "fail" and line["summary"].startswith(f"{refused}: the command center keeps"), line
    assert any(c["area"] == "config" and c["status"] == "fail" and refused in c["summary"] for c in checks), checks


def test_reachable_migrated_listening_then_a_missing_migration_then_postgresql_stopped(tmp_path: Path) -> None:
    pg = Postgres().start()  # a cluster of this test's own: it is stopped
    try:
        url = pg.create_database("fleet")
        env = plain_env(tmp_path, AGENT_HOOKS__CENTER__DATABASE=url)
        # An empty database: reachable, none of the named migrations applied (no server to check).
        [line], _ = doctor(env)
        assert line["status"] == "fail" and line["data"]["missing"] == schema.MIGRATIONS, line
        assert f"{len(schema.MIGRATIONS)} of the {len(schema.MIGRATIONS)} migrations not applied" in line["summary"]
        assert "agent-hook server start" in line["fix"]

        center = Center(tmp_path / "center", env={"AGENT_HOOKS__FLEET__HOST": "center",
                                                  "AGENT_HOOKS__CENTER__DATABASE": url}).start()
        try:
            # The center migrated it at start; its listener is connected and hears the fleet's commits.
            assert center.ingest({"tmux_session": "agent-1", "event": "start"}, key="k1").status_code == 200
            wait_for(lambda: center_status(center)["listener"]["notifications"] > 0,
                     what="the listener hearing the card's commit", show=lambda: center_status(center))
            lines, out = doctor(center.env)
            assert [c["status"] for c in lines] == ["ok", "ok"], lines
            reach, listen = lines
            assert reach["summary"] == (f"the fleet's PostgreSQL at {fleetstore.describe(url)}: reachable, all"
                                        f" {len(schema.MIGRATIONS)} migrations applied")
            assert "connected since" in listen["summary"] and listen["data"]["listener"]["notifications"] > 0
            assert pg.password not in out and ":***@" in reach["summary"]
            said = center.cli("status").stdout
            assert f"fleet in PostgreSQL {fleetstore.describe(url)}: listener connected since" in said, said

            # One migration's record gone: doctor names that one, and the fix it names mends it.
            gone = schema.MIGRATIONS[len(schema.MIGRATIONS) // 2]
            pg.sql(f"DELETE FROM _migrations WHERE name = '{gone}'", "fleet")
            [line, _listen], _ = doctor(center.env)
            assert line["status"] == "fail" and line["data"]["missing"] == [gone], line
            assert f"1 of the {len(schema.MIGRATIONS)} migrations not applied ({gone})" in line["summary"]
            center.stop()
            center.start()
            [line, _listen], _ = doctor(center.env)
            assert line["status"] == "ok", line

            # The listener's connection cut: it reconnects by itself, and says it did.
            pg.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                   " WHERE application_name = 'agent-hooks center listener'")
            wait_for(lambda: center_status(center)["listener"]["reconnects"] == 1
                     and center_status(center)["listener"]["connected"], what="the listener back",
                     show=lambda: center_status(center))
            [_reach, listen], _ = doctor(center.env)
            assert listen["status"] == "ok" and "1 reconnect(s); last error" in listen["summary"], listen

            # PostgreSQL stopped: unreachable (the URL named without its password), the listener down.
            pg.halt()
            wait_for(lambda: not center_status(center)["listener"]["connected"], what="the listener down")
            t0 = time.monotonic()
            lines, out = doctor(center.env)
            assert time.monotonic() - t0 < 30
            assert [c["status"] for c in lines] == ["fail", "fail"], lines
            reach, listen = lines
            assert reach["summary"].startswith(f"the fleet's PostgreSQL at {fleetstore.describe(url)} cannot be"
                                               " reached: ")
            assert "start PostgreSQL there, or fix [center] database" in reach["fix"]
            assert "is not connected; last error" in listen["summary"], listen
            assert pg.password not in out
        finally:
            center.stop()
    finally:
        pg.stop()


def center_status(center: Center) -> dict[str, Any]:
    r = center.http.get("/status")
    assert r.status_code == 200, r.text
    store: dict[str, Any] = r.json()["fleet_store"]
    assert store["backend"] == "postgresql", store
    return store


def test_a_password_in_a_config_toml_others_can_read_is_a_warning_run_as_an_ordinary_user(
        postgres_server: Postgres, fleet_db: str) -> None:
    prefix: list[str] = []
    if os.getuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: cannot run doctor as an ordinary user")
        import agent_hooks

        why = unreachable_by_others(BIN / "agent-hook", Path(agent_hooks.__file__))
        if why:
            pytest.skip(f"nobody cannot run this checkout's agent-hook: {why}")
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    # Not under tmp_path: pytest's base directory is 0700, and nobody must reach this one.
    base = Path(tempfile.mkdtemp(prefix="agent-hooks-doctor-pg-"))
    try:
        os.chmod(base, 0o755)
        env = plain_env(base)
        state = base / "state"
        state.mkdir(mode=0o700)
        config = state / "config.toml"
        config.write_text(f'[center]\ndatabase = "{fleet_db}"\n')
        passfile = state / "pgpass"
        pg = postgres_server
        passfile.write_text(f"127.0.0.1:{pg.port}:*:*:{pg.password}\n")
        if prefix:
            for root, dirs, files in os.walk(base):
                for name in [root, *(os.path.join(root, f) for f in dirs + files)]:
                    os.lchown(name, NOBODY, NOBODY)
        fleetstore.PgStore(fleet_db).close()  # migrated, as a command center leaves it

        def warnings() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            lines, out = doctor(env, prefix)
            assert pg.password not in out
            return [c for c in lines if c["status"] == "warn"], [c for c in lines if c["status"] != "warn"]

        config.chmod(0o644)  # what an editor with umask 022 makes
        [warn], [reach] = warnings()
        assert "carries the database's password, and the file is readable by others (mode 644)" in warn["summary"]
        assert warn["fix"].startswith(f"chmod 600 {config}") and "passfile" in warn["fix"], warn
        assert reach["status"] == "ok" and "reachable" in reach["summary"], reach
        config.chmod(0o600)
        assert warnings()[0] == []

        # The password out of the URL, in a 0600 file the URL names: no warning, whatever config.toml's mode.
        bare = fleet_db.replace(f":{pg.password}@", "@")
        config.write_text(f'[center]\ndatabase = "{bare}?passfile={passfile}"\n')
        config.chmod(0o644)
        passfile.chmod(0o600)
        none, [reach] = warnings()
        assert none == [] and reach["status"] == "ok", reach
        # libpq ignores a password file others can read: doctor says so.
        passfile.chmod(0o644)
        none, [reach] = warnings()
        assert none == [] and reach["status"] == "fail" and "chmod 600 it" in reach["fix"], reach
    finally:
        shutil.rmtree(base, ignore_errors=True)
