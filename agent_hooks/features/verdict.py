"""What a guard decided about one tool call or prompt: allow, warn or deny, by which rule, why."""

from __future__ import annotations

ALLOW, WARN, DENY = "allow", "warn", "deny"
_RANK = {ALLOW: 0, WARN: 1, DENY: 2}


class Verdict:
    """A guard's verdict (a plain class: typing.NamedTuple would cost the hook path ~2 ms)."""

    __slots__ = ("decision", "rule", "message")

    def __init__(self, decision: str, rule: str | None = None, message: str | None = None) -> None:
        self.decision = decision  # allow | warn | deny
        self.rule = rule  # e.g. "loops.repeat", "polling.no_progress:ci-watch"
        self.message = message  # what the model reads

    def __repr__(self) -> str:
        return f"Verdict({self.decision!r}, {self.rule!r}, {self.message!r})"


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
