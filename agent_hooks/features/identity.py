"""Identity files: the store is the agent's source of truth for SOUL.md and friends.

* SessionStart writes the agent's current versions into the workspace (backing
  up a differing file we did not write), records a per-session baseline, and
  injects what Claude Code did not load itself as ``additionalContext``
  (2.1.197 reads CLAUDE.md before SessionStart hooks run and never reads
  SOUL/IDENTITY/TOOLS), plus refused writes and conflicts since last time.
* PostToolUse on Write/Edit/MultiEdit of one of the files stores the new
  content as a ``self_edit`` version.
* Stop and SessionEnd sync files that moved from the baseline
  (``session_sync``). A file changed on both sides keeps both versions: the
  store's stays current, the session's is kept with source ``conflict``.
* Guards: a write that shrinks a file below its minimum or grows it past the
  budget is refused, recorded, and reported at the next SessionStart.

The decisions (:func:`guard`, :func:`decide`) are pure; the rest is I/O.
"""

from __future__ import annotations

import os
import sqlite3
import time

from agent_hooks.features import files, workspace_check
from agent_hooks.features.sessions import agent_name
from agent_hooks.features.toolcalls import WRITE_TOOLS

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_hooks.output import Outcome
    from agent_hooks.runner import Context

MANUAL, SELF_EDIT, SESSION_SYNC, CONFLICT = "manual", "self_edit", "session_sync", "conflict"
REJECTED, CONFLICTED, UNSAFE = "rejected", "conflict", "unsafe"


class Head:
    """The current version of one file (a plain class: typing.NamedTuple would import typing on the hook path)."""

    __slots__ = ("id", "version", "sha256", "chars", "source", "at", "content")

    def __init__(self, id: int, version: int, sha256: str, chars: int, source: str, at: float,
                 content: str) -> None:
        self.id, self.version, self.sha256, self.chars = id, version, sha256, chars
        self.source, self.at, self.content = source, at, content


class Baseline:
    """What a session started from: the file's hash on disk and the store version it matched."""

    __slots__ = ("sha256", "version_id")

    def __init__(self, sha256: str | None, version_id: int | None) -> None:
        self.sha256, self.version_id = sha256, version_id


# --- configuration -----------------------------------------------------------


def settings(config: dict[str, Any]) -> dict[str, Any]:
    return config["identity_files"]


def names(config: dict[str, Any]) -> list[str]:
    return [n for n in settings(config)["files"] if isinstance(n, str) and n and "/" not in n]


def min_chars(config: dict[str, Any], name: str) -> int:
    table = settings(config).get("min_chars") or {}
    value = table.get(name, 0) if isinstance(table, dict) else table
    return int(value or 0)


def max_bytes(config: dict[str, Any]) -> int:
    # UTF-8 is at most 4 bytes a character; the character check comes after decoding.
    return int(settings(config)["max_chars"]) * 4 + 4


def managed(conn: sqlite3.Connection, config: dict[str, Any], agent: str) -> bool:
    """Whether this agent's files are ours to keep: it has one in the store, or new agents are managed."""
    if settings(config).get("manage_new_agents"):
        return True
    return conn.execute("SELECT 1 FROM identity_versions WHERE agent = ? LIMIT 1", (agent,)).fetchone() is not None


# --- pure decisions ----------------------------------------------------------


def guard(config: dict[str, Any], name: str, chars: int, previous_chars: int | None) -> str | None:
    """Why a write of ``chars`` characters must be refused (None: accept it)."""
    limit = int(settings(config)["max_chars"])
    if chars > limit and (previous_chars is None or chars > previous_chars):
        return f"it would grow {name} to {chars} characters, past the {limit}-character budget"
    floor = min_chars(config, name)
    if chars < floor and (previous_chars is None or chars < previous_chars):
        why = (f"below the {floor}-character minimum for {name} (identity_files.min_chars): a file this short "
               "is usually a test sentinel or a cut-off write, and one once replaced a real profile")
        if previous_chars is None:
            return f"{name} would be {chars} characters, {why}"
        return f"it would shrink {name} from {previous_chars} to {chars} characters, {why}"
    return None


