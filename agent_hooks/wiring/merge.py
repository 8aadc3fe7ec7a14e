"""Install and uninstall as edits of a parsed settings document."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from agent_hooks.wiring.entries import is_ours, our_groups


class SettingsError(Exception):
    """A settings file we refuse to touch; the message says why and what to do."""

    @property
    def message(self) -> str:
        return str(self)


@dataclass
class Change:
    """What a merge did to a document."""

    removed: int = 0  # entries of ours taken out (older forms, other paths, duplicates)
    added: int = 0
    events: list[str] = field(default_factory=list)


def _check_shape(doc: Any, where: str) -> None:
    if not isinstance(doc, dict):
        raise SettingsError(f"{where}: the top level is a JSON {type(doc).__name__}, not an object; "
                            "fix the file by hand, then re-run. It was left untouched.")
    hooks = doc.get("hooks")
    if hooks is None:
        return
    if not isinstance(hooks, dict):
        raise SettingsError(f"{where}: \"hooks\" is not an object; fix it by hand, then re-run. "
                            "The file was left untouched.")
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise SettingsError(f"{where}: hooks.{event} is not a list; fix it by hand, then re-run. "
                                "The file was left untouched.")


def strip_ours(doc: dict[str, Any], change: Change, drop_empty_hooks: bool = True) -> dict[str, int]:
    """Remove our handlers in place; return event -> index of the first group that held only ours.

    Groups and events left empty by the removal go too (and ``hooks`` itself when
    ``drop_empty_hooks``); groups that were empty before are someone else's business and stay.
    """
    hooks = doc.get("hooks")
    slots: dict[str, int] = {}
    if not isinstance(hooks, dict):
        return slots
    for event in list(hooks):
        groups = hooks[event]
        kept_groups: list[Any] = []
        touched = False
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                kept_groups.append(group)
                continue
            kept = [h for h in handlers if not is_ours(h)]
            gone = len(handlers) - len(kept)
            if not gone:
                kept_groups.append(group)
                continue
            touched = True
            change.removed += gone
            if kept:
                group["hooks"] = kept
                kept_groups.append(group)
            else:
                slots.setdefault(event, len(kept_groups))
        if not touched:
            continue
        if kept_groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    if drop_empty_hooks and "hooks" in doc and not doc["hooks"] and change.removed:
        del doc["hooks"]
    return slots


def merge_install(doc: dict[str, Any], bin_dir: str, cfg: dict[str, Any]) -> tuple[dict[str, Any], Change]:
    """A copy of ``doc`` with exactly one entry of ours per event, where ours were (else appended)."""
    new = copy.deepcopy(doc)
    change = Change()
    old_hooks = new.get("hooks") if isinstance(new.get("hooks"), dict) else {}
    old_order = list(old_hooks)
    slots = strip_ours(new, change, drop_empty_hooks=False)  # "hooks" keeps its place among the keys
    hooks = new.setdefault("hooks", {})
    for event, group in our_groups(bin_dir, cfg).items():
        groups = hooks.setdefault(event, [])
        at = slots.get(event, len(groups))
        groups.insert(min(at, len(groups)), group)
        change.added += 1
        change.events.append(event)
    # An event emptied by the strip and re-added lands at the end of the dict; put it back.
    order = [e for e in old_order if e in hooks] + [e for e in hooks if e not in old_order]
    new["hooks"] = {e: hooks[e] for e in order}
    return new, change


def merge_uninstall(doc: dict[str, Any]) -> tuple[dict[str, Any], Change]:
    """A copy of ``doc`` without any entry of ours."""
    new = copy.deepcopy(doc)
    change = Change()
    strip_ours(new, change)
    return new, change
