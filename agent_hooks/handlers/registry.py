"""The compiled list of handlers: rebuilt when a source changes, read cheaply on every hook call.

A rebuild (discovery.py, PyYAML) writes ``<state dir>/cache/handlers-<key>.bin``
(marshal: a hook call loads it in ~0.01 ms, where JSON took ~0.1 ms): the handler records and the stamp (inode, mtime, size) of every directory and
file it read. A hook call stats the source directories (none there: no
handlers, done), then checks every recorded stamp; only a difference rebuilds.
So a long-lived process (the http transport) sees an edit, an install or a
removal on its next call, and the command transport pays a few stat calls.

The sources themselves (bundled < extra dirs < managed < workspace, lowest
precedence first) are listed in sources.py and the operator's on/off switch
is in switches.py: every call needs them, and so do discovery.py (imported
only to rebuild; PyYAML) and eligibility.py (only for a handler with
something to check). Arrows point down: the registry imports discovery,
eligibility, sources and switches; discovery and eligibility import sources
and switches; none of them imports the registry.
"""

from __future__ import annotations

import marshal
import os
import sys

# Names kept here for the callers that import them from the registry (cli/hooks.py, run.py, tests).
from agent_hooks.handlers.sources import (  # noqa: F401
    BUNDLED,
    BUNDLED_DIR,
    EXTRA,
    MANAGED,
    PRECEDENCE,
    WORKSPACE,
    WORKSPACE_SUBDIR,
    Source,
    current_sources,
    is_trusted,
    managed_dir,
    platform,
    sources,
    stamp,
    workspace_dir,
    workspace_of,
)
from agent_hooks.handlers.switches import entry_of, switched_on

# Annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

CACHE_VERSION = 4  # 3: marshal instead of JSON; 4: matchers with nested repeats refused (discovery)
# The cache file's first bytes: anything else there (a damaged or foreign file) is never unmarshalled.
CACHE_MAGIC = b"agent-hooks handlers %d %s\n" % (CACHE_VERSION, sys.implementation.cache_tag.encode())
# path of a cache file -> (its stamp, its parsed content): a long-lived process skips the unmarshal.
_MEMO: dict[str, tuple[Any, dict[str, Any]]] = {}


def _cache_path(state_dir: str, srcs: list[Source]) -> str:
    from agent_hooks.hashing import sha256

    key = sha256(marshal.dumps([s.as_list() for s in srcs])).hexdigest()[:16]
    return os.path.join(state_dir, "cache", f"handlers-{key}.bin")


def _read_cache(path: str, srcs: list[Source]) -> dict[str, Any] | None:
    file_stamp = stamp(path)
    if file_stamp is None:
        return None
    memo = _MEMO.get(path)
    if memo is not None and memo[0] == file_stamp:
        data = memo[1]
    else:
        try:
            with open(path, "rb") as f:
                raw = f.read()
            if not raw.startswith(CACHE_MAGIC):
                return None
            data = marshal.loads(memoryview(raw)[len(CACHE_MAGIC):])
        except (OSError, ValueError, EOFError, TypeError):  # what marshal raises on a truncated file
            return None
        if not isinstance(data, dict):
            return None
        _MEMO[path] = (file_stamp, data)
    if data.get("version") != CACHE_VERSION or data.get("sources") != [s.as_list() for s in srcs]:
        return None
    stamps = data.get("stamps")
    if not isinstance(stamps, dict):
        return None
    for p, recorded in stamps.items():
        if stamp(p) != recorded:
            return None
    return data


def _write_cache(path: str, data: dict[str, Any]) -> None:
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(CACHE_MAGIC + marshal.dumps(data))
        os.replace(tmp, path)
    except OSError:
        pass  # a cache we cannot write costs a rebuild next time, nothing else