SKIP, SAME, STORE, CONFLICT_ACTION = "skip", "same", "store", "conflict"


def decide(disk_sha: str, baseline: Baseline | None, head: Head | None, explicit: bool) -> str:
    """What to do with a file's content on disk.

    ``explicit`` is a Write/Edit the agent just made; otherwise it is the end-of-turn
    sync, which without a baseline knows nothing about the file and leaves it.
    Returns skip (nothing moved), same (disk equals the store), store (a new
    current version), or conflict (both sides moved: keep the disk copy beside).
    """
    if head is not None and disk_sha == head.sha256:
        return SAME
    if baseline is None:
        if not explicit:
            return SKIP
        baseline = Baseline(None, head.id if head else None)
    elif disk_sha == baseline.sha256:
        return SKIP
    if head is None:
        return STORE  # nothing current to overwrite, so nothing to conflict with
    return STORE if head.id == baseline.version_id else CONFLICT_ACTION


# --- store access ------------------------------------------------------------


def head(conn: sqlite3.Connection, agent: str, name: str) -> Head | None:
    row = conn.execute(
        "SELECT id, version, sha256, chars, source, at, content FROM identity_versions"
        " WHERE agent = ? AND name = ? AND source != 'conflict' ORDER BY version DESC LIMIT 1",
        (agent, name),
    ).fetchone()
    return Head(*row) if row else None


def add_version(conn: sqlite3.Connection, agent: str, name: str, content: str, source: str,
                session_id: str | None, path: str | None, at: float) -> tuple[int, int]:
    """Append a version; returns (row id, version number)."""
    row = conn.execute(
        "SELECT coalesce(max(version), 0) + 1 FROM identity_versions WHERE agent = ? AND name = ?", (agent, name)
    ).fetchone()
    version = int(row[0])
    cur = conn.execute(
        "INSERT INTO identity_versions (agent, name, version, content, sha256, chars, source, session_id, path, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (agent, name, version, content, files.sha256_text(content), len(content), source, session_id, path, at),
    )
    return int(cur.lastrowid or 0), version


def report(conn: sqlite3.Connection, agent: str, name: str, kind: str, session_id: str | None, detail: str,
           at: float, sha256: str | None = None, chars: int | None = None) -> bool:
    """Record something to tell the agent at its next SessionStart; False when already pending."""
    if sha256 is not None and conn.execute(
        "SELECT 1 FROM identity_reports WHERE agent = ? AND name = ? AND kind = ? AND sha256 = ?"
        " AND reported_at IS NULL LIMIT 1",
        (agent, name, kind, sha256),
    ).fetchone():
        return False
    conn.execute(
        "INSERT INTO identity_reports (agent, name, kind, session_id, detail, sha256, chars, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (agent, name, kind, session_id, detail, sha256, chars, at),
    )
    return True


def baseline(conn: sqlite3.Connection, session_id: str, name: str) -> Baseline | None:
    row = conn.execute(
        "SELECT sha256, version_id FROM identity_baselines WHERE session_id = ? AND name = ?", (session_id, name)
    ).fetchone()
    return Baseline(*row) if row else None


def set_baseline(conn: sqlite3.Connection, session_id: str, name: str, agent: str, path: str,
                 sha256: str | None, version_id: int | None, at: float) -> None:
    conn.execute(
        "INSERT INTO identity_baselines (session_id, name, agent, path, sha256, version_id, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, name) DO UPDATE SET"
        " agent = excluded.agent, path = excluded.path, sha256 = excluded.sha256,"
        " version_id = excluded.version_id, at = excluded.at",
        (session_id, name, agent, path, sha256, version_id, at),
    )


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(at))


# --- sync (PostToolUse, Stop, SessionEnd, and SessionStart before it writes) -----


