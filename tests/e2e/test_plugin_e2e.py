"""The plugin under the real client: marketplace add + plugin install, no settings file of ours.

The first session starts the environment's build (detached) and passes through
unrecorded; once the build is ready, sessions are recorded; a new version passes
through until its own environment is rebuilt; after ``claude plugin uninstall``
nothing is recorded. One test (two real builds with pip, about 80 s): marked slow.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import claude_client
import pytest
from harness import E2E, REPO
from model_server import text, tool_use

from agent_hooks import __version__
from agent_hooks.wiring import plugin

# Plugins from the shell (`claude plugin marketplace add`, `plugin install`): observed on 2.1.332.
PLUGIN_CLIENT_VERSION = "2.1.332"
BUILD_TIMEOUT_S = 420


def _copy_checkout(dest: Path) -> None:
    """The checkout's files (tracked and new, not ignored): what a clone holds, without .venv or caches."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = REPO / name
        if not src.is_file():
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def _plugin_client() -> Path:
    try:
        claude = claude_client.ensure_client(PLUGIN_CLIENT_VERSION)
    except claude_client.InstallError as exc:
        pytest.skip(f"plugins from the shell need Claude Code {PLUGIN_CLIENT_VERSION}: {exc}")
    probe = subprocess.run([str(claude), "plugin", "--help"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"Claude Code at {claude} has no `plugin` command")
    return claude


def _wait_ready(found: plugin.Installed) -> None:
    """Until the detached build of ``found``'s version is ready."""
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    while not found.built:
        assert time.monotonic() < deadline, (Path(found.data_dir) / "build.log").read_text()
        time.sleep(1)


def _bump(market: Path, old: str) -> str:
    """A new patch version in the marketplace copy: package, manifests and hooks.json, as a release does."""
    major, minor, patch = old.split(".")
    new = f"{major}.{minor}.{int(patch) + 1}"
    for name in ("pyproject.toml", "agent_hooks/__init__.py", ".claude-plugin/plugin.json",
                 ".claude-plugin/marketplace.json"):
        path = market / name
        text_before = path.read_text()
        assert f'"{old}"' in text_before, name
        path.write_text(text_before.replace(f'"{old}"', f'"{new}"'))
    (market / plugin.HOOKS_FILE).write_text(plugin.render_hooks(new))
    return new


@pytest.mark.slow
def test_plugin_install_records_sessions_and_uninstall_stops_them(e2e: E2E, tmp_path: Path) -> None:
    claude = _plugin_client()
    e2e.claude = claude
    market = tmp_path / "market"
    _copy_checkout(market)
    # pip in the detached build reads the same index settings as this run's pip.
    pip_env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    env = e2e.env(pip_env)

    def client(*args: str) -> str:
        proc = subprocess.run([str(claude), *args], capture_output=True, text=True, env=env, timeout=120,
                              cwd=e2e.workspace, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    assert "agent-hooks" in client("plugin", "marketplace", "add", str(market))
    assert plugin.PLUGIN_ID in client("plugin", "install", plugin.PLUGIN_ID)
    assert not (e2e.home / ".claude" / "settings.json").read_text().count("agent-hook-"), \
        "no settings entry of ours: the plugin wires the hooks"
    found = plugin.installed(env)
    assert found is not None and found.enabled and found.version == __version__

    # First session: the environment is not built, so every hook passes through at once.
    e2e.server.set_script([[text("Hello.")]])
    first = e2e.run("Say hello.", settings_flag=False, env_extra=pip_env)
    assert first.ok, e2e.describe()
    _wait_ready(found)
    sessions = e2e.query("SELECT session_id FROM sessions") if e2e.store_path.exists() else []
    assert first.session_id not in [s["session_id"] for s in sessions], "nothing recorded before the build"

    # Built: a session is recorded, and the plugin's bin/ puts agent-hook on the Bash tool's PATH.
    e2e.server.set_script([
        [tool_use("Bash", {"command": "agent-hook --version", "description": "version"})],
        [text("Done.")],
    ])
    second = e2e.run("Check the plugin.", settings_flag=False, env_extra=pip_env)
    assert second.ok, e2e.describe()
    (session,) = e2e.query("SELECT * FROM sessions WHERE session_id = ?", second.session_id)
    calls = e2e.query("SELECT outcome FROM tool_calls")
    assert session["state"] == "ended" and calls == [{"outcome": "success"}], \
        (calls, e2e.server.messages("main")[-1].text[-1500:], e2e.describe())
    events = [r["event"] for r in e2e.query("SELECT event FROM session_events WHERE session_id = ? ORDER BY id",
                                            second.session_id)]
    assert events == ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"], events
    assert f"agent-hook, version {__version__}" in e2e.server.messages("main")[-1].text, "agent-hook on PATH"
    assert e2e.errors() == []

    # A new version: its hooks find no ready environment of their own, pass through, and rebuild it.
    new_version = _bump(market, __version__)
    client("plugin", "marketplace", "update", plugin.MARKETPLACE)
    client("plugin", "update", plugin.PLUGIN_ID)
    updated = plugin.installed(env)
    assert updated is not None and updated.version == new_version and not updated.built
    e2e.server.set_script([[text("During the rebuild.")]])
    during = e2e.run("Say hello again.", settings_flag=False, env_extra=pip_env)
    assert during.ok, e2e.describe()
    assert e2e.query("SELECT * FROM sessions WHERE session_id = ?", during.session_id) == [], \
        "the old environment does not serve the new version"
    _wait_ready(updated)
    assert not Path(found.env_dir).exists(), "the previous version's environment is removed once the new one is ready"
    e2e.server.set_script([[text("Rebuilt.")]])
    rebuilt = e2e.run("Say rebuilt.", settings_flag=False, env_extra=pip_env)
    assert rebuilt.ok and e2e.query("SELECT state FROM sessions WHERE session_id = ?", rebuilt.session_id) == \
        [{"state": "ended"}], e2e.describe()

    client("plugin", "uninstall", plugin.PLUGIN_ID)
    assert plugin.active(env) is None
    e2e.server.set_script([[text("Bye.")]])
    third = e2e.run("Say bye.", settings_flag=False, env_extra=pip_env)
    assert third.ok, e2e.describe()
    assert e2e.query("SELECT * FROM sessions WHERE session_id = ?", third.session_id) == []
    assert e2e.store_path.exists(), "the store stays"


def _readme_plugin_lines() -> list[str]:
    """The README's plugin install lines, as a person copies them (comments and all)."""
    install = (REPO / "README.md").read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", install, re.S)
    return [line for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_readmes_plugin_lines_work_in_a_fresh_home(e2e: E2E, tmp_path: Path) -> None:
    """Literally: `claude` on PATH and nothing else prepared (no ~/.local/bin), each line succeeds;
    once the first session has built the environment, `agent-hook doctor` through the link reports
    the plugin, and memory search by meaning."""
    claude = _plugin_client()
    e2e.claude = claude
    market = tmp_path / "market"
    _copy_checkout(market)
    pip_env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    env = e2e.env(pip_env)
    env["PATH"] = f"{claude.parent}:{env['PATH']}"
    assert not (e2e.home / ".local").exists() and not (e2e.home / ".claude").exists()
    lines = _readme_plugin_lines()
    assert len(lines) == 3 and "mkdir -p ~/.local/bin" in lines[2]
    for line in lines:
        line = line.replace("<this repository's URL or a clone's path>", shlex.quote(str(market)))
        proc = subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=env, cwd=e2e.workspace,
                              timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)
    link = e2e.home / ".local" / "bin" / "agent-hook"
    assert link.is_symlink()

    # The first session starts the build; the link works once it is ready.
    e2e.server.set_script([[text("Hello.")]])
    first = e2e.run("Say hello.", settings_flag=False, env_extra=pip_env)
    assert first.ok, e2e.describe()
    found = plugin.installed(env)
    assert found is not None
    _wait_ready(found)
    proc = subprocess.run([str(link), "doctor", "--no-run"], capture_output=True, text=True, env=env,
                          cwd=e2e.workspace, timeout=180)
    out = proc.stdout
    assert "search ranks by words and meaning" in out, out + proc.stderr
    assert "\n0 broken," in out and proc.returncode == 0, out + proc.stderr
    assert f"agent-hook, version {__version__}" in subprocess.run(
        [str(link), "--version"], capture_output=True, text=True, env=env, timeout=60).stdout
