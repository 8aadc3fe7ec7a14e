"""Settings area: every settings file Claude Code reads, and our entries in them."""

from __future__ import annotations

import os
import shutil
from typing import Any

from agent_hooks.checks import FAIL, OK, WARN, Check, Context, check
from agent_hooks.cli.settings import (
    EVENT_OF,
    HOOKS,
    SettingsError,
    handler_words,
    is_ours,
    read_settings,
)

TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
# Claude Code's timeouts are seconds, at most 600 by default: more looks like milliseconds.
MAX_SANE_TIMEOUT_S = 600


@check("settings", order=20)
def settings(ctx: Context) -> list[Check]:
    """Each settings file, each of our handlers in it, and each event wired exactly once."""
    checks, ctx.wired = check_settings(ctx.project_dir, ctx.bin_dir, ctx.cfg)
    return checks


def settings_files(project_dir: str) -> list[tuple[str, str]]:
    """(scope, path) of every settings file Claude Code reads for ``project_dir``, deduplicated."""
    home = os.environ.get("HOME") or os.path.expanduser("~")
    files = [
        ("user", os.path.join(home, ".claude", "settings.json")),
        ("project", os.path.join(project_dir, ".claude", "settings.json")),
        ("local", os.path.join(project_dir, ".claude", "settings.local.json")),
    ]
    seen: set[str] = set()
    out = []
    for scope, path in files:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            out.append((scope, path))
    return out


def _resolve(words: list[str], project_dir: str) -> tuple[str | None, str]:
    """(absolute executable or None, how it was resolved) for a handler's argv."""
    exe = os.path.expanduser(os.path.expandvars(words[0].replace("${CLAUDE_PROJECT_DIR}", project_dir)
                                                .replace("$CLAUDE_PROJECT_DIR", project_dir)))
    if os.sep in exe:
        return (exe if os.access(exe, os.X_OK) and os.path.isfile(exe) else None), "path"
    found = shutil.which(exe)
    return found, "PATH"


def check_settings(project_dir: str, bin_dir: str, cfg: dict[str, Any]) -> tuple[list[Check], dict[str, list[str]]]:
    """Checks of every settings file, and event -> the distinct commands of ours wired for it."""
    checks: list[Check] = []
    wired: dict[str, list[str]] = {}
    where: dict[str, list[str]] = {}
    deadline_s = cfg["runtime"]["deadline_ms"] / 1000
    any_file = False
    for scope, path in settings_files(project_dir):
        if not os.path.exists(path):
            continue
        any_file = True
        label = f"{scope} settings {path}"
        try:
            doc, _ = read_settings(path)
        except SettingsError as exc:
            checks.append(Check("settings", FAIL, f"{label}: {exc.message}",
                                "fix the file (Claude Code ignores an invalid one), then agent-hook settings install"))
            continue
        problems_before = len(checks)
        if doc.get("disableAllHooks") is True:
            checks.append(Check("settings", FAIL, f"{label}: disableAllHooks is true, no hook runs",
                                f"remove \"disableAllHooks\" from {path}"))
        count = 0
        for event, groups in (doc.get("hooks") or {}).items():
            for group in groups:
                if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                    continue
                for handler in group["hooks"]:
                    if not is_ours(handler):
                        continue
                    count += 1
                    checks.extend(_check_handler(label, event, group, handler, project_dir, bin_dir, deadline_s))
                    command = handler["command"] + " " + " ".join(map(str, handler.get("args") or []))
                    wired.setdefault(event, [])
                    where.setdefault(event, [])
                    if command.strip() not in wired[event]:
                        wired[event].append(command.strip())
                    where[event].append(scope)
        if len(checks) == problems_before:
            checks.append(Check("settings", OK, f"{label}: {count} hooks of ours" + (", all resolve" if count else "")))
    # Across files: each of our events wired exactly once.
    for event, exe, _ in HOOKS:
        commands = wired.get(event, [])
        if not commands:
            continue
        if len(commands) > 1:
            checks.append(Check("settings", FAIL, f"{event}: our hook is wired {len(commands)} times "
                                f"({', '.join(where[event])}), so it runs {len(commands)} times per call",
                                "keep one: agent-hook settings uninstall on the extra file(s) "
                                "(--project DIR [--local]), then agent-hook settings install"))
        elif len(where[event]) > 1 and len(set(where[event])) == 1:
            checks.append(Check("settings", WARN, f"{event}: the same hook appears {len(where[event])} times "
                                f"in the {where[event][0]} settings", "agent-hook settings install (keeps one)"))
    if wired:
        missing = [event for event, _, _ in HOOKS if event not in wired]
        if missing:
            checks.append(Check("settings", FAIL, f"not wired: {', '.join(missing)} (an entry was removed?)",
                                "agent-hook settings install", {"missing_events": missing}))
    else:
        text = "no hooks of ours in any settings file" + ("" if any_file else " (no settings file found)")
        checks.append(Check("settings", FAIL, text, "run install.sh, or agent-hook settings install"))
    return checks, wired


def _check_handler(label: str, event: str, group: dict[str, Any], handler: dict[str, Any], project_dir: str,
                   bin_dir: str, deadline_s: float) -> list[Check]:
    out: list[Check] = []
    fix = "agent-hook settings install (rewrites our entries)"
    words = handler_words(handler)
    base = os.path.basename(words[0])
    name = f"{label}: {event}"
    if event not in EVENT_OF.values():
        out.append(Check("settings", FAIL, f"{name} runs {base}: we do not hook this event (stale entry)", fix))
        return out
    if base.startswith("agent-hook-"):
        if base not in EVENT_OF:
            out.append(Check("settings", FAIL, f"{name} runs {base}, which we do not ship (stale entry)", fix))
            return out
        if EVENT_OF[base] != event:
            out.append(Check("settings", FAIL, f"{name} runs {base}, the hook of {EVENT_OF[base]}", fix))
    else:
        out.append(Check("settings", WARN, f"{name} uses the old form `{' '.join(words[:3])}`", fix))
    exe, how = _resolve(words, project_dir)
    if exe is None:
        out.append(Check("settings", FAIL, f"{name}: {words[0]} does not exist (stale path)", fix))
    elif how == "PATH":
        out.append(Check("settings", WARN, f"{name}: {words[0]} found only on PATH ({exe}); "
                         "Claude Code's PATH may differ", fix + " (absolute paths)"))
    elif base.startswith("agent-hook-") and os.path.realpath(os.path.dirname(exe)) != os.path.realpath(bin_dir):
        out.append(Check("settings", WARN, f"{name}: runs {exe}, another installation than {bin_dir}", fix))
    timeout = handler.get("timeout")
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        if timeout > MAX_SANE_TIMEOUT_S:
            out.append(Check("settings", FAIL, f"{name}: timeout {timeout} looks like milliseconds "
                             "(Claude Code reads seconds)", fix))
        elif timeout <= deadline_s:
            out.append(Check("settings", WARN, f"{name}: timeout {timeout} s is not above our "
                             f"{deadline_s:g} s deadline; Claude Code may kill the hook first", fix))
    elif timeout is not None:
        out.append(Check("settings", FAIL, f"{name}: timeout {timeout!r} is not a number of seconds", fix))
    matcher = group.get("matcher")
    if event in TOOL_EVENTS and matcher not in (None, "", "*"):
        out.append(Check("settings", WARN, f"{name}: matcher {matcher!r} limits our hook to some tools", fix))
    return out
