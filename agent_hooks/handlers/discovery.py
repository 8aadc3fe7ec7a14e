"""Where handlers come from, which one wins a name, and which paths are refused.

Sources, lowest precedence first: bundled (in the package), extra dirs
(``handlers.extra_dirs``), managed (``<config dir>/hooks``), workspace
(``<workspace>/.agent-hooks/hooks``, only for a workspace the operator trusts).
A later source's handler replaces an earlier one of the same name.

Path safety: every path is resolved, and the handler directory, its HOOK.md
and its handler file must stay inside their source once resolved; a symlink
that leads out is refused (listed as broken, with the reason). A file anyone
may write is refused too: someone else could put code there.

Only rebuilds call this module (registry.py); it imports PyYAML.
"""

from __future__ import annotations

import json
import os
import re
import stat

from agent_hooks.handlers import API_VERSION

# The source list is in sources.py (every hook call needs it; this module only rebuilds).
from agent_hooks.handlers.sources import (  # noqa: F401
    BUNDLED,
    BUNDLED_DIR,
    EXTRA,
    MANAGED,
    PRECEDENCE,
    WORKSPACE,
    WORKSPACE_SUBDIR,
    Source,
    is_trusted,
    managed_dir,
    platform,
    sources,
    stamp,
    workspace_dir,
)

# Annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HOOK_MD = "HOOK.md"
PY_ENTRY, EXEC_ENTRY = "handler.py", "handler"
PACK_MANIFEST = "hooks-pack.json"
MAX_HOOK_MD_BYTES = 256 * 1024

# The events a handler may name: the ones our executables handle.
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact",
          "Stop", "SessionEnd", "Notification")
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
KNOWN_KEYS = frozenset({"name", "description", "events", "matcher", "priority", "timeout_ms", "enabled", "requires",
                        "os", "always", "agents", "roles", "api_version", "homepage"})
REQUIRE_KEYS = ("bins", "anyBins", "env", "config")
DEFAULT_PRIORITY = 100


# -- path safety -------------------------------------------------------------------------------

def _mark(stamped: dict[str, Any], path: str) -> None:
    # Stamped before it is read: a change made while we read shows as a newer stamp next call.
    if path not in stamped:
        stamped[path] = stamp(path)


def inside(path: str, root: str) -> bool:
    """True when resolved ``path`` is ``root`` or below it (both resolved)."""
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


def unsafe_reason(path: str, root: str, what: str) -> str | None:
    """Why ``path`` may not be used (resolves outside ``root``; writable by anyone; another
    user's), or None. What another user may write or own, they could make us run."""
    real = os.path.realpath(path)
    if not inside(real, root):
        return f"{what} resolves to {real}, outside its source {root} (a symlink leading out is refused)"
    try:
        st = os.stat(real)
    except OSError as exc:
        return f"{what}: {exc.strerror or exc}"
    if st.st_mode & stat.S_IWOTH:
        return f"{what} is writable by anyone (mode {stat.S_IMODE(st.st_mode):o}): chmod o-w {real}"
    if st.st_uid not in (os.geteuid(), 0):
        return f"{what} belongs to another user (uid {st.st_uid}), not to you or root: {real}"
    return None


# -- HOOK.md -----------------------------------------------------------------------------------

