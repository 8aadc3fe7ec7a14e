"""hooks list / info / check / enable / disable / install / new: user handlers (docs/handlers.md)."""

from __future__ import annotations

import ast
import os
import shutil
import stat
from typing import Any

import click

from agent_hooks.cli.common import NotFound, echo_json, load_config, paths
from agent_hooks.handlers import config_edit, discovery, eligibility, registry
from agent_hooks.handlers.discovery import EVENTS, WORKSPACE
from agent_hooks.paths import Paths, ensure_dir, write_private

MARK = {"ok": "✓", "warn": "!", "fail": "✗"}


# -- the inventory -----------------------------------------------------------------------------

def inventory(workspace: str | None, cfg: dict[str, Any] | None = None, p: Paths | None = None) -> list[dict[str, Any]]:
    """Every handler of every source (untrusted workspaces included), with status and reasons."""
    cfg = cfg if cfg is not None else load_config()
    p = p or paths()
    srcs = registry.current_sources(cfg, p.config_dir, workspace)
    handlers, _ = registry.compile_sources(srcs, p.state_dir)
    env = os.environ
    from agent_hooks.features.sessions import agent_name, role

    agent, who = agent_name(env, cfg), role(env, cfg)
    out = []
    for h in handlers:
        h = dict(h)
        h["status"], h["reasons"] = eligibility.evaluate(h, discovery.platform(), env, cfg, agent, who)
        h["switched_on"] = registry.switched_on(h, registry.entry_of(cfg, h["name"])) is None
        out.append(h)
    out.sort(key=lambda h: (h["priority"], h["name"]))
    return out


def _workspace(option: str | None) -> str:
    return os.path.realpath(option or os.getcwd())


def _find(name: str, workspace: str, cfg: dict[str, Any] | None = None) -> dict[str, Any]:
    for h in inventory(workspace, cfg):
        if h["name"] == name:
            return h
    raise NotFound(f"no handler named {name!r} (see: agent-hook hooks list)")


def _events_text(h: dict[str, Any]) -> str:
    text = ",".join(h["events"]) or "-"
    return f"{text}({h['matcher']})" if h["matcher"] else text


def _public(h: dict[str, Any]) -> dict[str, Any]:
    keys = ("name", "description", "source", "dir", "kind", "entry", "events", "matcher", "priority", "timeout_ms",
            "enabled", "always", "requires", "os", "agents", "roles", "api_version", "status", "reasons",
            "warnings", "shadows")
    return {k: h.get(k) for k in keys}


workspace_option = click.option("--workspace", type=click.Path(file_okay=False), default=None,
                                help="Workspace whose .agent-hooks/hooks to include (default: the current directory).")


@click.group(name="hooks")
def hooks() -> None:
    """User handlers: HOOK.md directories run by the events after the built-in guards (docs/handlers.md)."""


@hooks.command(name="list")
@click.option("--eligible", is_flag=True, help="Only the handlers that would run.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Say why each handler that would not run is out.")
@workspace_option
def list_cmd(eligible: bool, as_json: bool, verbose: bool, workspace: str | None) -> None:
    """List handlers from every source: name, source, events, priority and status."""
    items = inventory(_workspace(workspace))
    if eligible:
        items = [h for h in items if h["status"] == eligibility.READY]
    if as_json:
        echo_json([_public(h) for h in items])
        return
    if not items:
        click.echo("no handlers" + (" would run" if eligible else ""))
        return
    click.echo(f"{'NAME':24} {'SOURCE':9} {'PRI':>4}  {'STATUS':10} EVENTS")
    for h in items:
        click.echo(f"{h['name']:24} {h['source']:9} {h['priority']:>4}  {h['status']:10} {_events_text(h)}")
        if verbose:
            for reason in h["reasons"]:
                click.echo(f"    - {reason}")
            for warning in h["warnings"]:
                click.echo(f"    ! {warning}")
            for shadow in h["shadows"]:
                click.echo(f"    (replaces {shadow})")


