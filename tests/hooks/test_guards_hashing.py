"""Identical calls: same tool and same SHA-256 of the canonical JSON input."""

from __future__ import annotations

from agent_hooks.hashing import canonical_json, digest


def test_keys_sorted_at_every_depth():
    a = {"b": 1, "a": {"y": [1, {"q": 1, "p": 2}], "x": None}}
    b = {"a": {"x": None, "y": [1, {"p": 2, "q": 1}]}, "b": 1}
    assert canonical_json(a) == canonical_json(b)
    assert digest(a) == digest(b)
    assert canonical_json(a) == '{"a":{"x":null,"y":[1,{"p":2,"q":1}]},"b":1}'


def test_arrays_keep_their_order():
    assert digest({"argv": ["a", "b"]}) != digest({"argv": ["b", "a"]})


def test_nested_values_are_not_dropped():
    # An early agent-swarm port hashed top-level keys only: every call of one MCP tool looked identical.
    first = {"query": {"repo": "acme/api", "filters": {"state": "open"}}}
    second = {"query": {"repo": "acme/api", "filters": {"state": "closed"}}}
    assert digest(first) != digest(second)


def test_distinct_mcp_inputs_are_distinct_and_full_width():
    hashes = {digest({"issue": n, "body": {"labels": ["bug"]}}) for n in range(2000)}
    assert len(hashes) == 2000
    assert all(len(h) == 64 for h in hashes)  # SHA-256, not agent-swarm's 32-bit hash


def test_types_and_unicode_matter():
    assert digest({"n": 1}) != digest({"n": "1"})
    assert digest({"n": 1}) != digest({"n": 1.5})
    assert digest({"s": "é"}) == digest({"s": "\u00e9"})
    assert digest({"s": "a"}) != digest({"s": "A"})
