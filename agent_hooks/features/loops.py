"""Loop detection: the agent repeats one call, or ping-pongs between two.

Identical means the same tool name and the same SHA-256 of the canonical JSON
input (:mod:`agent_hooks.hashing`). The history is the session's last
``loops.window`` calls that were not denied (a blocked call is not history:
recording blocks made agent-swarm's port feed its own wedge), after the
session's reset mark; each subagent (payload ``agent_id``) has its own. A new
session starts empty; a resumed one keeps its rows.

Two rules, both warning (PreToolUse additionalContext) before they deny:

* repeat: the number of identical calls in the window, this one included;
* ping-pong: the number of switches between two alternating calls in the
  trailing stretch where the pair makes up at least ``pingpong_share`` of the
  calls. Counting switches in that stretch, not the pair's share of the whole
  window as agent-swarm did, sees a ping-pong that starts after varied work at
  once rather than once it fills 80 % of the window (and then blocks unwarned).

A rule denies only a call that was already warned in the window (it, or its
ping-pong partner; the decision is on the history rows): the warning always
comes first, whatever the thresholds or the shape of the history.

A call of a ``reset_tools`` tool (Edit, Write, ...) whose input is new in the
window changes the state the agent is looking at: calls before it do not
count, so re-running the same test after each new edit is not a loop, while
flipping one edit back and forth still is.
"""

from __future__ import annotations

import sqlite3

from agent_hooks.features.verdict import DENY, WARN, Verdict

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A call's identity: (tool_name, input_hash).
Key = tuple
RULE_REPEAT = "loops.repeat"
RULE_PINGPONG = "loops.pingpong"
_OVERRIDABLE = ("enabled", "repeat_warn", "repeat_block", "pingpong_warn", "pingpong_block", "pingpong_share")


def settings_for(tool_name: str, config: dict[str, Any]) -> dict[str, Any]:
    """The [loops] settings with the tool's override (exact name first, then patterns)."""
    section = config["loops"]
    merged = {k: section.get(k) for k in _OVERRIDABLE}
    merged["enabled"] = section.get("enabled", True)
    tools = section.get("tools") or {}
    override = tools.get(tool_name)
    if override is None and any(c in k for k in tools for c in "*?["):
        from fnmatch import fnmatchcase  # only when a pattern is configured

        override = next((v for k, v in tools.items() if fnmatchcase(tool_name, k)), None)
    if isinstance(override, dict):
        merged.update({k: v for k, v in override.items() if k in _OVERRIDABLE})
    return merged


def read_history(conn: sqlite3.Connection, session_id: str, since_id: int, window: int,
                 agent_id: str | None = None) -> list[tuple]:
    """The last ``window - 1`` non-denied calls of the session's agent, oldest first,
    as (tool_name, input_hash, decision).

    ``agent_id`` None is the main agent (index on session_id, id); a subagent has
    its own history (partial index on session_id, agent_id, id).
    """
    # `agent_id = ?` (not IS) lets a subagent's read use the partial index on agent_id.
    who = "agent_id IS NULL" if agent_id is None else "agent_id = ?"
    args = (session_id,) + (() if agent_id is None else (agent_id,)) + (since_id, max(0, window - 1))
    rows = conn.execute(
        f"SELECT tool_name, input_hash, decision FROM tool_calls WHERE session_id = ? AND {who} AND id > ?"
        " AND outcome != 'denied' ORDER BY id DESC LIMIT ?",
        args,
    ).fetchall()
    rows.reverse()
    return rows


def reset_point(seq: list[Key], reset_tools: list[str] | tuple[str, ...]) -> int:
    """Index where counting starts: just after the last state-changing call new in ``seq``."""
    if not reset_tools:
        return 0
    tools = set(reset_tools)
    for i in range(len(seq) - 2, -1, -1):  # the current call (last) never resets itself
        if seq[i][0] in tools and seq.count(seq[i]) == 1:
            return i + 1
    return 0


