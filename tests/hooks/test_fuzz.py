"""Fuzz tier: mutated payloads (reproducible: a fixed random seed) across every executable.

Bad input is bad input: 0 internal errors (error log and ``errors`` table hold
``bad_input`` at most), 0 accidental decisions, 0 non-zero exits, 0 bad stdout.
A few hundred run in-process through the runner on every run (and a sample as
subprocesses, and 300 through the resident server); 10,000 in-process and 3,000
through the server run with ``-m fuzz``. Every other route of the server (ingest,
register, PATCH, the cancels, the board, status...) is fuzzed too, 400 requests on
every run and 4,000 with ``-m fuzz``: none may answer 5xx.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from support.fuzz import cases, handler_cases
from support.scripts import BIN, EXECUTABLES, error_log

RANDOM_SEED = 12
ALLOWED_KINDS = {"bad_input"}
# Every top-level key an answer of ours may carry.
ANSWER_KEYS = {"hookSpecificOutput", "decision", "reason"}


def _handler(event: str) -> Any:
    module = EXECUTABLES[event].removeprefix("agent-hook-").replace("-", "_")
    return importlib.import_module(f"agent_hooks.events.{module}").handle


def _env(home: Path) -> dict[str, str]:
    return {"AGENT_HOOKS_HOME": str(home), "HOME": str(home.parent / "user-home"),
            "AGENT_HOOKS__FORWARD__ENABLED": "false",
            # In-process the deadline path would end pytest itself (it exits the process).
            "AGENT_HOOKS_DEADLINE_MS": "120000", "AGENT_HOOKS_BUSY_TIMEOUT_MS": "60000"}


def _run_in_process(event: str, data: bytes, env: dict[str, str]) -> tuple[int, str, str]:
    from agent_hooks.runner import run

    saved = sys.stdin, sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(data))
    sys.stdout, sys.stderr = out, err
    try:
        code = run(event, _handler(event), env=env, fast_exit=False)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


def _check_answer(event: str, stdout: str, problems: list[str], case: int) -> None:
    text = stdout.strip()
    if not text:
        return
    if event == "PreCompact" and not text.startswith("{"):
        return  # plain text: the goal reminder
    try:
        doc = json.loads(text)
    except ValueError:
        problems.append(f"case {case} ({event}): stdout is not one JSON object: {text[:200]!r}")
        return
    if not isinstance(doc, dict) or set(doc) - ANSWER_KEYS or "\n" in text:
        problems.append(f"case {case} ({event}): unexpected answer {text[:200]!r}")
    specific = doc.get("hookSpecificOutput", {}) if isinstance(doc, dict) else {}
    if doc.get("decision") == "block" or specific.get("permissionDecision") == "deny":
        problems.append(f"case {case} ({event}): accidental decision {text[:200]!r}")


def _internal(home: Path) -> list[str]:
    bad = [f"log: {e['kind']} {e['event']}: {e['message'][:200]}" for e in error_log(home)
           if e["kind"] not in ALLOWED_KINDS]
    store = home / "store.db"
    if store.exists():
        conn = sqlite3.connect(store)
        try:
            bad += [f"errors table: {k} {ev}: {m[:200]}" for k, ev, m in
                    conn.execute("SELECT kind, event, message FROM errors WHERE kind NOT IN ('bad_input')")]
        finally:
            conn.close()
    return bad


def fuzz_in_process(home: Path, count: int) -> list[str]:
    env = _env(home)
    (home.parent / "user-home").mkdir(exist_ok=True)
    old_umask = os.umask(0o022)
    problems: list[str] = []
    try:
        for n, (event, data) in enumerate(cases(count, RANDOM_SEED)):
            code, out, err = _run_in_process(event, data, env)
            if code != 0:
                problems.append(f"case {n} ({event}): exit {code}")
            if "Traceback" in err or "internal error" in err:
                problems.append(f"case {n} ({event}): {err[:300]!r}")
            _check_answer(event, out, problems, n)
    finally:
        os.umask(old_umask)
    return problems + _internal(home)


def fuzz_subprocess(home: Path, count: int, offset: int) -> list[str]:
    import subprocess

    env = {**os.environ, **_env(home), "AGENT_HOOKS_DEADLINE_MS": "4000", "AGENT_HOOKS_BUSY_TIMEOUT_MS": "2500"}
    problems: list[str] = []
    all_cases = cases(offset + count, RANDOM_SEED)[offset:]
    for n, (event, data) in enumerate(all_cases, start=offset):
        proc = subprocess.run([str(BIN / EXECUTABLES[event])], input=data, capture_output=True, env=env, timeout=60)
        if proc.returncode != 0:
            problems.append(f"case {n} ({event}): exit {proc.returncode}")
        err = proc.stderr.decode(errors="replace")
        if "Traceback" in err or "internal error" in err:
            problems.append(f"case {n} ({event}): {err[:300]!r}")
        _check_answer(event, proc.stdout.decode(errors="replace"), problems, n)
    return problems + _internal(home)


def test_fuzz_every_executable_in_process(hooks_home: Path) -> None:
    problems = fuzz_in_process(hooks_home, 300)
    assert not problems, "\n".join(problems[:30])


def test_fuzz_every_executable_as_subprocesses(hooks_home: Path) -> None:
    # A different slice than the in-process run, two per executable-ish.
    problems = fuzz_subprocess(hooks_home, 24, offset=5000)
    assert not problems, "\n".join(problems[:30])


@pytest.mark.fuzz
def test_fuzz_ten_thousand(hooks_home: Path) -> None:
    problems = fuzz_in_process(hooks_home, 10_000)
    assert not problems, "\n".join(problems[:50])


@pytest.mark.fuzz
def test_fuzz_subprocess_thousand(hooks_home: Path) -> None:
    problems = fuzz_subprocess(hooks_home, 1000, offset=20_000)
    assert not problems, "\n".join(problems[:50])


def fuzz_server(home: Path, count: int, offset: int) -> list[str]:
    """The same cases through the resident server (docs/server.md): the tool events run on its event
    loop (and hand off to a thread for bad input), everything else on the pool."""
    import http.client

    from support.servers import start_server

    (home.parent / "user-home").mkdir(exist_ok=True)
    env = {k: v for k, v in _env(home).items() if k != "AGENT_HOOKS_DEADLINE_MS"}
    server = start_server(home, env)
    problems: list[str] = []
    try:
        for n, (event, data) in enumerate(cases(offset + count, RANDOM_SEED)[offset:], start=offset):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            try:
                conn.request("POST", f"/hooks/{event}", data, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                body = resp.read().decode(errors="replace")
                problem = resp.getheader("x-agent-hooks-problem") or ""
            finally:
                conn.close()
            if resp.status != 200:
                problems.append(f"case {n} ({event}): HTTP {resp.status} {body[:200]!r}")
            if "internal error" in problem:
                problems.append(f"case {n} ({event}): {problem[:300]!r}")
            _check_answer(event, body, problems, n)
        status = server.status()
        if not status["up"]:
            problems.append("the server is down after the cases")
    finally:
        server.stop()
    return problems + _internal(home)


def test_fuzz_the_server(hooks_home: Path) -> None:
    problems = fuzz_server(hooks_home, 300, offset=30_000)
    assert not problems, "\n".join(problems[:30])


@pytest.mark.fuzz
def test_fuzz_the_server_three_thousand(hooks_home: Path) -> None:
    problems = fuzz_server(hooks_home, 3000, offset=40_000)
    assert not problems, "\n".join(problems[:50])


def fuzz_api(home: Path, count: int, offset: int) -> list[str]:
    """Every route the server's app registers (read from the app: a route added later is fuzzed
    too), fed hostile bodies, path parameters, queries and headers: a 4xx at worst, never a 5xx,
    no traceback in the server's log, and nothing but bad input in the error log."""
    from support.fuzz import api_cases
    from support.routes import app_routes, request
    from support.servers import start_server

    (home.parent / "user-home").mkdir(exist_ok=True)
    env = {k: v for k, v in _env(home).items() if k != "AGENT_HOOKS_DEADLINE_MS"}
    server = start_server(home, env)
    problems: list[str] = []
    seen: set[str] = set()
    try:
        routes = app_routes(home.parent / "routes")
        for n, case in enumerate(api_cases(routes, offset + count)[offset:], start=offset):
            seen.add(case["route"])
            try:
                answer = request(server.port, case["method"], case["path"], case["headers"], case["body"], timeout=30)
            except Exception as exc:  # noqa: BLE001 - no answer at all is a finding too
                problems.append(f"case {n} {case['method']} {case['path'][:120]}: no answer ({exc!r})")
                continue
            if answer.status >= 500:
                problems.append(f"case {n} {case['method']} {case['path'][:120]} {case['body'][:80]!r}: "
                                f"HTTP {answer.status} {answer.body[:200]!r}")
        missing = {r.template for r in routes if r.kind != "websocket"} - seen
        if missing:
            problems.append(f"routes never fuzzed: {sorted(missing)}")
        if not server.status()["up"]:
            problems.append("the server is down after the cases")
    finally:
        server.stop()
    log = home / "logs" / "server.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    if "Traceback" in text:
        problems.append("the server's log holds a traceback:\n" + text[text.index("Traceback"):][:1500])
    return problems + _internal(home)


