"""The board on a phone and as an app, in headless Chromium (Debian's, via Playwright): at 390 x 844 nothing is
wider than the screen, every control is on it and at least 44 px tall, the filters fold into a menu and the
columns become one list with a state selector; each state is said once, in words, with a legend; a link to
one request opens it; the manifest, icons and service worker are served and the worker registers, shows a
push and opens its request."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.approvals import PERMISSION, Held
from support.browser import chromium_page
from support.center import Center, center_for

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")

PHONE = (390, 844)


@pytest.fixture
def center(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Center]:
    """The test's own command center; the worker's shared one for a test marked shared_center."""
    with center_for(request, tmp_path / "cc", {"AGENT_HOOKS__FLEET__HOST": "here"}) as server:
        yield server


@pytest.fixture
def phone(center: Center) -> Iterator[Any]:
    with chromium_page(sync_api, *PHONE) as pg:
        yield pg


@pytest.fixture
def held(center: Center) -> Iterator[list[Held]]:
    """Requests held by PermissionRequest executables; given up (terminated) after the test."""
    out: list[Held] = []
    yield out
    for h in out:
        if h.proc.poll() is None:
            h.proc.terminate()
            h.proc.wait(timeout=10)


def _hold(center: Center, held: list[Held], sid: str, command: str) -> None:
    env = {"AGENT_HOOKS_HOME": center.env["AGENT_HOOKS_HOME"], "HOME": center.env["HOME"], "TMUX": "", "TMUX_PANE": ""}
    held.append(Held({**PERMISSION, "session_id": sid, "tool_input": {"command": command}}, env))


def _pending(center: Center, n: int) -> dict[str, dict[str, Any]]:
    """The center's pending requests by session id, once there are ``n`` (two held at once may be asked in
    either order)."""
    end = time.time() + 10
    while time.time() < end:
        found = [a for a in center.http.get("/api/approvals").json()["approvals"] if a["state"] == "pending"]
        if len(found) == n:
            return {a["session_id"]: a for a in found}
        time.sleep(0.05)
    raise AssertionError(f"not {n} pending requests: {found}")


def _open(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#conn[data-state=live]", timeout=15000)


# What is on screen and too small: every visible control (button, field, selector, the menu's toggle) whose
# box leaves the screen sideways or is under 44 px tall. Only the header's tiny controls on a wide screen are
# spared by the caller; here every one counts.
OFF_OR_SMALL = """(root) => {
  const out = [];
  for (const n of document.querySelectorAll(root + ' button, ' + root + ' input:not([type=checkbox]), ' + root + ' select')) {
    const r = n.getBoundingClientRect();
    if (!r.width || !r.height || getComputedStyle(n).visibility === 'hidden') continue;   // not shown
    const what = (n.tagName + ' ' + (n.className || n.id || '') + ' ' + (n.textContent || n.placeholder || '')).trim();
    if (r.left < 0 || r.right > innerWidth + 0.5) out.push(`${what}: off screen (${r.left.toFixed(0)}..${r.right.toFixed(0)})`);
    if (r.height < 44) out.push(`${what}: ${r.height.toFixed(1)} px tall`);
  }
  return out;
}"""


def test_phone_no_sideways_scroll_big_controls_menu_and_one_list(center: Center, phone: Any, held: list[Held]) -> None:
    """Two requests pending at 390 x 844: the page is no wider than the screen, every button and field is on it and
    at least 44 px tall, the filters (and notify me, and the day's cost) sit in a menu, and the state columns are
    one list that the state selector switches."""
    _hold(center, held, "phone-1", "make migrate ENV=staging && psql -f 0042_invoices.sql --single-transaction")
    _hold(center, held, "phone-2", "terraform apply -auto-approve")
    working = center.ingest({"tmux_session": "agent-far", "event": "tool_use", "metadata": "Grep: ok"},
                            headers={"X-Agent-Hooks-Host": "web-1"}).json()["session"]
    for i in range(5):  # a fleet: each host's spend in the header's menu
        center.ingest({"tmux_session": f"agent-{i}", "event": "tool_use"}, headers={"X-Agent-Hooks-Host": f"build-server-0{i}"})
    asked = _pending(center, 2)
    _open(phone, center.base + "/")
    phone.wait_for_function("document.querySelectorAll('.need').length === 2", timeout=5000)
    phone.wait_for_selector(f'.card[data-id="{working}"]', state="attached", timeout=5000)

    width = phone.evaluate("[document.documentElement.scrollWidth, document.body.scrollWidth, innerWidth]")
    assert max(width[:2]) <= PHONE[0] == width[2], f"the page scrolls sideways: {width}"
    assert phone.evaluate(OFF_OR_SMALL, "body") == []
    # The requests stack, each as wide as the list; Allow, Deny and the message field are full size.
    boxes = [phone.locator(".need").nth(i).bounding_box() for i in range(2)]
    assert boxes[0]["y"] + boxes[0]["height"] <= boxes[1]["y"] and abs(boxes[0]["x"] - boxes[1]["x"]) < 1, boxes
    for sel in (".need button.allow", ".need button.deny", ".need input.deny-msg"):
        box = phone.locator(sel).first.bounding_box()
        assert box["height"] >= 44 and box["x"] >= 0 and box["x"] + box["width"] <= PHONE[0], (sel, box)
    assert phone.locator(".need input.deny-msg").first.bounding_box()["width"] >= 300  # not "me"

    # The filters fold into a menu, opened by its button; they are then on screen, and as big.
    for sel in ("#f-host", "#f-type", "#f-task", "#needs-notify", "#spend-today"):
        assert phone.locator(sel).is_hidden(), sel
    phone.click("#menu-toggle")
    assert phone.get_attribute("#menu-toggle", "aria-expanded") == "true"
    for sel in ("#f-host", "#f-type", "#f-task", "#needs-notify", "#spend-today"):
        assert phone.locator(sel).is_visible(), sel
    assert phone.evaluate(OFF_OR_SMALL, ".top") == []
    assert max(phone.evaluate("[document.documentElement.scrollWidth, document.body.scrollWidth]")) <= PHONE[0]
    header = phone.locator(".top").bounding_box()
    for sel in ("#f-task", "#notify-label", "#spend"):  # inside the dark bar, not on the page beneath it
        box = phone.locator(sel).bounding_box()
        assert header["y"] <= box["y"] and box["y"] + box["height"] <= header["y"] + header["height"], (sel, box, header)
    phone.click("#menu-toggle")
    assert phone.locator("#f-host").is_hidden()

    # One list: a single column shows; the selector names each state with its count and switches the list.
    assert phone.locator(".col:visible").count() == 1
    options = phone.eval_on_selector_all("#state-pick option", "os => os.map(o => o.textContent)")
    assert "Working (6)" in options and "Waiting for you (2)" in options, options
    assert phone.input_value("#state-pick") == "awaiting_review"  # the sessions asking come first
    phone.select_option("#state-pick", "running")
    phone.wait_for_selector(f'#col-running .card[data-id="{working}"]', state="visible", timeout=2000)
    assert phone.locator(".col:visible").count() == 1 and phone.locator("#col-awaiting_review").is_hidden()
    card = phone.locator(f'.card[data-id="{working}"]').bounding_box()
    assert card["x"] >= 0 and card["x"] + card["width"] <= PHONE[0], card
    assert max(phone.evaluate("[document.documentElement.scrollWidth, document.body.scrollWidth]")) <= PHONE[0]

    # Allow on a phone answers as on a desktop.
    phone.locator(f'.need[data-id="{asked["phone-1"]["id"]}"] button.allow').click()
    phone.wait_for_function("document.querySelectorAll('.need').length === 1", timeout=5000)
    assert held[0].answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"


@pytest.mark.shared_center
def test_the_desktop_board_keeps_its_columns(center: Center) -> None:
    """At 1400 px every column shows side by side, the filters sit in the bar, and there is no menu button or
    state selector."""
    center.ingest({"tmux_session": "agent-far", "event": "tool_use"}, headers={"X-Agent-Hooks-Host": "web-1"})
    with chromium_page(sync_api, 1400, 800) as page:
        _open(page, center.base + "/")
        assert page.locator(".col:visible").count() == 5
        assert page.locator("#menu-toggle").is_hidden() and page.locator("#state-pick").is_hidden()
        assert page.locator("#f-task").is_visible() and page.locator("#needs-notify").is_visible()
        tops = {round(page.locator(f"#col-{s}").bounding_box()["y"]) for s in ("idle", "running", "failed")}
        assert len(tops) == 1, tops
        assert page.evaluate("document.documentElement.scrollWidth") <= 1400


def _state(center: Center, sid: str, want: str) -> list[str]:
    """The session's events, oldest first, once its state is ``want``."""
    end = time.time() + 5
    while center.card(sid)["state"] != want and time.time() < end:
        time.sleep(0.05)
    assert center.card(sid)["state"] == want, center.card(sid)
    return [e["event"] for e in reversed(center.http.get(f"/api/board/sessions/{sid}").json()["events"])]


def test_a_card_moves_on_a_touch_phone_as_a_drag_moves_it_on_the_desktop(center: Center) -> None:
    """A drag on the desktop sends the card's PATCH to a column its state may go to. On a touch phone (390 px, one list)
    the card's "Move to…" offers those columns as buttons a thumb can hit, and a tap sends the same PATCH; the
    buttons stay open while other cards change. On the desktop the control is not shown: the drag does it."""
    sid = center.ingest({"tmux_session": "agent-mig", "event": "tool_use"}, headers={"X-Agent-Hooks-Host": "db-1"}).json()["session"]
    with chromium_page(sync_api, *PHONE, touch=True) as phone:
        _open(phone, center.base + "/")
        card = phone.locator(f'#col-running .card[data-id="{sid}"]')
        card.wait_for(timeout=5000)
        toggle = card.locator(".move-toggle")
        assert toggle.is_visible() and toggle.inner_text() == "Move to…"
        toggle.tap()
        # The same columns a drag may drop it on, in the person's words; a tap here does not open the session.
        assert card.locator(".move-to").all_inner_texts() == ["Waiting for you", "Finished", "Failed"]
        assert phone.locator("#panel").is_hidden()
        assert phone.evaluate(OFF_OR_SMALL, ".card") == []
        # Another card's update re-renders the list: the choices stay open under the finger.
        center.ingest({"tmux_session": "agent-other", "event": "tool_use"}, headers={"X-Agent-Hooks-Host": "db-2"})
        phone.wait_for_function("document.querySelectorAll('#col-running .card').length === 2", timeout=5000)
        assert card.locator(".move-to").count() == 3
        card.locator('.move-to[data-state="completed"]').tap()
        assert _state(center, sid, "completed")[-1] == "exit"  # what a drag to Finished sends
        phone.wait_for_selector(f'#col-running .card[data-id="{sid}"]', state="detached", timeout=5000)
        phone.wait_for_function("document.getElementById('toast').textContent.includes('moved to Finished')", timeout=5000)
        # From the Finished list it goes back to run again (the drag from "Finished" to "Idle").
        phone.select_option("#state-pick", "completed")
        done = phone.locator(f'#col-completed .card[data-id="{sid}"]')
        done.locator(".move-toggle").tap()
        assert done.locator(".move-to").all_inner_texts() == ["Idle"]
        done.locator(".move-to").tap()
        assert _state(center, sid, "idle")[-2:] == ["exit", "requeue"]
    with chromium_page(sync_api, 1400, 800) as page:
        _open(page, center.base + "/")
        page.wait_for_selector(f'.card[data-id="{sid}"]', timeout=5000)
        assert page.locator(".card .move").first.is_hidden() and page.locator(".drag-tip").is_visible()


JARGON = ("ours:", "contract:", "OptimalOS", "state machine", "awaiting_review", "needs_input", "own state")


def test_one_state_per_card_in_words_and_a_legend(center: Center, phone: Any, tmp_path: Path) -> None:
    """A session whose turn is over sits in "Waiting for you" though the contract's default map calls it completed,
    and the card says so once, in words: no ours:/contract: chips, no jargon anywhere on the page; the legend says
    what each state means; the contract's state stays in the API."""
    from support.scripts import run_hook

    env = {"AGENT_HOOKS_HOME": center.env["AGENT_HOOKS_HOME"], "HOME": center.env["HOME"]}
    sid = "0b0a7d-words"
    base = {"session_id": sid, "cwd": str(tmp_path), "transcript_path": f"{tmp_path}/t.jsonl"}
    run_hook({**base, "hook_event_name": "SessionStart", "source": "startup"}, env)
    run_hook({**base, "hook_event_name": "Stop", "stop_hook_active": False}, env)
    failed = center.ingest({"tmux_session": "agent-etl", "event": "start"}, headers={"X-Agent-Hooks-Host": "etl-1"}).json()
    center.ingest({"tmux_session": "agent-etl", "event": "exit_error", "metadata": "exit 2"},
                  headers={"X-Agent-Hooks-Host": "etl-1"})
    # The API keeps the contract's state (the hooks' calls reach the center's cards within a poll).
    api = center.wait_card(lambda c: c["id"] == sid and c["state"] == "completed", what="the session completed")
    assert api["column"] == "awaiting_review"

    _open(phone, center.base + "/")
    card = phone.locator(f'#col-awaiting_review .card[data-id="{sid}"]')
    card.wait_for(state="visible", timeout=5000)
    assert card.locator(".badge.state").count() == 1
    assert card.locator(".badge.state").inner_text() == "waiting for a prompt"
    assert phone.locator(f'.card[data-id="{failed["session"]}"] .badge.state').inner_text() == "failed"
    assert phone.input_value("#state-pick") == "awaiting_review"
    assert phone.locator("#state-pick option:checked").inner_text() == "Waiting for you (1)"

    legend = phone.inner_text("#legend")
    for label, words in (("Idle", "not started yet"), ("Working", "at work"), ("Waiting for you", "waits for your next prompt"),
                         ("Finished", "the session ended"), ("Failed", "ended on an error")):
        assert label in legend and words in legend, (label, legend)
    assert "stalled" in legend.lower() and "minutes" in legend  # how long "stalled" means, from the config
    page_text = phone.evaluate("document.body.innerText") + phone.evaluate(
        "[...document.querySelectorAll('[title]')].map(n => n.title).join(' ')")
    assert [w for w in JARGON if w in page_text] == [], page_text

    # The session page says the same, once.
    card.locator(".label").click()
    phone.wait_for_selector("#p-sub .badge.state", timeout=5000)
    sub = phone.inner_text("#p-sub")
    assert "Waiting for you" in sub and "waiting for a prompt" in sub and "ours:" not in sub and "state:" not in sub, sub
    phone.wait_for_selector("#p-events tr >> nth=1", timeout=5000)
    history = phone.inner_text("#p-events")
    assert "started" in history and "Working" in history and "running" not in history, history


# Each value and what both formatters (agent_hooks.money and the board's money()) make of it.
MONEY = [(0, "0¢"), (0.00001, "<0.1¢"), (0.0005, "0.1¢"), (0.004, "0.4¢"), (0.035, "3.5¢"), (0.0995, "10¢"),
         (0.09949, "9.9¢"), (0.125, "13¢"), (0.38, "38¢"), (0.994, "99¢"), (0.995, "$1.00"), (1, "$1.00"),
         (1.25, "$1.25"), (12.345, "$12.35"), (1204.5, "$1,204.50"), (-0.5, "-50¢")]


@pytest.mark.shared_center
def test_cost_reads_the_same_on_the_board_and_in_the_cli(center: Center, phone: Any) -> None:
    """Dollars with two decimals, or whole cents under a dollar, from one rule in both languages; a card, the
    header and the session page use it."""
    from agent_hooks.money import usd

    _open(phone, center.base + "/")
    board = phone.evaluate("(vs) => vs.map(money)", [v for v, _ in MONEY])
    assert board == [usd(v) for v, _ in MONEY] == [text for _, text in MONEY]


@pytest.mark.shared_center
def test_a_request_says_who_was_told(center: Center, phone: Any) -> None:
    """A request's ``notifications`` (per channel: state, time, error) read in words on its card, an error on
    hover; a request without them shows no line."""
    _open(phone, center.base + "/")
    notes = [{"channel": "ntfy", "state": "sent", "at": 1700000000, "error": None},
             {"channel": "Slack", "state": "retrying", "at": 1700000001, "error": "HTTP 503 from hooks.slack.com"},
             {"channel": "email", "state": "failed", "at": 1700000002, "error": "<b>refused</b>"}]
    got = phone.evaluate("""(notes) => {
      const node = deliveries({notifications: notes});
      return [node.textContent, [...node.querySelectorAll('.delivery')].map(n => [n.className, n.title]),
              node.querySelectorAll('b').length, deliveries({}), deliveries({notifications: []})];
    }""", notes)
    text, spans, tags, none, empty = got
    assert text == "sent to ntfy · retrying Slack · could not reach email", text
    assert [c for c, _ in spans] == ["delivery sent", "delivery retrying", "delivery failed"]
    assert "HTTP 503 from hooks.slack.com" in spans[1][1] and "<b>refused</b>" in spans[2][1] and tags == 0
    assert none is None and empty is None


def test_a_link_opens_its_request(center: Center, phone: Any, held: list[Held]) -> None:
    """<board>/#request=<id> selects that request, marks it, scrolls to it and switches the phone's list to its
    session's column; a change of the fragment opens another; a request no longer pending says so."""
    _hold(center, held, "link-1", "make one")
    _hold(center, held, "link-2", "make two")
    asked = _pending(center, 2)
    first, second = asked["link-1"], asked["link-2"]
    center.ingest({"tmux_session": "agent-far", "event": "tool_use"}, headers={"X-Agent-Hooks-Host": "web-1"})
    _open(phone, center.base + f"/#request={second['id']}")
    target = phone.locator(f'.need.target.selected[data-id="{second["id"]}"]')
    target.wait_for(state="visible", timeout=5000)
    assert phone.locator(".need.target").count() == 1 and phone.locator(".need.selected").count() == 1
    box = target.bounding_box()
    assert 0 <= box["y"] and box["y"] + min(box["height"], 200) <= PHONE[1], box  # scrolled to
    session = phone.evaluate(f"cardFor(board.approvals.find(a => a.id === {json.dumps(second['id'])})).id")
    column = center.board_cards()[session]["column"]
    assert phone.input_value("#state-pick") == column
    phone.wait_for_selector(f'.col.picked .card[data-id="{session}"]', state="visible", timeout=2000)

    # Another link, in the same page (as a push's click sends it): the fragment changes, that one opens.
    phone.select_option("#state-pick", "running")
    phone.evaluate(f"location.hash = 'request=' + encodeURIComponent({json.dumps(first['id'])})")
    phone.wait_for_selector(f'.need.target[data-id="{first["id"]}"]', timeout=5000)
    assert phone.input_value("#state-pick") == center.board_cards()["link-1"]["column"]

    # Answered: the link has done its work and leaves the address; an old link says the request is gone.
    phone.locator(f'.need[data-id="{first["id"]}"] button.allow').click()
    phone.wait_for_function("!location.hash", timeout=5000)
    assert held[0].answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"
    phone.evaluate(f"location.hash = 'request=' + encodeURIComponent({json.dumps(first['id'])})")
    phone.wait_for_selector("#toast:visible", timeout=3000)
    assert "not waiting any more" in phone.inner_text("#toast")
    assert phone.locator(".need.target").count() == 0


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:16]
    return struct.unpack(">II", data[16:24])


