"""Settings area: every settings file Claude Code reads, and our entries in them."""

from __future__ import annotations

import os
import shutil
from typing import Any

from agent_hooks.checks import FAIL, OK, WARN, Check, Context, check
from agent_hooks.wiring.entries import LAUNCHER_MARK, handler_words, mentions_ours, recognise
from agent_hooks.wiring.merge import SettingsError
from agent_hooks.wiring.plugin import PLUGIN_ID
from agent_hooks.wiring.plugin import active as plugin_active
from agent_hooks.wiring.settings_file import jsonc_extensions, read_settings
from agent_hooks.wiring.table import EVENT_OF, HOOKS

TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
# Every source the newest client sends on events whose matcher filters by source:
# a matcher of ours that drops one of these leaves those sessions unhooked.
MATCHED_SOURCES = {"SessionStart": ("startup", "resume", "clear", "compact", "fork")}
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
            doc, text = read_settings(path)
        except SettingsError as exc:
            checks.append(Check("settings", FAIL, f"{label}: {exc.message}",
                                "fix the file (Claude Code ignores an invalid one), then agent-hook settings install"))
            continue
        problems_before = len(checks)
        jsonc = jsonc_extensions(text.removeprefix("\ufeff"), path) if text and text.strip() else set()
        if jsonc:
            checks.append(Check("settings", FAIL, f"{label}: has {' and '.join(sorted(jsonc))}: Claude Code "
                                "ignores this whole file, so no hook in it runs",
                                "make it plain JSON (remove the comments and trailing commas)"))
        if doc.get("disableAllHooks") is True:
            checks.append(Check("settings", FAIL, f"{label}: disableAllHooks is true, no hook runs",
                                f"remove \"disableAllHooks\" from {path}"))
        count = 0
        for event, groups in (doc.get("hooks") or {}).items():
            for group in groups:
                if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                    continue
                for handler in group["hooks"]:
                    ours = recognise(handler)
                    if ours is None:
                        mine = mentions_ours(handler)
                        if mine:
                            checks.append(Check("settings", WARN, f"{label}: {event}: a hand-written entry runs "
                                                f"{mine} (settings install leaves it alone, so it may run twice)",
                                                "remove it if `agent-hook settings install` wires the same hook"))
                        continue
                    count += 1
                    if ours.kind == "command":
                        checks.extend(_check_handler(label, event, group, handler, project_dir, bin_dir, deadline_s))
                    checks.extend(_check_hold_timeout(label, event, handler, cfg))
                    # The command as Claude Code runs it (the synthetic run does the same); an http entry's URL.
                    wired_as = handler["command"] if ours.kind == "command" else ours.target
                    command = wired_as + " " + " ".join(map(str, handler.get("args") or []))
                    wired.setdefault(event, [])
                    where.setdefault(event, [])
                    if command.strip() not in wired[event]:
                        wired[event].append(command.strip())
                    where[event].append(scope)
        if len(checks) == problems_before:
            checks.append(Check("settings", OK, f"{label}: {count} hooks of ours" + (", all resolve" if count else "")))
    # Across files: each of our events wired exactly once.
    for event, _, _ in HOOKS:
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
    elif plugin_active():
        checks.append(Check("settings", OK, f"no hooks of ours in any settings file: the plugin {PLUGIN_ID} wires them"))
    else:
        text = "no hooks of ours in any settings file" + ("" if any_file else " (no settings file found)")
        checks.append(Check("settings", FAIL, text, "run install.sh, or agent-hook settings install"))
    return checks, wired


def _check_hold_timeout(label: str, event: str, handler: dict[str, Any], cfg: dict[str, Any]) -> list[Check]:
    """A hook that holds a request for a person (docs/approvals.md) must outlive its wait: a client
    that kills it first counts no decision, which for an approval gate lets the call run."""
    if event not in ("PermissionRequest", "PreToolUse"):
        return []
    from agent_hooks.wiring.entries import timeouts

    needed = timeouts(cfg)[event]
    timeout = handler.get("timeout")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout >= needed:
        return []
    what = "approvals.wait_s" if event == "PermissionRequest" else "the longest approval gate's timeout_s"
    return [Check("settings", WARN, f"{label}: {event}: timeout {timeout:g} s is below the {needed} s that {what}"
                  " needs: the client would stop the hook while it waits for a person",
                  "agent-hook settings install (rewrites our entries)")]


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
        # The installation was removed or moved (the launcher lets these calls pass, and logs them).
        out.append(Check("settings", FAIL, f"{name}: {words[0]} does not exist (stale path)",
                         "re-run install.sh (or, to unwire: agent-hook settings uninstall)"))
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
    if isinstance(handler.get("command"), str) and not handler["command"].endswith(LAUNCHER_MARK):
        out.append(Check("settings", WARN, f"{name}: wired without our launcher (an older version's entry): "
                         "if the installation goes, every call shows a hook error", fix))
    matcher = group.get("matcher")
    if event in TOOL_EVENTS and matcher not in (None, "", "*"):
        out.append(Check("settings", WARN, f"{name}: matcher {matcher!r} limits our hook to some tools", fix))
    dropped = dropped_sources(event, matcher)
    if dropped:
        out.append(Check("settings", FAIL, f"{name}: matcher {matcher!r} drops source {', '.join(dropped)}: "
                         "those sessions start without registration, identity or a start event", fix,
                         {"dropped_sources": dropped}))
    return out


def dropped_sources(event: str, matcher: Any) -> list[str]:
    """The sources the client sends for ``event`` that ``matcher`` lets through to no hook of ours."""
    sources = MATCHED_SOURCES.get(event)
    if not sources or matcher in (None, "", "*"):
        return []
    import re

    matcher = str(matcher)
    # Reference §6.3: only letters, digits, _ - space , | make a list of exact names (split on | and ,);
    # any other character makes the matcher an unanchored JavaScript regex.
    if all(c.isascii() and (c.isalnum() or c in "_- ,|") for c in matcher):
        names = {n.strip() for n in re.split(r"[|,]", matcher)}
        return [s for s in sources if s not in names]
    try:
        pattern = re.compile(matcher)
    except re.error:
        return list(sources)
    return [s for s in sources if not pattern.search(s)]
