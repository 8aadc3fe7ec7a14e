"""The server process: every route module's shutdown runs, even when one before it fails; the board's address."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from agent_hooks import config
from agent_hooks.paths import Paths
from agent_hooks.server.app import create_app


def _area(name: str, calls: list[str], fail: bool = False) -> types.ModuleType:
    """A route module of its own (no routes), registered where importlib finds it."""
    module = types.ModuleType(name)

    async def shutdown(state: object) -> None:
        calls.append(name)
        if fail:
            raise TypeError("this area cannot stop")

    module.routes = lambda state: []  # type: ignore[attr-defined]
    module.shutdown = shutdown  # type: ignore[attr-defined]
    sys.modules[name] = module
    return module


def test_a_failing_shutdown_is_logged_and_the_others_still_run(tmp_path: Path) -> None:
    calls: list[str] = []
    names = ["lifespan_first", "lifespan_failing", "lifespan_last"]
    for name in names:
        _area(name, calls, fail=name == "lifespan_failing")
    env = {"AGENT_HOOKS_HOME": str(tmp_path / "home")}
    paths = Paths(env)
    try:
        app = create_app(paths, config.defaults(), env, route_modules=names)
        with TestClient(app):
            pass
    finally:
        for name in names:
            sys.modules.pop(name, None)
    assert calls == ["lifespan_last", "lifespan_failing", "lifespan_first"]  # reverse order, none skipped
    lines = [json.loads(line) for line in Path(paths.error_log).read_text().splitlines()]
    assert [line["message"] for line in lines] == [
        "lifespan_failing: shutdown failed: TypeError: this area cannot stop"]


def test_the_board_url_names_the_address_the_server_listens_on() -> None:
    from agent_hooks.server.local import board_url

    def cfg(listen: str) -> dict[str, Any]:
        return {"fleet": {"listen": listen}}

    assert board_url(cfg(""), 8377) == "http://127.0.0.1:8377/"
    assert board_url(cfg("0.0.0.0"), 8377) == "http://127.0.0.1:8377/"  # every address: loopback among them
    assert board_url(cfg("192.0.2.7"), 8377) == "http://192.0.2.7:8377/"  # only that one: 127.0.0.1 would not answer
    assert board_url(cfg("::1"), 9) == "http://[::1]:9/"
