"""The compiled list of handlers: rebuilt when a source changes, read cheaply on every hook call.

A rebuild (discovery.py, PyYAML) writes ``<state dir>/cache/handlers-<key>.json``:
the handler records and the stamp (inode, mtime, size) of every directory and
file it read. A hook call stats the source directories (none there: no
handlers, done), then checks every recorded stamp; only a difference rebuilds.
So a long-lived process (the http transport) sees an edit, an install or a
removal on its next call, and the command transport pays a few stat calls.
"""

from __future__ import annotations

import json
import os

from agent_hooks.handlers import discovery

# Annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

CACHE_VERSION = 1
# path of a cache file -> (its stamp, its parsed content): a long-lived process skips the JSON parse.
_MEMO: dict[str, tuple[Any, dict[str, Any]]] = {}


def workspace_of(env: Mapping[str, str], cwd: str | None) -> str | None:
    """The session's workspace: $CLAUDE_PROJECT_DIR (the project root), else the payload's cwd."""
    ws = env.get("CLAUDE_PROJECT_DIR") or cwd or None
    return ws if ws and os.path.isabs(ws) else None


def current_sources(config: Mapping[str, Any], config_dir: str, workspace: str | None,
                    hot: bool = False) -> list[discovery.Source]:
    """The sources for this call. ``hot`` (the hook path) leaves out what cannot run: bundled
    handlers when none is enabled in the config (all are off by default), untrusted workspaces."""
    hcfg = config["handlers"]
    include_bundled = True
    if hot:
        entries = hcfg.get("entries") or {}
        include_bundled = isinstance(entries, dict) and any(
            isinstance(e, dict) and e.get("enabled") is True for e in entries.values())
        if workspace and not hcfg.get("trusted_workspaces"):
            workspace = None  # skip even the realpath: nothing in a workspace can run
    return discovery.sources(hcfg, config_dir, workspace, include_bundled=include_bundled,
                             include_untrusted=not hot)


def _cache_path(state_dir: str, srcs: list[discovery.Source]) -> str:
    from agent_hooks.hashing import sha256

    key = sha256(json.dumps([s.as_list() for s in srcs]).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return os.path.join(state_dir, "cache", f"handlers-{key}.json")


def _read_cache(path: str, srcs: list[discovery.Source]) -> dict[str, Any] | None:
    file_stamp = discovery.stamp(path)
    if file_stamp is None:
        return None
    memo = _MEMO.get(path)
    if memo is not None and memo[0] == file_stamp:
        data = memo[1]
    else:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
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
        if discovery.stamp(p) != recorded:
            return None
    return data


def _write_cache(path: str, data: dict[str, Any]) -> None:
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache we cannot write costs a rebuild next time, nothing else


def compile_sources(srcs: list[discovery.Source], state_dir: str, force: bool = False) -> tuple[list[dict[str, Any]], bool]:
    """(every handler record of ``srcs``, whether it was rebuilt): from the cache while its stamps hold."""
    path = _cache_path(state_dir, srcs)
    data = None if force else _read_cache(path, srcs)
    if data is not None:
        return data["handlers"], False
    handlers, stamps = discovery.discover(srcs)
    _write_cache(path, {"version": CACHE_VERSION, "sources": [s.as_list() for s in srcs], "stamps": stamps,
                        "handlers": handlers})
    return handlers, True


def matches(matcher: str | None, tool_name: str) -> bool:
    """Does HOOK.md's ``matcher`` take this tool? Empty or "*": every tool; plain names
    (``Bash``, ``Write|Edit``, ``Write, Edit``): exactly those; else a regex matched against the whole name."""
    if not matcher or matcher == "*":
        return True
    if all(c.isalnum() or c in "_-|, " for c in matcher):
        return tool_name in {n.strip() for n in matcher.replace(",", "|").split("|")}
    import re

    return re.fullmatch(matcher, tool_name) is not None


def due(config: Mapping[str, Any], config_dir: str, state_dir: str, env: Mapping[str, str], cwd: str | None,
        event: str, tool_name: str = "") -> list[dict[str, Any]]:
    """The handlers to run for this call, in priority order (the hook path; cheap when there are none)."""
    hcfg = config.get("handlers") or {}
    if not hcfg.get("enabled", True):
        return []
    srcs = current_sources(config, config_dir, workspace_of(env, cwd), hot=True)
    srcs = [s for s in srcs if os.path.isdir(s.path)]
    if not srcs:
        return []
    handlers, _ = compile_sources(srcs, state_dir)
    candidates = [h for h in handlers
                  if event in h["events"] and not h["errors"]
                  and (not h["matcher"] or matches(h["matcher"], tool_name))]
    if not candidates:
        return []
    from agent_hooks.handlers import eligibility
    from agent_hooks.features.sessions import agent_name, role

    agent, who = agent_name(env, config), role(env, config)
    plat = discovery.platform()
    ready = [h for h in candidates
             if eligibility.evaluate(h, plat, env, config, agent, who)[0] == eligibility.READY]
    ready.sort(key=lambda h: (h["priority"], h["name"]))
    return ready
