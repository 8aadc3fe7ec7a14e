"""Small, checked edits of config.toml for ``hooks enable|disable|install --link`` (the CLI only).

The file is the operator's: comments and layout stay as they are. An edit
changes or adds one line (or appends one table), then the new text is parsed
and must hold exactly the value meant; otherwise nothing is written and the
error says which line to add by hand. Writes are atomic, 0600, under a lock.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from typing import Any

from agent_hooks.locking import FlockFile
from agent_hooks.paths import write_private


class EditError(Exception):
    """The edit cannot be made safely; the message says what to do instead."""


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)  # a TOML basic string for str (JSON escapes are TOML escapes)


def _get(data: dict[str, Any], keys: list[str]) -> Any:
    value: Any = data
    for k in keys:
        if not isinstance(value, dict) or k not in value:
            return None
        value = value[k]
    return value


def _header_re(keys: list[str]) -> re.Pattern[str]:
    parts = [rf'(?:{re.escape(k)}|"{re.escape(k)}"|\'{re.escape(k)}\')' for k in keys]
    return re.compile(r"^[ \t]*\[[ \t]*" + r"[ \t]*\.[ \t]*".join(parts) + r"[ \t]*\][ \t]*(?:#.*)?$", re.M)


def _table_key(keys: list[str]) -> str:
    return ".".join(k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k) for k in keys)


def set_value(text: str, table: list[str], key: str, value: Any) -> str:
    """``text`` with ``key = value`` set in the table ``table`` (added when absent)."""
    line = f"{key} = {_toml(value)}"
    found = _header_re(table).search(text)
    if found:
        body_start = found.end()
        nxt = re.compile(r"^[ \t]*\[", re.M).search(text, body_start)
        body_end = nxt.start() if nxt else len(text)
        body = text[body_start:body_end]
        existing = re.compile(rf"^[ \t]*(?:{re.escape(key)}|\"{re.escape(key)}\")[ \t]*=(.*)$", re.M).search(body)
        if existing:
            rest = existing.group(1).strip()
            if rest.startswith("[") and not rest.rstrip().split("#")[0].rstrip().endswith("]"):
                raise EditError(f"{key} in [{_table_key(table)}] spans several lines")
            body = body[:existing.start()] + line + body[existing.end():]
        else:
            body = "\n" + line + body
        return text[:body_start] + body + text[body_end:]
    if _get(tomllib.loads(text), table + [key]) is not None or _get(tomllib.loads(text), table) is not None:
        raise EditError(f"[{_table_key(table)}] is written in a form this command does not edit")
    sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    return f"{text}{sep}[{_table_key(table)}]\n{line}\n"


def update(path: str, table: list[str], key: str, make: Any) -> Any:
    """Set ``table.key`` in the TOML file at ``path`` to ``make(current value)``; returns the new value.

    A symlinked config.toml (dotfiles) is edited at its target, the link kept; a read-only one is refused.
    """
    if os.path.islink(path) and not os.path.exists(path):
        raise EditError(f"{path} is a symlink to {os.path.realpath(path)}, which does not exist; "
                        "fix the link (or remove it), then re-run. Nothing was written.")
    path = os.path.realpath(path)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    try:
        if not os.stat(path).st_mode & stat.S_IWUSR:
            raise EditError(f"{path} is read-only; make it writable (chmod u+w) to let this command "
                            "edit it. It was left untouched.")
    except FileNotFoundError:
        pass
    # 0600 whatever the umask.
    with FlockFile(path + ".lock", 10.0, EditError):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            text = ""
        try:
            current = _get(tomllib.loads(text), table + [key])
        except tomllib.TOMLDecodeError as exc:
            raise EditError(f"{path} is not valid TOML ({exc}); fix it first") from None
        value = make(current)
        hint = f"add this under [{_table_key(table)}] in {path}: {key} = {_toml(value)}"
        try:
            new_text = set_value(text, table, key, value)
            ok = _get(tomllib.loads(new_text), table + [key]) == value
        except (EditError, tomllib.TOMLDecodeError) as exc:
            raise EditError(f"could not edit {path} safely ({exc}); {hint}") from None
        if not ok:
            raise EditError(f"could not edit {path} safely; {hint}")
        try:
            write_private(path, new_text)
        except OSError as exc:
            raise EditError(f"cannot write {path}: {exc.strerror or exc}; it was left untouched; {hint}") from None
    return value


def set_enabled(path: str, name: str, enabled: bool) -> None:
    """``handlers.entries.<name>.enabled = enabled``."""
    update(path, ["handlers", "entries", name], "enabled", lambda _cur: enabled)


def add_to_list(path: str, key: str, item: str) -> bool:
    """Add ``item`` to the list ``handlers.<key>``; False when it was there already."""
    added = []

    def make(current: Any) -> list[Any]:
        items = list(current) if isinstance(current, list) else []
        if item not in items:
            items.append(item)
            added.append(item)
        return items

    update(path, ["handlers"], key, make)
    return bool(added)
