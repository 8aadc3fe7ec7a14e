"""Test-only MCP server (stdio) whose one tool asks the person a question: an elicitation.

``capture_fixtures.py`` wires it with ``--mcp-config`` so that the real client
meets an MCP server asking for input (``elicitation/create``), which is what
fires the Elicitation and ElicitationResult hooks. Newline-delimited JSON-RPC
on stdin/stdout, standard library only; it answers the tool call with whatever
the client answered the elicitation with.
"""

from __future__ import annotations

import json
import sys
from typing import Any

QUESTION = "Which database should the service use?"
SCHEMA = {"type": "object", "properties": {"database": {"type": "string", "enum": ["SQLite", "Postgres"]}},
          "required": ["database"]}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> int:
    pending: dict[Any, Any] = {}  # elicitation request id -> the tools/call id waiting on its answer
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "asker", "version": "1.0"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{
                "name": "ask", "description": "Ask the person which database to use.",
                "inputSchema": {"type": "object", "properties": {}}}]}})
        elif method == "tools/call":
            ask_id = f"elicit-{mid}"
            pending[ask_id] = mid
            send({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
                  "params": {"message": QUESTION, "requestedSchema": SCHEMA}})
        elif method is None and mid in pending:  # the client's answer to our elicitation
            call_id = pending.pop(mid)
            answer = json.dumps(msg.get("result") or msg.get("error"))
            send({"jsonrpc": "2.0", "id": call_id, "result": {"content": [{"type": "text", "text": answer}]}})
        elif mid is not None and method is not None:
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