def split_frontmatter(text: str) -> tuple[str | None, str]:
    """(YAML frontmatter or None, the documentation after it)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return "".join(lines[1:i]), "".join(lines[i + 1:])
    return None, text


def _strings(value: Any, key: str, errors: list[str]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    errors.append(f"{key} must be a string or a list of strings, got {_show(value)}")
    return []


def parse_meta(front: str | None, default_name: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """HOOK.md frontmatter -> (normalised metadata, errors, warnings). Unknown keys only warn."""
    import yaml

    errors: list[str] = []
    warnings: list[str] = []
    if front is None:
        return {}, ["HOOK.md has no YAML frontmatter (a first line '---', then the keys, then '---')"], []
    try:
        # libyaml's loader when PyYAML ships it (its wheels do): about 7 times faster, and it refuses
        # nesting past 1,000 levels in a millisecond where the pure-Python composer spends most of a
        # second recursing into a RecursionError, in every hook until the file is fixed.
        raw = yaml.load(front, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        return {}, [f"HOOK.md frontmatter is not valid YAML: {' '.join(str(exc).split())}"], []
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        # YAML PyYAML parses but cannot construct: a date like 2024-02-30 (ValueError), deep nesting.
        message = " ".join(str(exc).split())[:200]
        return {}, [f"HOOK.md frontmatter cannot be read: {type(exc).__name__}: {message}"], []
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return {}, ["HOOK.md frontmatter must be a mapping of keys"], []
    for key in raw:
        if key not in KNOWN_KEYS:
            warnings.append(f"unknown key {_show(key)} in HOOK.md (ignored)")
    name = raw.get("name")
    if name is None:
        name = default_name
        warnings.append(f"no name in HOOK.md: using the directory's, {default_name!r}")
    if not isinstance(name, str) or not NAME_RE.match(name):
        errors.append(f"name {_show(name)} must be letters, digits, '-' or '_' (at most 64)")
        name = default_name
    description = raw.get("description")
    if description is None:
        warnings.append("no description in HOOK.md")
        description = ""
    elif not isinstance(description, str):
        errors.append(f"description must be a string, got {_show(description)}")
        description = ""  # not str(): an aliased YAML structure can expand without bound
    events = []
    for e in _strings(raw.get("events"), "events", errors):
        if e in EVENTS:
            events.append(e)
        else:
            warnings.append(f"event {e!r} is not one agent-hooks handles ({', '.join(EVENTS)}); ignored")
    if not events:
        errors.append("no events: list the Claude Code events it handles, e.g. events: [PreToolUse]")
    matcher = raw.get("matcher")
    if matcher is not None and not isinstance(matcher, str):
        errors.append("matcher must be a string (tool names, or a regex)")
        matcher = None
    if matcher:
        if not set(events) & set(TOOL_EVENTS):
            warnings.append("matcher only applies to tool events (PreToolUse, PostToolUse, PostToolUseFailure)")
        if not _plain_names(matcher):
            try:
                re.compile(matcher)
            except re.error as exc:
                errors.append(f"matcher {_show(matcher)} is not a valid regex: {exc}")
            else:
                if _nested_repeat(matcher):
                    errors.append(f"matcher {_show(matcher)} repeats a repetition, as in (\\w+)*: on a tool name it"
                                  " can backtrack for minutes, holding the hook past its deadline; write it"
                                  " without the nesting (\\w*)")
    priority = _int(raw.get("priority"), DEFAULT_PRIORITY, "priority", errors)
    timeout_ms = _int(raw.get("timeout_ms"), None, "timeout_ms", errors)
    if timeout_ms is not None and timeout_ms <= 0:
        errors.append("timeout_ms must be above 0")
    enabled = raw.get("enabled", True)
    always = raw.get("always", False)
    for key, value in (("enabled", enabled), ("always", always)):
        if not isinstance(value, bool):
            errors.append(f"{key} must be true or false, got {_show(value)}")
    requires_raw = raw.get("requires") or {}
    requires: dict[str, list[str]] = {}
    if not isinstance(requires_raw, dict):
        errors.append("requires must be a mapping (bins, anyBins, env, config)")
        requires_raw = {}
    for key in requires_raw:
        if key not in REQUIRE_KEYS:
            warnings.append(f"unknown key requires.{_show(key)} (ignored)")
    for key in REQUIRE_KEYS:
        requires[key] = _strings(requires_raw.get(key), f"requires.{key}", errors)
    api = _int(raw.get("api_version"), API_VERSION, "api_version", errors)
    if api > API_VERSION:
        errors.append(f"needs handler API version {api}; this agent-hooks speaks {API_VERSION}")
    meta = {
        "name": name,
        "description": description,
        "events": events,
        "matcher": matcher or None,
        "priority": priority,
        "timeout_ms": timeout_ms,
        "enabled": enabled if isinstance(enabled, bool) else False,
        "always": always if isinstance(always, bool) else False,
        "requires": requires,
        "os": _strings(raw.get("os"), "os", errors),
        "agents": _strings(raw.get("agents"), "agents", errors),
        "roles": _strings(raw.get("roles"), "roles", errors),
        "api_version": api,
    }
    return meta, errors, warnings


def _int(value: Any, default: Any, key: str, errors: list[str]) -> Any:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        errors.append(f"{key} must be an integer, got {_show(value)}")
        return default
    return value


def _show(value: Any) -> str:
    """A short repr for a message: YAML aliases let a few lines of HOOK.md stand for a structure
    whose full repr would take gigabytes and hold the GIL past the hook's deadline."""
    import reprlib

    shown = reprlib.Repr()
    shown.maxlevel, shown.maxstring, shown.maxother = 2, 80, 80
    shown.maxdict = shown.maxlist = shown.maxtuple = shown.maxset = 4
    text = shown.repr(value)
    return text if len(text) <= 120 else text[:119] + "…"