@pytest.mark.shared_center
def test_manifest_icons_and_service_worker_are_served(center: Center) -> None:
    """The manifest (application/manifest+json) names the board, its scope and its icons (an SVG, a 192 and a
    512 PNG, each served with its type); the service worker is JavaScript at /sw.js, for people only, as the
    board is, while the manifest and icons answer a browser that sends no cookie."""
    r = center.http.get("/manifest.webmanifest")
    assert r.status_code == 200 and r.headers["content-type"].split(";")[0] == "application/manifest+json"
    manifest = r.json()
    assert manifest["start_url"] == "/" and manifest["scope"] == "/" and manifest["display"] == "standalone"
    assert "agent-hooks" in manifest["name"] and manifest["short_name"]
    sizes = {}
    for icon in manifest["icons"]:
        got = center.http.get(icon["src"])
        assert got.status_code == 200 and got.headers["content-type"].split(";")[0] == icon["type"], icon
        if icon["type"] == "image/png":
            w, h = _png_size(got.content)
            assert icon["sizes"] == f"{w}x{h}", icon
            sizes[w] = icon
        else:
            assert got.content.lstrip().startswith(b"<svg")
    assert {192, 512} <= set(sizes)
    assert center.http.get("/icons/../board.py").status_code == 404
    assert center.http.get("/icons/board.js").status_code == 404

    sw = center.http.get("/sw.js")
    assert sw.status_code == 200 and sw.headers["content-type"].split(";")[0] == "text/javascript"
    assert "notificationclick" in sw.text and "addEventListener(\"fetch\"" not in sw.text  # caches nothing
    # An unknown paired-device credential: the worker is refused as the board is; the manifest is not.
    stranger = {"Cookie": "agent_hooks_device=ah1.nobody.nothing"}
    assert center.http.get("/sw.js", headers=stranger).status_code == 401
    assert center.http.get("/", headers=stranger).status_code == 401
    assert center.http.get("/manifest.webmanifest", headers=stranger).status_code == 200
    assert center.http.get("/icons/icon-192.png", headers=stranger).status_code == 200


