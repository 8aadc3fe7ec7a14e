"""Whether the operator turned a handler on: its config entry and the on/off switch.

The hook path needs this for every candidate handler (registry.py), and the
full eligibility check (eligibility.py, imported only for a handler with
requirements or an audience) needs it too, so it sits below both.

Standard library only; imports nothing.
"""

from __future__ import annotations

# Annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def entry_of(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The handler's own settings, ``handlers.entries.<name>`` ({} when none)."""
    entries = config["handlers"]["entries"] or {}
    entry = entries.get(name) if isinstance(entries, dict) else None
    return entry if isinstance(entry, dict) else {}


def switched_on(h: dict[str, Any], entry: dict[str, Any]) -> str | None:
    """None when the handler is on; else why it is off. The operator's config beats HOOK.md,
    and a workspace handler needs the operator's word twice: a trusted workspace and enabled = true."""
    name = h["name"]
    configured = entry.get("enabled")
    if h["source"] == "workspace":
        if not h.get("trusted"):
            return (f"workspace handlers are off until the operator trusts this workspace:"
                    f" agent-hook hooks enable {name} (run in the workspace)")
        if configured is not True:
            return f"a workspace handler is off until the operator enables it: agent-hook hooks enable {name}"
        return None
    if configured is False:
        return f"disabled in the config (handlers.entries.{name}.enabled = false): agent-hook hooks enable {name}"
    if configured is not True and not h["enabled"]:
        return f"off by default (HOOK.md enabled: false): agent-hook hooks enable {name}"
    return None