@hooks.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@workspace_option
def info(name: str, as_json: bool, workspace: str | None) -> None:
    """Everything about one handler: where it is, what it handles, whether it runs and why not."""
    h = _find(name, _workspace(workspace))
    if as_json:
        echo_json(_public(h))
        return
    req = {k: v for k, v in (h["requires"] or {}).items() if v}
    rows = [("name", h["name"]), ("description", h["description"]), ("status", h["status"]),
            ("source", h["source"]), ("dir", h["dir"]), ("kind", h["kind"] or "-"), ("events", _events_text(h)),
            ("priority", h["priority"]), ("timeout_ms", h["timeout_ms"] or "default"),
            ("requires", req or "-"), ("os", ",".join(h["os"]) or "any"), ("always", h["always"]),
            ("agents", ",".join(h["agents"]) or "all"), ("roles", ",".join(h["roles"]) or "all")]
    for key, value in rows:
        click.echo(f"{key:12} {value}")
    for reason in h["reasons"]:
        click.echo(f"  - {reason}")
    for warning in h["warnings"]:
        click.echo(f"  ! {warning}")
    for shadow in h["shadows"]:
        click.echo(f"  (replaces {shadow})")


# -- check ---------------------------------------------------------------------------------------

def static_problems(h: dict[str, Any]) -> list[str]:
    """What is wrong with a handler that discovery could not see: handler.py's syntax and its handle().
    The code is parsed, never run: checking must not run a repository's code."""
    if h["errors"] or h["kind"] != "python":
        return []
    try:
        with open(h["entry"], encoding="utf-8") as f:
            tree = ast.parse(f.read(), h["entry"])
    except (OSError, UnicodeDecodeError) as exc:
        return [f"handler.py cannot be read: {exc}"]
    except SyntaxError as exc:
        return [f"handler.py line {exc.lineno}: {exc.msg}"]
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    if "handle" not in defined:
        return ["handler.py defines no handle(event) function"]
    if any(isinstance(n, ast.AsyncFunctionDef) and n.name == "handle" for n in tree.body):
        return ["handle must be a plain function, not async"]
    return []


def check_rows(workspace: str | None = None, cfg: dict[str, Any] | None = None,
               p: Paths | None = None) -> list[tuple[str, str, str]]:
    """(status ok|warn|fail, summary, fix) per handler, for ``hooks check`` and doctor.

    Fail: a handler that is switched on and broken. Warn: switched on but not eligible here, or warnings."""
    rows = []
    for h in inventory(workspace, cfg, p):
        problems = list(h["errors"]) + static_problems(h)
        on = h["switched_on"]
        label = f"{h['name']} ({h['source']})"
        if problems:
            rows.append(("fail" if on else "warn", f"{label}: broken: {'; '.join(problems)}",
                         f"fix {h['dir']}, or: agent-hook hooks disable {h['name']}"))
        elif h["status"] == eligibility.READY:
            extra = f" ({'; '.join(h['warnings'])})" if h["warnings"] else ""
            rows.append(("warn" if h["warnings"] else "ok", f"{label}: ready{extra}", ""))
        elif on:
            rows.append(("warn", f"{label}: will not run here: {'; '.join(h['reasons'])}", ""))
        else:
            rows.append(("ok", f"{label}: off", ""))
    return rows


def doctor_rows(project_dir: str, cfg: dict[str, Any], p: Paths | None = None) -> list[tuple[str, str, str]]:
    """``check_rows`` for doctor (area "handlers"); a failure to look is itself a row."""
    try:
        rows = check_rows(project_dir, cfg, p)
    except Exception as exc:  # noqa: BLE001 - doctor reports, it does not crash
        return [("fail", f"handlers could not be listed: {type(exc).__name__}: {exc}", "agent-hook hooks list -v")]
    off = [r[1].split(" ")[0] for r in rows if r[0] == "ok" and r[1].endswith(": off")]
    rows = [r for r in rows if not (r[0] == "ok" and r[1].endswith(": off"))]
    if off:
        rows.append(("ok", f"{len(off)} handler(s) off: {', '.join(off)}", ""))
    return rows


@hooks.command()
@workspace_option
def check(workspace: str | None) -> None:
    """Say for each handler whether it is ready; exit 1 if a handler that is switched on is broken."""
    rows = check_rows(_workspace(workspace))
    for status, summary, fix in rows:
        click.echo(f"{MARK[status]} {summary}" + (f" -> fix: {fix}" if fix else ""))
    if not rows:
        click.echo("no handlers")
    if any(r[0] == "fail" for r in rows):
        raise SystemExit(1)


# -- enable / disable -----------------------------------------------------------------------------

