"""session-memory: the session's summary, saved into the workspace's memory directory and indexed."""

from __future__ import annotations

import os
import re
import time

from agent_hooks import config as config_mod
from agent_hooks.features import files, memory, sessions, summary
from agent_hooks.paths import Paths
from agent_hooks.store import Store


def slug(text: str, words: int = 6, limit: int = 48) -> str:
    parts = re.findall(r"[a-z0-9]+", text.lower())[:words]
    return "-".join(parts)[:limit].strip("-")


def handle(event: dict) -> dict | None:
    env = os.environ
    paths = Paths(env)
    cfg, _ = config_mod.load_lenient(paths, env)
    sid = event["session"]["id"]
    ws = files.workspace(cfg, event["session"]["cwd"])
    if ws is None or not os.path.exists(paths.store):
        return None
    dirs = [d for d in cfg["memory"]["dirs"] if isinstance(d, str) and d and not os.path.isabs(d)]
    if not dirs:
        return None
    target_dir = os.path.realpath(os.path.join(ws, dirs[0]))
    if not files.inside(target_dir, ws):
        return None
    store = Store(paths.store, int(cfg["runtime"]["busy_timeout_ms"]), migrate=False)
    try:
        row = sessions.with_task(store.conn, sid)
        saved = summary.get(store.conn, sid)
        text = (saved or {}).get("summary") or ""
        goal = row.get("description") or row.get("first_prompt") or ""
        if not text and goal:
            text = f"Goal: {goal}"
        if len(text.strip()) < int(event["config"].get("min_chars", 40)):
            return None
        at = time.time()
        name_slug = slug(goal) or slug(text) or sid[:8]
        day = time.strftime("%Y-%m-%d", time.localtime(at))
        os.makedirs(target_dir, mode=0o700, exist_ok=True)
        marker = f"session: {sid}"
        name = f"{day}-{name_slug}.md"
        n = 1
        while True:  # a file of another session keeps its name; this session's own is rewritten
            status, existing = files.read_text(os.path.join(target_dir, name), 1 << 20)
            if status == files.MISSING or (existing is not None and marker in existing):
                break
            n += 1
            name = f"{day}-{name_slug}-{n}.md"
        title = (goal or text).strip().splitlines()[0][:100]
        body = (f"# {title}\n\n{marker} · agent: {row.get('agent') or '-'} · task: {row.get('task_id') or '-'}"
                f" · ended: {time.strftime('%Y-%m-%d %H:%M', time.localtime(at))}"
                f" ({event['payload'].get('reason') or 'end'})\n\n{text.strip()}\n")
        files.write_text(target_dir, name, body, at, backup=False)
        path = os.path.realpath(os.path.join(target_dir, name))
        agent = event["session"]["agent"]
        for root, scope in memory.roots(cfg, ws):
            if files.inside(path, root):
                with store.write() as conn:
                    memory.index_file(conn, cfg, root, path, scope, agent, sid, at)
                break
    finally:
        store.close()
    return None
