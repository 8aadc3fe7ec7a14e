"""A credential per paired device (a person's browser), on a real command center over real HTTP.

The link `agent-hook fleet pair --device NAME` prints opens a pairing page with the code in place; its
form sets the device cookie (HttpOnly, SameSite=Strict, Path=/, not Secure over plain http). Every
answer and cancel made with that cookie is recorded under the device's name, whatever the body says.
A code works once; an expired one says so; a revoked device is refused (401).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.approvals import Held
from support.center import Center, center_for
from support.pairing import bearer, host_credential, pair_code
from support.repo import fixture_payload
from support.scripts import agent_hook, store_rows
from support.waiting import wait_for

PERMISSION = {**fixture_payload("permission_request_bash.json", "2.1.330"), "session_id": "c-asks-1"}


@pytest.fixture
def center(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Center]:
    """The test's own command center; the worker's shared one for a test marked shared_center (its codes,
    hosts and credentials are named only by it)."""
    with center_for(request, tmp_path / "center", {"AGENT_HOOKS__FLEET__HOST": "center"}) as c:
        yield c


def _cookie_attributes(set_cookie: str) -> tuple[str, set[str]]:
    first, *attrs = [p.strip() for p in set_cookie.split(";")]
    return first, {a.lower() for a in attrs}


def test_a_device_pairs_by_its_link_and_its_answers_carry_its_name(center: Center) -> None:
    doc = pair_code(center, "--device", "alices-phone")
    assert doc["kind"] == "device" and doc["link"] == f"{center.base}/pair?code={doc['code']}"
    browser = httpx.Client(base_url=center.base, timeout=10, trust_env=False)
    # Opening the link shows the page with the code in its field, and spends nothing.
    page = browser.get(f"/pair?code={doc['code']}")
    assert page.status_code == 200 and f'value="{doc["code"]}"' in page.text, page.text
    assert not page.headers.get("set-cookie")
    r = browser.post("/pair", data={"code": doc["code"]}, headers={"Origin": center.base})
    assert r.status_code == 303 and r.headers["location"] == "/", r.text
    first, attrs = _cookie_attributes(r.headers["set-cookie"])
    name, _, value = first.partition("=")
    assert name == "agent_hooks_device" and value.startswith("ah1.")
    assert {"httponly", "samesite=strict", "path=/"} <= attrs and "secure" not in attrs, attrs
    assert browser.get("/").status_code == 200  # the board, with the cookie

    # The code works once.
    again = httpx.post(f"{center.base}/pair", data={"code": doc["code"]}, headers={"Origin": center.base},
                       trust_env=False, timeout=10)
    assert again.status_code == 409 and "already used" in again.text
    assert "set-cookie" not in again.headers

    # A request held on the center; the phone answers it. The record names the phone, from its credential:
    # the body's "by" is kept as a note, never as who answered.
    held = Held(PERMISSION, {"AGENT_HOOKS_HOME": str(center.home), "HOME": center.env["HOME"]})
    [row] = wait_for(lambda: center.http.get("/api/approvals").json()["approvals"], what="the request")
    r = browser.post(f"/api/approvals/{row['id']}", json={"decision": "allow", "by": "the owner"},
                     headers={"Origin": center.base})
    assert r.status_code == 200, r.text
    assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"
    [stored] = store_rows(center.home, "SELECT answered_by, note FROM approvals WHERE id = ?", (row["id"],))
    assert tuple(stored) == ("alices-phone", "the owner")
    history = browser.get("/api/approvals", params={"state": "all"}).json()["approvals"]
    assert [a["answer"]["by"] for a in history if a["id"] == row["id"]] == ["alices-phone"]

    # A cancel by the phone is recorded under its name too.
    r = browser.post("/api/sessions/c-asks-1/cancel", json={"reason": "stop"}, headers={"Origin": center.base})
    assert r.status_code == 200, r.text
    acts = store_rows(center.home, "SELECT action, by_kind, by_name FROM fleet_actions ORDER BY id")
    assert [tuple(a) for a in acts] == [("answer: allow", "device", "alices-phone"),
                                        ("cancel", "device", "alices-phone")]
    # The board's page of the session shows who answered.
    page_doc = wait_for(lambda: (lambda r: r.status_code == 200 and r.json())(browser.get("/api/board/sessions/c-asks-1")),
                        what="the session's page")
    assert [a["answer"]["by"] for a in page_doc["approvals"]] == ["alices-phone"]

    # A device is a person's browser: it does not speak for a host.
    assert browser.post("/api/hooks/ingest", json={"tmux_session": "x", "event": "start"},
                        headers={"Origin": center.base}).status_code == 403
    assert browser.get("/api/fleet/controls", params={"host": "h", "wait": "0"}).status_code == 403

    listed = json.loads(agent_hook("fleet", "devices", "--json", env=center.env).stdout)["devices"]
    assert [d["name"] for d in listed] == ["alices-phone"] and listed[0]["last_seen_at"]

    # Revoked: refused at its next request (from the owner's own uid on loopback too: the cookie decides).
    agent_hook("fleet", "revoke", "--device", "alices-phone", env=center.env)
    r = browser.get("/api/board")
    assert r.status_code == 401 and "revoked" in r.json()["error"], r.text
    assert browser.post(f"/api/approvals/{row['id']}", json={"decision": "deny"},
                        headers={"Origin": center.base}).status_code == 401


@pytest.mark.shared_center
def test_a_code_of_the_wrong_kind_an_unknown_or_expired_one_pairs_nothing(center: Center, tmp_path: Path) -> None:
    host_code = pair_code(center, "--host", "host-q")["code"]
    r = httpx.post(f"{center.base}/pair", json={"code": host_code}, trust_env=False, timeout=10)
    assert r.status_code == 409 and "agent-hook fleet join" in r.json()["error"], r.text
    device_code = pair_code(center, "--device", "tablet")["code"]
    r = httpx.post(f"{center.base}/api/fleet/pair", json={"code": device_code}, trust_env=False, timeout=10)
    assert r.status_code == 409 and "browser" in r.json()["error"], r.text
    # Neither was spent by the wrong door: each still pairs what it was made for.
    assert httpx.post(f"{center.base}/api/fleet/pair", json={"code": host_code}, trust_env=False,
                      timeout=10).status_code == 200
    r = httpx.post(f"{center.base}/api/fleet/pair", json={"code": "ZZZZ-ZZZZ-ZZZZ"}, trust_env=False, timeout=10)
    assert r.status_code == 401 and "unknown pairing code" in r.json()["error"]
    # A code typed in lower case, with spaces, pairs all the same.
    r = httpx.post(f"{center.base}/pair", data={"code": " " + device_code.lower().replace("-", " ") + " "},
                   headers={"Origin": center.base}, trust_env=False, timeout=10)
    assert r.status_code == 303, r.text

    # An expired code says so (its expiry moved into the past in the center's store).
    late = pair_code(center, "--host", "host-late")["code"]
    import sqlite3

    conn = sqlite3.connect(center.home / "store.db")
    with conn:
        conn.execute("UPDATE fleet_pairing_codes SET expires_at = ? WHERE name = 'host-late'", (time.time() - 5,))
    conn.close()
    joined = agent_hook("fleet", "join", center.base, "--code", late, check=False,
                        env={**center.env, "AGENT_HOOKS_HOME": str(tmp_path / "late")})
    assert joined.returncode == 1 and "410" in joined.stderr and "expired" in joined.stderr, joined.stderr
    # Bad bodies are 4xx with a message, never a 500.
    for body, kind in ((b"{", "application/json"), (b'{"code": 5}', "application/json"), (b"", "text/plain"),
                       (b"code=" + b"A" * 200, "application/x-www-form-urlencoded")):
        r = httpx.post(f"{center.base}/api/fleet/pair", content=body, headers={"Content-Type": kind},
                       trust_env=False, timeout=10)
        assert r.status_code == 400 and r.json()["error"], (body, r.status_code, r.text)
    page = httpx.post(f"{center.base}/pair", content=b"code=%3Cscript%3E", trust_env=False, timeout=10,
                      headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": center.base})
    assert page.status_code == 401 and "<script>" not in page.text and "&lt;script&gt;" in page.text


@pytest.mark.shared_center
def test_a_stale_or_unknown_credential_is_refused_even_on_the_owners_loopback(center: Center) -> None:
    cred = host_credential(center, "host-z")
    forged = cred[:-4] + ("AAAA" if not cred.endswith("AAAA") else "BBBB")
    for value in (forged, "ah1.0123456789abcdef.notarealsecretnotarealsecret"):
        r = center.http.get("/api/approvals", headers=bearer(value))
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", r.text
    browser = httpx.Client(base_url=center.base, timeout=10, trust_env=False, cookies={"agent_hooks_device": forged})
    assert browser.get("/api/board").status_code == 401
    # The same uid with no credential is the owner, as before.
    assert center.http.get("/api/board").status_code == 200


def test_a_reply_from_a_device_is_recorded_under_its_name_and_its_host_confirms_it(center: Center) -> None:
    """A device replies to a paired host's session: the control goes to that host, which says (with its own
    credential) that it typed it; the record names the device. Another host's word is refused."""
    import threading

    from support.pairing import device_client

    host_r = bearer(host_credential(center, "host-r"))
    host_s = bearer(host_credential(center, "host-s"))
    card = {"session_id": "r-sess-1", "tmux_session": "agent-r", "in_tmux": True, "reply": True,
            "own_state": "awaiting"}
    assert center.http.post("/api/fleet/report", json={"cards": [card]}, headers=host_r).status_code == 200
    [card_id] = wait_for(lambda: [c["id"] for c in center.board_cards().values() if c["host"] == "host-r"],
                         what="host R's card")
    phone = device_client(center, "bobs-laptop")
    got: list[httpx.Response] = []
    sender = threading.Thread(target=lambda: got.append(phone.post(
        f"/api/sessions/{card_id}/reply", json={"text": "carry on"}, headers={"Origin": center.base})))
    sender.start()
    [control] = wait_for(lambda: center.http.get("/api/fleet/controls", params={"wait": "0"}, headers=host_r)
                         .json()["controls"], what="the reply control")
    assert control["action"] == "reply" and control["reason"] == "carry on"
    # Host S cannot say what became of host R's control.
    r = center.http.post("/api/fleet/replies", json={"results": [{"seq": control["seq"], "error": None}]},
                         headers=host_s)
    assert r.status_code == 403, r.text
    while sender.is_alive():  # until the route waits for host R's word (it registers after the control)
        r = center.http.post("/api/fleet/replies", json={"results": [{"seq": control["seq"], "error": None}]},
                             headers=host_r)
        assert r.status_code == 200, r.text
        sender.join(0.2)
    assert got[0].status_code == 200 and got[0].json()["applied"] == "typed", got[0].text
    acts = store_rows(center.home, "SELECT action, card, host, by_kind, by_name, note FROM fleet_actions")
    assert [tuple(a) for a in acts] == [("reply", card_id, "host-r", "device", "bobs-laptop", "carry on")]
