"""bootstrap-extra-files: globbed workspace files as context at SessionStart."""

from __future__ import annotations

import glob
import os

from agent_hooks.features import files


def handle(event: dict) -> dict | None:
    cfg = event["config"]
    sources = cfg.get("sources") or ["startup", "resume", "clear", "compact"]
    if event["payload"].get("source", "startup") not in sources:
        return None
    ws = files.real_dir(event["session"]["cwd"])
    patterns = cfg.get("patterns") or []
    if ws is None or not isinstance(patterns, list):
        return None
    budget = int(cfg.get("max_chars", 3500))
    max_files = int(cfg.get("max_files", 20))
    seen: list[str] = []
    for pattern in patterns:
        if not isinstance(pattern, str) or os.path.isabs(pattern) or ".." in pattern.split("/"):
            continue
        for match in sorted(glob.glob(os.path.join(glob.escape(ws), pattern), recursive=True)):
            real = files.resolve_in(ws, match)
            if real and real not in seen and os.path.isfile(real):
                seen.append(real)
    parts: list[str] = []
    used = 0
    skipped = 0
    for path in seen[:max_files]:
        status, text = files.read_text(path, 512 * 1024)
        if status != files.OK or text is None:
            continue
        block = f"## {os.path.relpath(path, ws)}\n\n{text.strip()}\n"
        if used + len(block) > budget:
            room = budget - used
            if room < 200:
                skipped += 1
                continue
            block = block[: room - 20] + "\n[… cut]\n"
        parts.append(block)
        used += len(block)
    skipped += max(0, len(seen) - max_files)
    if not parts:
        return None
    tail = f"\n[{skipped} more file(s) left out: over the budget]" if skipped else ""
    return {"context": "Workspace files (bootstrap-extra-files):\n\n" + "\n".join(parts) + tail}
