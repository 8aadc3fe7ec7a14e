"""The fleet token as the server reads it: once, again only when its file changes, and a file that
cannot be read is a "try again" (503), never "wrong credential" (401), which a sender takes as final."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_hooks.paths import Paths
from agent_hooks.server.access import TokenFile, TokenUnreadable

from support.center import Center
from support.servers import as_nobody


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _config(path: Path) -> dict:
    return {"fleet": {"token_file": str(path)}}


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return Paths({"AGENT_HOOKS_HOME": str(tmp_path / "home")})


def test_the_file_is_read_once_and_again_only_when_it_changes(tmp_path: Path, paths: Paths) -> None:
    token = tmp_path / "fleet-token"
    token.write_text("first\n")
    clock = Clock()
    tokens = TokenFile({}, clock)
    assert tokens.value(paths, _config(token)) == "first"
    # Changed, but not looked at again before the recheck time: the value read stays.
    token.write_text("second-longer\n")
    clock.now += TokenFile.RECHECK_S / 2
    assert tokens.value(paths, _config(token)) == "first"
    clock.now += TokenFile.RECHECK_S
    assert tokens.value(paths, _config(token)) == "second-longer"
    # Removed: no token at all (the owner turned it off), after the recheck.
    token.unlink()
    clock.now += TokenFile.RECHECK_S + 0.1
    assert tokens.value(paths, _config(token)) is None


def test_a_file_that_cannot_be_read_keeps_the_last_value_or_says_try_again(tmp_path: Path, paths: Paths) -> None:
    token = tmp_path / "fleet-token"
    token.mkdir()  # exists, and open() fails: as when the process has no descriptor left
    clock = Clock()
    tokens = TokenFile({}, clock)
    with pytest.raises(TokenUnreadable, match="cannot be read now"):
        tokens.value(paths, _config(token))
    token.rmdir()
    token.write_text("known\n")
    assert tokens.value(paths, _config(token)) == "known"
    token.unlink()
    token.mkdir()
    clock.now += TokenFile.RECHECK_S + 0.1
    assert tokens.value(paths, _config(token)) == "known"


def test_the_environment_wins_and_no_file_is_looked_at(tmp_path: Path, paths: Paths) -> None:
    token = tmp_path / "fleet-token"
    token.mkdir()
    assert TokenFile({"AGENT_HOOKS_FLEET_TOKEN": " from-env "}).value(paths, _config(token)) == "from-env"


def test_every_client_reads_the_token_with_one_reader_that_a_fifo_does_not_hold(tmp_path: Path, paths: Paths) -> None:
    """The server's check of callers, the CLI and the reporter (agent_hooks.fleet.token) and the OpenClaw client read
    their secret with agent_hooks.fleet.read_secret: a FIFO named as the token file (open() would wait for a
    writer, on the server's event loop) is refused at once, as the OpenClaw client always refused it."""
    import threading

    from agent_hooks import config as config_mod
    from agent_hooks import fleet
    from agent_hooks.openclaw import settings

    fifo = tmp_path / "fleet-token"
    os.mkfifo(fifo, 0o600)
    cfg = config_mod.defaults()
    cfg["fleet"]["token_file"] = str(fifo)
    cfg["openclaw"].update(url="ws://127.0.0.1:18789", token_file=str(fifo))
    got: dict[str, object] = {}

    def read_all() -> None:
        with pytest.raises(TokenUnreadable, match="not a regular file"):
            TokenFile({}).value(paths, cfg)
        got["server"] = "503"
        got["cli"] = fleet.token(paths, cfg, {})
        with pytest.raises(settings.SettingError, match="not a regular file"):
            settings.token(cfg, {})
        got["openclaw"] = "refused"

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():
        for _ in range(3):  # let the stuck reader go before failing
            with open(fifo, "w") as f:
                f.write("x\n")
        pytest.fail(f"reading a FIFO as the token file blocked (done: {got})")
    assert got == {"server": "503", "cli": None, "openclaw": "refused"}
    # The same file, private and readable, is the same token to each; the environment wins for each.
    fifo.unlink()
    fifo.write_text(" t0ken \n")
    fifo.chmod(0o600)
    assert TokenFile({}).value(paths, cfg) == fleet.token(paths, cfg, {}) == settings.token(cfg, {}) == "t0ken"
    assert fleet.token(paths, cfg, {"AGENT_HOOKS_FLEET_TOKEN": "env"}) == "env"


CALLER = r"""
import json, sys, urllib.request, urllib.error
port, token = sys.argv[1], sys.argv[2]
request = urllib.request.Request(f"http://127.0.0.1:{port}/api/board", headers={"Authorization": f"Bearer {token}"})
try:
    with urllib.request.urlopen(request, timeout=10) as answer:
        print(answer.status, "", "")
except urllib.error.HTTPError as exc:
    print(exc.code, exc.headers.get("Retry-After"), json.loads(exc.read())["error"].replace(" ", "_"))
"""


def _call_as_another_user(center: Center, token: str) -> tuple[int, str, str]:
    """A caller the kernel does not show as the server's user: a host, judged by its token alone."""
    out = subprocess.run([*as_nobody(), sys.executable, "-I", "-c", CALLER, str(center.port), token],
                         capture_output=True, text=True, timeout=30, cwd="/", check=True).stdout.split()
    return int(out[0]), (out[1] if len(out) > 1 else ""), (out[2].replace("_", " ") if len(out) > 2 else "")


@pytest.fixture
def center(tmp_path: Path) -> Iterator[Center]:
    token = tmp_path / "token"
    token.mkdir()  # exists, but cannot be read as a file: as when the server has no descriptor left
    server = Center(tmp_path / "agent-hooks", env={"AGENT_HOOKS__FLEET__TOKEN_FILE": str(token),
                                                   "AGENT_HOOKS__FLEET__NAMES": '["cc.example.org"]'}).start()
    yield server
    server.stop()


def test_a_token_that_cannot_be_read_is_answered_503_not_401(center: Center, tmp_path: Path) -> None:
    status, retry, error = _call_as_another_user(center, "secret-token")
    assert (status, retry) == (503, "1"), error
    assert "cannot be read now" in error
    # The owner on loopback is known by its uid, whatever it shows: still served.
    assert center.http.get("/api/board", headers={"Authorization": "Bearer secret-token"}).status_code == 200
    token = tmp_path / "token"
    token.rmdir()
    token.write_text("secret-token\n")
    os.chmod(token, 0o600)
    assert _call_as_another_user(center, "secret-token")[0] == 200
    assert _call_as_another_user(center, "wrong")[0] == 401


def test_a_configured_name_whose_token_cannot_be_read_is_try_again_at_the_front_door(center: Center) -> None:
    # The owner's own process calling by the fleet's name must show the token (a rebound page cannot);
    # when the token cannot be read, the door says try again, not "refused" (a 4xx is final to a sender).
    answer = center.http.get("/api/board", headers={"Host": f"cc.example.org:{center.port}",
                                                    "Authorization": "Bearer secret-token"})
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "1"
    assert "cannot be read now" in answer.json()["error"]