def _edit(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except config_edit.EditError as exc:
        raise click.ClickException(str(exc)) from None


@hooks.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the handler's new state as JSON.")
@workspace_option
def enable(name: str, as_json: bool, workspace: str | None) -> None:
    """Switch a handler on in the config (effective on the next hook call).

    For a workspace handler this also trusts the workspace: its .agent-hooks/hooks may then run code.
    """
    ws = _workspace(workspace)
    h = _find(name, ws)
    cfg_file = paths().config_file
    trusted = h["source"] == WORKSPACE and not h["trusted"]
    if trusted:
        _edit(config_edit.add_to_list, cfg_file, "trusted_workspaces", ws)
    _edit(config_edit.set_enabled, cfg_file, name, True)
    h = _find(name, ws)
    if as_json:
        echo_json({**_public(h), "trusted_workspace": ws if trusted else None})
        return
    if trusted:
        click.echo(f"trusted workspace {ws}: its .agent-hooks/hooks handlers may run once enabled")
    click.echo(f"enabled {name} ({h['source']}), effective on the next hook call")
    if h["status"] != eligibility.READY:
        click.echo(f"note: it will not run yet ({h['status']}): {'; '.join(h['reasons'])}", err=True)


@hooks.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the handler's new state as JSON.")
@workspace_option
def disable(name: str, as_json: bool, workspace: str | None) -> None:
    """Switch a handler off in the config (effective on the next hook call)."""
    ws = _workspace(workspace)
    _find(name, ws)
    _edit(config_edit.set_enabled, paths().config_file, name, False)
    if as_json:
        echo_json(_public(_find(name, ws)))
        return
    click.echo(f"disabled {name}, effective on the next hook call")


# -- install / new ----------------------------------------------------------------------------------

def _validate_candidate(path: str) -> list[dict[str, Any]]:
    """The handlers at ``path`` (a handler or a pack), refusing any that is broken."""
    if not os.path.isdir(path):
        raise click.ClickException(f"{path} is not a directory")
    root = os.path.realpath(path)
    if not os.path.isfile(os.path.join(root, discovery.HOOK_MD)) and \
            not os.path.isfile(os.path.join(root, discovery.PACK_MANIFEST)):
        raise click.ClickException(f"{path} holds neither {discovery.HOOK_MD} (a handler) nor "
                                   f"{discovery.PACK_MANIFEST} (a pack)")
    found = discovery.scan_source(discovery.Source(discovery.EXTRA, root), {})
    problems = [f"{h['name']}: {'; '.join(h['errors'] + static_problems(h))}" for h in found
                if h["errors"] or static_problems(h)]
    if problems:
        raise click.ClickException("not installed, broken: " + " | ".join(problems))
    if not found:
        raise click.ClickException(f"no handler found in {path}")
    return found


def _copy_private(src: str, dest: str) -> None:
    """Copy a handler directory: no symlink leading out, dirs 0700, files 0600 (0700 if executable)."""
    for dirpath, dirnames, filenames in os.walk(src):
        for n in dirnames + filenames:
            full = os.path.join(dirpath, n)
            if not discovery.inside(os.path.realpath(full), src):
                raise click.ClickException(f"{full} leads outside {src}; refused")
    shutil.copytree(src, dest, symlinks=False, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for dirpath, _dirnames, filenames in os.walk(dest):
        os.chmod(dirpath, 0o700)
        for n in filenames:
            full = os.path.join(dirpath, n)
            executable = os.stat(full).st_mode & stat.S_IXUSR
            os.chmod(full, 0o700 if executable else 0o600)


@hooks.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--link", is_flag=True, help="Use it where it is (added to handlers.extra_dirs) instead of copying it.")
@click.option("--force", is_flag=True, help="Replace a managed handler of the same name.")
def install(path: str, link: bool, force: bool) -> None:
    """Validate a handler (a directory with HOOK.md) or a pack (hooks-pack.json listing several),
    then copy it into the managed dir, or link it."""
    found = _validate_candidate(path)
    p = paths()
    if link:
        real = os.path.realpath(path)
        added = _edit(config_edit.add_to_list, p.config_file, "extra_dirs", real)
        click.echo(f"{'linked' if added else 'already linked'}: {real} (handlers.extra_dirs)")
    else:
        managed = discovery.managed_dir(p.config_dir)
        ensure_dir(managed)  # its parents too: ~/.config/agent-hooks is 0700 as well
        for h in found:
            dest = os.path.join(managed, h["name"])
            if os.path.lexists(dest) and not force:
                raise click.ClickException(f"{dest} exists (use --force to replace it)")
            tmp = os.path.join(managed, f".{h['name']}.installing-{os.getpid()}")
            _copy_private(h["dir"], tmp)
            if os.path.lexists(dest):
                shutil.rmtree(dest)
            os.replace(tmp, dest)
            click.echo(f"installed {h['name']} -> {dest}")
    for h in found:
        state = "on" if h["enabled"] else f"off until: agent-hook hooks enable {h['name']}"
        click.echo(f"  {h['name']}: {_events_text(h)}, priority {h['priority']}, {state}")


HOOK_MD_TEMPLATE = """---
name: {name}
description: "What {name} does, in one line."
events: [{events}]
{matcher}priority: 100
timeout_ms: 1000
# Off until you switch it on: agent-hook hooks enable {name}
enabled: false
# requires: {{bins: [git], env: [MY_TOKEN], config: [memory.dirs]}}
# agents: [worker-1]
# roles: [worker]
---

# {name}

Say here what the handler does and why, for whoever runs `agent-hook hooks info {name}`.
"""

PY_TEMPLATE = '''"""{name}: a user handler run in-process by agent-hooks (docs/handlers.md)."""

from __future__ import annotations


def handle(event: dict) -> dict | None:
    """Return None (no opinion) or {{"decision", "reason", "context", "updated_input"}}, each optional."""
    payload = event["payload"]
    if event["event"] == "PreToolUse" and "rm -rf /" in str(payload.get("tool_input", {{}}).get("command", "")):
        return {{"decision": "deny", "reason": "{name}: not on this machine."}}
    return None
'''

EXEC_TEMPLATE = '''#!/usr/bin/env python3
"""{name}: an executable user handler: the event JSON on stdin, the result JSON (or nothing) on stdout."""
import json
import sys

event = json.load(sys.stdin)
result = None
if event["event"] == "PreToolUse" and "rm -rf /" in str(event["payload"].get("tool_input", {{}}).get("command", "")):
    result = {{"decision": "deny", "reason": "{name}: not on this machine."}}
if result is not None:
    json.dump(result, sys.stdout)
'''


@hooks.command()
@click.argument("name")
@click.option("--event", "events", multiple=True, required=True, type=click.Choice(EVENTS),
              help="A Claude Code event it handles (repeat for several).")
@click.option("--exec", "executable", is_flag=True, help="An executable `handler` instead of handler.py.")
@click.option("--dir", "parent", type=click.Path(file_okay=False), default=None,
              help="Create it here instead of in the managed dir.")
def new(name: str, events: tuple[str, ...], executable: bool, parent: str | None) -> None:
    """Scaffold a handler, switched off: HOOK.md and handler.py (or an executable handler).

    It runs on no hook call until `agent-hook hooks enable NAME`, so a half-edited
    template never denies a tool call. Files are 0600 (the executable 0700) in 0700
    directories, the managed directory's parents included.
    """
    if not discovery.NAME_RE.match(name):
        raise click.ClickException("a name is letters, digits, '-' or '_' (at most 64)")
    base = parent or discovery.managed_dir(paths().config_dir)
    dest = os.path.join(base, name)
    if os.path.lexists(dest):
        raise click.ClickException(f"{dest} exists")
    if parent:
        os.makedirs(parent, mode=0o700, exist_ok=True)  # the user's directory: its mode is theirs
    else:
        ensure_dir(base)  # ~/.config/agent-hooks and hooks/ are 0700, as every directory we create
    os.mkdir(dest, 0o700)
    tool = any(e in discovery.TOOL_EVENTS for e in events)
    write_private(os.path.join(dest, discovery.HOOK_MD),
                  HOOK_MD_TEMPLATE.format(name=name, events=", ".join(events),
                                          matcher="matcher: Bash\n" if tool else ""))
    entry = os.path.join(dest, discovery.EXEC_ENTRY if executable else discovery.PY_ENTRY)
    write_private(entry, (EXEC_TEMPLATE if executable else PY_TEMPLATE).format(name=name))
    if executable:
        os.chmod(entry, 0o700)
    click.echo(f"created {dest} (off: it runs on no hook call yet)")
    click.echo(f"edit it, then: agent-hook hooks check && agent-hook hooks enable {name}")


COMMANDS = [hooks]
