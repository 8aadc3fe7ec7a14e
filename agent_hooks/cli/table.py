"""Terminal-safe cells for every table and line the CLI prints.

What we print comes from payloads: a session id can hold an escape sequence that
clears the screen, a cwd a newline that forges a whole row, a field megabytes of
text. :func:`cell` is the one place that turns a stored value into printable
text: control and bidi characters become visible escapes, and long values are
clipped. :func:`block` does the same for multi-line text (summaries), keeping
its newlines.
"""

from __future__ import annotations

import re
from typing import Any

# C0 and C1 controls, DEL, line/paragraph separators, bidi embeddings and isolates,
# zero-width marks, BOM, and lone surrogates (click cannot even encode those).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}
# Widest cell by default: a whole path fits, a 3 MB field does not.
CELL_CHARS = 120
BLOCK_CHARS = 20000
# A session's state column: the widest state (needs_input) shown whole, never "needs_in…".
STATE_WIDTH = len("needs_input")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def cell(value: Any, width: int | None = None, limit: int | None = None, empty: str = "-") -> str:
    """``value`` as one safe line: escaped, clipped to ``limit`` (default ``width`` or
    :data:`CELL_CHARS`) with "…", and padded to ``width`` when given."""
    text = empty if value is None or value == "" else str(value)
    limit = limit or width or CELL_CHARS
    # Clip before and after escaping: a huge value is never escaped whole.
    text = _UNSAFE.sub(_escape, text[: limit + 1])
    if len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text.ljust(width) if width else text


def rcell(value: Any, width: int) -> str:
    """:func:`cell` aligned right (counts, ids)."""
    return cell(value, limit=width).rjust(width)


def block(value: Any, limit: int = BLOCK_CHARS) -> str:
    """Multi-line text made safe: newlines and tabs kept, other controls escaped, clipped."""
    text = "" if value is None else str(value)
    clipped = len(text) > limit
    lines = text[:limit].replace("\r\n", "\n").replace("\t", "    ").split("\n")
    return "\n".join(_UNSAFE.sub(_escape, line) for line in lines) + ("\n[… clipped]" if clipped else "")
