"""`agent-hook fleet pair / join / hosts / devices / revoke`, the installed command run as a subprocess
against a real command center, and doctor's word on a host that still uses the shared fleet token."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.center import Center, center_for
from support.pairing import read_credential_file
from support.scripts import agent_hook, store_rows


@pytest.fixture
def center(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Center]:
    """The test's own command center; the worker's shared one for a test marked shared_center (one that
    only makes codes and reads what it printed, or is refused)."""
    with center_for(request, tmp_path / "center", {"AGENT_HOOKS__FLEET__HOST": "center"}) as c:
        yield c


def _host_env(tmp_path: Path, name: str, **extra: str) -> dict[str, str]:
    home = tmp_path / name
    return {"AGENT_HOOKS_HOME": str(home), "HOME": str(tmp_path / f"{name}-user"), "AGENT_HOOKS__FLEET__HOST": name,
            **extra}


@pytest.mark.shared_center
def test_pair_prints_a_code_and_the_line_to_run(center: Center) -> None:
    out = agent_hook("fleet", "pair", "--host", "build-1", env=center.env).stdout
    assert "pairing code for host build-1:" in out and "works once, for 10 minutes" in out
    assert f"agent-hook fleet join {center.base} --code " in out
    doc = json.loads(agent_hook("fleet", "pair", "--host", "build-1", "--minutes", "3", "--json",
                                env=center.env).stdout)
    assert doc["kind"] == "host" and doc["name"] == "build-1" and doc["expires_in_s"] == 180
    assert doc["join"] == f"agent-hook fleet join {center.base} --code {doc['code']}"
    assert len(doc["code"]) == 14 and doc["code"].count("-") == 2
    assert abs(doc["expires_at"] - (time.time() + 180)) < 30
    # The default comes from fleet.pairing_code_minutes.
    doc = json.loads(agent_hook("fleet", "pair", "--device", "ipad", "--json",
                                env={**center.env, "AGENT_HOOKS__FLEET__PAIRING_CODE_MINUTES": "2"}).stdout)
    assert doc["expires_in_s"] == 120 and doc["link"] == f"{center.base}/pair?code={doc['code']}"
    assert "join" not in doc
    # --url: the address other machines use.
    doc = json.loads(agent_hook("fleet", "pair", "--host", "b2", "--url", "http://cc.lan:24817/", "--json",
                                env=center.env).stdout)
    assert doc["join"].startswith("agent-hook fleet join http://cc.lan:24817 --code ")
    # Only hashes are stored: no code is in the store in clear.
    import sqlite3

    conn = sqlite3.connect(center.home / "store.db")
    try:
        assert doc["code"].replace("-", "") not in " ".join(r[0] for r in conn.execute(
            "SELECT code_sha256 FROM fleet_pairing_codes"))
    finally:
        conn.close()


@pytest.mark.shared_center
@pytest.mark.parametrize("args, code, says", [
    ((), 2, "give --host NAME or --device NAME"),
    (("--host", "a", "--device", "b"), 2, "give --host NAME or --device NAME"),
    (("--host", "bad name!"), 2, "plain name"),
    (("--host", "center"), 1, "own name"),
    (("--host", "a", "--minutes", "0"), 1, "from 1 to 1440"),
    (("--device", "a", "--url", "ftp://x"), 2, "not an http(s) URL"),
])
def test_pair_refuses_what_it_cannot_do(center: Center, args: tuple[str, ...], code: int, says: str) -> None:
    proc = agent_hook("fleet", "pair", *args, env=center.env, check=False)
    assert proc.returncode == code and says in proc.stderr, (proc.returncode, proc.stderr)


def test_join_hosts_devices_and_revoke(center: Center, tmp_path: Path) -> None:
    assert json.loads(agent_hook("fleet", "hosts", "--json", env=center.env).stdout) == {"hosts": []}
    assert "no hosts paired" in agent_hook("fleet", "hosts", env=center.env).stdout
    env = _host_env(tmp_path, "build-1", AGENT_HOOKS_INGEST_URL=f"{center.base}/api/hooks/ingest")
    code = json.loads(agent_hook("fleet", "pair", "--host", "build-1", "--json", env=center.env).stdout)["code"]
    joined = agent_hook("fleet", "join", center.base, "--code", code, env=env).stdout
    assert joined.startswith(f"paired: this host is 'build-1' on the command center {center.base};"), joined
    assert "note:" not in joined  # forward.url names this center; the names agree
    assert "ah1." not in joined  # the credential is never printed
    saved = read_credential_file(Path(env["AGENT_HOOKS_HOME"]))
    assert saved["host"] == "build-1"

    # A host whose name here differs, and whose forward.url names no center: told both.
    other = _host_env(tmp_path, "laptop")
    code = json.loads(agent_hook("fleet", "pair", "--host", "ci-7", "--json", env=center.env).stdout)["code"]
    out = agent_hook("fleet", "join", f"{center.base}/api/hooks/ingest", "--code", code, env=other).stdout
    assert "this host is 'ci-7' on the command center" in out
    assert "forward.url does not name this command center" in out and "[fleet] host = 'ci-7'" in out

    listed = json.loads(agent_hook("fleet", "hosts", "--json", env=center.env).stdout)["hosts"]
    assert [h["name"] for h in listed] == ["build-1", "ci-7"]
    assert all(h["paired_at"] and h["revoked_at"] is None and h["paired_from"] == "127.0.0.1" for h in listed)
    table = agent_hook("fleet", "hosts", env=center.env).stdout
    assert table.splitlines()[0].split()[:4] == ["NAME", "PAIRED", "LAST", "SEEN"] and "build-1" in table

    code = json.loads(agent_hook("fleet", "pair", "--device", "phone", "--json", env=center.env).stdout)["code"]
    import httpx

    r = httpx.post(f"{center.base}/pair", json={"code": code}, trust_env=False, timeout=10)
    assert r.status_code == 200 and r.json()["device"] == "phone"
    assert [d["name"] for d in json.loads(agent_hook("fleet", "devices", "--json", env=center.env).stdout)["devices"]] \
        == ["phone"]

    # Revoke: a host by name, a device with --device; unknown names are "not found" (exit 3).
    done = json.loads(agent_hook("fleet", "revoke", "ci-7", "--json", env=center.env).stdout)
    assert done == {"ok": True, "kind": "host", "name": "ci-7", "revoked": True}
    again = agent_hook("fleet", "revoke", "ci-7", env=center.env, check=False)
    assert again.returncode == 3 and "no paired host 'ci-7'" in again.stderr
    assert agent_hook("fleet", "revoke", "phone", env=center.env, check=False).returncode == 3  # a device, not a host
    assert "device phone: revoked" in agent_hook("fleet", "revoke", "--device", "phone", env=center.env).stdout
    assert [h["name"] for h in json.loads(agent_hook("fleet", "hosts", "--json", env=center.env).stdout)["hosts"]] \
        == ["build-1"]
    everyone = json.loads(agent_hook("fleet", "hosts", "--all", "--json", env=center.env).stdout)["hosts"]
    assert [(h["name"], bool(h["revoked_at"])) for h in everyone] == [("build-1", False), ("ci-7", True)]

    # Pairing a name again replaces its credential: the old one stops working.
    old = read_credential_file(Path(env["AGENT_HOOKS_HOME"]))["credential"]
    code = json.loads(agent_hook("fleet", "pair", "--host", "build-1", "--json", env=center.env).stdout)["code"]
    agent_hook("fleet", "join", center.base, "--code", code, env=env)
    new = read_credential_file(Path(env["AGENT_HOOKS_HOME"]))["credential"]
    assert new != old
    auth = {"Authorization": f"Bearer {old}"}
    assert httpx.get(f"{center.base}/api/fleet/controls", headers=auth, trust_env=False, timeout=10).status_code == 401
    auth = {"Authorization": f"Bearer {new}"}
    assert httpx.get(f"{center.base}/api/fleet/controls", params={"wait": "0"}, headers=auth, trust_env=False,
                     timeout=10).status_code == 200


def test_join_says_what_went_wrong(center: Center, tmp_path: Path) -> None:
    env = _host_env(tmp_path, "h1")
    bad = agent_hook("fleet", "join", "not a url", "--code", "X", env=env, check=False)
    assert bad.returncode == 2 and "not a command center's URL" in bad.stderr
    unknown = agent_hook("fleet", "join", center.base, "--code", "AAAA-BBBB-CCCC", env=env, check=False)
    assert unknown.returncode == 1 and "401" in unknown.stderr and "unknown pairing code" in unknown.stderr
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = agent_hook("fleet", "join", f"http://127.0.0.1:{port}", "--code", "AAAA-BBBB-CCCC", env=env, check=False)
    assert gone.returncode == 1 and "unreachable" in gone.stderr
    assert not (Path(env["AGENT_HOOKS_HOME"]) / "fleet-credential").exists()


def test_doctor_says_when_a_host_still_uses_the_shared_token(center: Center, tmp_path: Path) -> None:
    env = _host_env(tmp_path, "old-host", AGENT_HOOKS_INGEST_URL=f"{center.base}/api/hooks/ingest",
                    AGENT_HOOKS__FORWARD__ENABLED="true", AGENT_HOOKS_FLEET_TOKEN="the-shared-token")
    before = json.loads(agent_hook("doctor", "--json", env=env, check=False).stdout)
    lines = [c["summary"] for c in before["checks"] if c["area"] == "board"]
    assert any("with the shared fleet token" in m for m in lines), lines
    code = json.loads(agent_hook("fleet", "pair", "--host", "old-host", "--json", env=center.env).stdout)["code"]
    agent_hook("fleet", "join", center.base, "--code", code, env=env)
    after = json.loads(agent_hook("doctor", "--json", env=env, check=False).stdout)
    lines = [c["summary"] for c in after["checks"] if c["area"] == "board"]
    assert not any("shared fleet token" in m for m in lines), lines
    assert any(m == f"paired with the command center {center.base} as host 'old-host'" for m in lines), lines


def test_doctor_on_the_center_names_hosts_that_poll_with_the_shared_token(center: Center) -> None:
    import httpx

    token = agent_hook("fleet", "token", "--new", env=center.env).stdout.strip()

    def center_lines() -> list[str]:
        doc = json.loads(agent_hook("doctor", "--json", env=center.env, check=False).stdout)
        return [c["summary"] for c in doc["checks"] if c["area"] == "board"]

    assert not any("shared fleet token" in m for m in center_lines())
    r = httpx.get(f"{center.base}/api/fleet/controls", params={"host": "old-host", "wait": "0"},
                  headers={"Authorization": f"Bearer {token}"}, trust_env=False, timeout=10)
    assert r.status_code == 200, r.text
    assert any("old-host still poll this command center with the shared fleet token" in m for m in center_lines())
    # Paired, it polls with its credential: no longer named.
    code = json.loads(agent_hook("fleet", "pair", "--host", "old-host", "--json", env=center.env).stdout)["code"]
    cred = httpx.post(f"{center.base}/api/fleet/pair", json={"code": code}, trust_env=False, timeout=10).json()
    r = httpx.get(f"{center.base}/api/fleet/controls", params={"wait": "0"},
                  headers={"Authorization": f"Bearer {cred['credential']}"}, trust_env=False, timeout=10)
    assert r.status_code == 200, r.text
    assert not any("shared fleet token" in m for m in center_lines())


def test_cancel_through_the_center_sends_the_hosts_credential(center: Center, tmp_path: Path) -> None:
    """`agent-hook cancel --server` on a paired host speaks with the host's credential: its own session is
    cancelled (recorded as done by that host), another host's is refused (403), and so is a task."""
    import httpx

    env = _host_env(tmp_path, "build-1")
    code = json.loads(agent_hook("fleet", "pair", "--host", "build-1", "--json", env=center.env).stdout)["code"]
    agent_hook("fleet", "join", center.base, "--code", code, env=env)
    own = read_credential_file(Path(env["AGENT_HOOKS_HOME"]))["credential"]
    r = httpx.post(f"{center.base}/api/fleet/report", json={"cards": [{"session_id": "b1-sess", "tmux_session": "t1"}]},
                   headers={"Authorization": f"Bearer {own}"}, trust_env=False, timeout=10)
    assert r.status_code == 200, r.text
    r = center.http.post("/api/fleet/report", json={"cards": [{"session_id": "other-sess"}]},
                         headers={"X-Agent-Hooks-Host": "other-host"})  # the owner names a host, as before pairing
    assert r.status_code == 200, r.text
    out = agent_hook("cancel", "--server", center.base, "b1-sess", "--reason", "wrong branch", env=env).stdout
    assert "on build-1: cancelled (sent)" in out, out
    denied = agent_hook("cancel", "--server", center.base, "other-sess", "--reason", "x", env=env, check=False)
    assert denied.returncode == 1 and "HTTP 403" in denied.stderr and "its own sessions" in denied.stderr
    denied = agent_hook("cancel", "--server", center.base, "--task", "T-9", "--reason", "x", env=env, check=False)
    assert denied.returncode == 1 and "HTTP 403" in denied.stderr
    acts = store_rows(center.home, "SELECT action, by_kind, by_name, host FROM fleet_actions")
    assert [tuple(a) for a in acts] == [("cancel", "host", "host build-1", "build-1")]


def test_doctor_fails_an_unsafe_or_unreadable_credential_file(tmp_path: Path) -> None:
    env = _host_env(tmp_path, "h2")
    home = Path(env["AGENT_HOOKS_HOME"])
    home.mkdir(parents=True)
    path = home / "fleet-credential"
    path.write_text(json.dumps({"center": "http://127.0.0.1:1", "host": "h2", "credential": "ah1.x.y"}))
    path.chmod(0o644)

    def board_lines() -> list[tuple[str, str]]:
        doc = json.loads(agent_hook("doctor", "--json", "--no-run", env=env, check=False).stdout)
        return [(c["status"], c["summary"]) for c in doc["checks"] if c["area"] == "board"]

    assert any(s == "fail" and "readable by others" in m for s, m in board_lines()), board_lines()
    path.chmod(0o600)
    assert not any(s == "fail" for s, _ in board_lines())
    path.write_text("not json")
    assert any(s == "fail" and "cannot be read" in m for s, m in board_lines()), board_lines()