def test_the_service_worker_registers_shows_a_push_and_opens_its_request(center: Center, held: list[Held]) -> None:
    """In Chromium the worker registers for the whole board and caches nothing. A push delivered to it (through
    the DevTools protocol: headless Chromium has no push service) shows a notification with the push's title, body,
    tag and link; opening that link brings the open board to the request."""
    _hold(center, held, "push-1", "make deploy")
    (request,) = _pending(center, 1).values()
    with chromium_page(sync_api, *PHONE) as page:
        page.context.grant_permissions(["notifications"], origin=center.base)
        _open(page, center.base + "/")
        scope = page.evaluate("navigator.serviceWorker.ready.then(r => r.scope)")
        assert scope == center.base + "/"
        page.wait_for_function("navigator.serviceWorker.controller !== null", timeout=5000)  # clients.claim()
        assert page.evaluate("caches.keys()") == []

        cdp = page.context.new_cdp_session(page)
        registrations: list[dict[str, Any]] = []
        cdp.on("ServiceWorker.workerRegistrationUpdated", lambda ev: registrations.extend(ev["registrations"]))
        cdp.send("ServiceWorker.enable")
        end = time.time() + 5
        while not registrations and time.time() < end:
            page.wait_for_timeout(50)  # Playwright hands out events while it runs a call
        (reg,) = [r for r in registrations if r["scopeURL"] == center.base + "/" and not r["isDeleted"]]
        link = f"https://elsewhere.example/#request={request['id']}"  # another origin: only its fragment is kept
        push = {"title": "Needs you: here", "body": "Bash: make deploy", "url": link, "tag": request["id"]}
        cdp.send("ServiceWorker.deliverPushMessage", {"origin": center.base, "registrationId": reg["registrationId"],
                                                      "data": json.dumps(push)})
        shown = "navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns => ns.map(n => [n.title, n.body, n.tag, n.data.url]))"
        end = time.time() + 5
        while not (notes := page.evaluate(shown)) and time.time() < end:
            time.sleep(0.1)
        assert notes == [["Needs you: here", "Bash: make deploy", request["id"], f"{center.base}/#request={request['id']}"]]

        # What a click on it does (sw.js's notificationclick calls openRequest; a test cannot click a notification).
        (worker,) = [w for w in page.context.service_workers if w.url == center.base + "/sw.js"]
        assert page.locator(".need.target").count() == 0
        worker.evaluate("(url) => self.openRequest(url)", notes[0][3])
        page.wait_for_selector(f'.need.target[data-id="{request["id"]}"]', timeout=5000)
        assert page.evaluate("location.hash") == f"#request={request['id']}"


