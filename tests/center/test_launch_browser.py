"""The board's "New session" form in headless Chromium at a phone's width (390 px): it lists the hosts and
the directories each allows, starts a session (a real server and tmux, the client's stand-in), and the card
shows; a refusal is said in the form and on the card."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.browser import chromium_page
from support.center import Center
from support.launching import TmuxDir, fake_client, launch_env, launched, tmux_dir

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")


@pytest.fixture
def tmux() -> Iterator[TmuxDir]:
    with tmux_dir() as t:
        yield t


def test_new_session_from_a_phone(tmp_path: Path, tmux: TmuxDir) -> None:
    work = tmp_path / "work"
    (work / "repo").mkdir(parents=True)
    center = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "here",
                                          **launch_env(tmux, [work], fake_client(tmp_path / "bin"))}).start()
    try:
        with chromium_page(sync_api, 390, 844) as page:
            page.goto(center.base + "/")
            page.wait_for_selector("#conn[data-state=live]", timeout=15000)
            page.click("#new-session")
            page.wait_for_selector("#launch-dialog[open]", timeout=5000)
            assert page.eval_on_selector("#launch-dialog select[name=host]", "s => s.value") == "here"
            assert page.eval_on_selector("#launch-dialog select[name=root]", "s => [...s.options].map(o => o.value)") \
                == [str(work.resolve())]
            assert page.eval_on_selector("#launch-dialog select[name=permission_mode]", "s => s.value") == "default"
            # Nothing of the form is cut off or scrolls sideways on a phone.
            width = page.evaluate("document.getElementById('launch-dialog').getBoundingClientRect().right")
            assert width <= 390, width
            assert page.evaluate("document.querySelector('.launch-form').scrollWidth <= "
                                 "document.querySelector('.launch-form').clientWidth")
            page.fill("#launch-dialog input[name=sub]", "repo")
            page.fill("#launch-dialog input[name=task_id]", "T-phone")
            page.fill("#launch-dialog input[name=label]", "from-phone")
            page.select_option("#launch-dialog select[name=permission_mode]", "plan")
            page.fill("#launch-dialog textarea[name=prompt]", "fix it")
            page.click("#launch-dialog button[type=submit]")
            page.wait_for_selector("#launch-dialog .launch-msg.ok", timeout=15000)
            assert "agent-from-phone" in page.inner_text("#launch-dialog .launch-msg")
            card = center.wait_card(lambda c: c["label"] == "from-phone", what="the phone's launch")
            assert launched(work / "repo", card["id"])["argv"][-4:] == ["--permission-mode", "plan", "--", "fix it"]
            page.wait_for_selector(f'.card[data-id="{card["id"]}"]', timeout=5000)
            assert "T-phone" in page.inner_text(f'.card[data-id="{card["id"]}"]')
            # A refusal: in the form, and on the card with the host's reason.
            page.wait_for_selector("#launch-dialog[open]", state="detached", timeout=5000)
            page.click("#new-session")
            page.wait_for_selector("#launch-dialog[open]", timeout=5000)
            page.fill("#launch-dialog input[name=sub]", "../../elsewhere")
            page.fill("#launch-dialog textarea[name=prompt]", "escape")
            page.click("#launch-dialog button[type=submit]")
            page.wait_for_selector("#launch-dialog .launch-msg.err", timeout=15000)
            assert "outside host here's [launch] roots" in page.inner_text("#launch-dialog .launch-msg")
            page.click("#launch-dialog button.ghost")
            page.wait_for_selector(".card .badge.launch-refused", timeout=5000)
            assert "outside" in page.inner_text(".card .launch-why")
        assert tmux.sessions() == ["agent-from-phone"]
    finally:
        center.stop()