def compile_sources(srcs: list[Source], state_dir: str, force: bool = False) -> tuple[list[dict[str, Any]], bool]:
    """(every handler record of ``srcs``, whether it was rebuilt): from the cache while its stamps hold."""
    path = _cache_path(state_dir, srcs)
    data = None if force else _read_cache(path, srcs)
    if data is not None:
        return data["handlers"], False
    from agent_hooks.handlers import discovery  # PyYAML: only on a rebuild

    handlers, stamps = discovery.discover(srcs)
    _write_cache(path, {"version": CACHE_VERSION, "sources": [s.as_list() for s in srcs], "stamps": stamps,
                        "handlers": handlers})
    return handlers, True


def conditional(h: dict[str, Any]) -> bool:
    """Whether the handler has requirements or an audience to check (eligibility.py); most have none,
    and the hook path then needs only its on/off switch."""
    if h["agents"] or h["roles"]:
        return True
    return not h.get("always") and bool(h["os"] or any(h["requires"].values()))


def matches(matcher: str | None, tool_name: str) -> bool:
    """Does HOOK.md's ``matcher`` take this tool? Empty or "*": every tool; plain names
    (``Bash``, ``Write|Edit``, ``Write, Edit``): exactly those; else a regex matched against the whole name."""
    if not matcher or matcher == "*":
        return True
    if all(c.isalnum() or c in "_-|, " for c in matcher):
        return tool_name in {n.strip() for n in matcher.replace(",", "|").split("|")}
    import re

    return re.fullmatch(matcher, tool_name) is not None


def _hot_sources(config: Mapping[str, Any], config_dir: str, env: Mapping[str, str], cwd: str | None) -> list[Source]:
    """The sources a hook call reads: none when handlers are off, else those that exist."""
    if not config["handlers"]["enabled"]:
        return []
    return [s for s in current_sources(config, config_dir, workspace_of(env, cwd), hot=True) if os.path.isdir(s.path)]


def _switched_on_for(config: Mapping[str, Any], handlers: list[dict[str, Any]], event: str,
                     tool_name: str) -> list[dict[str, Any]]:
    """The handlers for this event and tool, without errors, that the operator's switches leave on."""
    return [h for h in handlers
            if event in h["events"] and not h["errors"]
            and (not h["matcher"] or matches(h["matcher"], tool_name))
            and switched_on(h, entry_of(config, h["name"])) is None]


def none_due(config: Mapping[str, Any], config_dir: str, state_dir: str, env: Mapping[str, str], cwd: str | None,
             event: str, tool_name: str = "") -> bool:
    """True when certainly no handler is due for this call, told from the compiled registry without
    rebuilding it (the server's event loop, where a rebuild's YAML parse must not run). False when
    one may be: a switched-on candidate, one with requirements to check, or a registry to rebuild."""
    srcs = _hot_sources(config, config_dir, env, cwd)
    if not srcs:
        return True
    data = _read_cache(_cache_path(state_dir, srcs), srcs)
    return data is not None and not _switched_on_for(config, data["handlers"], event, tool_name)


def due(config: Mapping[str, Any], config_dir: str, state_dir: str, env: Mapping[str, str], cwd: str | None,
        event: str, tool_name: str = "") -> list[dict[str, Any]]:
    """The handlers to run for this call, in priority order (the hook path; cheap when there are none)."""
    srcs = _hot_sources(config, config_dir, env, cwd)
    if not srcs:
        return []
    handlers, _ = compile_sources(srcs, state_dir)
    ready = _switched_on_for(config, handlers, event, tool_name)
    if any(conditional(h) for h in ready):
        from agent_hooks.features.sessions import agent_name, role
        from agent_hooks.handlers import eligibility

        agent, who = agent_name(env, config), role(env, config)
        plat = platform()
        ready = [h for h in ready if not conditional(h)
                 or eligibility.evaluate(h, plat, env, config, agent, who)[0] == eligibility.READY]
    ready.sort(key=lambda h: (h["priority"], h["name"]))
    return ready
