"""doctor: a checklist of everything that has to be right for the hooks to work.

Each check gives ✓ (ok), ! (works, but look) or ✗ (broken), and every ! and ✗
names its fix. Exit status 1 when anything is ✗. Doctor reads the real store
without migrating it; its only write is the time of this check (``meta``), so
that the next run reports the errors logged since.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import click

from agent_hooks import claude_code
from agent_hooks import config as config_mod
from agent_hooks.cli.common import iso, paths
from agent_hooks.cli.settings import (EVENT_OF, EXECUTABLES, HOOKS, SettingsError, default_bin_dir,
                                      handler_words, is_ours, read_settings)
from agent_hooks.paths import Paths
from agent_hooks.store import SCHEMA_VERSION

OK, WARN, FAIL = "ok", "warn", "fail"
MARK = {OK: "✓", WARN: "!", FAIL: "✗"}
LAST_CHECK_KEY = "doctor.last_check_at"
MIN_PYTHON = (3, 11)
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
# Claude Code's timeouts are seconds, at most 600 by default: more looks like milliseconds.
MAX_SANE_TIMEOUT_S = 600


@dataclass
class Check:
    """One line of the checklist."""

    area: str
    status: str
    summary: str
    fix: str = ""
    data: dict[str, Any] = field(default_factory=dict)


# -- python, executables -----------------------------------------------------------------------

def check_python() -> list[Check]:
    v = sys.version_info
    from agent_hooks import __version__

    text = f"Python {v.major}.{v.minor}.{v.micro} ({sys.executable}), agent-hooks {__version__}"
    if v[:2] >= MIN_PYTHON:
        return [Check("python", OK, text)]
    return [Check("python", FAIL, f"{text}: need {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer",
                  "re-run install.sh with a newer python3 on PATH")]


def check_executables(bin_dir: str) -> list[Check]:
    missing = [exe for exe in EXECUTABLES if not os.access(os.path.join(bin_dir, exe), os.X_OK)]
    if not missing:
        return [Check("executables", OK, f"all {len(EXECUTABLES)} executables in {bin_dir}")]
    return [Check("executables", FAIL, f"missing in {bin_dir}: {', '.join(missing)}",
                  "reinstall the package: re-run install.sh (or pip install --force-reinstall agent-hooks)",
                  {"missing": missing})]


def check_client() -> list[Check]:
    """The ``claude`` on PATH against the newest client the package was tested with."""
    exe, version = claude_code.installed()
    newest = claude_code.NEWEST_TESTED
    if exe is None:
        return [Check("client", OK, f"no claude on PATH (not checked; tested up to Claude Code {newest})")]
    if version is None:
        return [Check("client", WARN, f"{exe} --version gave no version", "check that Claude Code runs")]
    if claude_code.newer_than_tested(version):
        return [Check("client", WARN, f"Claude Code {version} ({exe}) is newer than the newest tested, {newest}",
                      "it may send events or fields we do not know yet: they are accepted and noted in "
                      "logs/notices.log; see docs/troubleshooting.md", {"version": version, "newest_tested": newest})]
    return [Check("client", OK, f"Claude Code {version} ({exe}); tested up to {newest}",
                  data={"version": version, "newest_tested": newest})]


# -- settings files ----------------------------------------------------------------------------

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


# -- store -------------------------------------------------------------------------------------

def connect_existing(path: str, timeout_s: float) -> sqlite3.Connection:
    """Open the store without creating it (mode=rw)."""
    return sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=timeout_s, isolation_level=None)


def check_store(p: Paths, cfg: dict[str, Any]) -> tuple[list[Check], sqlite3.Connection | None]:
    """Checks of the store, and a connection when it is usable (schema current)."""
    path = p.store
    if not os.path.exists(path):
        return [Check("store", WARN, f"store {path} does not exist yet",
                      "nothing to do: the first hook call creates it (or run agent-hook init)")], None
    checks: list[Check] = []
    fix_corrupt = f"move it aside (mv {path} {path}.broken) and run agent-hook init"
    try:
        conn = connect_existing(path, cfg["runtime"]["busy_timeout_ms"] / 1000)
        result = conn.execute("PRAGMA quick_check").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        return [Check("store", FAIL, f"store {path} cannot be read: {exc} (corrupt?)", fix_corrupt)], None
    if result != "ok":
        checks.append(Check("store", FAIL, f"store {path} is damaged: {result}", fix_corrupt))
        conn.close()
        return checks, None
    checks.append(Check("store", OK, f"store {path} opens, integrity ok"))
    usable = True
    if version == SCHEMA_VERSION:
        checks.append(Check("store", OK, f"schema current (version {version})"))
    elif version < SCHEMA_VERSION:
        usable = False
        checks.append(Check("store", FAIL, f"schema at version {version}, this code needs {SCHEMA_VERSION}",
                            "agent-hook init (the next hook call also migrates it)"))
    else:
        usable = False
        checks.append(Check("store", FAIL, f"schema at version {version} is newer than this code ({SCHEMA_VERSION})",
                            "upgrade the package: re-run install.sh from a newer checkout"))
    if mode.lower() == "wal":
        checks.append(Check("store", OK, "WAL journal on"))
    else:
        checks.append(Check("store", FAIL, f"journal mode is {mode}, not WAL: readers block the writer",
                            f"sqlite3 {path} 'PRAGMA journal_mode=WAL'"))
    writable = os.access(path, os.W_OK) and bool(os.stat(path).st_mode & stat.S_IWUSR)
    if writable:
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            writable = False
            checks.append(Check("store", FAIL, f"store is not writable: {exc}",
                                "check the file's owner and mode, or what holds the lock"))
        else:
            checks.append(Check("store", OK, "writable"))
    else:
        checks.append(Check("store", FAIL, "store file is read-only", f"chmod 600 {path}"))
    loose = []
    for f in (path, path + "-wal", path + "-shm", p.error_log, p.config_file):
        try:
            if stat.S_IMODE(os.stat(f).st_mode) & 0o077:
                loose.append(f"{f} ({stat.S_IMODE(os.stat(f).st_mode):o})")
        except FileNotFoundError:
            pass
    if loose:
        checks.append(Check("store", FAIL, f"readable by others: {', '.join(loose)}",
                            "chmod 600 " + " ".join(x.split(" (")[0] for x in loose)))
    else:
        checks.append(Check("store", OK, "files are 0600"))
    if not usable:
        conn.close()
        return checks, None
    return checks, conn


# -- configuration and errors ------------------------------------------------------------------

def check_config(p: Paths) -> tuple[list[Check], dict[str, Any]]:
    """Checks of the configuration, and the configuration to use (defaults when invalid)."""
    import copy

    source = p.config_file if os.path.exists(p.config_file) else "defaults, no config file"
    try:
        cfg = config_mod.load(p, os.environ)
    except config_mod.ConfigError as exc:
        return [Check("config", FAIL, f"configuration invalid: {exc}",
                      f"fix {p.config_file} or the variable; the hooks run on defaults meanwhile")], \
            copy.deepcopy(config_mod.DEFAULTS)
    problems = config_mod.validate(cfg)
    if problems:
        # Doctor's own thresholds come from the defaults then: the values may not even be numbers.
        return [Check("config", FAIL, f"configuration: {problem}", f"fix it in {p.config_file} (see docs/configuration.md)")
                for problem in problems], copy.deepcopy(config_mod.DEFAULTS)
    return [Check("config", OK, f"configuration valid ({source})")], cfg


def _log_entries_since(p: Paths, since: float) -> list[dict[str, Any]]:
    entries = []
    for path in (p.error_log + ".1", p.error_log):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(entry, dict) and float(entry.get("ts") or 0) > since:
                        entries.append(entry)
        except OSError:
            pass
    return entries


def check_errors(p: Paths, conn: sqlite3.Connection | None, now: float) -> list[Check]:
    """Errors logged since the last doctor run (error log and ``errors`` table); records this run."""
    since = 0.0
    counted = 0
    if conn is not None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (LAST_CHECK_KEY,)).fetchone()
        since = float(row[0]) if row else 0.0
        counted = conn.execute("SELECT count(*) FROM errors WHERE at > ?", (since,)).fetchone()[0]
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                         "value = excluded.value", (LAST_CHECK_KEY, repr(now)))
            conn.execute("COMMIT")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    logged = _log_entries_since(p, since)
    when = f"since the last check ({iso(since)})" if since else "so far"
    if not logged and not counted:
        return [Check("errors", OK, f"no errors logged {when}")]
    kinds: dict[str, int] = {}
    for entry in logged:
        kinds[str(entry.get("kind"))] = kinds.get(str(entry.get("kind")), 0) + 1
    latest = logged[-1] if logged else {}
    text = f"{max(len(logged), counted)} errors logged {when}"
    if kinds:
        text += " (" + ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())) + ")"
    if latest:
        text += f"; latest: {latest.get('event')}: {str(latest.get('message'))[:160]}"
    return [Check("errors", WARN, text, f"read {p.error_log}; the hooks failed open on these calls",
                  {"log_entries": len(logged), "store_rows": counted})]


# -- forwarding --------------------------------------------------------------------------------

def check_server(cfg: dict[str, Any]) -> list[Check]:
    """Whether the ingest server answers (any HTTP answer counts; nothing is posted)."""
    fwd = cfg.get("forward") or {}
    if not fwd.get("enabled", True):
        return [Check("forward", OK, "forwarding disabled (forward.enabled = false)")]
    url = fwd.get("url")
    if not url:
        return [Check("forward", FAIL, "forwarding enabled but forward.url is empty",
                      "set forward.url, or forward.enabled = false")]
    from agent_hooks.forward.eventmap import problems
    from agent_hooks.forward.urls import url_problem

    map_checks = [Check("forward", WARN, problem, "fix forward.event_map (see docs/forwarding.md)") for problem in problems(cfg)]
    refused = url_problem(url, bool(fwd.get("allow_remote")))
    if refused:
        # Not probed either: nothing goes off this host unless the user allowed it.
        return [Check("forward", FAIL, refused, "use a loopback URL, or set forward.allow_remote = true",
                      {"url": url})] + map_checks
    import urllib.error
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    probe = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/api/hooks/sessions", "", ""))
    try:
        with urllib.request.urlopen(urllib.request.Request(probe, method="GET"), timeout=2) as resp:
            code = resp.status
    except urllib.error.HTTPError as exc:
        code = exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        # At the default URL nobody asked for a command center: a warning. A URL the
        # user configured that does not answer is broken.
        default = (config_mod.DEFAULTS.get("forward") or {}).get("url")
        status = WARN if url == default else FAIL
        return [Check("forward", status, f"ingest server {url} does not answer ({reason})",
                      "start the command center, fix forward.url, or set forward.enabled = false; "
                      "events wait in the queue meanwhile", {"url": url})] + map_checks
    return [Check("forward", OK, f"ingest server answers at {parts.scheme}://{parts.netloc} (HTTP {code})",
                  data={"url": url, "status": code})] + map_checks


def check_queue(p: Paths, conn: sqlite3.Connection | None, cfg: dict[str, Any], now: float) -> list[Check]:
    """The outbox: queued and dead events, and the age of the oldest queued one."""
    if conn is None:
        return []
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'outbox'").fetchone():
        return [Check("queue", WARN, "no outbox table in the store (schema behind)", "run agent-hook init")]
    cols = {row[1] for row in conn.execute("PRAGMA table_info(outbox)")}
    total = conn.execute("SELECT count(*) FROM outbox").fetchone()[0]
    by_state: dict[str, int] = {}
    if "state" in cols:
        by_state = dict(conn.execute("SELECT state, count(*) FROM outbox GROUP BY state").fetchall())
    dead = sum(n for s, n in by_state.items() if s and "dead" in s)
    queued = total - dead
    oldest = None
    if "created_at" in cols and queued:
        where = "WHERE state NOT LIKE '%dead%'" if "state" in cols else ""
        oldest = conn.execute(f"SELECT min(created_at) FROM outbox {where}").fetchone()[0]
    data = {"queued": queued, "dead": dead, "oldest_queued_at": iso(oldest) if oldest else None}
    stale_s = float(cfg["doctor"]["queue_stale_s"])
    checks = []
    if oldest and now - oldest > stale_s:
        checks.append(Check("queue", WARN, f"{queued} events queued, the oldest for {int(now - oldest)} s: "
                            "the queue is not draining", "check the ingest server line above; "
                            "the next hook call restarts the drainer", data))
    else:
        checks.append(Check("queue", OK, f"queue healthy: {queued} queued", data=data))
    if dead:
        last = None
        if "last_error" in cols:
            row = conn.execute("SELECT last_error FROM outbox WHERE state LIKE '%dead%' ORDER BY id DESC LIMIT 1").fetchone()
            last = row[0] if row else None
        checks.append(Check("queue", WARN, f"{dead} dead letters" + (f"; last error: {last}" if last else ""),
                            "inspect and retry them with agent-hook queue (see docs/forwarding.md)", data))
    return checks


# -- synthetic run -----------------------------------------------------------------------------

def sample_payloads(session_id: str, cwd: str) -> list[dict[str, Any]]:
    """One realistic payload per event, in the order of a session (shapes from Claude Code 2.1.197)."""
    common = {"session_id": session_id, "transcript_path": os.path.join(cwd, f"{session_id}.jsonl"), "cwd": cwd}
    tool = {**common, "permission_mode": "default", "prompt_id": "doctor-prompt", "tool_name": "Bash"}
    ok_call = {"command": "echo doctor", "description": "doctor's synthetic call"}
    bad_call = {"command": "exit 3", "description": "doctor's failing call"}
    return [
        {**common, "hook_event_name": "SessionStart", "source": "startup", "model": "claude-sonnet-4-5"},
        {**common, "hook_event_name": "UserPromptSubmit", "permission_mode": "default",
         "prompt": "agent-hook doctor: synthetic prompt"},
        {**tool, "hook_event_name": "PreToolUse", "tool_input": ok_call, "tool_use_id": "toolu_doctor_1"},
        {**tool, "hook_event_name": "PostToolUse", "tool_input": ok_call, "tool_use_id": "toolu_doctor_1",
         "tool_response": {"stdout": "doctor", "stderr": "", "interrupted": False, "isImage": False},
         "duration_ms": 5},
        {**tool, "hook_event_name": "PreToolUse", "tool_input": bad_call, "tool_use_id": "toolu_doctor_2"},
        {**tool, "hook_event_name": "PostToolUseFailure", "tool_input": bad_call, "tool_use_id": "toolu_doctor_2",
         "error": "Exit code 3", "is_interrupt": False, "duration_ms": 4},
        {**common, "hook_event_name": "Notification", "message": "Claude needs your permission to use Bash",
         "title": "Permission needed", "notification_type": "permission_prompt"},
        {**common, "hook_event_name": "PreCompact", "trigger": "manual", "custom_instructions": ""},
        {**common, "hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "Done."},
        {**common, "hook_event_name": "SessionEnd", "reason": "other"},
    ]


def _scratch_env(scratch: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AGENT_HOOKS") and k not in ("OPTIMALOS_SESSION_TMUX",)}
    env["AGENT_HOOKS_HOME"] = scratch
    env["CLAUDE_PROJECT_DIR"] = scratch
    # The scratch run must not send synthetic events to the user's command center.
    if "enabled" in config_mod.DEFAULTS.get("forward", {}):
        env["AGENT_HOOKS__FORWARD__ENABLED"] = "false"
    for var in ("AGENT_HOOKS_DEADLINE_MS", "AGENT_HOOKS_BUSY_TIMEOUT_MS"):
        if var in os.environ:
            env[var] = os.environ[var]
    return env


def _time_run(argv: list[str], stdin: bytes, env: dict[str, str], cwd: str, limit_s: float) -> tuple[float, Any]:
    started = time.perf_counter()
    try:
        proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, timeout=limit_s)
    except subprocess.TimeoutExpired:
        return (time.perf_counter() - started) * 1000, None
    return (time.perf_counter() - started) * 1000, proc


def check_synthetic(wired: dict[str, list[str]], bin_dir: str, cfg: dict[str, Any]) -> list[Check]:
    """Run every executable, as Claude Code would (``sh -c`` on the wired command), in a scratch store."""
    budget = float(cfg["doctor"]["latency_budget_ms"])
    deadline = float(cfg["runtime"]["deadline_ms"])
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="agent-hooks-doctor-") as scratch:
        os.chmod(scratch, 0o700)
        env = _scratch_env(scratch)
        scratch_paths = Paths(env)
        # Migrate first, so the timings are of ordinary calls, not of the store's creation.
        from agent_hooks.schema import migrate

        migrate(scratch_paths.store)
        base_ms, _ = _time_run([sys.executable, "-c", "import json, sqlite3"], b"", env, scratch, 30)
        session_id = f"doctor-{os.getpid()}-{int(time.time())}"
        calls = 0
        timings: dict[str, list[float]] = {}
        failures = 0
        for payload in sample_payloads(session_id, scratch):
            event = payload["hook_event_name"]
            exe = next(x for e, x, _ in HOOKS if e == event)
            commands = wired.get(event) or [os.path.join(bin_dir, exe)]
            for command in commands:
                calls += 1
                log_size = _size(scratch_paths.error_log)
                ms, proc = _time_run(["/bin/sh", "-c", command], json.dumps(payload).encode(), env, scratch,
                                     deadline / 1000 + 5)
                timings.setdefault(exe, []).append(ms)
                problem = _judge(proc, scratch_paths.error_log, log_size, event)
                if problem:
                    failures += 1
                    checks.append(Check("run", FAIL, f"{exe} ({event}): {problem}",
                                        f"run it by hand: echo '<payload>' | {command}; see the error log",
                                        {"command": command, "ms": round(ms, 1)}))
                elif ms > deadline:
                    checks.append(Check("run", FAIL, f"{exe} ({event}): {ms:.0f} ms, over the {deadline:.0f} ms "
                                        "deadline", "a slow disk or a locked store: check the store lines above",
                                        {"ms": round(ms, 1)}))
                elif ms > budget:
                    checks.append(Check("run", WARN, f"{exe} ({event}): {ms:.0f} ms, over the {budget:.0f} ms "
                                        "budget", "a busy machine, or a slow import on the hook path; "
                                        "see bench/ for the measurement", {"ms": round(ms, 1)}))
        per_exe = {exe: round(max(ms), 1) for exe, ms in timings.items()}
        slowest = max(per_exe.values()) if per_exe else 0
        text = ", ".join(f"{exe.removeprefix('agent-hook-')} {ms:.0f}" for exe, ms in per_exe.items())
        checks.insert(0, Check("run", OK if not failures else FAIL,
                               f"synthetic run: {calls - failures}/{calls} calls ok in a scratch store; ms: {text} "
                               f"(python baseline {base_ms:.0f} ms, budget {budget:.0f} ms)",
                               "" if not failures else "see the lines below",
                               {"ms": per_exe, "baseline_ms": round(base_ms, 1), "budget_ms": budget,
                                "slowest_ms": slowest}))
        conn = sqlite3.connect(scratch_paths.store)
        try:
            row = conn.execute("SELECT hook_calls, state FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        finally:
            conn.close()
        if row and row[0] == calls and row[1] == "ended":
            checks.insert(1, Check("run", OK, f"the scratch store shows the session: {row[0]} hook calls, {row[1]}"))
        else:
            checks.insert(1, Check("run", FAIL, f"the scratch store does not show the session as expected "
                                   f"(row: {row}, expected {calls} calls, ended)",
                                   "see the error log lines above; re-run install.sh"))
    return checks


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _judge(proc: Any, error_log: str, log_size: int, event: str | None = None) -> str | None:
    if proc is None:
        return "did not finish (killed after its deadline + 5 s)"
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        return f"exit {proc.returncode}" + (f": {err[-1][:200]}" if err else "")
    out = proc.stdout.strip()
    # PreCompact speaks plain stdout (the goal reminder); only its block answer is JSON.
    if out and not (event == "PreCompact" and not out.startswith(b"{")):
        try:
            json.loads(out)
        except ValueError:
            return f"stdout is not one JSON object: {out[:120]!r}"
    if _size(error_log) > log_size:
        try:
            with open(error_log, encoding="utf-8", errors="replace") as f:
                f.seek(log_size)
                entry = json.loads(f.read().splitlines()[0])
            return f"failed open: {entry.get('kind')}: {str(entry.get('message'))[:200]}"
        except (OSError, ValueError, IndexError):
            return "wrote to the error log"
    return None


# -- command -----------------------------------------------------------------------------------

def run_checks(project_dir: str, bin_dir: str, synthetic: bool = True) -> list[Check]:
    """Every check, in checklist order."""
    p = paths()
    now = time.time()
    checks = check_python()
    config_checks, cfg = check_config(p)
    checks += check_executables(bin_dir)
    checks += check_client()
    settings_checks, wired = check_settings(project_dir, bin_dir, cfg)
    checks += settings_checks
    store_checks, conn = check_store(p, cfg)
    checks += store_checks
    checks += config_checks
    try:
        checks += check_errors(p, conn, now)
        checks += check_server(cfg)
        checks += check_queue(p, conn, cfg, now)
    finally:
        if conn is not None:
            conn.close()
    if synthetic:
        checks += check_synthetic(wired, bin_dir, cfg)
    return checks


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checklist as JSON.")
@click.option("--project", type=click.Path(file_okay=False), default=None,
              help="Project whose .claude/settings*.json to check (default: the current directory).")
@click.option("--bin-dir", type=click.Path(file_okay=False), default=None,
              help="Directory of the agent-hook-* executables (default: this interpreter's bin).")
@click.option("--no-run", is_flag=True, help="Skip the synthetic run of every executable.")
def doctor(as_json: bool, project: str | None, bin_dir: str | None, no_run: bool) -> None:
    """Check the wiring, store, configuration, forwarding and hook latency; exit 1 if anything is broken.

    Each line is ✓ (ok), ! (works, but look) or ✗ (broken), with its fix.
    """
    os.umask(0o077)
    project_dir = os.path.abspath(project or os.getcwd())
    bin_dir = os.path.abspath(bin_dir) if bin_dir else default_bin_dir()
    checks = run_checks(project_dir, bin_dir, synthetic=not no_run)
    broken = [c for c in checks if c.status == FAIL]
    if as_json:
        click.echo(json.dumps({"ok": not broken, "checks": [asdict(c) for c in checks]}, indent=2,
                              ensure_ascii=False))
    else:
        for c in checks:
            line = f"{MARK[c.status]} {c.area:11} {c.summary}"
            if c.fix and c.status != OK:
                line += f" -> fix: {c.fix}"
            click.echo(line)
        warns = sum(c.status == WARN for c in checks)
        click.echo(f"\n{len(broken)} broken, {warns} to look at, {len(checks) - len(broken) - warns} ok")
    if broken:
        raise SystemExit(1)


COMMANDS = [doctor]
