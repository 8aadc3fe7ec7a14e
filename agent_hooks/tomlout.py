"""Plain data -> TOML text that :mod:`tomllib` reads back to the same data.

Enough for our configuration: tables of strings, numbers, booleans, arrays
and nested tables (written inline, so a section stays one block).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def key(name: str) -> str:
    """A bare key when TOML allows one, else a quoted key."""
    return name if _BARE.match(name) else string(name)


def string(text: str) -> str:
    # JSON's escapes are TOML basic-string escapes; TOML also forbids a raw DEL.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def value(v: Any) -> str:
    """One TOML value (inline form for tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        if not v:
            return "{}"
        return "{ " + ", ".join(f"{key(str(k))} = {value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def dumps(doc: dict[str, dict[str, Any]], comments: dict[str, str] | None = None) -> str:
    """``[section]`` tables of ``key = value`` lines; ``comments`` maps "section.key" to a trailing note."""
    comments = comments or {}
    out: list[str] = []
    for section, values in doc.items():
        out.append(f"[{key(section)}]")
        for k, v in values.items():
            note = comments.get(f"{section}.{k}")
            out.append(f"{key(k)} = {value(v)}" + (f"  # {note}" if note else ""))
        out.append("")
    return "\n".join(out)
