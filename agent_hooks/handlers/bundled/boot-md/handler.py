"""boot-md: the workspace's BOOT.md as context at startup."""

from __future__ import annotations

import os

from agent_hooks.features import files


def handle(event: dict) -> dict | None:
    cfg = event["config"]
    if event["payload"].get("source", "startup") not in (cfg.get("sources") or ["startup"]):
        return None
    ws = files.real_dir(event["session"]["cwd"])
    name = str(cfg.get("file") or "BOOT.md")
    if ws is None or os.sep in name:
        return None
    status, text = files.read_text(os.path.join(ws, name), 256 * 1024)
    if status != files.OK or not text or not text.strip():
        return None
    limit = int(cfg.get("max_chars", 3500))
    body = text.strip()
    if len(body) > limit:
        body = body[: limit - 20] + "\n[… BOOT.md cut]"
    return {"context": f"{name} (start-up instructions of this workspace):\n\n{body}"}
