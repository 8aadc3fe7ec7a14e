"""Dollars as a person reads them, the same in the CLI and on the board.

One rule everywhere (the board's ``money()`` in center/static/board.js is the
same function, and a browser test holds the two to the same answers):

* a dollar or more: dollars with two decimals and thousands separated, ``$1.25``,
  ``$1,204.50``;
* under a dollar: cents, whole from ten cents (``38¢``), to a tenth of a cent
  below (``3.5¢``, ``0.4¢``); under half a tenth, ``<0.1¢``; nothing, ``0¢``.

Both languages round half up on whole numbers of tenths of a cent and of cents
(``floor(x * 1000 + 0.5)``), from the same double, so they never disagree on a
tie. Standard library only.
"""

from __future__ import annotations

import math


def usd(value: float | int | None) -> str:
    """``$1.25``, ``38¢``, ``3.5¢``, ``<0.1¢``, ``0¢`` (see the module); a value that is not a number is ``0¢``."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "0¢"
    if not math.isfinite(v):
        return "0¢"
    if v < 0:
        return "-" + usd(-v)
    tenths = math.floor(v * 1000 + 0.5)
    if tenths == 0:
        return "<0.1¢" if v > 0 else "0¢"
    if tenths < 100:
        return f"{tenths // 10}.{tenths % 10}¢"
    cents = math.floor(v * 100 + 0.5)
    if cents < 100:
        return f"{cents}¢"
    return f"${cents / 100:,.2f}"
