"""The scripted model server on its own, over real HTTP (no client needed)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from model_server import COMPACT, MAIN, SIDE, SUMMARY_TEXT, ModelServer, text, tool_use

TOOLS = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]
COMPACT_ASK = ("CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n\n"
               "Your task is to create a detailed summary of the conversation so far")


def post(server: ModelServer, body: dict[str, Any], path: str = "/v1/messages?beta=true") -> tuple[str, bytes]:
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers["Content-Type"], resp.read()


def sse(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in data.decode().strip().split("\n\n"):
        name_line, data_line = chunk.split("\n")
        assert name_line.startswith("event: ") and data_line.startswith("data: ")
        events.append((name_line[7:], json.loads(data_line[6:])))
    return events


def body(prompt: str, tools: list[dict[str, Any]] | None = TOOLS, stream: bool = True) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "tools": tools or [],
            "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}]}


def test_streams_scripted_turns_and_skips_side_and_compaction_calls(model_server: ModelServer) -> None:
    model_server.set_script([[text("hi"), tool_use("Bash", {"command": "ls"})], [text("bye")]])

    kind, data = post(model_server, body("go"))
    assert kind == "text/event-stream"
    events = sse(data)
    names = [n for n, _ in events]
    assert names == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                     "content_block_start", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]
    assert events[2][1]["delta"] == {"type": "text_delta", "text": "hi"}
    start, delta = events[4][1]["content_block"], events[5][1]["delta"]
    assert start["type"] == "tool_use" and start["name"] == "Bash" and start["id"].startswith("toolu_")
    assert delta["type"] == "input_json_delta" and json.loads(delta["partial_json"]) == {"command": "ls"}
    assert events[7][1]["delta"]["stop_reason"] == "tool_use"

    # A side call (no tools) and the compaction request consume no turn.
    _, side = post(model_server, body("title please", tools=None))
    assert sse(side)[2][1]["delta"]["text"] == "ok"
    _, summary = post(model_server, body("earlier words\n" + COMPACT_ASK))
    assert sse(summary)[2][1]["delta"]["text"] == SUMMARY_TEXT
    assert model_server.remaining == 1

    # Non-streaming requests get one JSON message.
    kind, data = post(model_server, body("next", stream=False))
    message = json.loads(data)
    assert kind == "application/json"
    assert message["content"] == [{"type": "text", "text": "bye"}] and message["stop_reason"] == "end_turn"

    # Past the end of the script: a final text turn, counted.
    last = sse(post(model_server, body("more"))[1])
    assert last[-2][1]["delta"]["stop_reason"] == "end_turn" and model_server.extra_turns == 1

    assert [r.kind for r in model_server.messages()] == [MAIN, SIDE, COMPACT, MAIN, MAIN]
    assert [r.turn for r in model_server.messages()] == [0, None, None, 1, None]
    assert [r.kind for r in model_server.requests_containing("title please")] == [SIDE]


def test_other_endpoints_get_harmless_answers(model_server: ModelServer) -> None:
    _, data = post(model_server, body("count me"), path="/v1/messages/count_tokens?beta=true")
    assert json.loads(data)["input_tokens"] >= 1
    with urllib.request.urlopen(model_server.url + "/v1/models", timeout=10) as resp:
        assert resp.status == 200
    assert model_server.messages() == [] and model_server.remaining == 0