def sync_file(conn: sqlite3.Connection, config: dict[str, Any], agent: str, name: str, path: str,
              session_id: str, source: str, at: float, explicit: bool) -> str | None:
    """Bring one file on disk into the store; returns a message for the model, if any."""
    status, text = files.read_text(path, max_bytes(config))
    if status == files.MISSING:
        return None  # a deleted file is not a version; the store keeps the last one
    if status == files.TOO_LARGE:
        text = None
        try:
            chars = os.path.getsize(path)
        except OSError:
            return None
    elif status != files.OK or text is None:
        if explicit:
            report(conn, agent, name, UNSAFE, session_id, f"{path} is not a regular UTF-8 file; not synced", at,
                   f"unsafe:{path}")
        return None
    else:
        chars = len(text)
    disk_sha = files.sha256_text(text) if text is not None else f"too-large:{chars}"
    base = baseline(conn, session_id, name)
    current = head(conn, agent, name)
    action = decide(disk_sha, base, current, explicit)
    if action == SKIP:
        return None
    if action == SAME:
        set_baseline(conn, session_id, name, agent, path, disk_sha, current.id if current else None, at)
        return None
    refusal = guard(config, name, chars, current.chars if current else None)
    keep_version = base.version_id if base else (current.id if current else None)
    if refusal or text is None:
        refusal = refusal or f"{name} is over the size budget"
        if current is not None:
            kept = f"the store keeps version {current.version} ({current.chars} characters)"
            advice = (f"The store keeps version {current.version} ({current.chars} characters); the file on disk "
                      "will be replaced by it at the next session start unless you write a complete version.")
        else:
            kept = "nothing is stored for it yet"
            advice = "Nothing is stored for it yet; write a complete version."
        report(conn, agent, name, REJECTED, session_id,
               f"a write of {chars} characters to {name} in session {session_id} at {_iso(at)} was refused: "
               f"{refusal}; {kept}.", at, disk_sha, chars)
        # The session now stands at this content: do not refuse it again every turn.
        set_baseline(conn, session_id, name, agent, path, disk_sha, keep_version, at)
        return f"agent-hooks: your write to {name} was not saved to the identity store: {refusal}. {advice}"
    if action == STORE:
        vid, _ = add_version(conn, agent, name, text, source, session_id, path, at)
        set_baseline(conn, session_id, name, agent, path, disk_sha, vid, at)
        return None
    # Both moved: the store's edit (a lead, `identity set`) stays current.
    _, version = add_version(conn, agent, name, text, CONFLICT, session_id, path, at)
    assert current is not None  # decide() answers conflict only against a current version
    report(conn, agent, name, CONFLICTED, session_id,
           f"{name} changed both in the store (version {current.version}, {current.source}, {_iso(current.at)}) "
           f"and in session {session_id} (kept as version {version}, source conflict); version {current.version} "
           f"stays current. Compare: agent-hook identity diff {agent} {name} --from {current.version} --to {version}",
           at, disk_sha, chars)
    set_baseline(conn, session_id, name, agent, path, disk_sha, keep_version, at)
    return (f"agent-hooks: {name} was also changed in the identity store during this session; your version "
            f"is kept as version {version} but the store's version {current.version} stays current.")


def relevant(payload: Any, config: dict[str, Any]) -> bool:
    """Cheap test, before any query: a Write/Edit/MultiEdit of a file named like an identity file."""
    if payload.tool_name not in WRITE_TOOLS:
        return False
    file_path = payload.tool_input.get("file_path")
    return isinstance(file_path, str) and os.path.basename(file_path) in names(config)


def after_tool(conn: sqlite3.Connection, ctx: Context, out: Outcome) -> None:
    """PostToolUse: store a Write/Edit/MultiEdit of an identity file as a ``self_edit`` version."""
    p = ctx.payload
    if not relevant(p, ctx.config):
        return
    file_path = p.tool_input["file_path"]
    name = os.path.basename(file_path)
    ws = files.workspace(ctx.config, p.cwd)
    if ws is None:
        return
    path = files.resolve_in(ws, file_path)
    if path != os.path.join(ws, name):
        return  # a SOUL.md elsewhere (a subdirectory, outside the workspace) is not the agent's
    agent = agent_name(ctx.env, ctx.config)
    if not managed(conn, ctx.config, agent):
        return
    message = sync_file(conn, ctx.config, agent, name, path, p.session_id, SELF_EDIT, ctx.started, explicit=True)
    if message:
        out.add_context(message)


