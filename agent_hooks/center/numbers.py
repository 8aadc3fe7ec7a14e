"""Numbers from callers and from the store: finite and in their kind's range, or refused (or dropped).

Python's json reads ``1e999`` as infinity and an integer of any length as an int. SQLite cannot
store an int past 2**63 - 1, strict JSON (every answer of the server is strict) has no infinity,
and a browser cannot parse the ``Infinity`` that lax JSON writes. So each number a route takes is
one of these kinds, with a documented range (docs/command-center.md, "Numbers"):

==========  ===========================  ===========================================================
kind        range                        fields
==========  ===========================  ===========================================================
``time``    0 to 4,102,444,800           epoch seconds, until 2100: a report's ``last_activity`` and
                                         ``waiting_since``; a request's ``created_at``,
                                         ``expires_at``, ``answered_at``
``count``   whole, 0 to 2**53            ``tool_calls``, ``warned``, ``denied``, ``waited_ms`` (2**53:
                                         the largest whole number a double, and so a browser, keeps exact)
``seq``     whole, 0 to 2**63 - 1        a control's sequence number (``/api/fleet/replies``), a long
                                         poll's ``after`` (SQLite's largest integer)
``flag``    0 or 1                       a request's ``interrupt``
``usd``     0 to 1,000,000,000           ``cost_usd`` (sums and rates of it stay finite)
==========  ===========================  ===========================================================

:func:`check` is the write side: the number, or :class:`~agent_hooks.center.contract.BodyError`
(400) naming the field. :func:`clean` is the read side's forgiving twin, for what a store written by
an older version may hold: the number, or None (dropped, never a 500).
"""

from __future__ import annotations

from typing import Any

from agent_hooks.center.contract import USD_MAX, BodyError

TIME_MAX = 4_102_444_800.0  # 2100-01-01T00:00:00Z
COUNT_MAX = 2**53
SEQ_MAX = 2**63 - 1

# kind -> (least, most, whole number?)
RANGES: dict[str, tuple[float, float, bool]] = {
    "time": (0.0, TIME_MAX, False),
    "count": (0, COUNT_MAX, True),
    "seq": (0, SEQ_MAX, True),
    "flag": (0, 1, True),
    "usd": (0.0, USD_MAX, False),
}
# The numbers of a reported card (agent_hooks.center.report) and of a reported request
# (agent_hooks.center.relay), by field: their kinds.
CARD_FIELDS = {"tool_calls": "count", "warned": "count", "denied": "count", "last_activity": "time",
               "waiting_since": "time"}
REQUEST_FIELDS = {"created_at": "time", "expires_at": "time", "answered_at": "time", "interrupt": "flag",
                  "waited_ms": "count"}
_SAID = {
    "time": "a time in epoch seconds from 0 to 4102444800 (the year 2100)",
    "count": "a whole number from 0 to 2**53",
    "seq": "a whole number from 0 to 2**63-1",
    "flag": "0 or 1",
    "usd": "a number of dollars from 0 to 1e9",
}


def clean(value: Any, kind: str) -> int | float | None:
    """``value`` as its kind's number (an int for whole kinds, a float otherwise) when it is a finite
    number in range, else None. A bool is not a number here."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    least, most, whole = RANGES[kind]
    # NaN fails every comparison, infinity the upper one; a huge int is compared exactly, never cast first.
    if not (least <= value <= most):
        return None
    if whole:
        if isinstance(value, float) and not value.is_integer():
            return None
        return int(value)
    return float(value)


def check(value: Any, kind: str, field: str) -> int | float | None:
    """A number a caller sent: None when absent (None), its kind's number when in range, else
    BodyError (400) saying which field and what it must be."""
    if value is None:
        return None
    out = clean(value, kind)
    if out is None:
        shown = repr(value) if not isinstance(value, int) or abs(value) < 10**20 else f"a {len(str(value))}-digit number"
        raise BodyError(f"{field} must be {_SAID[kind]}, got {shown[:60]}")
    return out


def parse(text: str | None, kind: str, field: str) -> int | float | None:
    """A number from a query string (``?after=12``): None when absent or empty, else as :func:`check`
    (text that is no number is refused the same way)."""
    if text is None or text == "":
        return None
    try:
        value: int | float = int(text) if RANGES[kind][2] else float(text)
    except ValueError:
        raise BodyError(f"{field} must be {_SAID[kind]}, got {text[:60]!r}") from None
    return check(value, kind, field)


def check_fields(doc: dict[str, Any], kinds: dict[str, str], where: str) -> None:
    """Check every numeric field of ``doc`` named in ``kinds`` (field -> kind); a field that holds
    no number at all is left to the caller (which ignores it); BodyError names ``where.field``."""
    for field, kind in kinds.items():
        value = doc.get(field)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            check(value, kind, f"{where}.{field}" if where else field)


def clean_fields(doc: dict[str, Any], kinds: dict[str, str]) -> dict[str, Any]:
    """``doc`` with every field named in ``kinds`` in range, or None (read side: never refuses)."""
    out = dict(doc)
    for field, kind in kinds.items():
        if field in out and out[field] is not None:
            out[field] = clean(out[field], kind)
    return out