def _nested_repeat(pattern: str) -> bool:
    """True when the regex repeats something that itself repeats ((a+)+, (\\w+)*, (a{1,2})*): the
    shape of catastrophic backtracking. The re module's matching holds the GIL, so no deadline
    of ours can stop it. Possessive repeats and atomic groups do not backtrack and pass."""
    # re's private modules (Python >= 3.11), which typeshed's re does not declare.
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]

    repeats = (sre.MAX_REPEAT, sre.MIN_REPEAT)
    atomic = getattr(sre, "ATOMIC_GROUP", None)

    def children(av: Any) -> Any:
        for x in av if isinstance(av, (list, tuple)) else (av,):
            if isinstance(x, sre_parse.SubPattern):
                yield x
            elif isinstance(x, (list, tuple)):
                yield from children(x)

    def walk(sub: Any, inside: bool) -> bool:
        for op, av in sub:
            if op in repeats and av[1] > 1:
                if inside or walk(av[2], True):
                    return True
            elif op != atomic and any(walk(child, inside) for child in children(av)):
                return True
        return False

    try:
        return walk(sre_parse.parse(pattern), False)
    except Exception:  # noqa: BLE001 - a parser of another Python version: no check rather than no handler
        return False


def _plain_names(matcher: str) -> bool:
    return all(c.isalnum() or c in "_-|, " for c in matcher)


# -- one handler directory ---------------------------------------------------------------------

def _blank_record(source: Source, root: str, path: str) -> dict[str, Any]:
    return {
        "name": os.path.basename(path.rstrip(os.sep)), "source": source.kind, "trusted": source.trusted,
        "root": root, "dir": path, "kind": None, "entry": None, "description": "", "events": [], "matcher": None,
        "priority": DEFAULT_PRIORITY, "timeout_ms": None, "enabled": True, "always": False,
        "requires": {k: [] for k in REQUIRE_KEYS}, "os": [], "agents": [], "roles": [],
        "api_version": API_VERSION, "errors": [], "warnings": [], "shadows": [],
    }


def load_handler(source: Source, root: str, path: str, stamped: dict[str, Any]) -> dict[str, Any]:
    """The record of the handler directory ``path`` in ``source`` (broken ones carry ``errors``).

    ``stamped`` collects the paths whose change must trigger a rebuild.
    """
    base = os.path.basename(path.rstrip(os.sep))
    record = _blank_record(source, root, path)
    _mark(stamped, path)
    problem = unsafe_reason(path, root, "handler directory")
    if problem:
        record["errors"].append(problem)
        return record
    real = os.path.realpath(path)
    record["dir"] = real
    hook_md = os.path.join(real, HOOK_MD)
    _mark(stamped, hook_md)
    problem = unsafe_reason(hook_md, real, HOOK_MD)
    if problem:
        record["errors"].append(problem if os.path.lexists(hook_md) else "no HOOK.md")
        return record
    if not os.path.isfile(hook_md):  # a FIFO would block open() until a writer came
        record["errors"].append("HOOK.md is not a regular file")
        return record
    try:
        with open(hook_md, "rb") as f:
            data = f.read(MAX_HOOK_MD_BYTES + 1)
        if len(data) > MAX_HOOK_MD_BYTES:
            raise ValueError(f"larger than {MAX_HOOK_MD_BYTES} bytes")
        text = data.decode("utf-8")
    except (OSError, ValueError) as exc:
        record["errors"].append(f"HOOK.md cannot be read: {exc}")
        return record
    front, _body = split_frontmatter(text)
    meta, errors, warnings = parse_meta(front, base)
    record.update(meta)
    record["errors"] += errors
    record["warnings"] += warnings
    py, exe = os.path.join(real, PY_ENTRY), os.path.join(real, EXEC_ENTRY)
    _mark(stamped, py)
    _mark(stamped, exe)
    has_py, has_exe = os.path.lexists(py), os.path.lexists(exe)
    if has_py and has_exe:
        record["errors"].append(f"both {PY_ENTRY} and {EXEC_ENTRY}: keep one")
    elif not has_py and not has_exe:
        record["errors"].append(f"no {PY_ENTRY} (in-process) or executable {EXEC_ENTRY}")
    else:
        entry = py if has_py else exe
        problem = unsafe_reason(entry, real, os.path.basename(entry))
        if problem:
            record["errors"].append(problem)
        elif not os.path.isfile(entry):
            record["errors"].append(f"{os.path.basename(entry)} is not a regular file")
        elif has_exe and not os.access(entry, os.X_OK):
            record["errors"].append(f"{EXEC_ENTRY} is not executable: chmod u+x {entry}")
        else:
            record["kind"] = "python" if has_py else "exec"
            record["entry"] = os.path.realpath(entry)
    return record


