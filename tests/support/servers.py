"""A real resident server for tests, on a free loopback port.

It is started and stopped by the functions `agent-hook server start` and `stop` call
(agent_hooks.server.process), from the test's own process: the same detached server process, the same
wait for its /health, without a CLI process around each. The fast tier starts some 150 servers, and a
CLI process costs about a tenth of a second of CPU. Tests of the commands themselves run them:
``Server.cli("start")``.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.ports import free_port
from support.scripts import BIN


class Server:
    """The server of one test's AGENT_HOOKS_HOME; its port and a POST helper."""

    def __init__(self, home: Path, port: int) -> None:
        self.home = home
        self.port = port
        self.env = {**os.environ, "AGENT_HOOKS__SERVE__PORT": str(port)}

    def cli(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(BIN / "agent-hook"), "server", *args], capture_output=True, text=True,
                              env={**self.env, **(env or {})}, timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"agent-hook server {' '.join(args)}: {proc.returncode} {proc.stderr}")
        return proc

    def _store_and_config(self, strict: bool = False) -> tuple[Any, dict[str, Any]]:
        """This server's paths and configuration, read as the commands read them. A configuration that
        does not load raises with ``strict`` (as `server start` refuses it), else the defaults on the
        port it started with serve (a test that broke its config.toml must still stop its server)."""
        from agent_hooks import config as config_mod
        from agent_hooks.paths import Paths

        paths = Paths(self.env)
        try:
            return paths, config_mod.load(paths, self.env)
        except config_mod.ConfigError:
            if strict:
                raise
            config = config_mod.defaults()
            config["serve"]["port"] = self.port
            return paths, config

    def start(self) -> dict[str, Any]:
        """Start the server (as `agent-hook server start`); its /health."""
        from agent_hooks.server import process

        paths, config = self._store_and_config(strict=True)
        try:
            doc, _done = process.start(paths, config, self.env)
        except process.ServerError:
            process.stop(paths, config)  # one that came up too late must not outlive the test
            raise
        return doc

    def stop(self) -> None:
        """Stop the server (as `agent-hook server stop`); nothing when none runs."""
        from agent_hooks.server import process

        process.stop(*self._store_and_config())

    def status(self) -> dict[str, Any]:
        """What `agent-hook server status --json` prints (the same function, through JSON)."""
        from agent_hooks.server import process

        return json.loads(json.dumps(process.status(*self._store_and_config())))  # type: ignore[no-any-return]

    def post(self, body: bytes | dict[str, Any], headers: dict[str, str] | None = None,
             timeout: float = 30, event: str | None = None) -> tuple[int, dict[str, str], bytes]:
        """One hook call as Claude Code makes it: a new connection, JSON body, to /hooks/<Event>
        (the body's event unless ``event`` says otherwise; "" posts to /hooks)."""
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        if event is None:
            event = body.get("hook_event_name", "") if isinstance(body, dict) else ""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("POST", f"/hooks/{event}" if event else "/hooks", data, {"Content-Type": "application/json", **(headers or {})})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def answer(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any] | None:
        """The parsed answer of a hook call that must succeed (None: empty body)."""
        status, got, data = self.post(body, headers)
        assert status == 200, (status, data)
        assert "x-agent-hooks-problem" not in got, got
        return json.loads(data) if data.strip() else None


# Root ignores file modes: the server runs without the capabilities that let it (setpriv drops
# them from the bounding set, so they are gone after exec too), and a 0444 store binds it as it
# binds any user. A user other than root needs nothing.
NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all"]


def mode_binding_prefix(tmp: Path) -> list[str]:
    """The command prefix under which a 0444 file cannot be written; skips when there is none."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root, and setpriv (util-linux) is missing to drop CAP_DAC_OVERRIDE")
    probe = tmp / "mode-probe"
    probe.write_text("")
    probe.chmod(0o444)
    proc = subprocess.run([*NO_DAC, "sh", "-c", f"echo x >> '{probe}'"], capture_output=True, text=True)
    probe.unlink()
    if proc.returncode == 0:
        pytest.skip("running as root, and dropping CAP_DAC_OVERRIDE with setpriv does not make file modes bind here")
    return NO_DAC


def as_nobody() -> list[str]:
    """The command prefix that runs a caller as another user (nobody): skips unless run as root."""
    if os.geteuid() != 0:
        pytest.skip("running a caller as another uid needs root (setpriv)")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]


NOBODY = 65534


def unreachable_by_others(*paths: Path) -> str | None:
    """Why a user who is neither the owner nor in the group cannot use ``paths``: the first directory
    on the way it may not enter, or a file it may not read; None when it can."""
    import stat

    for path in paths:
        for target in dict.fromkeys((path, path.resolve())):
            for d in reversed(target.parents):
                mode = stat.S_IMODE(d.stat().st_mode)
                if not mode & stat.S_IXOTH:
                    return f"other users cannot enter {d} (mode {mode:04o})"
            mode = stat.S_IMODE(target.stat().st_mode)
            if not mode & stat.S_IROTH:
                return f"other users cannot read {target} (mode {mode:04o})"
    return None


def start_with_prefix(server: Server, prefix: list[str]) -> None:
    """`agent-hook server start` run under ``prefix`` (mode_binding_prefix's), kept on the server for
    the test's later commands."""
    server.prefix = prefix  # type: ignore[attr-defined]
    proc = subprocess.run([*prefix, str(BIN / "agent-hook"), "server", "start"], capture_output=True, text=True,
                          env=server.env, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr + server_log(server.home)


def server_log(home: Path) -> str:
    """The server's log under ``home`` ("" before it wrote one)."""
    path = home / "logs" / "server.log"
    return path.read_text() if path.exists() else ""


def start_server(home: Path, env: dict[str, str] | None = None) -> Server:
    server = Server(home, free_port())
    server.env.update(env or {})
    server.start()
    return server


@pytest.fixture
def server(hooks_home: Path) -> Iterator[Server]:
    """A server on this test's store, started for the test and stopped after it."""
    srv = start_server(hooks_home)
    try:
        yield srv
    finally:
        srv.stop()
