"""Reading Claude Code's transcript JSONL, defensively.

The format is undocumented (reference §7): one JSON object per line, the last
line possibly partial, tool results possibly huge, the file possibly hundreds
of MB. So: the path from the payload is opened only under the client's
config directory (or configured roots), never through a symlink; only the
last ``transcript.max_read_bytes`` are read; overlong and unparsable lines
are skipped; parsing stops at a time budget. Everything else here is pure:
:func:`facts` turns parsed entries into what reminders and summaries need.
"""

from __future__ import annotations

import json
import os
import stat
import time

from agent_hooks.features import files
from agent_hooks.output import one_line

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

# Tools whose input names a file the agent changed.
FILE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
# User text that is not a human prompt (mirrors the client's own reader).
SKIP_PREFIXES = ("<local-command-stdout>", "<local-command-caveat>", "<command-name>", "<session-start-hook>",
                 "[Request interrupted by user", "<ide_opened_file>", "<ide_selection>", "<system-reminder>")
TODO_OPEN = ("pending", "in_progress")


def allowed_roots(env: Any, config: dict[str, Any]) -> list[str]:
    """Directories a transcript may live under: the client's config dir and configured extras."""
    roots = []
    claude_dir = env.get("CLAUDE_CONFIG_DIR")
    if claude_dir:
        roots.append(claude_dir)
    home = env.get("HOME")
    if home:
        roots.append(os.path.join(home, ".claude"))
    roots.extend(str(r) for r in config["transcript"].get("extra_roots") or [])
    return [os.path.realpath(os.path.expanduser(r)) for r in roots if r]


def safe_path(path: str, env: Any, config: dict[str, Any]) -> str | None:
    """``path`` when it is an absolute ``.jsonl`` under an allowed root, else None."""
    if not path or not os.path.isabs(path) or not path.endswith(".jsonl") or "\x00" in path:
        return None
    # The file itself must not be a symlink; parent directories may resolve (a symlinked ~/.claude).
    if os.path.islink(path):
        return None
    real = os.path.realpath(path)
    if os.path.basename(real) != os.path.basename(path):
        return None
    for root in allowed_roots(env, config):
        if files.inside(real, root) and real != root:
            return real
    return None


