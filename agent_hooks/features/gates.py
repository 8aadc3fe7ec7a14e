"""Approval gates: a PreToolUse that matches one is held until a person answers, or until it times out.

Configured as ``[[approvals.gates]]`` (docs/approvals.md)::

    [[approvals.gates]]
    name = "push"                     # optional: named in the reason the model reads
    tool = "Bash"                     # a tool name, a glob ("mcp__github__*") or "*"
    match = "git push|deploy-prod"    # regex searched in the command, the file path, or the input as JSON
    timeout_s = 300
    on_timeout = "deny"               # or "allow"
    task = "T-42"; agent = "builder"; role = "worker"; host = "ci-1"   # optional narrowing (globs)

PreToolUse imports this module only when ``approvals.gates`` is not empty, so a
host with no gate compiles no regex. A gate that is malformed (a bad regex, a
wrong type) is skipped, with a line in the error log that doctor shows: a typo
must not stop every tool call (fail open, never silently).
"""

from __future__ import annotations

import fnmatch
import json
import re

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KEYS = ("name", "tool", "match", "timeout_s", "on_timeout", "task", "agent", "role", "host")
NARROWING = ("task", "agent", "role", "host")
DEFAULT_TIMEOUT_S = 300.0
# With the 30 s margin our PreToolUse entry gets, the longest gate keeps the hook's timeout at
# 600 s, the most a command hook gets by default (doctor takes more for milliseconds).
MAX_TIMEOUT_S = 570.0


class Gate:
    """One valid gate, its regex compiled."""

    __slots__ = ("name", "tool", "pattern", "timeout_s", "on_timeout", "narrow")

    def __init__(self, name: str, tool: str, pattern: re.Pattern[str] | None, timeout_s: float, on_timeout: str,
                 narrow: dict[str, str]) -> None:
        self.name = name
        self.tool = tool
        self.pattern = pattern
        self.timeout_s = timeout_s
        self.on_timeout = on_timeout
        self.narrow = narrow


def parse(raw: Any, index: int) -> tuple[Gate | None, list[str]]:
    """One gate from its table, or None and what is wrong with it."""
    where = f"approvals.gates[{index}]"
    if not isinstance(raw, dict):
        return None, [f"{where} must be a table"]
    problems = [f"unknown setting {where}.{k}" for k in raw if k not in KEYS]
    tool = raw.get("tool", "*")
    if not isinstance(tool, str) or not tool:
        problems.append(f"{where}.tool must be a tool name or \"*\"")
    match = raw.get("match")
    pattern = None
    if match is not None:
        if not isinstance(match, str):
            problems.append(f"{where}.match must be a regex (text)")
        else:
            try:
                pattern = re.compile(match)
            except re.error as exc:
                problems.append(f"{where}.match: invalid regex ({exc}); the gate is ignored")
    timeout = raw.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT_S:
        problems.append(f"{where}.timeout_s must be a number of seconds in (0, {MAX_TIMEOUT_S:g}]")
    on_timeout = raw.get("on_timeout", "deny")
    if on_timeout not in ("deny", "allow"):
        problems.append(f"{where}.on_timeout must be \"deny\" or \"allow\", got {on_timeout!r}")
    narrow = {}
    for key in NARROWING:
        if raw.get(key) is not None:
            if not isinstance(raw[key], str):
                problems.append(f"{where}.{key} must be text (a name or a glob)")
            else:
                narrow[key] = raw[key]
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        problems.append(f"{where}.name must be text")
    if match is None and tool == "*":
        problems.append(f"{where} needs a tool or a match: a gate on every call of every tool holds everything")
    if problems:
        return None, problems
    label = name or (f"{tool}:{match}" if match else tool)
    return Gate(label, tool, pattern, float(timeout), on_timeout, narrow), []


def problems(config: dict[str, Any]) -> list[str]:
    """Every problem of ``[[approvals.gates]]`` (for `config check` and doctor)."""
    section = config.get("approvals")
    if not isinstance(section, dict):
        return []
    raw = section.get("gates") or []
    if not isinstance(raw, list):
        return ["approvals.gates must be a list of tables ([[approvals.gates]])"]
    out: list[str] = []
    for i, item in enumerate(raw):
        out.extend(parse(item, i)[1])
    return out


_CACHE: dict[str, tuple[list[Gate], list[str]]] = {}


def compiled(config: dict[str, Any]) -> tuple[list[Gate], list[str]]:
    """The valid gates and the problems of the others (cached per process on the gates' text)."""
    raw = config["approvals"]["gates"] or []
    key = json.dumps(raw, sort_keys=True, default=str)
    hit = _CACHE.get(key)
    if hit is None:
        gates, found = [], []
        for i, item in enumerate(raw if isinstance(raw, list) else []):
            gate, issues = parse(item, i)
            found.extend(issues)
            if gate is not None:
                gates.append(gate)
        if not isinstance(raw, list):
            found.append("approvals.gates must be a list of tables ([[approvals.gates]])")
        hit = _CACHE[key] = (gates, found)
    return hit


def subjects(tool_input: Any) -> list[str]:
    """What a gate's regex is searched in: the command, the file path, then the whole input as JSON."""
    out = []
    if isinstance(tool_input, dict):
        for key in ("command", "file_path", "notebook_path", "path", "url"):
            value = tool_input.get(key)
            if isinstance(value, str):
                out.append(value)
    out.append(json.dumps(tool_input, ensure_ascii=False, sort_keys=True, default=str))
    return out


def first_match(gates: list[Gate], tool_name: str, tool_input: Any, who: dict[str, str | None]) -> Gate | None:
    """The first gate that holds this call (``who``: task, agent, role, host of the session)."""
    texts: list[str] | None = None
    for gate in gates:
        if gate.tool != "*" and gate.tool != tool_name and not fnmatch.fnmatchcase(tool_name, gate.tool):
            continue
        if any(not fnmatch.fnmatchcase(who.get(k) or "", v) for k, v in gate.narrow.items()):
            continue
        if gate.pattern is not None:
            if texts is None:
                texts = subjects(tool_input)
            if not any(gate.pattern.search(t) for t in texts):
                continue
        return gate
    return None