def final_sync(conn: sqlite3.Connection, ctx: Context, end: bool = False) -> None:
    """Stop / SessionEnd: sync files that moved from the session's baseline (``session_sync``).

    Silent: Stop context would keep the turn going; what matters is reported at the next start.
    """
    p = ctx.payload
    rows = conn.execute(
        "SELECT name, agent, path FROM identity_baselines WHERE session_id = ?", (p.session_id,)
    ).fetchall()
    swapped = workspace_check.problem(conn, p.session_id) if rows else None
    if swapped is not None:
        from agent_hooks.log import log_error
        from agent_hooks.store import record_error

        log_error(ctx.paths, p.event, "workspace", swapped[0], p.session_id, swapped[1], ctx.config)
        record_error(conn, p.event, "workspace", swapped[0], p.session_id)
        rows = []
    for name, agent, path in rows:
        sync_file(conn, ctx.config, agent, name, path, p.session_id, SESSION_SYNC, ctx.started, explicit=False)
    if end:
        conn.execute("DELETE FROM identity_baselines WHERE session_id = ?", (p.session_id,))
        workspace_check.forget(conn, p.session_id)


# --- SessionStart ------------------------------------------------------------


def materialise(conn: sqlite3.Connection, config: dict[str, Any], agent: str, directory: str, at: float,
                session_id: str | None = None) -> dict[str, dict[str, Any]]:
    """Write the agent's current files into ``directory`` (resolved); per file what happened.

    Each entry: ``head`` (Head or None), ``action`` (absent | same | written | unsafe |
    failed), ``backup`` path, ``disk_was_current`` (the file on disk already matched).
    With ``session_id`` a baseline is recorded for each file.
    """
    result: dict[str, dict[str, Any]] = {}
    backup = bool(settings(config).get("backup", True))
    for name in names(config):
        path = os.path.join(directory, name)
        current = head(conn, agent, name)
        status, text = files.read_text(path, max_bytes(config))
        disk_sha = files.sha256_text(text) if text is not None else None
        entry: dict[str, Any] = {"head": current, "action": "absent", "backup": None, "path": path,
                                 "disk_was_current": current is not None and disk_sha == current.sha256}
        result[name] = entry
        if status == files.UNSAFE:
            entry["action"] = UNSAFE
            report(conn, agent, name, UNSAFE, session_id,
                   f"{path} is a symlink or not a regular file; it was neither read nor written", at,
                   f"unsafe:{path}")
            continue
        if current is None:
            if session_id:
                set_baseline(conn, session_id, name, agent, path, disk_sha, None, at)
            continue
        if disk_sha == current.sha256:
            entry["action"] = "same"
        else:
            written = conn.execute("SELECT sha256 FROM identity_written WHERE path = ?", (path,)).fetchone()
            ours = written is not None and written[0] == disk_sha
            try:
                wstatus, saved = files.write_text(directory, name, current.content, at,
                                                  backup=backup and status != files.MISSING and not ours)
            except OSError as exc:
                wstatus, saved = "failed", None
                report(conn, agent, name, UNSAFE, session_id, f"could not write {path}: {exc}", at)
            entry["action"] = "written" if wstatus == files.OK else wstatus
            entry["backup"] = saved
            if wstatus == files.OK:
                conn.execute(
                    "INSERT INTO identity_written (path, agent, name, sha256, at) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (path) DO UPDATE SET agent = excluded.agent, name = excluded.name,"
                    " sha256 = excluded.sha256, at = excluded.at",
                    (path, agent, name, current.sha256, at),
                )
                disk_sha = current.sha256
            elif wstatus == UNSAFE:
                report(conn, agent, name, UNSAFE, session_id,
                       f"{path} is a symlink or not a regular file; it was not overwritten", at,
                       f"unsafe:{path}")
        if session_id:
            set_baseline(conn, session_id, name, agent, path, disk_sha, current.id, at)
    return result


def pending_reports(conn: sqlite3.Connection, agent: str) -> list[tuple[int, str, str, str]]:
    return conn.execute(
        "SELECT id, name, kind, detail FROM identity_reports WHERE agent = ? AND reported_at IS NULL ORDER BY id",
        (agent,),
    ).fetchall()


