"""`agent-hook doctor` reports each broken state we can produce, with exit 1 on ✗.

doctor runs as the installed console script, with HOME and AGENT_HOOKS_HOME in tmp_path.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_hooks.checks.synthetic import sample_payloads
from agent_hooks.cli.settings import EXECUTABLES, HOOKS

from support.repo import ROOT
from support.scripts import BIN, sh
from support.servers import NOBODY, unreachable_by_others

# Read at import: the autouse fixture clears AGENT_HOOKS_* from the environment of each test.
CLAUDE_CACHE = Path(os.environ.get("AGENT_HOOKS_CLAUDE_CACHE") or ROOT / ".cache")


class Env:
    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "home"
        self.state = tmp / "state"
        self.project = tmp / "project"
        for d in (self.home, self.state, self.project):
            d.mkdir()
        self.state.chmod(0o700)  # as agent-hook creates it
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("AGENT_HOOKS", "XDG_")) and k != "OPTIMALOS_SESSION_TMUX"}
        self.env.update(HOME=str(self.home), AGENT_HOOKS_HOME=str(self.state))

    @property
    def settings(self) -> Path:
        return self.home / ".claude" / "settings.json"

    @property
    def store(self) -> Path:
        return self.state / "store.db"

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(BIN / "agent-hook"), *args], capture_output=True, text=True, env=self.env,
                              cwd=self.project, timeout=120)
        if check:
            assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    def doctor(self, *args: str, text: bool = False, text_no_run: bool = False) -> tuple[int, dict[str, Any], str]:
        """(exit code, --json report, text report when asked).

        ``text_no_run``: the text report without the synthetic run, for a test whose text
        assertions are about other checks (the run costs a process per hook, seconds under load).
        """
        j = self.cli("doctor", "--json", *args, check=False)
        report = json.loads(j.stdout)
        if not text:
            return j.returncode, report, ""
        plain = self.cli("doctor", *args, *(("--no-run",) if text_no_run and "--no-run" not in args else ()),
                         check=False)
        assert plain.returncode == j.returncode
        return j.returncode, report, plain.stdout

    def hook(self, exe: str, stdin: bytes) -> None:
        subprocess.run([str(BIN / exe)], input=stdin, capture_output=True, env=self.env, timeout=30, check=True)


def lines(report: dict[str, Any], status: str, area: str | None = None) -> list[str]:
    return [c["summary"] for c in report["checks"] if c["status"] == status and area in (None, c["area"])]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


@pytest.fixture
def healthy(env: Env) -> Env:
    env.cli("settings", "install")
    env.cli("init")
    return env


def test_healthy_installation(healthy: Env) -> None:
    code, report, text = healthy.doctor(text=True)
    assert code == 0, text
    assert report["ok"] is True
    assert lines(report, "fail") == []
    assert any(f"{len(HOOKS)} hooks of ours, all resolve" in s for s in lines(report, "ok", "settings"))
    assert any("schema current" in s for s in lines(report, "ok", "store"))
    assert any("WAL" in s for s in lines(report, "ok", "store"))
    assert any("0600" in s for s in lines(report, "ok", "store"))
    run = [c for c in report["checks"] if c["area"] == "run"]
    assert run[0]["status"] == "ok" and set(run[0]["data"]["ms"]) == set(EXECUTABLES)
    assert all(ms > 0 for ms in run[0]["data"]["ms"].values())
    assert f"{len(sample_payloads('s', '/'))} hook calls, ended" in run[1]["summary"]
    # The text form: one mark per line, and a fix on every ! and ✗ line.
    for line in text.splitlines():
        if line.startswith(("!", "✗")):
            assert "-> fix:" in line
    assert text.splitlines()[0].startswith("✓ python")
    # The synthetic run used a scratch store: the real one has no session.
    conn = sqlite3.connect(healthy.store)
    assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0


def test_nothing_installed(env: Env) -> None:
    code, report, _ = env.doctor("--no-run")
    assert code == 1
    assert any("no hooks of ours in any settings file" in s for s in lines(report, "fail", "settings"))
    assert any("does not exist yet" in s for s in lines(report, "warn", "store"))


def test_missing_executable(env: Env, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for exe in EXECUTABLES:
        shutil.copy2(BIN / exe, bin_dir / exe)
    env.cli("settings", "install", "--bin-dir", str(bin_dir))
    env.cli("init")
    code, report, _ = env.doctor("--bin-dir", str(bin_dir))
    assert code == 0, lines(report, "fail")
    (bin_dir / "agent-hook-stop").unlink()
    code, report, text = env.doctor("--bin-dir", str(bin_dir), text=True, text_no_run=True)
    assert code == 1
    fails = lines(report, "fail")
    assert any("missing in" in s and "agent-hook-stop" in s for s in lines(report, "fail", "executables"))
    stale = [c for c in report["checks"] if "does not exist (stale path)" in c["summary"]]
    assert stale and "Stop" in stale[0]["summary"] and "re-run install.sh" in stale[0]["fix"]
    # The launcher let the synthetic call pass (exit 0) and logged why: doctor shows it, fix included.
    assert any(s.startswith("agent-hook-stop (Stop): failed open: install_missing:") and "re-run install.sh" in s
               for s in lines(report, "fail", "run")), fails
    assert "✗ executables" in text


def test_removed_entry(healthy: Env) -> None:
    doc = json.loads(healthy.settings.read_text())
    del doc["hooks"]["PreCompact"]
    healthy.settings.write_text(json.dumps(doc))
    code, report, _ = healthy.doctor("--no-run")
    assert code == 1
    assert any("not wired: PreCompact" in s for s in lines(report, "fail", "settings"))


def test_timeouts_in_milliseconds_and_too_short(healthy: Env) -> None:
    doc = json.loads(healthy.settings.read_text())
    doc["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 10000
    doc["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] = 2
    healthy.settings.write_text(json.dumps(doc))
    code, report, _ = healthy.doctor("--no-run")
    assert code == 1
    assert any("Stop: timeout 10000 looks like milliseconds" in s for s in lines(report, "fail", "settings"))
    assert any("PreToolUse: timeout 2 s is not above" in s for s in lines(report, "warn", "settings"))
    healthy.cli("settings", "install")
    code, report, _ = healthy.doctor("--no-run")
    assert code == 0, lines(report, "fail")


def test_duplicates_across_files_and_stale_forms(healthy: Env, tmp_path: Path) -> None:
    other = tmp_path / "old-venv" / "bin"
    other.mkdir(parents=True)
    local = healthy.project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(json.dumps({"hooks": {
        "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": f"{other}/agent-hook-post-tool-use"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": f"{other}/../bin/agent-hook-stop"}]},
                 {"hooks": [{"type": "command", "command": f"AGENT_HOOKS_ROLE=lead {BIN}/agent-hook-stop"}]}],
        "TeammateIdle": [{"hooks": [{"type": "command", "command": f"{BIN}/agent-hook-stop"}]}],
    }}))
    code, report, _ = healthy.doctor("--no-run")
    assert code == 1
    fails = lines(report, "fail", "settings")
    assert any("PostToolUse: our hook is wired 2 times (user, local)" in s for s in fails), fails
    assert any("Stop: our hook is wired 2 times" in s for s in fails), fails
    assert any("agent-hook-post-tool-use does not exist (stale path)" in s for s in fails)
    assert any("TeammateIdle runs agent-hook-stop: we do not hook this event" in s for s in fails)
    warns = lines(report, "warn", "settings")
    assert any("Stop: wired without our launcher" in s for s in warns), warns
    assert any("Stop: a hand-written entry runs agent-hook-stop" in s for s in warns), warns
    # The fix the line names works.
    healthy.cli("settings", "uninstall", "--project", str(healthy.project), "--local")
    code, report, _ = healthy.doctor("--no-run")
    assert code == 0, lines(report, "fail")
    # The hand-written entry is the user's: uninstall left it, and doctor still points at it.
    assert "AGENT_HOOKS_ROLE=lead" in local.read_text()


def test_a_session_start_matcher_that_drops_a_source(healthy: Env) -> None:
    doc = json.loads(healthy.settings.read_text())
    assert "matcher" not in doc["hooks"]["SessionStart"][0], "we wire SessionStart for every source"
    doc["hooks"]["SessionStart"][0]["matcher"] = "startup|resume|clear|compact"  # what 0.1.0 wrote
    healthy.settings.write_text(json.dumps(doc))
    code, report, _ = healthy.doctor("--no-run")
    assert code == 1
    (check,) = [c for c in report["checks"] if "drops source" in c["summary"]]
    assert check["data"]["dropped_sources"] == ["fork"] and "SessionStart" in check["summary"]
    healthy.cli("settings", "install")  # the fix it names
    code, report, _ = healthy.doctor("--no-run")
    assert code == 0, lines(report, "fail")


@pytest.mark.parametrize(("matcher", "dropped"), [
    (".", []),  # any other character makes it an unanchored regex: "." matches every source
    ("startup, resume, clear, compact, fork", []),  # a comma list of exact names (clients >= 2.1.191)
    ("startup,resume", ["clear", "compact", "fork"]),
    ("^(startup|resume|clear|compact)$", ["fork"]),
    ("startup|resume|clear|compact", ["fork"]),  # what 0.1.0 wrote
])
def test_doctor_reads_a_source_matcher_as_the_client_does(env: Env, matcher: str, dropped: list[str]) -> None:
    """Reference §6.3: a matcher of letters, digits, _ - space , | is a list of exact names; any other
    character makes it an unanchored regex. Doctor matched every matcher as an anchored regex, so it
    reported sources as dropped (a ✗ line, exit 1) that the client does run our hook for."""
    env.cli("settings", "install")
    doc = json.loads(env.settings.read_text())
    doc["hooks"]["SessionStart"][0]["matcher"] = matcher
    env.settings.write_text(json.dumps(doc))
    _, report, _ = env.doctor("--no-run")
    found = [c["data"]["dropped_sources"] for c in report["checks"] if "dropped_sources" in c.get("data", {})]
    assert found == ([dropped] if dropped else []), report["checks"]


def test_the_installation_is_gone(env: Env, tmp_path: Path) -> None:
    """The venv was deleted: the wired hooks pass (exit 0, logged), and doctor from any other
    installation says to re-run install.sh."""
    gone = tmp_path / "venv" / "bin"
    gone.mkdir(parents=True)
    for exe in EXECUTABLES:
        shutil.copy2(BIN / exe, gone / exe)
    env.cli("settings", "install", "--bin-dir", str(gone))
    env.cli("init")
    shutil.rmtree(tmp_path / "venv")
    doc = json.loads(env.settings.read_text())
    command = doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    payload = json.dumps({"session_id": "s-gone", "hook_event_name": "PreToolUse", "cwd": str(env.project),
                          "tool_name": "Bash", "tool_input": {"command": "ls"}}).encode()
    proc = subprocess.run(["/bin/sh", "-c", command], input=payload, capture_output=True, env=env.env, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    logged = [json.loads(x) for x in (env.state / "logs" / "errors.log").read_text().splitlines()]
    assert logged[-1]["kind"] == "install_missing" and logged[-1]["event"] == "PreToolUse"
    code, report, text = env.doctor("--no-run", text=True)
    assert code == 1
    assert any("re-run install.sh" in c["fix"] for c in report["checks"] if c["area"] == "settings"), text
    (errors,) = [c for c in report["checks"] if c["area"] == "errors"]
    assert "install_missing" in errors["summary"] and "re-run install.sh" in errors["summary"]


def test_doctor_run_fix_for_a_gone_installation_says_reinstall(env: Env, tmp_path: Path) -> None:
    """When the launcher found its target gone (install_missing), the run lines told the user to pipe a
    payload into the launcher by hand; the fix is to re-run install.sh."""
    gone = tmp_path / "venv" / "bin"
    gone.mkdir(parents=True)
    for exe in (BIN).glob("agent-hook-*"):
        (gone / exe.name).symlink_to(exe)
    env.cli("settings", "install", "--bin-dir", str(gone))
    for f in gone.iterdir():
        f.unlink()
    _, report, _ = env.doctor()
    runs = [c for c in report["checks"] if c["area"] == "run" and "install_missing" in c["summary"]]
    assert runs and len(runs) == sum(1 for c in report["checks"] if c["area"] == "run" and "(" in c["summary"]
                                     and "):" in c["summary"]), report["checks"]
    assert all("re-run install.sh" in c["fix"] and "<payload>" not in c["fix"] for c in runs), runs[0]


def test_doctor_run_fix_feeds_the_payload_to_the_hook(env: Env, tmp_path: Path) -> None:
    """The synthetic run's fix for a failing hook said `echo '<payload>' | <wired command>`; the wired
    command is our launcher (`h=...; if ...; exec "$h"`), so the pipe fed only the assignment and the
    hook, run by hand as told, never saw the payload. The fix must be a command that does."""
    fake = tmp_path / "venv" / "bin"
    fake.mkdir(parents=True)
    got = tmp_path / "stdin-seen"
    for exe in (BIN).glob("agent-hook-*"):
        (fake / exe.name).symlink_to(exe)
    (fake / "agent-hook-stop").unlink()
    (fake / "agent-hook-stop").write_text(f"#!/bin/sh\ncat > '{got}'\necho boom >&2\nexit 1\n")
    (fake / "agent-hook-stop").chmod(0o755)
    env.cli("settings", "install", "--bin-dir", str(fake))
    _, report, _ = env.doctor()
    (line,) = [c for c in report["checks"] if c["area"] == "run" and "agent-hook-stop (Stop)" in c["summary"]]
    assert "exit 1" in line["summary"], line
    fix = line["fix"]
    assert "'<payload>'" in fix, fix
    hand = fix.split("run it by hand: ", 1)[1].split("; see the error log")[0].replace("'<payload>'", "'{\"x\": 1}'")
    got.unlink()
    sh(hand, env.env)
    assert got.read_text().strip() == '{"x": 1}', hand


def test_invalid_settings_file(healthy: Env) -> None:
    project_settings = healthy.project / ".claude" / "settings.json"
    project_settings.parent.mkdir()
    project_settings.write_text('{"hooks": ')
    code, report, _ = healthy.doctor("--no-run")
    assert code == 1
    assert any("project settings" in s and "not valid JSON" in s for s in lines(report, "fail", "settings"))


def test_corrupt_store(healthy: Env) -> None:
    healthy.store.write_bytes(b"this is not a database, it only wears the name" * 200)
    os.chmod(healthy.store, 0o600)
    code, report, text = healthy.doctor("--no-run", text=True)
    assert code == 1
    (line,) = [c for c in report["checks"] if c["area"] == "store"]
    assert line["status"] == "fail" and "is damaged" in line["summary"] and line["data"]["state"] == "corrupt"
    # Moved aside, never deleted: the old file is kept for recovery.
    assert "mv " in line["fix"] and "store.db.broken" in line["fix"] and "agent-hook init" in line["fix"]
    assert "rm " not in line["fix"]
    assert "✗ store" in text


def test_unreachable_by_others_names_the_directory_in_the_way() -> None:
    """What the test below relies on to skip rather than fail in a checkout under a 0700 directory."""
    # Not under tmp_path: pytest's base directory is itself 0700.
    base = Path(tempfile.mkdtemp(prefix="agent-hooks-reach-"))
    try:
        os.chmod(base, 0o755)
        for d in base.parents:
            if not os.stat(d).st_mode & 0o001:
                pytest.skip(f"{d} is already closed to others")
        private = base / "private"
        (private / "clone").mkdir(parents=True)
        script = private / "clone" / "agent-hook"
        script.write_text("#!/bin/sh\n")
        private.chmod(0o700)
        (private / "clone").chmod(0o755)
        script.chmod(0o755)
        assert unreachable_by_others(script) == f"other users cannot enter {private} (mode 0700)"
        private.chmod(0o711)
        assert unreachable_by_others(script) is None
        script.chmod(0o700)
        assert unreachable_by_others(script) == f"other users cannot read {script} (mode 0700)"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_store_mode_000_is_a_permission_problem_not_corruption() -> None:
    """Run as a normal user (nobody, when the tests run as root): chmod, never "move it aside"."""
    prefix: list[str] = []
    if os.getuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: mode 000 does not stop root")
        # nobody runs this environment's agent-hook and imports the package from where it is installed
        # (the checkout, for an editable install): a checkout under a 0700 directory is out of its reach.
        import agent_hooks

        why = unreachable_by_others(BIN / "agent-hook", Path(agent_hooks.__file__))
        if why:
            pytest.skip(f"nobody cannot run this checkout's agent-hook: {why}")
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    # Not under tmp_path: pytest's base directory is 0700 and the other user must reach this one.
    base = Path(tempfile.mkdtemp(prefix="agent-hooks-doctor-"))
    try:
        os.chmod(base, 0o755)
        env = Env(base)
        env.cli("settings", "install")
        env.cli("init")
        rows = sqlite3.connect(env.store).execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if prefix:
            for root, dirs, files in os.walk(base):
                for name in [root, *(os.path.join(root, f) for f in dirs + files)]:
                    os.lchown(name, NOBODY, NOBODY)
        os.chmod(env.store, 0o000)

        def doctor() -> tuple[int, dict[str, Any]]:
            proc = subprocess.run([*prefix, str(BIN / "agent-hook"), "doctor", "--json", "--no-run"],
                                  capture_output=True, text=True, env=env.env, cwd=env.project, timeout=120)
            return proc.returncode, json.loads(proc.stdout)

        code, report = doctor()
        assert code == 1
        (line,) = [c for c in report["checks"] if c["area"] == "store"]
        assert line["data"]["state"] == "permission", line
        assert "permission denied (mode 000)" in line["summary"]
        assert line["fix"].startswith(f"chmod 600 {env.store}")
        assert "mv " not in line["fix"] and "corrupt" not in line["summary"] and "init" not in line["fix"]
        # The advice is right: after it the store is healthy, every row kept.
        os.chmod(env.store, 0o600)
        code, report = doctor()
        assert code == 0, lines(report, "fail")
        assert sqlite3.connect(env.store).execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == rows
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_store_path_is_a_directory(env: Env) -> None:
    env.cli("settings", "install")
    env.store.mkdir()
    (env.store / "keep-me").write_text("someone's file")
    code, report, _ = env.doctor("--no-run")
    assert code == 1
    (line,) = [c for c in report["checks"] if c["area"] == "store"]
    assert line["data"]["state"] == "directory" and "is a directory, not a file" in line["summary"]
    assert f"mv {env.store} {env.store}.dir" in line["fix"]
    assert (env.store / "keep-me").exists()  # doctor itself moves nothing


def test_locked_store_is_not_called_corrupt(healthy: Env) -> None:
    holder = sqlite3.connect(healthy.store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        healthy.env["AGENT_HOOKS_BUSY_TIMEOUT_MS"] = "200"
        code, report, _ = healthy.doctor("--no-run")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 1
    locked = [c for c in report["checks"] if c["area"] == "store" and c["data"].get("state") == "locked"]
    assert locked and "is locked" in locked[0]["summary"] and "fuser" in locked[0]["fix"]
    assert "do not delete" in locked[0]["fix"]
    assert not any("damaged" in s or "corrupt" in s for s in lines(report, "fail", "store"))


def test_exact_modes(healthy: Env) -> None:
    os.chmod(healthy.store, 0o400)
    try:
        code, report, _ = healthy.doctor("--no-run")
    finally:
        os.chmod(healthy.store, 0o600)
    assert not any(s == "files are 0600, directories 0700" for s in lines(report, "ok", "store"))
    assert any("store.db is 400 (expected 600)" in s for s in lines(report, "fail", "store") +
               lines(report, "warn", "store")), report
    code, report, _ = healthy.doctor("--no-run")
    assert "files are 0600, directories 0700" in lines(report, "ok", "store")


def test_config_file_mode_is_labelled_config(healthy: Env) -> None:
    config = healthy.state / "config.toml"
    config.write_text("[runtime]\ndeadline_ms = 3000\n")
    os.chmod(config, 0o644)  # what an editor with umask 022 makes
    code, report, text = healthy.doctor("--no-run", text=True)
    assert code == 0, "a config readable by others is worth a look, not a breakage"
    (line,) = [c for c in report["checks"] if c["area"] == "config" and c["status"] == "warn"]
    assert "readable by others (mode 644)" in line["summary"] and "commands the hooks run" in line["summary"]
    assert line["fix"] == f"chmod 600 {config}"
    assert not any("config.toml" in s for s in lines(report, "fail", "store") + lines(report, "warn", "store"))
    os.chmod(config, 0o666)
    code, report, _ = healthy.doctor("--no-run")
    assert code == 1 and any("writable by others" in s for s in lines(report, "fail", "config"))
    os.chmod(config, 0o600)
    code, report, _ = healthy.doctor("--no-run")
    assert code == 0 and any("is private (mode 600)" in s for s in lines(report, "ok", "config"))


def test_store_behind_loose_and_not_wal(env: Env) -> None:
    env.cli("settings", "install")
    os.umask(0o022)
    conn = sqlite3.connect(env.store)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("CREATE TABLE errors (id INTEGER PRIMARY KEY, at FLOAT, event TEXT, kind TEXT, session_id TEXT, message TEXT)")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    os.chmod(env.store, 0o644)
    code, report, _ = env.doctor("--no-run")
    assert code == 1
    fails = lines(report, "fail", "store")
    assert any("schema at version 1, this code needs" in s for s in fails), fails
    assert any("journal mode is delete, not WAL" in s for s in fails), fails
    assert any("readable by others" in s and "store.db is 644 (expected 600)" in s for s in fails), fails
    # Read-only: doctor never migrates.
    assert sqlite3.connect(env.store).execute("PRAGMA user_version").fetchone()[0] == 1


def test_invalid_configuration(healthy: Env) -> None:
    (healthy.state / "config.toml").write_text('[runtime]\ndeadline_ms = "soon"\ndealine_ms = 1\n[nonsense]\nx = 1\n')
    os.chmod(healthy.state / "config.toml", 0o600)
    code, report, _ = healthy.doctor("--no-run")
    assert code == 1
    fails = lines(report, "fail", "config")
    assert any("runtime.deadline_ms must be int" in s for s in fails), fails
    assert any("unknown section [nonsense]" in s for s in fails), fails
    assert "configuration: unknown setting runtime.dealine_ms (did you mean deadline_ms?)" in fails, fails
    (healthy.state / "config.toml").write_text("[runtime\n")
    code, report, _ = healthy.doctor("--no-run")
    assert code == 1 and any("configuration invalid" in s for s in lines(report, "fail", "config"))
    # A directory where the file should be: one line that says so, no chmod advice for it.
    (healthy.state / "config.toml").unlink()
    (healthy.state / "config.toml").mkdir()
    code, report, _ = healthy.doctor("--no-run")
    config_lines = [c for c in report["checks"] if c["area"] == "config"]
    assert code == 1 and [c["status"] for c in config_lines] == ["fail"], config_lines
    assert "Is a directory" in config_lines[0]["summary"] and "chmod" not in (config_lines[0]["fix"] or "")


def test_errors_stay_shown_until_marked_seen_and_status_agrees(healthy: Env) -> None:
    code, report, _ = healthy.doctor("--no-run")
    assert any("no errors so far" in s for s in lines(report, "ok", "errors"))
    healthy.hook("agent-hook-stop", b"this is not JSON")
    healthy.hook("agent-hook-pre-tool-use", b"[1, 2]")
    for _ in range(2):  # a second run does not hide them
        code, report, text = healthy.doctor("--no-run", text=True)
        assert code == 0, "errors the hooks failed open on are a warning, not a breakage"
        (line,) = [c for c in report["checks"] if c["area"] == "errors"]
        assert line["status"] == "warn"
        assert line["summary"].startswith("2 errors so far") and "bad_input: 2" in line["summary"]
        assert "latest: PreToolUse" in line["summary"] and "agent-hook errors seen" in line["fix"]
        assert json.loads(healthy.cli("status", "--json").stdout)["errors"] == 2
        assert "2 errors not yet marked seen" in healthy.cli("status").stdout
    listed = json.loads(healthy.cli("errors", "--json").stdout)
    assert listed["unseen"] == 2 and [e["event"] for e in listed["recent"]] == ["Stop", "PreToolUse"]
    assert json.loads(healthy.cli("errors", "seen", "--json").stdout)["marked_seen"] == 2
    code, report, _ = healthy.doctor("--no-run")
    assert any("no errors since they were marked seen" in s for s in lines(report, "ok", "errors"))
    assert json.loads(healthy.cli("status", "--json").stdout)["errors"] == 0
    healthy.hook("agent-hook-stop", b"{")
    assert json.loads(healthy.cli("status", "--json").stdout)["errors"] == 1
    assert "1 error " in healthy.cli("errors").stdout


def test_queue_health_from_the_outbox(healthy: Env) -> None:
    conn = sqlite3.connect(healthy.store)
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'outbox'").fetchone():
        conn.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY, event TEXT, created_at FLOAT, state TEXT, "
                     "last_error TEXT)")
    base = "INSERT INTO outbox ({cols}) VALUES ({vals})"
    cols = {row[1] for row in conn.execute("PRAGMA table_info(outbox)")}
    row_old = {"event_id": "e1", "session_key": "s", "event": "start", "body": "{}", "created_at": 1000.0,
               "state": "queued"}
    row_dead = {"event_id": "e2", "session_key": "s", "event": "exit", "body": "{}", "created_at": 1001.0,
                "state": "dead", "last_error": "HTTP 400"}
    for row in (row_old, row_dead):
        row = {k: v for k, v in row.items() if k in cols}
        conn.execute(base.format(cols=", ".join(row), vals=", ".join("?" * len(row))), list(row.values()))
    conn.commit()
    conn.close()
    code, report, _ = healthy.doctor("--no-run")
    warns = lines(report, "warn", "queue")
    assert any("1 event queued" in s and "not draining" in s for s in warns), warns
    assert any("1 dead letter; last error: HTTP 400" in s for s in warns), warns


@pytest.fixture
def server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b"[]"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/api/hooks/ingest"
    httpd.shutdown()
    httpd.server_close()


def test_ingest_server(healthy: Env, server: str) -> None:
    healthy.env["AGENT_HOOKS__FORWARD__URL"] = server
    healthy.env["AGENT_HOOKS__FORWARD__ENABLED"] = "true"
    code, report, _ = healthy.doctor("--no-run")
    assert any("ingest server answers" in s and "HTTP 200" in s for s in lines(report, "ok", "forward")), report
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    healthy.env["AGENT_HOOKS__FORWARD__URL"] = f"http://127.0.0.1:{closed}/api/hooks/ingest"
    code, report, _ = healthy.doctor("--no-run")
    assert code == 1
    assert any("does not answer" in s for s in lines(report, "fail", "forward"))
    # Nothing configured (the default URL) and nothing there: "not configured", no warning.
    del healthy.env["AGENT_HOOKS__FORWARD__URL"]
    code, report, _ = healthy.doctor("--no-run")
    assert not lines(report, "warn", "forward") and not lines(report, "fail", "forward")
    ok = lines(report, "ok", "forward")
    assert any("not configured" in s or "answers" in s for s in ok), ok
    # The same default URL written in config.toml by the user is configured: it must answer.
    (healthy.state / "config.toml").write_text('[forward]\nurl = "http://127.0.0.1:3000/api/hooks/ingest"\n')
    os.chmod(healthy.state / "config.toml", 0o600)
    code, report, _ = healthy.doctor("--no-run")
    assert not any("not configured" in s for s in lines(report, "ok", "forward"))


def test_a_settings_file_the_client_ignores(healthy: Env) -> None:
    """Comments or trailing commas: Claude Code (2.1.197, 2.1.330) runs no hook from the file."""
    text = healthy.settings.read_text()
    healthy.settings.write_text("// my hooks\n" + text)
    code, report, _ = healthy.doctor("--no-run")
    assert code == 1
    assert any("has comments: Claude Code ignores this whole file" in s for s in lines(report, "fail", "settings"))
    healthy.settings.write_text("\ufeff" + text)  # a byte-order mark is fine for the client
    code, report, _ = healthy.doctor("--no-run")
    assert code == 0, lines(report, "fail")


def _client_on_path(env: Env, tmp_path: Path, script: str) -> None:
    bin_dir = tmp_path / "client-bin"
    bin_dir.mkdir(exist_ok=True)
    claude = bin_dir / "claude"
    claude.write_text("#!/bin/sh\n" + script + "\n")
    claude.chmod(0o755)
    env.env["PATH"] = f"{bin_dir}:{env.env['PATH']}"


def test_doctor_warns_when_the_client_is_newer_than_the_newest_tested(tmp_path: Path) -> None:
    from agent_hooks import claude_code

    env = Env(tmp_path)
    major, minor, patch = claude_code.parse(claude_code.NEWEST_TESTED)
    # A stand-in for a client released after our newest capture: it only answers --version.
    _client_on_path(env, tmp_path, f'echo "{major}.{minor}.{patch + 1} (Claude Code)"')
    code, report, text = env.doctor("--no-run", text=True)
    (line,) = [c for c in report["checks"] if c["area"] == "client"]
    assert line["status"] == "warn", line
    assert f"{major}.{minor}.{patch + 1}" in line["summary"] and f"newest tested, {claude_code.NEWEST_TESTED}" in line["summary"]
    assert "! client" in text and "docs/troubleshooting.md" in text
    _client_on_path(env, tmp_path, f'echo "{claude_code.NEWEST_TESTED} (Claude Code)"')
    _, report, _ = env.doctor("--no-run")
    (line,) = [c for c in report["checks"] if c["area"] == "client"]
    assert line["status"] == "ok" and line["data"]["version"] == claude_code.NEWEST_TESTED


def test_doctor_reads_the_real_pinned_client(tmp_path: Path) -> None:
    from agent_hooks import claude_code

    cache = CLAUDE_CACHE
    real = cache / f"claude-code-{claude_code.PINNED}" / "node_modules" / ".bin"
    if not (real / "claude").exists():
        pytest.skip(f"the pinned client is not installed in {cache} (the e2e tier installs it)")
    env = Env(tmp_path)
    env.env["PATH"] = f"{real}:{env.env['PATH']}"
    _, report, _ = env.doctor("--no-run")
    (line,) = [c for c in report["checks"] if c["area"] == "client"]
    assert line["status"] == "ok" and line["data"]["version"] == claude_code.PINNED


def test_doctor_notes_a_default_mode_that_rarely_asks_a_person(healthy: Env) -> None:
    _, report, _ = healthy.doctor("--no-run")
    [line] = [c for c in report["checks"] if c["area"] == "permissions"]
    assert line["status"] == "ok" and "not set" in line["summary"]
    doc = json.loads(healthy.settings.read_text())
    doc["permissions"] = {"defaultMode": "auto"}
    healthy.settings.write_text(json.dumps(doc))
    code, report, text = healthy.doctor("--no-run", text=True)
    [line] = [c for c in report["checks"] if c["area"] == "permissions"]
    assert line["status"] == "warn" and "auto mode" in line["summary"] and str(healthy.settings) in line["summary"]
    assert "permissions.defaultMode" in line["fix"] and "docs/approvals.md" in line["fix"]
    assert code == 0  # a note, not a break
    # The project's local settings win over the user's, as the client reads them.
    local = healthy.project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(json.dumps({"permissions": {"defaultMode": "acceptEdits"}}))
    _, report, _ = healthy.doctor("--no-run")
    [line] = [c for c in report["checks"] if c["area"] == "permissions"]
    assert line["status"] == "ok" and "acceptEdits mode" in line["summary"]
