"""Defects found in review of issues 12 (settings), 13 and 19 (wiring); one test each.

Every test runs the installed console scripts as subprocesses against a fresh state directory.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agent_hooks.wiring.table import HOOKS

BIN = Path(sys.executable).parent


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HOOKS", "XDG_"))}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), **extra)
    return env


def _sh(script: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", "-c", script], input=stdin, capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("mode", ["home", "xdg"])
def test_settings_install_creates_our_state_dir_private(tmp_path: Path, mode: str) -> None:
    """`agent-hook settings install` run first (before any hook or init) made the state directory
    (AGENT_HOOKS_HOME, or $XDG_STATE_HOME/agent-hooks) 0755 under umask 022: only the leaf of
    makedirs(locks, 0o700) got 0700. Doctor then warned "unexpected modes" on a fresh install."""
    state = tmp_path / "state-home"
    if mode == "home":
        env = _env(tmp_path, AGENT_HOOKS_HOME=str(state))
        ours = state
    else:
        env = _env(tmp_path, XDG_STATE_HOME=str(state))
        ours = state / "agent-hooks"
    settings = tmp_path / "settings.json"
    proc = _sh(f"umask 022; exec '{BIN}/agent-hook' settings install --settings '{settings}'", env)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(ours.stat().st_mode) == 0o700, oct(ours.stat().st_mode)


def _doctor_json(env: dict[str, str], cwd: Path) -> dict:
    proc = subprocess.run([str(BIN / "agent-hook"), "doctor", "--json", "--no-run"], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)
    return json.loads(proc.stdout)


@pytest.mark.parametrize(("matcher", "dropped"), [
    (".", []),  # any other character makes it an unanchored regex: "." matches every source
    ("startup, resume, clear, compact, fork", []),  # a comma list of exact names (clients >= 2.1.191)
    ("startup,resume", ["clear", "compact", "fork"]),
    ("^(startup|resume|clear|compact)$", ["fork"]),
    ("startup|resume|clear|compact", ["fork"]),  # what 0.1.0 wrote
])
def test_doctor_reads_a_source_matcher_as_the_client_does(tmp_path: Path, matcher: str, dropped: list[str]) -> None:
    """Reference §6.3: a matcher of letters, digits, _ - space , | is a list of exact names; any other
    character makes it an unanchored regex. Doctor matched every matcher as an anchored regex, so it
    reported sources as dropped (a ✗ line, exit 1) that the client does run our hook for."""
    state = tmp_path / "state"
    env = _env(tmp_path, AGENT_HOOKS_HOME=str(state))
    settings = Path(env["HOME"]) / ".claude" / "settings.json"
    assert _sh(f"'{BIN}/agent-hook' settings install", env).returncode == 0
    doc = json.loads(settings.read_text())
    doc["hooks"]["SessionStart"][0]["matcher"] = matcher
    settings.write_text(json.dumps(doc))
    report = _doctor_json(env, tmp_path)
    found = [c["data"]["dropped_sources"] for c in report["checks"] if "dropped_sources" in c.get("data", {})]
    assert found == ([dropped] if dropped else []), report["checks"]


def test_doctor_run_fix_feeds_the_payload_to_the_hook(tmp_path: Path) -> None:
    """The synthetic run's fix for a failing hook said `echo '<payload>' | <wired command>`; the wired
    command is our launcher (`h=...; if ...; exec "$h"`), so the pipe fed only the assignment and the
    hook, run by hand as told, never saw the payload. The fix must be a command that does."""
    state = tmp_path / "state"
    env = _env(tmp_path, AGENT_HOOKS_HOME=str(state))
    fake = tmp_path / "venv" / "bin"
    fake.mkdir(parents=True)
    got = tmp_path / "stdin-seen"
    for exe in (BIN).glob("agent-hook-*"):
        (fake / exe.name).symlink_to(exe)
    (fake / "agent-hook-stop").unlink()
    (fake / "agent-hook-stop").write_text(f"#!/bin/sh\ncat > '{got}'\necho boom >&2\nexit 1\n")
    (fake / "agent-hook-stop").chmod(0o755)
    assert _sh(f"'{BIN}/agent-hook' settings install --bin-dir '{fake}'", env).returncode == 0
    proc = subprocess.run([str(BIN / "agent-hook"), "doctor", "--json"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    report = json.loads(proc.stdout)
    (line,) = [c for c in report["checks"] if c["area"] == "run" and "agent-hook-stop (Stop)" in c["summary"]]
    assert "exit 1" in line["summary"], line
    fix = line["fix"]
    assert "'<payload>'" in fix, fix
    hand = fix.split("run it by hand: ", 1)[1].split("; see the error log")[0].replace("'<payload>'", "'{\"x\": 1}'")
    got.unlink()
    _sh(hand, env)
    assert got.read_text().strip() == '{"x": 1}', hand


def test_doctor_run_fix_for_a_gone_installation_says_reinstall(tmp_path: Path) -> None:
    """When the launcher found its target gone (install_missing), the run lines told the user to pipe a
    payload into the launcher by hand; the fix is to re-run install.sh."""
    state = tmp_path / "state"
    env = _env(tmp_path, AGENT_HOOKS_HOME=str(state))
    gone = tmp_path / "venv" / "bin"
    gone.mkdir(parents=True)
    for exe in (BIN).glob("agent-hook-*"):
        (gone / exe.name).symlink_to(exe)
    assert _sh(f"'{BIN}/agent-hook' settings install --bin-dir '{gone}'", env).returncode == 0
    for f in gone.iterdir():
        f.unlink()
    proc = subprocess.run([str(BIN / "agent-hook"), "doctor", "--json"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    report = json.loads(proc.stdout)
    runs = [c for c in report["checks"] if c["area"] == "run" and "install_missing" in c["summary"]]
    assert runs and len(runs) == sum(1 for c in report["checks"] if c["area"] == "run" and "(" in c["summary"]
                                     and "):" in c["summary"]), report["checks"]
    assert all("re-run install.sh" in c["fix"] and "<payload>" not in c["fix"] for c in runs), runs[0]


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "agent-hook"), *args], capture_output=True, text=True, env=env, timeout=120)


def test_config_init_with_an_unusable_config_dir_is_a_clear_error(tmp_path: Path) -> None:
    """`agent-hook config init` printed a Python traceback (FileExistsError / PermissionError from
    makedirs) when the config directory could not be made; a user error is one clear line."""
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("")
    proc = _cli(_env(tmp_path, AGENT_HOOKS_HOME=str(in_the_way)), "config", "init")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "Error:" in proc.stderr and str(in_the_way) in proc.stderr, proc.stderr


def test_config_init_force_twice_keeps_the_users_file(tmp_path: Path) -> None:
    """`config init --force` kept the old file as config.toml.bak, overwriting any earlier .bak: run twice,
    the user's own configuration (the first .bak) was replaced by the defaults and lost."""
    state = tmp_path / "state"
    env = _env(tmp_path, AGENT_HOOKS_HOME=str(state))
    state.mkdir(mode=0o700)
    mine = '# my own settings\n[heartbeat]\nstalled_after_s = 60\n'
    (state / "config.toml").write_text(mine)
    for _ in range(2):
        proc = _cli(env, "config", "init", "--force")
        assert proc.returncode == 0, proc.stderr
    kept = [p for p in state.iterdir() if p.name.startswith("config.toml.bak")]
    assert any(p.read_text() == mine for p in kept), [p.name for p in kept]


