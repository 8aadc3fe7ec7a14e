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
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
# Runs of plain characters at once: one alternative per character made a long string slow to match.
_STRING = re.compile(r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"')


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


# One token per match, after any whitespace: a comment, punctuation, a string, a number, a literal
# or the end of the text.
_TOKEN = re.compile(rf"""[ \t\r\n]*(?:
    (?P<comment>//[^\n]*\n?|/\*.*?\*/)
  | (?P<punct>[][{{}}:,])
  | (?P<string>{_STRING.pattern})
  | (?P<number>{_NUMBER})
  | (?P<literal>true|false|null)
  | (?P<end>\Z)
)""", re.VERBOSE | re.DOTALL)
_END = "end"  # the kind of the token after the last one
_SPACE = re.compile(r"[ \t\r\n]*")


def _tokens(text: str, extensions: set[str]) -> list[tuple[str, int, int]]:
    """(kind, start, end) of each token but whitespace and comments; punctuation is its own kind."""
    out: list[tuple[str, int, int]] = []
    append, match, pos = out.append, _TOKEN.match, 0
    while True:
        m = match(text, pos)
        if m is None:  # no token here: the parser says what it expected, when it gets here
            pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
            append(("?", pos, pos + 1))
            return out
        kind, pos = m.lastgroup, m.end()
        start = m.start(kind)  # type: ignore[arg-type]
        if kind == "punct":
            append((text[start], start, pos))
        elif kind == "end":
            append((_END, pos, pos))
            return out
        elif kind != "comment":
            append((kind, start, pos))  # type: ignore[arg-type]
        else:
            extensions.add("comments")


class _Parser:
    """Recursive descent over the token list; errors name the position of the token they met."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.extensions: set[str] = set()
        self.tokens = _tokens(text, self.extensions)
        self.i = 0

    def fail(self, msg: str, pos: int | None = None) -> JSONTextError:
        if pos is None:
            kind, pos, _ = self.tokens[self.i]
            if kind == "?" and self.text.startswith("/*", pos):
                msg = "unterminated /* comment"  # met wherever the parser is, as whitespace is
        return JSONTextError(msg, self.text, pos)

    def value(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels")
        kind, start, end = self.tokens[self.i]
        if kind == "{":
            return self.container(depth, "object", "}")
        if kind == "[":
            return self.container(depth, "array", "]")
        if kind in ("string", "number", "literal"):
            self.i += 1
            return Node(kind, start, end)
        if kind == _END:
            raise self.fail("unexpected end of text")
        if self.text.startswith('"', start):
            raise self.fail("invalid string")
        raise self.fail(f"unexpected character {self.text[start]!r}")

    def container(self, depth: int, kind: str, close: str) -> Node:
        tokens, text = self.tokens, self.text
        node = Node(kind, tokens[self.i][1], -1)
        self.i += 1
        after_comma = False
        while True:
            tok, start, end = tokens[self.i]
            if tok == close:
                if after_comma:
                    self.extensions.add("trailing commas")
                self.i += 1
                node.end = end
                return node
            if kind == "object":
                key = self.value(depth + 1)
                if key.kind != "string":
                    raise self.fail("object key is not a string", start)
                if tokens[self.i][0] != ":":
                    raise self.fail("expected ':'")
                self.i += 1
                raw = text[key.start + 1:key.end - 1]
                name = json.loads(f'"{raw}"') if "\\" in raw else raw  # most keys have no escapes
                node.members.append(Member(name, start, self.value(depth + 1)))
            else:
                node.items.append(self.value(depth + 1))
            after_comma = tokens[self.i][0] == ","
            if after_comma:
                self.i += 1
            elif tokens[self.i][0] != close:
                raise self.fail(f"expected ',' or {close!r}")


def parse(text: str) -> Node:
    """The spans of ``text`` (one JSON/JSONC value, nothing after it but whitespace and comments)."""
    p = _Parser(text)
    node = p.value(0)
    if p.tokens[p.i][0] != _END:
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
