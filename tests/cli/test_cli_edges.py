"""The CLI's edges a newcomer met: a question answered in CLI terms, who asks in `approvals`, dollars
as people write them, `cost sessions` with whole ids and who ran what, and `--since` in words.

Every command runs as the installed console script on a real store in the test's own home.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from support.approvals import PERMISSION, QUESTION, Held
from support.cost import assistant, post_tool, tpath, write
from support.scripts import agent_hook, run_hook
from support.waiting import wait_for

pytestmark = pytest.mark.usefixtures("migrated_store")


def _pending() -> list[dict[str, Any]]:
    return json.loads(agent_hook("approvals", "--json").stdout)["approvals"]


def _start(sid: str, env: dict[str, str]) -> None:
    run_hook({"session_id": sid, "hook_event_name": "SessionStart", "source": "startup", "cwd": "/tmp"}, env)


def test_a_question_without_an_answer_is_told_the_cli_way_to_answer(hooks_home: Path) -> None:
    held = Held(QUESTION)
    wait_for(_pending, timeout=10)
    [row] = _pending()
    proc = agent_hook("approve", row["id"], check=False)
    assert proc.returncode == 2, proc.stderr
    assert f'agent-hook approve {row["id"]} --answer "Which database should we use?=SQLite"' in proc.stderr
    assert "Q2: Which checks should run?" in proc.stderr
    assert "{question: label}" not in proc.stderr and "answers:" not in proc.stderr
    agent_hook("approve", row["id"], "--answer", "1=SQLite", "--answer", "2=lint")  # still answerable
    assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"


def test_approvals_names_the_agent_and_tmux_session_that_ask(hooks_home: Path) -> None:
    env = {"AGENT_HOOKS_AGENT": "bob", "AGENT_HOOKS_TMUX_SESSION": "bob-ask"}
    _start(PERMISSION["session_id"], env)
    held = Held(PERMISSION, env)
    wait_for(_pending, timeout=10)
    text = agent_hook("approvals").stdout
    header, line = text.splitlines()[:2]
    assert "AGENT" in header and "bob · bob-ask" in line
    [row] = _pending()
    assert row["agent"] == "bob" and row["tmux_session"] == "bob-ask"
    agent_hook("deny", row["id"], "-m", "no")
    held.answer()


def _costly_sessions(home: Path) -> tuple[str, str]:
    """Two sessions with priced messages whose dollars, summed as floats, carry binary noise."""
    s1, s2 = "0b3c9e2a-5d1f-4e7a-9c2b-1f0e6d5a4b3c", "7f1e2d3c-4b5a-4968-8776-655443322110"
    write(tpath(s1), [assistant(f"m{i}", f"r{i}", model="claude-haiku-4-5", input_tokens=100, output_tokens=7,
                                at=time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()))
                      for i in range(7)])
    write(tpath(s2), [assistant("n1", "q1", input_tokens=333, output_tokens=1,
                                at=time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()))])
    agent_hook("task", "create", "T-4")
    post_tool(s1, home, {"AGENT_HOOKS_AGENT": "alice", "AGENT_HOOKS_TASK_ID": "T-4"})
    post_tool(s2, home, {"AGENT_HOOKS_AGENT": "bob"})
    return s1, s2


def test_cost_json_gives_dollars_without_float_noise(hooks_home: Path) -> None:
    _costly_sessions(hooks_home)
    for args in (("cost", "--json"), ("cost", "sessions", "--json"), ("cost", "daily", "--json")):
        out = agent_hook(*args).stdout
        noisy = re.findall(r'"usd": (-?\d+\.\d{13,})', out)
        assert not noisy, (args, noisy)
    total = json.loads(agent_hook("cost", "--json").stdout)["usd"]
    assert total > 0 and total == float(f"{total:.12g}")


def test_cost_sessions_shows_whole_ids_agent_task_and_totals(hooks_home: Path) -> None:
    s1, s2 = _costly_sessions(hooks_home)
    lines = agent_hook("cost", "sessions").stdout.splitlines()
    header = lines[0]
    assert "AGENT" in header and "TASK" in header and "total tokens" in header
    one = next(x for x in lines if x.startswith(s1))
    assert "alice" in one and "T-4" in one and f"{7 * 107:,}" in one
    assert next(x for x in lines if x.startswith(s2)).split()[1] == "bob"
    assert lines[-1].startswith("total (2 sessions)")
    usd = json.loads(agent_hook("cost", "--json").stdout)["usd"]
    assert 0 < usd < 0.1 and lines[-1].endswith(f" {usd * 100:.1f}¢")  # as the board shows money (agent_hooks.money)


@pytest.mark.parametrize("since", ["today", "yesterday", "7d", "0d", "Today"])
def test_since_takes_today_yesterday_and_days(hooks_home: Path, since: str) -> None:
    _costly_sessions(hooks_home)
    for args in (("cost",), ("cost", "daily"), ("cost", "sessions")):
        proc = agent_hook(*args, "--since", since, "--json", check=False)
        assert proc.returncode == 0, (args, proc.stderr)
    assert json.loads(agent_hook("cost", "--since", since, "--json").stdout)["usd"] > 0


def test_since_in_the_future_or_unknown_words(hooks_home: Path) -> None:
    assert json.loads(agent_hook("cost", "--since", "2999-01-01", "--json").stdout)["usd"] == 0
    proc = agent_hook("cost", "--since", "last week", check=False)
    assert proc.returncode == 2 and "today, yesterday or Nd" in proc.stderr


def test_the_help_names_the_board_and_where_it_is() -> None:
    from agent_hooks.config import defaults

    url = f"http://127.0.0.1:{defaults()['serve']['port']}/"
    top = agent_hook("--help").stdout
    server_line = top[top.index("  server "):top.index("  session ")]
    assert "board" in server_line and url in " ".join(server_line.split())
    start = " ".join(agent_hook("server", "start", "--help").stdout.split())
    assert "board" in start and url in start and "[serve] port" in start


def test_the_readme_names_the_board_where_the_server_serves_it() -> None:
    from agent_hooks.config import defaults

    from support.repo import ROOT

    first = (ROOT / "README.md").read_text().split("## The first five minutes", 1)[1].split("\n## ", 1)[0]
    assert "board" in first and f"http://127.0.0.1:{defaults()['serve']['port']}/" in first
    assert "agent-hook server start" in first
