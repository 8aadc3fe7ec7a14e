"""Test-only hook: append the payload the client sent, as it came, to ``$AGENT_HOOKS_CAPTURE_LOG``.

It prints nothing and exits 0, so wiring it on any event changes nothing the
client does; the one exception, with ``$AGENT_HOOKS_CAPTURE_WATCH`` set, is
SessionStart's ``watchPaths`` naming that file (for FileChanged). ``capture_fixtures.py`` wires it for every event and turns the
log into fixture files.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    data = sys.stdin.buffer.read()
    log = os.environ.get("AGENT_HOOKS_CAPTURE_LOG")
    if not log:
        return 0
    try:
        payload = json.loads(data)
    except ValueError:
        payload = {"unparsed": data.decode("utf-8", "replace")}
    with open(log, "a", encoding="utf-8") as f:
        # One line per call; O_APPEND keeps concurrent hook processes' lines whole.
        f.write(json.dumps(payload, ensure_ascii=False) + "\n")
    watch = os.environ.get("AGENT_HOOKS_CAPTURE_WATCH")
    if watch and isinstance(payload, dict) and payload.get("hook_event_name") == "SessionStart":
        # Ask the client to watch one file, so that a change to it fires FileChanged.
        json.dump({"hookSpecificOutput": {"hookEventName": "SessionStart", "watchPaths": [watch]}}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
