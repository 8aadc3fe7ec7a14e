"""A scripted stand-in for the Anthropic Messages API on 127.0.0.1.

The real Claude Code client talks to it through ``ANTHROPIC_BASE_URL``. A test
hands it a script: a list of assistant turns, each a list of content blocks
(:func:`text` and :func:`tool_use`). Every request body is recorded, so a test
can assert what reached the model.

Which requests consume a scripted turn (reference Part A):

* main-loop requests carry a non-empty ``tools`` list: they get the next turn;
* side calls (titles, topic detection, ...) come without tools: plain text;
* the compaction request carries the tools too (2.1.197) but its last user
  message asks for a summary and says not to call tools: a plain text summary.

When the script runs out, a main-loop request gets a final ``end_turn`` text.
A turn made of :func:`api_error` answers with an HTTP error instead (the client's
StopFailure path).
Answers are streamed as server-sent events when the request says
``"stream": true`` and returned as one JSON message otherwise.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Block = dict[str, Any]
# A turn is a list of blocks, or a function of the request body returning one
# (for answers that depend on what the client sent, e.g. a tool result).
Turn = "list[Block] | Callable[[dict[str, Any]], list[Block]]"

MAIN, SIDE, COMPACT, OTHER = "main", "side", "compact", "other"
DONE_TEXT = "Done."
SIDE_TEXT = "ok"
# In the shape the compaction prompt asks for (newer clients ask again when the tags are missing).
SUMMARY_TEXT = ("<analysis>Scripted.</analysis>\n"
                "<summary>Summary: the user asked for a few scripted steps; they were carried out.</summary>")


def text(value: str) -> Block:
    """A text block of an assistant turn."""
    return {"type": "text", "text": value}


def tool_use(name: str, input: dict[str, Any], id: str | None = None) -> Block:  # noqa: A002
    """A tool_use block; its id is generated when not given."""
    block: Block = {"type": "tool_use", "name": name, "input": input}
    if id:
        block["id"] = id
    return block


def api_error(status: int = 400, kind: str = "invalid_request_error", message: str = "scripted error",
              sticky: bool = False) -> Block:
    """A turn of its own: the request gets HTTP ``status`` with an API error body.

    ``sticky`` keeps answering every later main-loop request with it (a client may
    retry or fall back once before it gives up).
    """
    return {"type": "api_error", "status": status, "error": {"type": kind, "message": message}, "sticky": sticky}


def flatten(value: Any) -> str:
    """Every string inside a JSON value, joined: what a 'does the model see X' test searches."""
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
        elif isinstance(v, list):
            for item in v:
                walk(item)

    walk(value)
    return "\n".join(out)


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return flatten(content)


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            return message_text(message)
    return ""


def is_compaction(body: dict[str, Any]) -> bool:
    """The summarisation request: its last user message asks for a summary and no tool calls."""
    last = last_user_text(body).lower()
    return "summary" in last and "tool" in last and ("do not call" in last or "not to call" in last
                                                       or "do not use" in last)


def classify(path: str, body: dict[str, Any] | None) -> str:
    if body is None or not path.startswith("/v1/messages") or "count_tokens" in path:
        return OTHER
    if not body.get("tools"):
        return SIDE
    if is_compaction(body):
        return COMPACT
    return MAIN


class Request:
    """One recorded request: method, path, parsed JSON body (or None) and its kind."""

    __slots__ = ("method", "path", "headers", "body", "kind", "turn", "at")

    def __init__(self, method: str, path: str, headers: dict[str, str], body: Any, kind: str) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.kind = kind
        self.turn: int | None = None  # index of the scripted turn it consumed
        self.at = time.monotonic()  # when it arrived (bench_client times tool-call cycles by it)

    @property
    def text(self) -> str:
        return flatten(self.body) if self.body is not None else ""

    def __repr__(self) -> str:
        return f"Request({self.method} {self.path} kind={self.kind} turn={self.turn})"


class ModelServer:
    """The server; start it, give it a script, point the client at :attr:`url`."""

    def __init__(self, script: list[Any] | None = None, model: str = "claude-sonnet-4-5") -> None:
        self.model = model
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self.script: list[Any] = []
        self.consumed = 0
        self.extra_turns = 0  # main-loop requests answered after the script ran out
        self._ids = itertools.count(1)
        # Input tokens every answer reports: the client writes them to the transcript, where
        # hooks read how full the context is (the default is an almost empty context).
        self.input_tokens = 10
        # Cache tokens a main request reports (cache writes, cache reads), for the cost tests.
        self.cache_tokens = (0, 0)
        self.set_script(script or [])
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ModelServer:
        # A short poll interval: stop() waits for it, once per test.
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- script --------------------------------------------------------------------
    def set_script(self, turns: list[Any]) -> None:
        """Replace the script; turns not yet consumed are dropped."""
        with self.lock:
            self.script = list(turns)
            self.consumed = 0

    def add_turns(self, turns: list[Any]) -> None:
        """Append turns for a follow-up (``--resume``) run."""
        with self.lock:
            self.script.extend(turns)

    @property
    def remaining(self) -> int:
        return len(self.script) - self.consumed

    def _next_turn(self, body: dict[str, Any]) -> tuple[int | None, list[Block]]:
        with self.lock:
            if self.consumed < len(self.script):
                index = self.consumed
                turn = self.script[index]
                if not (isinstance(turn, list) and turn and turn[0].get("sticky")):
                    self.consumed += 1
            else:
                self.extra_turns += 1
                return None, [text(DONE_TEXT)]
        blocks = turn(body) if callable(turn) else turn
        return index, [dict(b) for b in blocks]

    def _tool_id(self) -> str:
        return f"toolu_e2e{next(self._ids):06d}"

    # -- assertions ----------------------------------------------------------------
    def messages(self, kind: str | None = None) -> list[Request]:
        """Recorded /v1/messages requests, optionally of one kind (main, side, compact)."""
        with self.lock:
            reqs = [r for r in self.requests if r.body is not None and r.kind != OTHER]
        return [r for r in reqs if kind is None or r.kind == kind]

    def bodies(self, kind: str | None = MAIN) -> list[dict[str, Any]]:
        return [r.body for r in self.messages(kind)]

    def requests_containing(self, needle: str, kind: str | None = None) -> list[Request]:
        """Message requests whose body holds ``needle`` in any string (system, messages, tools)."""
        return [r for r in self.messages(kind) if needle in r.text]

    def tool_results(self, kind: str | None = MAIN) -> list[Block]:
        """Every tool_result block the client sent (duplicates across requests removed)."""
        seen: dict[str, Block] = {}
        for body in self.bodies(kind):
            for message in body.get("messages") or []:
                content = message.get("content")
                if isinstance(content, list):
                    for block in content:
                        if isinstance(block, dict) and block.get("type") == "tool_result":
                            seen.setdefault(str(block.get("tool_use_id")), block)
        return list(seen.values())

    # -- answers -------------------------------------------------------------------
    def answer(self, req: Request) -> tuple[list[Block], str]:
        """The content blocks and stop reason for a message request."""
        body = req.body or {}
        if req.kind == MAIN:
            index, blocks = self._next_turn(body)
            req.turn = index
        elif req.kind == COMPACT:
            blocks = [text(SUMMARY_TEXT)]
        else:
            blocks = [text(SIDE_TEXT)]
        for block in blocks:
            if block["type"] == "tool_use" and not block.get("id"):
                block["id"] = self._tool_id()
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        return blocks, stop

    def record(self, req: Request) -> None:
        with self.lock:
            self.requests.append(req)


def _usage(output_tokens: int = 1, input_tokens: int = 10, cache: tuple[int, int] = (0, 0)) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache[0],
        "cache_read_input_tokens": cache[1],
    }


def _sse_events(message_id: str, model: str, blocks: list[Block], stop: str,
                input_tokens: int = 10, cache: tuple[int, int] = (0, 0)) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = [(
        "message_start",
        {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": _usage(input_tokens=input_tokens, cache=cache)}},
    )]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                    "content_block": {"type": "text", "text": ""}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                    "delta": {"type": "text_delta", "text": block["text"]}}))
        elif block["type"] == "tool_use":
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                    "content_block": {"type": "tool_use", "id": block["id"],
                                                                      "name": block["name"], "input": {}}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                    "delta": {"type": "input_json_delta",
                                                              "partial_json": json.dumps(block["input"])}}))
        else:
            raise ValueError(f"unknown block type {block['type']!r}")
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _handler_for(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            pass

        def _send_json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", f"req_e2e{next(server._ids)}")
            self.end_headers()
            self.wfile.write(data)

        def _read_body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not raw:
                return None
            try:
                return json.loads(raw)
            except ValueError:
                return None

        def do_GET(self) -> None:  # noqa: N802
            server.record(Request("GET", self.path, dict(self.headers), None, OTHER))
            self._send_json(200, {"data": [], "has_more": False})

        def do_HEAD(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:  # noqa: N802
            body = self._read_body()
            path = self.path
            kind = classify(path, body if isinstance(body, dict) else None)
            req = Request("POST", path, dict(self.headers), body, kind)
            server.record(req)
            if kind == OTHER:
                if "count_tokens" in path:
                    tokens = max(1, len(flatten(body)) // 4) if body else 1
                    self._send_json(200, {"input_tokens": tokens})
                else:
                    self._send_json(200, {})
                return
            blocks, stop = server.answer(req)
            if blocks and blocks[0]["type"] == "api_error":
                self._send_json(blocks[0]["status"], {"type": "error", "error": blocks[0]["error"]})
                return
            message_id = f"msg_e2e{next(server._ids):06d}"
            model = (body or {}).get("model") or server.model
            tokens = server.input_tokens if req.kind == MAIN else 10
            cache = server.cache_tokens if req.kind == MAIN else (0, 0)
            if (body or {}).get("stream"):
                self._stream(_sse_events(message_id, model, blocks, stop, tokens, cache))
            else:
                self._send_json(200, {
                    "id": message_id, "type": "message", "role": "assistant", "model": model,
                    "content": blocks, "stop_reason": stop, "stop_sequence": None,
                    "usage": _usage(5, tokens, cache)})

        def _stream(self, events: list[tuple[str, dict[str, Any]]]) -> None:
            data = b"".join(
                f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode() for name, payload in events
            )
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", f"req_e2e{next(server._ids)}")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

    return Handler