def test_fuzz_every_api_route(hooks_home: Path) -> None:
    problems = fuzz_api(hooks_home, 400, offset=0)
    assert not problems, "\n".join(problems[:30])


@pytest.mark.fuzz
def test_fuzz_every_api_route_four_thousand(hooks_home: Path) -> None:
    problems = fuzz_api(hooks_home, 4000, offset=10_000)
    assert not problems, "\n".join(problems[:50])


# -- what user handlers return ------------------------------------------------------------------

FUZZED_HANDLER = """\
import pickle, sys
def handle(event):
    with open({path!r}, "rb") as f:
        action, value = pickle.load(f)
    if action == "raise":
        raise value
    if action == "print":
        print(value)
        sys.stdout.write(value)
        return {{"context": "printed"}}
    if action == "deep":
        deep = None
        for _ in range(5000):
            deep = {{"a": deep}}
        return deep if value == "result" else {{value: deep}}
    return value
"""


def fuzz_handler_results(home: Path, count: int) -> list[str]:
    """A handler for every event that returns (or raises, or prints) what the case says, then a
    well-behaved one: the answer stays the protocol (strict JSON, or PreCompact's plain text),
    the hook exits 0, and nothing but the handler's own failure is logged."""
    import pickle

    from support.handlers import write_handler

    env = _env(home)
    (home.parent / "user-home").mkdir(exist_ok=True)
    result_file = home.parent / "fuzz-result.pickle"
    events = sorted({event for event, _, _ in handler_cases(40)})
    write_handler(home / "hooks", "fuzzed", events=events, priority=1,
                  code=FUZZED_HANDLER.format(path=str(result_file)))
    write_handler(home / "hooks", "witness", events=events, priority=2,
                  code="def handle(event):\n    return {'context': 'witness'}\n")
    problems: list[str] = []
    old_umask = os.umask(0o022)
    try:
        for n, (event, data, action) in enumerate(handler_cases(count)):
            result_file.write_bytes(pickle.dumps(action))
            code, out, err = _run_in_process(event, data, env)
            if code != 0:
                problems.append(f"case {n} ({event}, {action!r:.80}): exit {code}")
            if "Traceback" in err or "internal error" in err:
                problems.append(f"case {n} ({event}, {action!r:.80}): {err[:300]!r}")
            text = out.strip()
            if text and not (event == "PreCompact" and not text.startswith("{")):
                try:
                    doc = json.loads(text, parse_constant=lambda c: {"non-JSON constant": c})
                except ValueError:
                    problems.append(f"case {n} ({event}, {action!r:.80}): stdout is not JSON: {text[:200]!r}")
                    continue
                if not isinstance(doc, dict) or set(doc) - ANSWER_KEYS or "non-JSON constant" in text:
                    problems.append(f"case {n} ({event}, {action!r:.80}): unexpected answer {text[:200]!r}")
    finally:
        os.umask(old_umask)
    bad = [p for p in _internal(home) if not p.split(": ", 1)[1].startswith("handler ")]
    return problems + bad


def test_fuzz_handler_results(hooks_home: Path) -> None:
    problems = fuzz_handler_results(hooks_home, 1000)
    assert not problems, "\n".join(problems[:30])


@pytest.mark.fuzz
def test_fuzz_handler_results_three_thousand(hooks_home: Path) -> None:
    problems = fuzz_handler_results(hooks_home, 3000)
    assert not problems, "\n".join(problems[:50])
