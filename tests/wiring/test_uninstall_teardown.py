"""Uninstall stops the drainer it would leave behind: `agent-hook settings
uninstall`, and install.sh --uninstall when the venv is already gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_hooks.forward import outbox
from agent_hooks.paths import Paths

from support.forward import drainers_of, kill_drainers
from support.repo import ROOT
from support.scripts import BIN


@pytest.fixture
def world(tmp_path: Path):
    home = tmp_path / "home"
    state = tmp_path / "state"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HOOKS", "XDG_"))}
    # A drainer that stays up: nothing to deliver, and a long idle exit.
    env.update(HOME=str(home), AGENT_HOOKS_HOME=str(state), AGENT_HOOKS__FORWARD__IDLE_EXIT_S="120",
               AGENT_HOOKS_INGEST_URL="http://127.0.0.1:9/api/hooks/events")
    subprocess.run([str(BIN / "agent-hook"), "init"], env=env, check=True, capture_output=True)
    yield env, state
    kill_drainers(str(state))


def start_drainer(env: dict[str, str], state: Path) -> int:
    subprocess.Popen([sys.executable, "-m", "agent_hooks.forward.drain"], env=env, cwd="/",
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    paths = Paths({"AGENT_HOOKS_HOME": str(state)})
    end = time.time() + 20
    while time.time() < end:
        if outbox.drainer_alive(paths) and drainers_of(str(state)):
            return drainers_of(str(state))[0]
        time.sleep(0.05)
    raise AssertionError("the drainer did not start")


def gone(pid: int, timeout: float = 10) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):
                    return True  # a zombie: exited, waiting for its parent
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_settings_uninstall_stops_the_drainer(world) -> None:
    env, state = world
    subprocess.run([str(BIN / "agent-hook"), "settings", "install"], env=env, check=True, capture_output=True)
    pid = start_drainer(env, state)
    proc = subprocess.run([str(BIN / "agent-hook"), "settings", "uninstall"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"stopped the drainer (pid {pid})" in proc.stdout
    assert gone(pid)
    assert not outbox.drainer_alive(Paths({"AGENT_HOOKS_HOME": str(state)}))


def test_install_sh_uninstall_stops_a_drainer_whose_venv_is_gone(world) -> None:
    env, state = world
    pid = start_drainer(env, state)
    # No venv at the install.sh location: the installation was deleted, its drainer still runs.
    proc = subprocess.run(["bash", str(ROOT / "install.sh"), "--uninstall"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "no installation found" in proc.stdout
    assert f"stopped the drainer (pid {pid})" in proc.stdout
    assert gone(pid)


def test_a_pid_file_naming_another_process_is_left_alone(world) -> None:
    env, state = world
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        (state / "locks").mkdir(exist_ok=True)
        (state / "locks" / "drain.pid").write_text(str(sleeper.pid))
        proc = subprocess.run(["bash", str(ROOT / "install.sh"), "--uninstall"], env=env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0 and "stopped the drainer" not in proc.stdout
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
