"""settings install / uninstall / template: wire our hooks into Claude Code's settings.json.

Only our entries are touched. An entry is ours when the executable its
command runs is ``agent-hook-*`` (any directory, quoted or not, with or
without leading ``VAR=value`` words) or ``python -m agent_hooks...``; that
is how entries written by older versions, other checkouts or by hand are
found and replaced. Everything else in the file (other tools' hooks, other
keys, their order, the file's indentation) is kept.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import re
import shlex
import stat
import sys
from dataclasses import dataclass, field
from typing import Any

import click

from agent_hooks import config as config_mod
from agent_hooks.cli.common import load_config, paths

PLACEHOLDER = "{{BIN}}"

# Our events in the order they are written: (event, executable, matcher or None).
# Matchers only where Claude Code takes them (reference §6.3); None = every value.
HOOKS: list[tuple[str, str, str | None]] = [
    ("SessionStart", "agent-hook-session-start", "startup|resume|clear|compact"),
    ("UserPromptSubmit", "agent-hook-user-prompt-submit", None),
    ("PreToolUse", "agent-hook-pre-tool-use", "*"),
    ("PostToolUse", "agent-hook-post-tool-use", "*"),
    ("PostToolUseFailure", "agent-hook-post-tool-use-failure", "*"),
    ("Notification", "agent-hook-notification", None),
    ("PreCompact", "agent-hook-pre-compact", None),
    ("Stop", "agent-hook-stop", None),
    ("SessionEnd", "agent-hook-session-end", None),
]
EXECUTABLES = [exe for _, exe, _ in HOOKS]
EVENT_OF = {exe: event for event, exe, _ in HOOKS}

_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python[0-9.]*$")


class SettingsError(click.ClickException):
    """A settings file we refuse to touch; the message says why and what to do."""


# -- recognising our entries -------------------------------------------------------------------

def command_words(command: str) -> list[str]:
    """The words of a shell command (best effort: unbalanced quotes fall back to spaces)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    while words and _ENV_WORD.match(words[0]):
        words.pop(0)
    if words and os.path.basename(words[0]) == "env":
        words.pop(0)
        while words and _ENV_WORD.match(words[0]):
            words.pop(0)
    return words


def handler_words(handler: Any) -> list[str]:
    """The argv a handler runs: shell form splits ``command``; exec form is command + args."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return []
    args = handler.get("args")
    if isinstance(args, list):
        return [handler["command"], *[str(a) for a in args]]
    return command_words(handler["command"])


def is_ours(handler: Any) -> bool:
    """True for a command handler that runs one of our executables, in any form we ever wrote."""
    words = handler_words(handler)
    if not words:
        return False
    base = os.path.basename(words[0])
    if base.startswith("agent-hook-") or base == "agent-hook":
        return True
    if _PYTHON.match(base):
        for i, word in enumerate(words[1:-1], start=1):
            if word == "-m" and words[i + 1].split(".")[0] == "agent_hooks":
                return True
    return False


# -- the entries we write ----------------------------------------------------------------------

def timeouts(cfg: dict[str, Any]) -> dict[str, int]:
    """Seconds per event for Claude Code's ``timeout`` (from the ``install`` config section)."""
    sec = cfg["install"]
    return {event: int(sec["session_end_timeout_s"] if event == "SessionEnd" else sec["hook_timeout_s"])
            for event, _, _ in HOOKS}


def command_for(bin_dir: str, exe: str) -> str:
    if bin_dir == PLACEHOLDER:
        return f"{PLACEHOLDER}/{exe}"
    # Claude Code runs the command with `sh -c`: quote paths with spaces (a no-op otherwise).
    return shlex.quote(f"{bin_dir.rstrip('/')}/{exe}")