def read_tail(path: str, max_bytes: int) -> tuple[bytes, bool]:
    """The last ``max_bytes`` of the file (no symlink, regular file); True when cut at the head."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return b"", False
        size = st.st_size
        start = max(0, size - max_bytes)
        if start:
            os.lseek(fd, start, os.SEEK_SET)
        data = files.read_upto(fd, size - start)
    finally:
        os.close(fd)
    if start:
        # Drop the partial first line.
        cut = data.find(b"\n")
        data = data[cut + 1:] if cut >= 0 else b""
    return data, bool(start)


def parse_lines(lines: Iterable[bytes | str], max_line_bytes: int,
                deadline: float | None = None) -> tuple[list[dict[str, Any]], bool]:
    """JSON objects from the lines; bad, overlong and non-object lines skipped. True when the budget ran out."""
    entries: list[dict[str, Any]] = []
    for line in lines:
        if deadline is not None and time.monotonic() > deadline:
            return entries, True
        if len(line) > max_line_bytes:
            continue
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError):  # a line nested too deep is skipped too
            continue
        if isinstance(obj, dict):
            entries.append(obj)
    return entries, False


def load(path: str, env: Any, config: dict[str, Any], budget_ms: int | None = None) -> dict[str, Any]:
    """Parsed entries of a transcript, or an empty result when it cannot be read safely.

    Returns ``{"entries": [...], "cut": bool, "partial": bool, "path": real path or None}``.
    """
    result: dict[str, Any] = {"entries": [], "cut": False, "partial": False, "path": None}
    real = safe_path(path, env, config)
    if real is None:
        return result
    tcfg = config["transcript"]
    try:
        data, cut = read_tail(real, int(tcfg["max_read_bytes"]))
    except OSError:
        return result
    deadline = time.monotonic() + budget_ms / 1000 if budget_ms else None
    entries, partial = parse_lines(data.split(b"\n"), int(tcfg["max_line_bytes"]), deadline)
    result.update(entries=entries, cut=cut, partial=partial, path=real)
    return result


def _content(entry: dict[str, Any]) -> Any:
    msg = entry.get("message")
    return msg.get("content") if isinstance(msg, dict) else None


def user_text(entry: dict[str, Any]) -> str | None:
    """Human-typed text of a ``user`` line; None for tool results, meta lines and summaries."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isSidechain") or entry.get("isCompactSummary"):
        return None
    content = _content(entry)
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return None
        texts = [b["text"] for b in content
                 if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    else:
        return None
    text = "\n".join(t for t in texts if isinstance(t, str) and t).strip()
    if not text or text.startswith(SKIP_PREFIXES):
        return None
    return text


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _todos(value: Any) -> list[dict[str, str]] | None:
    if not isinstance(value, list):
        return None
    todos = []
    for item in value:
        if isinstance(item, dict) and isinstance(item.get("content"), str):
            todos.append({"content": item["content"], "status": str(item.get("status") or "pending")})
    return todos


def facts(entries: list[dict[str, Any]], item_chars: int = 200) -> dict[str, Any]:
    """What the transcript says the session did.

    ``first_prompt``, ``last_prompt``, ``last_reply``: texts; ``files``: paths
    changed by Write/Edit (in order, unique); ``commands``: Bash commands;
    ``failures``: ``{tool_use_id: {"tool", "what", "error"}}`` for tool results
    marked ``is_error``; ``todos``: the last TodoWrite list that did not fail
    (None when unknown); ``tool_uses``: count; ``compactions``: boundaries seen.
    """
    out: dict[str, Any] = {"first_prompt": None, "last_prompt": None, "last_reply": None, "files": [],
                           "commands": [], "failures": {}, "todos": None, "tool_uses": 0, "compactions": 0}
    uses: dict[str, tuple[str, str]] = {}  # tool_use_id -> (tool, short description)
    todo_candidates: dict[str, list[dict[str, str]]] = {}  # TodoWrite tool_use_id -> its list
    last_todos: list[dict[str, str]] | None = None
    last_todo_id: str | None = None
    replies: dict[str, list[str]] = {}
    reply_order: list[str] = []
    for e in entries:
        kind = e.get("type")
        if e.get("isSidechain"):
            continue
        if kind == "system" and e.get("subtype") == "compact_boundary":
            out["compactions"] += 1
        elif kind == "user":
            text = user_text(e)
            if text:
                out["first_prompt"] = out["first_prompt"] or text
                out["last_prompt"] = text
            content = _content(e)
            if isinstance(content, list):
                for b in content:
                    if not isinstance(b, dict) or b.get("type") != "tool_result":
                        continue
                    tid = b.get("tool_use_id")
                    if not isinstance(tid, str):
                        continue
                    if b.get("is_error") is True:
                        tool, what = uses.get(tid, ("?", ""))
                        out["failures"][tid] = {"tool": tool, "what": what,
                                                "error": one_line(_result_text(b), item_chars)}
                        if tid == last_todo_id:
                            last_todo_id = None
                    elif tid == last_todo_id and tid in todo_candidates:
                        last_todos = todo_candidates[tid]
                        last_todo_id = None
            top = _todos(e.get("todos"))
            if top is not None and e.get("todos"):
                last_todos = top
        elif kind == "assistant":
            raw_msg = e.get("message")
            msg = raw_msg if isinstance(raw_msg, dict) else {}
            mid = str(msg.get("id") or e.get("uuid") or len(reply_order))
            content = _content(e)
            for b in content if isinstance(content, list) else []:  # another shape: nothing to read
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "text" and isinstance(b.get("text"), str):
                    if mid not in replies:
                        replies[mid] = []
                        reply_order.append(mid)
                    replies[mid].append(b["text"])
                elif b.get("type") == "tool_use":
                    out["tool_uses"] += 1
                    name = str(b.get("name") or "?")
                    raw_inp = b.get("input")
                    inp = raw_inp if isinstance(raw_inp, dict) else {}
                    tid = b.get("id") if isinstance(b.get("id"), str) else None
                    what = ""
                    if name in FILE_TOOLS and isinstance(inp.get(FILE_TOOLS[name]), str):
                        what = inp[FILE_TOOLS[name]]
                        if what not in out["files"]:
                            out["files"].append(what)
                    elif name == "Bash" and isinstance(inp.get("command"), str):
                        what = one_line(inp["command"], item_chars)
                        out["commands"].append(what)
                    elif name == "TodoWrite":
                        todos = _todos(inp.get("todos"))
                        if todos is not None and tid:
                            todo_candidates[tid] = todos
                            last_todo_id = tid
                    else:
                        for key in ("file_path", "path", "pattern", "url", "query"):
                            if isinstance(inp.get(key), str):
                                what = one_line(inp[key], item_chars)
                                break
                    if tid:
                        uses[tid] = (name, what)
    # A TodoWrite whose result is not in the window yet (the transcript lags) still counts.
    if last_todo_id and last_todo_id in todo_candidates:
        last_todos = todo_candidates[last_todo_id]
    out["todos"] = last_todos
    for mid in reversed(reply_order):
        text = "\n".join(replies[mid]).strip()
        if text:
            out["last_reply"] = text
            break
    return out


def open_todos(todos: list[dict[str, str]] | None) -> list[dict[str, str]]:
    return [t for t in todos or [] if t.get("status") in TODO_OPEN]
