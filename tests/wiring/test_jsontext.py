"""The settings parser's spans and errors (agent_hooks/wiring/jsontext.py), in-process.

The corpus tests (test_settings_corpus.py) run install and uninstall through the CLI; here the
parser itself: every node's span is its value's text, keys are decoded, and a broken file is
reported at its first error in text order, with the line and column a person can find.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from agent_hooks.wiring import jsontext

from support.repo import FIXTURES_ROOT

CORPUS = FIXTURES_ROOT / "settings"


def _check_spans(text: str, node: jsontext.Node) -> Any:
    """The node's value, checking on the way that each span parses to the same value as its parts."""
    if node.kind == "object":
        value = {}
        for m in node.members:
            key_text = text[m.start:m.value.start].rstrip().removesuffix(":").rstrip()
            assert json.loads(key_text) == m.key
            value[m.key] = _check_spans(text, m.value)
    elif node.kind == "array":
        value = [_check_spans(text, item) for item in node.items]
    else:
        value = json.loads(text[node.start:node.end])
    if "//" not in text and "/*" not in text:
        assert json.loads(text[node.start:node.end]) == value
    return value


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(["obj", "arr", "str", "num", "lit"] if depth < 4 else ["str", "num", "lit"])
    if kind == "obj":
        return {rng.choice(["a", "b\"q", "é", "\\x", "\u2028", "k" * rng.randint(1, 40)]) + str(i): _random_value(rng, depth + 1)
                for i in range(rng.randint(0, 4))}
    if kind == "arr":
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind == "str":
        return "".join(rng.choice(['x', ' ', '"', '\\', '\n', '\x01', 'é', '😀', '/', '$HOME']) for _ in range(rng.randint(0, 30)))
    if kind == "num":
        return rng.choice([0, -1, 3.25, 1e21, -0.5e-7, 12345678901234567890])
    return rng.choice([True, False, None])


@pytest.mark.parametrize("seed", range(3))
def test_every_span_is_its_values_text(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        value = _random_value(rng)
        text = json.dumps(value, indent=rng.choice([None, 1, 4, "\t"]), ensure_ascii=rng.random() < 0.5)
        node = jsontext.parse(text)
        assert _check_spans(text, node) == value
        assert jsontext.value_of(text, node) == value
        assert node.extensions == set()


def test_the_corpus_reads_as_json_does() -> None:
    for path in sorted(CORPUS.glob("*.json")):
        text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
        if not text.strip():
            continue
        assert jsontext.value_of(text, jsontext.parse(text)) == json.loads(text), path.name


def test_jsonc_is_read_and_named() -> None:
    text = '// top\n{\n  "a": /* inline */ 1, // end\n  "b": [1, 2,],\n}\n/* after */'
    node = jsontext.parse(text)
    assert jsontext.value_of(text, node) == {"a": 1, "b": [1, 2]}
    assert node.extensions == {"comments", "trailing commas"}


def test_duplicate_keys_keep_their_spans_and_the_last_wins() -> None:
    text = '{"hooks": {}, "x": 1, "hooks": {"Stop": []}}'
    node = jsontext.parse(text)
    assert [m.key for m in node.members] == ["hooks", "x", "hooks"]
    assert jsontext.value_of(text, node) == {"hooks": {"Stop": []}, "x": 1}
    assert jsontext.value_of(text, node, pairs=True) == [("hooks", []), ("x", 1), ("hooks", [("Stop", [])])]


@pytest.mark.parametrize("text,msg,line,col", [
    ("", "unexpected end of text", 1, 1),
    ("  \n ", "unexpected end of text", 2, 2),
    ('{"a": 1', "expected ',' or '}'", 1, 8),
    ('{"a" 1}', "expected ':'", 1, 6),
    ("{1: 2}", "object key is not a string", 1, 2),
    ('{"a": tru}', "unexpected character 't'", 1, 7),
    ('{"a": "x\x01"}', "invalid string", 1, 7),
    ('["\\q"]', "invalid string", 1, 2),
    ("[1 2]", "expected ',' or ']'", 1, 4),
    ('{"a": 1}\n/* open', "unterminated /* comment", 2, 1),
    ('{"a": 1} x', "extra text after the value", 1, 10),
    ('{"a": 01}', "expected ',' or '}'", 1, 8),
    # The first error in the text is the one reported, whatever kind the later ones are.
    ('{"a" 1, "b": "x\x01"}', "expected ':'", 1, 6),
    ('{\n  "a": 1 "b": /* open', "expected ',' or '}'", 2, 10),
    ('{"a": [1, /* open', "unterminated /* comment", 1, 11),
    ("[" * (jsontext.MAX_DEPTH + 2), f"nested deeper than {jsontext.MAX_DEPTH} levels", 1, jsontext.MAX_DEPTH + 2),
])
def test_errors_name_the_first_problem_and_where(text: str, msg: str, line: int, col: int) -> None:
    with pytest.raises(jsontext.JSONTextError) as err:
        jsontext.parse(text)
    assert (err.value.msg, err.value.line, err.value.col) == (msg, line, col)