def compose_context(agent: str, blocks: list[tuple[str, str, str]], reports: list[str], budget: int) -> str:
    """The SessionStart text: reports first (short, urgent), then identity files, all within ``budget``.

    ``blocks`` are (name, content, path) in configured order. A file that does not
    fit is cut, or only named with its path, so the model knows where to read it.
    """
    sep = "\n\n"
    parts: list[str] = []

    def room() -> int:
        return budget - (len(sep.join(parts)) + len(sep) if parts else 0)

    if reports:
        text = "Identity store reports since your last session start:\n" + "\n".join(f"- {r}" for r in reports)
        parts.append(text[: max(0, budget)])
    if blocks:
        header = (f"Your identity files (agent \"{agent}\"), from the agent-hooks store. Claude Code does not "
                  "load these itself; hold them as your own. Edits you make to these files are saved as new "
                  "versions.")
        notes = [f"## {name}\n[not included: over the context budget; read {path}]" for name, _, path in blocks]
        if len(header) <= room():
            parts.append(header)
        for i, (name, content, path) in enumerate(blocks):
            reserve = sum(len(sep) + len(n) for n in notes[i + 1:])
            space = room() - reserve
            title, body = f"## {name}\n", content.strip("\n")
            cut = f"\n[… cut at the context budget; the whole file is {path}]"
            if len(title) + len(body) <= space:
                parts.append(title + body)
            elif space - len(title) - len(cut) >= 200:
                parts.append(title + body[: space - len(title) - len(cut)] + cut)
            elif len(notes[i]) <= room():
                parts.append(notes[i])
    return sep.join(parts)[: max(0, budget)]


def session_start(conn: sqlite3.Connection, ctx: Context, out: Outcome) -> None:
    """SessionStart: sync what moved, write the store's files, inject identity and reports."""
    p = ctx.payload
    config = ctx.config
    agent = agent_name(ctx.env, config)
    if not managed(conn, config, agent):
        return
    # Sessions killed before SessionEnd leave baselines behind; a few rows each, pruned here.
    cutoff = ctx.started - float(settings(config)["baseline_days"]) * 86400
    conn.execute("DELETE FROM identity_baselines WHERE at < ?", (cutoff,))
    workspace_check.forget(conn, before=cutoff)
    injected = dict(conn.execute(
        "SELECT name, injected_version_id FROM identity_baselines WHERE session_id = ?", (p.session_id,)
    ).fetchall())
    if injected:
        # Resume or compaction of a session we know: keep what the agent changed before rewriting.
        final_sync(conn, ctx)
    ws = files.workspace(config, p.cwd)
    if ws is not None:
        result = materialise(conn, config, agent, ws, ctx.started, p.session_id)
        workspace_check.record(conn, p.session_id, ws, ctx.started)
    else:
        result = {n: {"head": head(conn, agent, n), "action": "absent", "path": n, "disk_was_current": False}
                  for n in names(config)}
    loaded = set(settings(config).get("loaded_by_client") or [])
    blocks = []
    for name, entry in result.items():
        current = entry["head"]
        if current is None or not current.content.strip():
            continue
        if name in loaded and entry["disk_was_current"]:
            continue  # Claude Code read this very text from disk already
        if p.get("source") == "resume" and injected.get(name) == current.id:
            continue  # a resumed transcript replays what this session was given; compaction does not
        blocks.append((name, current.content, entry["path"]))
        conn.execute("UPDATE identity_baselines SET injected_version_id = ? WHERE session_id = ? AND name = ?",
                     (current.id, p.session_id, name))
    rows = pending_reports(conn, agent)
    if rows:
        conn.executemany(
            "UPDATE identity_reports SET reported_at = ?, reported_session = ? WHERE id = ?",
            [(ctx.started, p.session_id, r[0]) for r in rows],
        )
    text = compose_context(agent, blocks, [r[3] for r in rows], int(settings(config)["context_budget_chars"]))
    if text:
        out.add_context(text)