def our_groups(bin_dir: str, cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Event -> the matcher group we install for it."""
    secs = timeouts(cfg)
    groups: dict[str, dict[str, Any]] = {}
    for event, exe, matcher in HOOKS:
        group: dict[str, Any] = {}
        if matcher is not None:
            group["matcher"] = matcher
        group["hooks"] = [{"type": "command", "command": command_for(bin_dir, exe), "timeout": secs[event]}]
        groups[event] = group
    return groups


def template(cfg: dict[str, Any] | None = None) -> dict[str, Any]:
    """The document of settings.template.json: our hooks block with the {{BIN}} placeholder."""
    cfg = cfg or copy.deepcopy(config_mod.DEFAULTS)
    return {"hooks": {event: [group] for event, group in our_groups(PLACEHOLDER, cfg).items()}}


# -- merging -----------------------------------------------------------------------------------

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


# -- the file ----------------------------------------------------------------------------------

def target_path(settings: str | None, project: str | None, local: bool) -> str:
    """The settings file the options name (default ~/.claude/settings.json, $HOME respected)."""
    if settings and project:
        raise click.UsageError("give --settings or --project, not both")
    if local and not project:
        raise click.UsageError("--local needs --project DIR")
    if settings:
        return os.path.abspath(os.path.expanduser(settings))
    if project:
        name = "settings.local.json" if local else "settings.json"
        return os.path.join(os.path.abspath(os.path.expanduser(project)), ".claude", name)
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".claude", "settings.json")


def read_settings(path: str) -> tuple[dict[str, Any], str | None]:
    """(document, original text); ({}, None) when the file does not exist. Refuses invalid files."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}, None
    except UnicodeDecodeError:
        raise SettingsError(f"{path} is not UTF-8 text; fix or move it, then re-run. "
                            "It was left untouched.") from None
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror}") from None
    if not text.strip():
        return {}, text
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "fix or move it, then re-run. It was left untouched."
        ) from None
    _check_shape(doc, path)
    return doc, text


def _indent_of(text: str | None) -> str | int:
    if text:
        m = re.search(r"\n([ \t]+)\"", text)
        if m:
            return m.group(1) if "\t" in m.group(1) else len(m.group(1))
    return 2


def render(doc: dict[str, Any], like: str | None = None) -> str:
    """JSON text for ``doc``, indented like the file it replaces."""
    return json.dumps(doc, indent=_indent_of(like), ensure_ascii=False) + "\n"


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=False) == json.dumps(b, sort_keys=False)


def write_settings(path: str, text: str, original: str | None) -> str | None:
    """Atomically replace ``path`` (temp file + os.replace); return the backup's path, if any."""
    directory = os.path.dirname(path)
    if original is not None:
        st = os.stat(path)
        if not st.st_mode & stat.S_IWUSR or not os.access(path, os.W_OK):
            raise SettingsError(f"{path} is read-only; make it writable (chmod u+w {shlex.quote(path)}) "
                                "or pick another file with --settings. It was left untouched.")
        mode = stat.S_IMODE(st.st_mode)
    else:
        mode = 0o600
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise SettingsError(f"cannot create {directory}: {exc.strerror}") from None
    backup = None
    tmp = os.path.join(directory, f".{os.path.basename(path)}.agent-hooks.{os.getpid()}.tmp")
    try:
        if original is not None:
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
            backup = f"{path}.bak-agent-hooks-{stamp}"
            n = 1
            while os.path.exists(backup):
                n += 1
                backup = f"{path}.bak-agent-hooks-{stamp}-{n}"
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(original)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise SettingsError(f"cannot write {path}: {exc.strerror or exc}; it was left untouched") from None
    return backup


def _lock(path: str) -> Any:
    import hashlib

    from filelock import FileLock

    p = paths()
    os.makedirs(p.lock_dir, mode=0o700, exist_ok=True)
    # One lock per settings file, kept in our state dir so ~/.claude gets no lock files.
    name = hashlib.sha256(path.encode()).hexdigest()[:16]
    return FileLock(os.path.join(p.lock_dir, f"settings-{name}.lock"), timeout=10)


def default_bin_dir() -> str:
    """The directory of the running interpreter: the venv's bin, where our console scripts are."""
    return os.path.dirname(os.path.abspath(sys.executable))


