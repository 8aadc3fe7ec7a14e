"""Pairing for tests: codes made by the installed `agent-hook fleet pair` on a real command center, traded
through its real HTTP routes, and a center with a paired host whose own server runs (two homes)."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from support.center import Center
from support.scripts import agent_hook


def pair_code(center: Center, *args: str) -> dict[str, Any]:
    """`agent-hook fleet pair ARGS --json` on the command center's home: the code and what it pairs."""
    return json.loads(agent_hook("fleet", "pair", *args, "--json", env=center.env).stdout)  # type: ignore[no-any-return]


def host_credential(center: Center, name: str) -> str:
    """A credential for host ``name``: a code from the CLI, traded at POST /api/fleet/pair (as `join` does)."""
    code = pair_code(center, "--host", name)["code"]
    r = center.http.post("/api/fleet/pair", json={"code": code})
    assert r.status_code == 200, r.text
    assert r.json()["host"] == name
    return r.json()["credential"]  # type: ignore[no-any-return]


def device_client(center: Center, name: str) -> httpx.Client:
    """A browser-like client (it keeps cookies) paired as device ``name`` by its link: the page the link
    opens, then its form."""
    link = pair_code(center, "--device", name)["link"]
    client = httpx.Client(base_url=center.base, timeout=10, trust_env=False)
    page = client.get(link.replace(center.base, ""))
    assert page.status_code == 200, page.text
    code = link.split("code=", 1)[1]
    r = client.post("/pair", data={"code": code}, headers={"Origin": center.base})
    assert r.status_code == 303, r.text
    return client


def bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


def read_credential_file(home: Path) -> dict[str, Any]:
    path = home / "fleet-credential"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    return json.loads(path.read_text())  # type: ignore[no-any-return]


@contextmanager
def center_and_paired_host(tmp_path: Path, name: str = "host-b", extra: dict[str, str] | None = None,
                           center_db: str = "") -> Iterator[tuple[Center, Center, dict[str, str]]]:
    """A command center ("center") and host ``name``, paired with it by `agent-hook fleet join` before its
    server starts; its hooks forward to the center and its server subscribes there with its credential.
    ``center_db``: the center's [center] database ("" = its SQLite store). Yields (center, host, the host's
    hook environment)."""
    center = Center(tmp_path / "center", env={"AGENT_HOOKS__FLEET__HOST": "center",
                                              **({"AGENT_HOOKS__CENTER__DATABASE": center_db} if center_db else {})}
                    ).start()
    settings = {
        "AGENT_HOOKS__FLEET__HOST": name,
        "AGENT_HOOKS__FORWARD__ENABLED": "true",
        "AGENT_HOOKS_INGEST_URL": f"{center.base}/api/hooks/ingest",
        "AGENT_HOOKS__FORWARD__IDLE_EXIT_S": "5",
        "AGENT_HOOKS__FLEET__SUBSCRIBE_BACKOFF_MAX_S": "0.5",
        **(extra or {}),
    }
    host = Center(tmp_path / name, env=settings)
    env = {"AGENT_HOOKS_HOME": str(host.home), "HOME": host.env["HOME"], **settings}
    try:
        code = pair_code(center, "--host", name)["code"]
        agent_hook("fleet", "join", center.base, "--code", code, env=env)
        host.start()
        yield center, host, env
    finally:
        host.stop()
        center.stop()


