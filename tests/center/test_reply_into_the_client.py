"""Reply types only into the Claude Code client, and types the text as it is (real tmux, a real server).

The board's Reply (POST /api/sessions/<ref>/reply) typed into whatever ran in the session's pane unless it
was one of a list of shells: a pane running `python3` took the reply as code and ran it. Now the program
in the pane's foreground must be the client, recognised by the file the kernel runs
(agent_hooks/center/foreground.py): a refusal is a 409 that says what runs there, and nothing is typed.
The client here is the stand-in of tests/tmux_support.py (why that is enough: its docstring); the real
client is in tests/e2e/test_reply_verbatim_e2e.py.

tmux also dropped a reply's trailing ``;`` (it ends a tmux command): text is typed as it is now.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.center import Center, center_for
from support.scripts import run_hook
from support.tmux import Tmux

# Each test's sessions are its own (their ids are only its): they share the worker's command center.
pytestmark = [pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the client is recognised through /proc"),
              pytest.mark.shared_center]


def payload(event: str, sid: str, cwd: str, **extra: object) -> dict[str, object]:
    return {"session_id": sid, "transcript_path": f"{cwd}/t.jsonl", "cwd": cwd, "hook_event_name": event, **extra}


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux()
    yield t
    t.close()


@pytest.fixture
def center(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Center]:
    with center_for(request, tmp_path / "cc", {"AGENT_HOOKS__FLEET__HOST": "here"}) as c:
        yield c


def awaiting(center: Center, tmux: Tmux, tmp_path: Path, sid: str, command: str | None = None) -> str:
    """A session in a new pane running ``command`` (the client's stand-in by default), awaiting its next
    prompt (its turn ended); its pane."""
    pane = tmux.new(sid, command)
    env = {"AGENT_HOOKS_HOME": str(center.home), "HOME": center.env["HOME"], **tmux.env(pane)}
    cwd = str(tmp_path)
    assert run_hook(payload("SessionStart", sid, cwd, source="startup"), env).returncode == 0
    assert run_hook(payload("Stop", sid, cwd, stop_hook_active=False), env).returncode == 0
    center.wait_card(lambda c: c["id"] == sid and c["reply"], what=f"{sid} awaiting its next prompt")
    return pane


def reply(center: Center, sid: str, text: str) -> tuple[int, str]:
    r = center.http.post(f"/api/sessions/{sid}/reply", json={"text": text})
    return r.status_code, r.json().get("error", "")


def test_a_pane_running_python_refuses_the_reply_and_runs_nothing(center: Center, tmux: Tmux, tmp_path: Path) -> None:
    marker = tmp_path / "typed-into-python"
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else os.path.realpath(sys.executable)
    pane = awaiting(center, tmux, tmp_path, "in-python", f"{python} -q")
    tmux.wait_text(pane, ">>>")
    status, error = reply(center, "in-python", f"open({str(marker)!r}, 'w').close()")
    assert status == 409 and "the pane runs python3" in error and "not Claude Code" in error, error
    time.sleep(0.5)
    assert not marker.exists()
    assert "open(" not in tmux.capture(pane)  # nothing typed, not even the keys that clear the prompt's line


def test_a_pane_running_cat_refuses_the_reply(center: Center, tmux: Tmux, tmp_path: Path) -> None:
    pane = awaiting(center, tmux, tmp_path, "in-cat", shutil.which("cat"))
    status, error = reply(center, "in-cat", "hello cat")
    assert status == 409 and "the pane runs cat, not Claude Code" in error, error
    time.sleep(0.3)
    assert "hello cat" not in tmux.capture(pane)


def test_a_program_merely_named_claude_is_not_the_client(center: Center, tmux: Tmux, tmp_path: Path) -> None:
    """tmux's #{pane_current_command} says "claude" for it; the file the kernel runs is python's."""
    named = tmp_path / "bin" / "claude"
    named.parent.mkdir()
    named.symlink_to(os.path.realpath(sys.executable))
    marker = tmp_path / "typed-into-a-fake"
    pane = awaiting(center, tmux, tmp_path, "named-claude", f"{named} -q")
    tmux.wait_text(pane, ">>>")
    assert tmux.run("display-message", "-p", "-t", pane, "#{pane_current_command}").stdout.strip() == "claude"
    status, error = reply(center, "named-claude", f"open({str(marker)!r}, 'w').close()")
    assert status == 409 and "the pane runs claude (the program python3" in error, error
    assert "not Claude Code" in error
    time.sleep(0.5)
    assert not marker.exists()


def test_the_client_gets_the_text_as_it_is(center: Center, tmux: Tmux, tmp_path: Path) -> None:
    """tmux takes an argument ending in ";" for the end of its command and drops the ";"."""
    pane = awaiting(center, tmux, tmp_path, "in-client")
    for text in ("run the tests;", "-x --force; then stop;;", ";", "send-keys C-c Enter \\; {x} #{pane_id} ~ $HOME"):
        status, error = reply(center, "in-client", text)
        assert status == 200, error
        shown = tmux.wait_text(pane, text)
        assert any(line.rstrip() == text for line in shown.splitlines()), shown


def test_a_client_started_by_a_wrapper_that_stays_in_the_foreground_gets_the_reply(
        center: Center, tmux: Tmux, tmp_path: Path) -> None:
    """`sh -c 'claude; ...'`: sh leads the foreground group and waits; the client reads the keys."""
    pane = awaiting(center, tmux, tmp_path, "wrapped", f"sh -c '{tmux.client}; echo client exited; sleep 60'")
    status, error = reply(center, "wrapped", "carry on")
    assert status == 200, error
    tmux.wait_text(pane, "carry on")


node = shutil.which("node")


@pytest.mark.skipif(node is None, reason="node is not installed: the client's Node builds cannot be stood in for")
@pytest.mark.parametrize("build", ["cli.js", "process.title"])
def test_a_node_build_of_the_client_gets_the_reply_and_another_node_program_does_not(
        center: Center, tmux: Tmux, tmp_path: Path, build: str) -> None:
    """The client's builds before its native one: node running the package's cli.js, which renames itself
    "claude" (process.title) and so no longer shows the script on its command line."""
    package = tmp_path / "lib" / "node_modules" / "@anthropic-ai" / "claude-code"
    package.mkdir(parents=True)
    title = "process.title = 'claude';" if build == "process.title" else ""
    (package / "cli.js").write_text(f"{title} process.stdin.resume();\n")
    tag = build.replace(".", "-")  # a session of its own per build (tmux takes "." in a name for a pane's)
    pane = awaiting(center, tmux, tmp_path, f"node-client-{tag}", f"{node} {package / 'cli.js'}")
    status, error = reply(center, f"node-client-{tag}", "from node;")
    assert status == 200, error
    tmux.wait_text(pane, "from node;")

    other = tmp_path / "other.js"
    other.write_text(f"{title.replace('claude', 'repl')} process.stdin.resume();\n")
    pane = awaiting(center, tmux, tmp_path, f"node-other-{tag}", f"{node} {other}")
    status, error = reply(center, f"node-other-{tag}", "not for you")
    assert status == 409 and "not Claude Code" in error, error
    time.sleep(0.3)
    assert "not for you" not in tmux.capture(pane)