@pytest.mark.shared_center
def test_notify_me_says_how_it_will_notify(center: Center) -> None:
    """Without a push key from the server (/api/push/key absent), "Notify me" falls back to a notification while
    the board is open, and says so and why; with a key, headless Chromium's missing push service is reported
    the same way. The answers of /api/push/key are played by the browser's request routing: what is tested
    here is how the board handles each, not the server's push."""
    with chromium_page(sync_api, 1400, 800) as page:
        page.context.grant_permissions(["notifications"], origin=center.base)
        page.route("**/api/push/key", lambda route: route.fulfill(status=404, json={"error": "not found"}))
        _open(page, center.base + "/")
        page.check("#needs-notify")
        page.wait_for_function("board.notify.mode !== 'off'", timeout=10000)
        assert page.evaluate("board.notify") == {
            "mode": "tab", "why": "only while this board is open: this server does not send push notifications"}
        assert "this server does not send push notifications" in page.inner_text("#toast")
        assert page.get_attribute("#notify-label", "title") == page.evaluate("board.notify.why")

        page.uncheck("#needs-notify")
        page.wait_for_function("board.notify.mode === 'off'", timeout=5000)
        page.unroute("**/api/push/key")
        key = "BEl62iUYgUivxIkv69yViEuiBIa-Ib9-SkvMeAtA3LFgDzkrxZJjSgSnfckjBJuBkr3qBUYIHBQFLXYp5Nksh8U"
        page.route("**/api/push/key", lambda route: route.fulfill(status=200, json={"public_key": key}))
        page.check("#needs-notify")
        page.wait_for_function("board.notify.mode !== 'off'", timeout=15000)
        note = page.evaluate("board.notify")
        assert note["mode"] == "tab" and note["why"].startswith("only while this board is open: the browser's push service refused"), note
