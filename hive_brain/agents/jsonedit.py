"""Write a changed JSON settings file keeping the user's bytes wherever the data did not change.

``json.dumps`` of the whole file would reflow it: a compact ``"allow": ["Read", "Bash(ls)"]`` becomes
four lines, and uninstall would not give back the file the user had. :func:`dump_like` instead
reuses the old text of every value that is equal at the same place (key path; list items by value,
else by position) and lays out only what changed, in the old value's style: a value that was on one
line stays on one line, an indented one keeps the file's indent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_SCALAR = json.JSONDecoder()
# A one-line object or list that grows past this (our hook entries added to it) is laid out on lines.
ONE_LINE_MAX = 120


@dataclass
class Node:
    """A parsed JSON value with where its text is (``raw[start:end]``) and its children's nodes."""

    value: Any
    start: int
    end: int
    keys: dict[str, Node] = field(default_factory=dict)
    items: list[Node] = field(default_factory=list)


def parse(raw: str) -> Node:
    """The node tree of a JSON document (raises ``ValueError`` as ``json.loads`` would)."""
    node, end = _value(raw, _WS.match(raw, 0).end())  # type: ignore[union-attr]
    if _WS.match(raw, end).end() != len(raw):  # type: ignore[union-attr]
        raise ValueError("extra data after the JSON value")
    return node


def _value(s: str, i: int) -> tuple[Node, int]:
    c = s[i : i + 1]
    if c == "{":
        node = Node({}, i, i)
        i = _WS.match(s, i + 1).end()  # type: ignore[union-attr]
        if s[i : i + 1] == "}":
            node.end = i + 1
            return node, i + 1
        while True:
            key, i = _SCALAR.raw_decode(s, i)
            if not isinstance(key, str):
                raise ValueError("an object key is not a string")
            i = _WS.match(s, i).end()  # type: ignore[union-attr]
            if s[i : i + 1] != ":":
                raise ValueError("expected ':'")
            child, i = _value(s, _WS.match(s, i + 1).end())  # type: ignore[union-attr]
            node.value[key] = child.value
            node.keys[key] = child
            i = _WS.match(s, i).end()  # type: ignore[union-attr]
            if s[i : i + 1] == ",":
                i = _WS.match(s, i + 1).end()  # type: ignore[union-attr]
                continue
            if s[i : i + 1] != "}":
                raise ValueError("expected ',' or '}'")
            node.end = i + 1
            return node, i + 1
    if c == "[":
        node = Node([], i, i)
        i = _WS.match(s, i + 1).end()  # type: ignore[union-attr]
        if s[i : i + 1] == "]":
            node.end = i + 1
            return node, i + 1
        while True:
            child, i = _value(s, i)
            node.value.append(child.value)
            node.items.append(child)
            i = _WS.match(s, i).end()  # type: ignore[union-attr]
            if s[i : i + 1] == ",":
                i = _WS.match(s, i + 1).end()  # type: ignore[union-attr]
                continue
            if s[i : i + 1] != "]":
                raise ValueError("expected ',' or ']'")
            node.end = i + 1
            return node, i + 1
    value, end = _SCALAR.raw_decode(s, i)
    return Node(value, i, end), end


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (``1 == True`` in Python; not in a settings file)."""
    return type(a) is type(b) and (a == b if not isinstance(a, dict | list) else json.dumps(a) == json.dumps(b))


def dump_like(data: Any, raw: str, indent: int | str = 2) -> str:
    """``data`` as JSON text that keeps ``raw``'s bytes for everything unchanged (see the module doc)."""
    try:
        old: Node | None = parse(raw) if raw.strip() else None
    except ValueError:
        old = None
    unit = " " * indent if isinstance(indent, int) else indent
    text = _emit(data, old, raw, "", unit)
    if old is not None:
        # The file's own leading and trailing whitespace (its final newline, or none).
        return raw[: old.start] + text + raw[old.end :]
    return text + "\n"


def _line_pad(raw: str, i: int) -> str:
    """The indentation of the line ``raw[i]`` is on (a changed value's children line up under it)."""
    line = raw[raw.rfind("\n", 0, i) + 1 : i]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _expanded(value: Any, old: Node | None, raw: str, pad: str, unit: str) -> str:
    return _emit(value, old, raw, pad, unit, one_line=False)


def _emit(value: Any, old: Node | None, raw: str, pad: str, unit: str, one_line: bool | None = None) -> str:
    if old is not None and _same(value, old.value):
        return raw[old.start : old.end]
    if not isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    if old is not None and type(old.value) is type(value):
        pad = _line_pad(raw, old.start)
        if one_line is None:
            one_line = "\n" not in raw[old.start : old.end]
    else:
        one_line = False
    inner = pad + unit
    if isinstance(value, dict):
        if not value:
            return "{}"
        keys = old.keys if old is not None and isinstance(old.value, dict) else {}
        parts = [
            json.dumps(k, ensure_ascii=False) + ": " + _emit(v, keys.get(k), raw, "" if one_line else inner, unit)
            for k, v in value.items()
        ]
        if one_line:
            flat = "{" + ", ".join(parts) + "}"
            if len(flat) <= ONE_LINE_MAX:
                return flat
            return _expanded(value, old, raw, pad, unit)
        return "{\n" + ",\n".join(inner + p for p in parts) + "\n" + pad + "}"
    if not value:
        return "[]"
    olds = old.items if old is not None and isinstance(old.value, list) else []
    used: set[int] = set()
    parts = []
    for pos, v in enumerate(value):
        match = next((j for j, n in enumerate(olds) if j not in used and _same(v, n.value)), None)
        if match is None and pos < len(olds) and pos not in used and type(olds[pos].value) is type(v):
            match = pos  # the same item, changed inside (a hook group we added an entry to)
        if match is not None:
            used.add(match)
        parts.append(_emit(v, olds[match] if match is not None else None, raw, "" if one_line else inner, unit))
    if one_line:
        flat = "[" + ", ".join(parts) + "]"
        if len(flat) <= ONE_LINE_MAX:
            return flat
        return _expanded(value, old, raw, pad, unit)
    return "[\n" + ",\n".join(inner + p for p in parts) + "\n" + pad + "]"
