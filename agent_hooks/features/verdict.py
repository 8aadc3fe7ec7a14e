"""What a guard decided about one tool call or prompt: allow, warn or deny, by which rule, why."""

from __future__ import annotations

from typing import NamedTuple

ALLOW, WARN, DENY = "allow", "warn", "deny"
_RANK = {ALLOW: 0, WARN: 1, DENY: 2}


class Verdict(NamedTuple):
    decision: str  # allow | warn | deny
    rule: str | None = None  # e.g. "loops.repeat", "polling.no_progress:ci-watch"
    message: str | None = None  # what the model reads


def combine(verdicts: list[Verdict | None]) -> tuple[Verdict, list[Verdict]]:
    """The call's decision (the strongest verdict; the first on ties) and every warning.

    Warnings are returned separately so that they still reach the model when
    another guard allows the call.
    """
    found = [v for v in verdicts if v is not None and v.decision != ALLOW]
    if not found:
        return Verdict(ALLOW), []
    top = max(found, key=lambda v: _RANK[v.decision])  # max keeps the first of equals
    return top, [v for v in found if v.decision == WARN]