def test_install_over_our_executable_under_an_event_we_do_not_hook(tmp_path: Path) -> None:
    """Our executable wired (by hand, or by an older version) only under an event we do not hook:
    install took it out, the emptied "hooks" object went with it, and then an internal assert
    failed: a traceback, and the file could not be wired at all."""
    env = _env(tmp_path, AGENT_HOOKS_HOME=str(tmp_path / "state"))
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"model": "opus", "hooks": {"TeammateIdle": [
        {"hooks": [{"type": "command", "command": str(BIN / "agent-hook-stop")}]}]}}, indent=2) + "\n")
    proc = _cli(env, "settings", "install", "--settings", str(settings))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(settings.read_text())
    assert list(doc) == ["model", "hooks"] and "TeammateIdle" not in doc["hooks"]
    assert len(doc["hooks"]) == len(HOOKS)
    again = _cli(env, "settings", "install", "--settings", str(settings))
    assert again.returncode == 0 and "nothing changed" in again.stdout, again.stdout + again.stderr


def test_launcher_logs_a_valid_json_line_for_any_install_path(tmp_path: Path) -> None:
    """A bin dir whose path holds '"', '\\' or '%' still gives doctor a parsable install_missing line:
    the path is JSON-escaped when the launcher is written, and passed to printf as an argument."""
    import subprocess

    from agent_hooks.wiring.entries import command_for

    bin_dir = tmp_path / 'we"ird\\ 100% dir'  # never created: the installation is gone
    home = tmp_path / "home"
    command = command_for(str(bin_dir), "agent-hook-pre-tool-use", "PreToolUse")
    proc = subprocess.run(["sh", "-c", command], input=b"{}", capture_output=True,
                          env={"PATH": "/usr/bin:/bin", "AGENT_HOOKS_HOME": str(home)})
    assert proc.returncode == 0 and proc.stdout == b""
    lines = (home / "logs" / "errors.log").read_text().splitlines()
    entry = json.loads(lines[-1])
    assert entry["kind"] == "install_missing" and entry["event"] == "PreToolUse"
    assert str(bin_dir / "agent-hook-pre-tool-use") in entry["message"]


def test_every_directory_we_create_is_private(tmp_path: Path) -> None:
    """ensure_dir makes each missing parent 0700 too, whatever the umask (os.makedirs gave parents 0755)."""
    from agent_hooks.paths import ensure_dir

    old = os.umask(0o022)
    try:
        ensure_dir(str(tmp_path / "state" / "agent-hooks" / "logs"))
        ensure_dir(str(tmp_path / "state" / "agent-hooks" / "logs"))  # existing: no error
    finally:
        os.umask(old)
    for d in (tmp_path / "state", tmp_path / "state" / "agent-hooks", tmp_path / "state" / "agent-hooks" / "logs"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        ensure_dir(str(tmp_path / "file"))
