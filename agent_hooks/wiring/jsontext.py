"""JSON text with positions: parse a settings file into spans, and splice edits into its text.

``json.loads`` + ``json.dumps`` rewrites a whole file: ``1e5`` becomes
``100000.0``, escapes become raw characters, compact arrays are re-spread,
duplicate keys collapse, comments are lost. Here every value keeps its span in
the original text, and an edit replaces only the characters of the value it
changes; everything else stays byte-for-byte.

Accepted beyond strict JSON, so that such a file can be read and our entries
taken out of it with the rest kept: ``//`` and ``/* */`` comments and trailing
commas (JSONC). The root node's ``extensions`` names those it met; the caller
decides (Claude Code ignores such a settings file, so install refuses it).
A byte-order mark is the caller's business (see ``settings_file``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 200  # settings nest 5 deep; deeper is not a settings file (and no RecursionError)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')


class JSONTextError(ValueError):
    """Text that is not JSON (or JSONC); ``line`` and ``col`` are 1-based."""

    def __init__(self, msg: str, text: str, pos: int) -> None:
        self.msg = msg
        self.pos = pos
        self.line = text.count("\n", 0, pos) + 1
        self.col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"{msg} (line {self.line}, column {self.col})")


@dataclass
class Member:
    """``"key": value`` in an object; ``start`` is where the key's quote is."""

    key: str
    start: int
    value: Node


