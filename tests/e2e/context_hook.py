"""Test-only hook: answers with additionalContext through OUR runner and output.

Usage in settings: ``<venv python> context_hook.py EVENT``. The handler is the
only test-specific part; the stdin parsing, fail-open runner and the stdout
shape are agent_hooks' own, so a scenario proves that context our hooks return
reaches the model. The context names the event and what the payload said, so a
test can tell which call produced it.
"""

from __future__ import annotations

import sys

from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

MARKER = "E2E-CONTEXT"


def context_for(event: str, ctx: Context) -> str:
    p = ctx.payload
    detail = {"SessionStart": f"source={p.get('source')}",
              "UserPromptSubmit": f"prompt={p.get('prompt')}"}.get(event, "")
    return f"{MARKER} {event} {detail} session={p.session_id}"


def main() -> int:
    event = sys.argv[1]

    def handle(ctx: Context) -> Outcome:
        out = Outcome()
        out.add_context(context_for(event, ctx))
        return out

    return run(event, handle)


if __name__ == "__main__":
    raise SystemExit(main())
