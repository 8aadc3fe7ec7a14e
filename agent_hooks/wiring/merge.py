"""Install and uninstall as edits of a settings file's text: only our entries change.

Every edit is spliced into the original text (see ``jsontext``), so numbers,
escapes, compact arrays, duplicate keys, comments and empty objects the user
wrote stay as they were. The file is parsed again after each edit; settings
files are small and the edits few, so no offsets are carried across edits.

Containers (``hooks``, ``hooks.<Event>``) that install had to create are
named in ``Change.created``; uninstall removes a container its removals
emptied only when install created it (or when that is unknown: no record),
so a user's own ``"hooks": {}`` or ``"Stop": []`` survives a round trip.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from agent_hooks.wiring import jsontext
from agent_hooks.wiring.entries import is_ours


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
    created: list[str] = field(default_factory=list)  # "hooks", "hooks.<Event>": containers install made


@dataclass
class _Found:
    """Where one entry of ours is."""

    hooks_at: int  # index of the root member "hooks" (duplicates are possible)
    event_at: int  # index of the event's member in that hooks object
    event: str
    group: int
    handler: int
    alone: bool  # the group holds only this handler


# The loops below parse the text again after each edit, and again when nothing changed: the
# last few parses are kept (nothing edits a parsed node; an edit makes a new text).
_parse = lru_cache(maxsize=4)(jsontext.parse)


@lru_cache(maxsize=256)
def _is_ours_text(handler: str) -> bool:
    """Whether a handler, given as its text, is one of ours (the same few come back at every parse)."""
    return is_ours(jsontext.value_of(handler, jsontext.parse(handler)))


def parse_root(text: str, where: str) -> jsontext.Node:
    """The root object of a settings text; refuses a shape we cannot edit safely."""
    try:
        root = _parse(text)
    except jsontext.JSONTextError as exc:
        raise SettingsError(f"{where} is not valid JSON (line {exc.line}, column {exc.col}: {exc.msg}); "
                            "fix or move it, then re-run. It was left untouched.") from None
    if root.kind != "object":
        raise SettingsError(f"{where}: the top level is a JSON {root.kind}, not an object; "
                            "fix the file by hand, then re-run. It was left untouched.")
    for m in root.members:
        if m.key != "hooks":
            continue
        if m.value.kind != "object":
            raise SettingsError(f"{where}: \"hooks\" is not an object; fix it by hand, then re-run. "
                                "The file was left untouched.")
        for ev in m.value.members:
            if ev.value.kind != "array":
                raise SettingsError(f"{where}: hooks.{ev.key} is not a list; fix it by hand, then re-run. "
                                    "The file was left untouched.")
    return root


def _ours(text: str, root: jsontext.Node, event: str | None = None) -> list[_Found]:
    found = []
    for hi, hm in enumerate(root.members):
        if hm.key != "hooks":
            continue
        for ei, em in enumerate(hm.value.members):
            if event is not None and em.key != event:
                continue
            for gi, group in enumerate(em.value.items):
                handlers = group.get("hooks") if group.kind == "object" else None
                if handlers is None or handlers.kind != "array":
                    continue
                for xi, handler in enumerate(handlers.items):
                    if _is_ours_text(text[handler.start:handler.end]):
                        found.append(_Found(hi, ei, em.key, gi, xi, len(handlers.items) == 1))
    return found


def _remove_one(text: str, where: str, f: _Found, keep_emptied: Any) -> tuple[str, int | None]:
    """``text`` without the entry ``f``; the group index it freed, when its whole group went."""
    root = parse_root(text, where)
    hooks = root.members[f.hooks_at].value
    groups = hooks.members[f.event_at].value
    if not f.alone:
        handlers = groups.items[f.group].get("hooks")
        assert handlers is not None
        return jsontext.remove(text, handlers, f.handler), None
    text = jsontext.remove(text, groups, f.group)
    if len(groups.items) > 1 or keep_emptied is None:
        return text, f.group
    # The event's list is empty now; it goes when install had created it.
    if f"hooks.{f.event}" in keep_emptied:
        return text, f.group
    root = parse_root(text, where)
    text = jsontext.remove(text, root.members[f.hooks_at].value, f.event_at)
    root = parse_root(text, where)
    hooks = root.members[f.hooks_at].value
    if not hooks.members and "hooks" not in keep_emptied:
        text = jsontext.remove(text, root, f.hooks_at)
    return text, f.group


def strip(text: str, where: str, change: Change, event: str | None = None,
          keep_emptied: Any = ()) -> tuple[str, int | None]:
    """Remove our entries (of ``event``, or all); return the new text and the first group slot freed
    in the effective (last) ``hooks.<event>`` list.

    ``keep_emptied=None`` keeps every emptied list (install puts our group back in);
    otherwise an emptied container goes unless it is in ``keep_emptied``.
    """
    slot: int | None = None
    while True:
        root = parse_root(text, where)
        found = _ours(text, root, event)
        if not found:
            return text, slot
        f = found[0]
        effective = _effective(root, f.event)
        text, freed = _remove_one(text, where, f, keep_emptied)
        change.removed += 1
        if freed is not None and slot is None and effective == (f.hooks_at, f.event_at):
            slot = freed


def _effective(root: jsontext.Node, event: str) -> tuple[int, int] | None:
    """(hooks member, event member) indices the client reads: the last of each duplicate key."""
    for hi in range(len(root.members) - 1, -1, -1):
        if root.members[hi].key == "hooks":
            members = root.members[hi].value.members
            for ei in range(len(members) - 1, -1, -1):
                if members[ei].key == event:
                    return hi, ei
            return hi, -1
    return None


def install(text: str, where: str, groups: dict[str, dict[str, Any]],
            created_before: Collection[str] | None = None) -> tuple[str, Change]:
    """``text`` with exactly one entry of ours per event (where ours were, else appended).

    ``created_before``: what an earlier install created (None: unknown).
    """
    change = Change(created=sorted(created_before or ()))
    root = parse_root(text, where)
    if _effective(root, "") is None:
        text = jsontext.insert(text, root, len(root.members), {e: [g] for e, g in groups.items()}, key="hooks")
        change.added = len(groups)
        change.events = list(groups)
        change.created = sorted({*change.created, "hooks", *(f"hooks.{e}" for e in groups)})
        return text, change
    # Entries of ours under events we no longer hook (older versions) go.
    for stale in _ours(text, root):
        if stale.event not in groups:
            # "hooks" itself stays: our groups go into it next (without it there is nowhere to put them).
            text, _ = strip(text, where, change, stale.event, keep_emptied=_KeepHooks(created_before))
    for event, group in groups.items():
        root = parse_root(text, where)
        found = _ours(text, root, event)
        effective = _effective(root, event)
        assert effective is not None
        if len(found) == 1 and found[0].alone and (found[0].hooks_at, found[0].event_at) == effective:
            current = root.members[effective[0]].value.members[effective[1]].value.items[found[0].group]
            if jsontext.value_of(text, current) == group:
                continue
        removed_before = change.removed
        text, slot = strip(text, where, change, event, keep_emptied=None)
        root = parse_root(text, where)
        effective = _effective(root, event)
        assert effective is not None  # keep_emptied=None above: no container went, "hooks" is still there
        hi, ei = effective
        hooks = root.members[hi].value
        if ei >= 0 and created_before is None and change.removed > removed_before and not hooks.members[ei].value.items:
            # It held only ours and nothing says who made it (an older version did, with no record):
            # uninstall may take it out again. With a record, the record says: a user's own
            # `"Stop": []` that install filled stays when a later install (another transport) refills it.
            change.created = sorted({*change.created, f"hooks.{event}"})
        if ei < 0:
            text = jsontext.insert(text, hooks, len(hooks.members), [group], key=event)
            change.created = sorted({*change.created, f"hooks.{event}"})
        else:
            groups_node = hooks.members[ei].value
            at = len(groups_node.items) if slot is None else min(slot, len(groups_node.items))
            text = jsontext.insert(text, groups_node, at, group)
        change.added += 1
        change.events.append(event)
    return text, change


def uninstall(text: str, where: str, created: Collection[str] | None) -> tuple[str, Change]:
    """``text`` without any entry of ours. ``created``: what install created (None: unknown, so
    containers our removal empties go, as older versions did)."""
    change = Change()
    text, _ = strip(text, where, change, keep_emptied=_KeepUnlessCreated(created))
    return text, change


class _KeepUnlessCreated:
    """The containers to keep when emptied: all but those install created (none when that is unknown)."""

    def __init__(self, created: Collection[str] | None) -> None:
        self.created = None if created is None else set(created)

    def __contains__(self, name: object) -> bool:
        return self.created is not None and name not in self.created


class _KeepHooks(_KeepUnlessCreated):
    """As :class:`_KeepUnlessCreated`, and the ``hooks`` object is always kept."""

    def __contains__(self, name: object) -> bool:
        return name == "hooks" or super().__contains__(name)