def _load_or_broken(source: Source, root: str, path: str, stamped: dict[str, Any]) -> dict[str, Any]:
    """load_handler, but what it did not foresee breaks this handler only, not the whole registry
    (every source's handlers, rebuilt and failed again on every hook call)."""
    try:
        return load_handler(source, root, path, stamped)
    except Exception as exc:  # noqa: BLE001
        record = _blank_record(source, root, path)
        record["errors"].append(f"cannot be read: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
        return record


def _pack_entries(root: str, manifest: str, stamped: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(handler directories a pack lists, errors)."""
    _mark(stamped, manifest)
    try:
        with open(manifest, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:
        return [], [f"{PACK_MANIFEST} cannot be read: {exc}"]
    listed = data.get("handlers") if isinstance(data, dict) else None
    if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
        return [], [f'{PACK_MANIFEST} must hold {{"handlers": ["dir", ...]}}']
    return [os.path.join(root, x) for x in listed], []


def scan_source(source: Source, stamped: dict[str, Any]) -> list[dict[str, Any]]:
    """Every handler directory of one source, in name order; refused ones carry errors."""
    _mark(stamped, source.path)
    if not os.path.isdir(source.path):
        return []
    root = os.path.realpath(source.path)
    if os.path.isfile(os.path.join(root, HOOK_MD)):  # an extra dir may be a handler itself
        return [_load_or_broken(source, root, root, stamped)]
    manifest = os.path.join(root, PACK_MANIFEST)
    if os.path.isfile(manifest):
        dirs, errors = _pack_entries(root, manifest, stamped)
        if errors:
            broken = _blank_record(source, root, root)
            broken["errors"] = errors
            return [broken]
    else:
        try:
            names = sorted(os.listdir(root))
        except OSError:
            return []
        dirs = [os.path.join(root, n) for n in names if not n.startswith(".")]
        dirs = [d for d in dirs if os.path.isdir(d)]
    records = [_load_or_broken(source, root, d, stamped) for d in dirs]
    # A folder others may write to could gain a handler of theirs at any time: none of it runs.
    problem = unsafe_reason(root, root, f"handler folder {root}")
    if problem:
        for record in records:
            record["errors"].insert(0, problem)
    return records


def discover(srcs: list[Source]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(handlers by name, the winner of each name; path -> stamp of everything read).

    Later sources win; an untrusted workspace handler never takes a name from another source.
    """
    stamped: dict[str, Any] = {}
    winners: dict[str, dict[str, Any]] = {}
    for source in srcs:
        seen_here: set[str] = set()
        for record in scan_source(source, stamped):
            name = record["name"]
            if name in seen_here:
                record["errors"].append(f"another handler in {source.path} is also named {name!r}")
                name = record["name"] = f"{name}@{os.path.basename(record['dir'])}"
            seen_here.add(name)
            previous = winners.get(name)
            if previous is not None and not source.trusted:
                previous["warnings"].append(f"an untrusted workspace handler of the same name in {record['dir']}"
                                            " is ignored")
                continue
            if previous is not None:
                record["shadows"] = previous["shadows"] + [f"{previous['source']}:{previous['dir']}"]
            winners[name] = record
    return [winners[n] for n in sorted(winners)], stamped