@dataclass
class Node:
    """One value and its span ``text[start:end]``."""

    kind: str  # object, array, string, number, literal
    start: int
    end: int
    members: list[Member] = field(default_factory=list)  # object
    items: list[Node] = field(default_factory=list)  # array
    extensions: set[str] = field(default_factory=set)  # root only: "comments", "trailing commas"

    def get(self, key: str) -> Node | None:
        """The value of the last member named ``key`` (JSON.parse keeps the last duplicate)."""
        found = None
        for m in self.members:
            if m.key == key:
                found = m.value
        return found


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.extensions: set[str] = set()

    def fail(self, msg: str, pos: int | None = None) -> JSONTextError:
        return JSONTextError(msg, self.text, self.pos if pos is None else pos)

    def skip(self) -> None:
        """Whitespace and comments."""
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c in " \t\r\n":
                self.pos += 1
            elif text.startswith("//", self.pos):
                self.extensions.add("comments")
                nl = text.find("\n", self.pos)
                self.pos = n if nl < 0 else nl + 1
            elif text.startswith("/*", self.pos):
                self.extensions.add("comments")
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    raise self.fail("unterminated /* comment")
                self.pos = close + 2
            else:
                return

    def value(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels")
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of text")
        c = self.text[self.pos]
        start = self.pos
        if c == "{":
            return self.container(depth, "object", "}")
        if c == "[":
            return self.container(depth, "array", "]")
        if c == '"':
            m = _STRING.match(self.text, self.pos)
            if not m:
                raise self.fail("invalid string")
            self.pos = m.end()
            return Node("string", start, self.pos)
        m = _NUMBER.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return Node("number", start, self.pos)
        for word in ("true", "false", "null"):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return Node("literal", start, self.pos)
        raise self.fail(f"unexpected character {c!r}")

    def container(self, depth: int, kind: str, close: str) -> Node:
        node = Node(kind, self.pos, -1)
        self.pos += 1
        after_comma = False
        while True:
            self.skip()
            if self.text.startswith(close, self.pos):
                if after_comma:
                    self.extensions.add("trailing commas")
                self.pos += 1
                node.end = self.pos
                return node
            if kind == "object":
                key_start = self.pos
                key = self.value(depth + 1)
                if key.kind != "string":
                    raise self.fail("object key is not a string", key_start)
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':'")
                self.pos += 1
                node.members.append(Member(json.loads(self.text[key.start:key.end]), key_start, self.value(depth + 1)))
            else:
                node.items.append(self.value(depth + 1))
            self.skip()
            after_comma = self.text.startswith(",", self.pos)
            if after_comma:
                self.pos += 1
            elif not self.text.startswith(close, self.pos):
                raise self.fail(f"expected ',' or {close!r}")


def parse(text: str) -> Node:
    """The spans of ``text`` (one JSON/JSONC value, nothing after it but whitespace and comments)."""
    p = _Parser(text)
    node = p.value(0)
    p.skip()
    if p.pos != len(text):
        raise p.fail("extra text after the value")
    node.extensions = p.extensions
    return node


def value_of(text: str, node: Node, pairs: bool = False) -> Any:
    """The Python value of ``node``: objects keep the last duplicate, or are lists of pairs with ``pairs``."""
    if node.kind == "object":
        items = [(m.key, value_of(text, m.value, pairs)) for m in node.members]
        return items if pairs else dict(items)
    if node.kind == "array":
        return [value_of(text, item, pairs) for item in node.items]
    return json.loads(text[node.start:node.end])


# -- layout -------------------------------------------------------------------------------------

def indent_unit(text: str) -> str:
    """The file's indentation step (the smallest indentation of a line; two spaces when flat)."""
    found = [m.group(1) for m in re.finditer(r"\n([ \t]+)\S", text)]
    if not found:
        return "  "
    return min(found, key=len)


def _line_indent(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    m = re.match(r"[ \t]*", text[line_start:])
    return m.group(0) if m else ""


def _multiline(text: str, node: Node) -> bool:
    """Whether a container is spread over lines (an empty one follows the whole file)."""
    if node.items or node.members:
        return "\n" in text[node.start:node.end]
    # A file of just "{}" grows into the usual spread-out layout; a minified file stays minified.
    return "\n" in text.strip() or len(text.strip()) <= 2


def render(value: Any, unit: str, indent: str, inline: bool) -> str:
    """``value`` as JSON text that sits at a line indented by ``indent``."""
    if inline:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    body = json.dumps(value, ensure_ascii=False, indent=unit)
    return body.replace("\n", "\n" + indent)


def _children(node: Node) -> list[tuple[int, int]]:
    """(start, end) of each element: an array's items, an object's members (key to value end)."""
    if node.kind == "object":
        return [(m.start, m.value.end) for m in node.members]
    return [(item.start, item.end) for item in node.items]


def _key_sep(text: str, node: Node) -> str:
    for m in node.members:
        key = _STRING.match(text, m.start)
        between = text[key.end():m.value.start] if key else ""
        return between if between.strip() == ":" else ": "
    return ": "


# -- edits (each returns the new text; callers parse again before the next edit) -----------------

def replace(text: str, node: Node, value: Any) -> str:
    """``node`` replaced by ``value``, laid out like the line it is on."""
    inline = "\n" not in text.strip()
    new = render(value, indent_unit(text), _line_indent(text, node.start), inline)
    return text[:node.start] + new + text[node.end:]


def remove(text: str, node: Node, index: int) -> str:
    """The ``index``-th element of a container removed, with its comma and the space before it."""
    spans = _children(node)
    start, end = spans[index]
    if len(spans) == 1:
        # The only element: the container becomes empty ({} or []), as it is written when empty.
        return text[:node.start + 1] + text[node.end - 1:]
    if index + 1 < len(spans):
        return text[:start] + text[spans[index + 1][0]:]
    # The last element: from the end of the one before (its comma goes too).
    return text[:spans[index - 1][1]] + text[end:]


def insert(text: str, node: Node, index: int, value: Any, key: str | None = None) -> str:
    """``value`` inserted as the ``index``-th element (a member named ``key`` in an object)."""
    unit = indent_unit(text)
    spans = _children(node)
    multiline = _multiline(text, node)
    if spans:
        ref = spans[min(index, len(spans) - 1)][0]
        indent = _line_indent(text, ref) if multiline else ""
    else:
        indent = _line_indent(text, node.start) + unit if multiline else ""
    prefix = "" if key is None else json.dumps(key, ensure_ascii=False) + _key_sep(text, node)
    body = prefix + render(value, unit, indent, not multiline)
    if not spans:
        close = _line_indent(text, node.start)
        inner = f"\n{indent}{body}\n{close}" if multiline else body
        return text[:node.start + 1] + inner + text[node.end - 1:]
    sep = f",\n{indent}" if multiline else ", "
    if index < len(spans):
        at = spans[index][0]
        return text[:at] + body + sep + text[at:]
    at = spans[-1][1]
    return text[:at] + sep + body + text[at:]