def pingpong(seq: list[Key], share: float) -> tuple[int, Key | None]:
    """(switches, partner): the strongest alternation of the last call with another call."""
    if len(seq) < 2:
        return 0, None
    cur = seq[-1]
    partners: list[Key] = []
    for key in reversed(seq[:-1]):
        if key != cur and key not in partners:
            partners.append(key)
            if len(partners) == 3:
                break
    best: tuple[int, Key | None] = (0, None)
    for partner in partners:
        pair = (cur, partner)
        in_pair = 0
        length = 0
        for n in range(1, len(seq) + 1):
            if seq[-n] in pair:
                in_pair += 1
            if in_pair >= share * n - 1e-9:
                length = n
        tail = [k for k in seq[len(seq) - length:] if k in pair]
        switches = sum(1 for a, b in zip(tail, tail[1:], strict=False) if a != b)  # neighbours
        if switches > best[0]:
            best = (switches, partner)
    return best


def decide(tool_name: str, input_hash: str, history: list[tuple], config: dict[str, Any]) -> Verdict | None:
    """Warn or deny a call repeated or ping-ponged too often; None otherwise. Pure.

    ``history`` is the previous non-denied calls, oldest first, as
    ``(tool_name, input_hash, decision)`` (decision may be missing). A rule
    denies only a call that was already warned in the window (it, or its
    ping-pong partner): the warning comes first whatever the configuration or
    the shape of the history (a reset that lapses, a stretch that grows).
    """
    section = config["loops"]
    cfg = settings_for(tool_name, config)
    if not section.get("enabled", True) or not cfg["enabled"]:
        return None
    window = int(section["window"])
    cur = (tool_name, input_hash)
    recent = list(history[-(window - 1):]) if window > 1 else []
    seq = [(e[0], e[1]) for e in recent]
    warned = {(e[0], e[1]) for e in recent if len(e) > 2 and e[2] in (WARN, DENY)}
    seq.append(cur)
    seq = seq[reset_point(seq, section.get("reset_tools") or ()):]

    repeats = seq.count(cur)
    switches, partner = pingpong(seq, float(cfg["pingpong_share"]))
    repeat_warn, repeat_block = int(cfg["repeat_warn"]), int(cfg["repeat_block"])
    pp_warn, pp_block = int(cfg["pingpong_warn"]), int(cfg["pingpong_block"])
    span = f"this session's last {len(seq)} tool calls"
    if repeats >= repeat_block and cur in warned:
        return Verdict(DENY, RULE_REPEAT, (
            f"Loop guard: blocked. {repeats} identical {tool_name} calls (same input, this one included) among {span}; "
            f"the call did not run. Repeating it will not give a different result. Change the approach "
            f"(different input, another tool, read the error again), or stop and report that you are stuck."
        ))
    if partner is not None and switches >= pp_block and (cur in warned or partner in warned):
        return Verdict(DENY, RULE_PINGPONG, (
            f"Loop guard: blocked. You have alternated between this {tool_name} call and a {partner[0]} call "
            f"{switches} times without other progress; the call did not run. Break the cycle: change the "
            f"approach, or stop and report that you are stuck."
        ))
    if repeats >= min(repeat_warn, repeat_block):
        then = ("The next identical call will be blocked." if repeats >= repeat_block
                else f"At {repeat_block} identical calls it will be blocked.")
        return Verdict(WARN, RULE_REPEAT, (
            f"Loop guard warning: {repeats} identical {tool_name} calls (same input, this one included) among {span}. "
            f"If it is not making progress, stop repeating it and change the approach. {then}"
        ))
    if partner is not None and switches >= min(pp_warn, pp_block):
        then = ("The next alternation will be blocked." if switches >= pp_block
                else f"At {pp_block} alternations it will be blocked.")
        return Verdict(WARN, RULE_PINGPONG, (
            f"Loop guard warning: you have alternated between this {tool_name} call and a {partner[0]} call "
            f"{switches} times. If this is not making progress, break the cycle. {then}"
        ))
    return None