def apply(path: str, action: str, bin_dir: str, cfg: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
    """Install or uninstall in the file at ``path``; returns a report (also the --json shape).

    With ``dry_run`` nothing is written and the report carries the unified ``diff``.
    """
    real = os.path.realpath(path)  # a symlinked settings.json (dotfiles) keeps its link
    with _lock(real):
        doc, original = read_settings(real)
        if action == "install":
            new, change = merge_install(doc, bin_dir, cfg)
        else:
            new, change = merge_uninstall(doc)
        report: dict[str, Any] = {"path": path, "action": action, "changed": False, "backup": None,
                                  "removed": change.removed, "added": change.added, "bin_dir": bin_dir}
        if _same(new, doc) and (original is not None or action == "uninstall"):
            return report
        text = render(new, original)
        if dry_run:
            import difflib

            report["diff"] = "".join(difflib.unified_diff((original or "").splitlines(True), text.splitlines(True),
                                                          path, f"{path} ({action})"))
            return report
        report["backup"] = write_settings(real, text, original)
        report["changed"] = True
        if report["backup"]:
            from agent_hooks.backups import prune

            report["pruned_backups"] = prune(real, int((cfg.get("install") or {}).get("keep_backups", 5)))
        return report


def _check_bin(bin_dir: str) -> None:
    missing = [exe for exe in EXECUTABLES if not os.access(os.path.join(bin_dir, exe), os.X_OK)]
    if missing:
        raise click.ClickException(
            f"{bin_dir} has no executable {', '.join(missing)}; pass --bin-dir with the directory of "
            "the agent-hook-* scripts (the venv's bin) or reinstall the package"
        )


def _target_options(fn: Any) -> Any:
    fn = click.option("--local", is_flag=True, help="With --project: .claude/settings.local.json.")(fn)
    fn = click.option("--project", type=click.Path(file_okay=False),
                      help="A project directory: its .claude/settings.json.")(fn)
    fn = click.option("--settings", "settings_path", type=click.Path(dir_okay=False),
                      help="This settings file (default ~/.claude/settings.json).")(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")(fn)
    fn = click.option("--dry-run", is_flag=True, help="Print the change as a diff; write nothing.")(fn)
    return fn


def _say(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    path = report["path"]
    if "diff" in report:
        click.echo(report["diff"], nl=False)
        click.echo(f"{path}: dry run, nothing written")
        return
    if not report["changed"]:
        what = "already up to date" if report["action"] == "install" else "no hooks of ours to remove"
        click.echo(f"{path}: {what}; nothing changed")
        return
    if report["action"] == "install":
        line = f"{path}: wired {report['added']} hooks to {report['bin_dir']}"
        if report["removed"]:
            line += f" (replaced {report['removed']} older entries of ours)"
    else:
        line = f"{path}: removed {report['removed']} hooks of ours; everything else kept"
    click.echo(line)
    if report["backup"]:
        click.echo(f"backup of the previous file: {report['backup']}")


@click.group()
def settings() -> None:
    """Wire our hooks into Claude Code's settings.json, or take them out."""


@settings.command()
@_target_options
@click.option("--bin-dir", type=click.Path(file_okay=False),
              help="Directory of the agent-hook-* executables (default: this interpreter's bin).")
def install(settings_path: str | None, project: str | None, local: bool, bin_dir: str | None,
            as_json: bool, dry_run: bool) -> None:
    """Insert or update our hooks (absolute paths); keep everything else. A second run changes nothing."""
    path = target_path(settings_path, project, local)
    bin_dir = os.path.abspath(os.path.expanduser(bin_dir)) if bin_dir else default_bin_dir()
    _check_bin(bin_dir)
    _say(apply(path, "install", bin_dir, load_config(), dry_run), as_json)


@settings.command()
@_target_options
def uninstall(settings_path: str | None, project: str | None, local: bool, as_json: bool, dry_run: bool) -> None:
    """Remove exactly our hooks (any path or older form); keep everything else."""
    path = target_path(settings_path, project, local)
    _say(apply(path, "uninstall", default_bin_dir(), load_config(), dry_run), as_json)


@settings.command(name="template")
def template_cmd() -> None:
    """Print settings.template.json: our hooks block with {{BIN}} for the executables' directory."""
    click.echo(render(template()), nl=False)


COMMANDS = [settings]
