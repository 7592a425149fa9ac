"""The frontmatter fast path (store/flatyaml.py) against PyYAML: whenever it answers, it answers
what ``yaml.load`` with the loader notes.py uses would, types included; and it answers for the
frontmatter hive-brain writes (issue 30)."""

from __future__ import annotations

import datetime as dt
import math
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from hive_brain.store import flatyaml, notes

# Scalars YAML reads in surprising ways, and ordinary ones.
SCALARS = [
    # words, and words YAML 1.1 reads as booleans or null
    "fact", "Bagri owner", "a  b", "x" * 300, "yes", "Yes", "YES", "yEs", "no", "No", "NO", "on", "On", "ON", "off",
    "Off", "OFF", "true", "True", "TRUE", "tRUE", "false", "FALSE", "y", "Y", "n", "N", "null", "Null", "NULL", "nULL",
    "~", "None", "none", "nan", "inf", "No.", "yes!", "True.", "onion", "offset",
    # numbers and near-numbers
    "0", "-0", "+0", "7", "-7", "+7", "10", "012", "0o12", "0x1f", "0b101", "1_000", "1,000", "0.88", "-0.5", "00.5",
    "0.0", "1.", ".5", "1.5e3", "1.5e+3", "1.5E-3", "-.inf", ".inf", ".Inf", ".nan", ".NaN", "1:20", "190:20:30",
    "1:20.5", "12345678901234567890123", "9" * 30, "3 retries", "1.2.3", "-", "--", "-x", "- x", "+", ".", "..",
    # dates and times
    "2024-02-17", "2024-2-7", "2024-02-30", "2024-13-01", "0000-01-01", "2024-02-17T14:00:00Z",
    "2024-02-17 14:00:00", "2024-02-17t14:00:00.5+02:00", "2024-02-17T25:00:00", "20240217",
    # quoted
    '"2024-02-17T14:00:00Z"', '"yes"', '"0.88"', '""', '" padded "', '"a: b"', '"a # b"', "'a: b'", "'it''s'", "''",
    "'a'b'", "'''", "''''", '"a\\"b"', '"a\\nb"', '"a"b"', '"a" # c', "'a' # c", '"unclosed', "'unclosed", "'a' b",
    '"tab\there"', "'x''", "\"'\"", "'\"'",
    # colons, comments, indicators
    "a: b", "a:", "a:b", "http://example.com:8080/x", "key:: v", "a #b", "a#b", "C#", "#x", "a\t#b", "&anchor v", "*alias",
    "!tag v", "!!str 5", "|", ">", "|-", "%x", "@x", "`x`", ",x", "?x", "? x", "=", "<<", "a]", "a}", "a, b", "a [b]",
    "{a: 1}", "{}", "[a, b]", "[a,b]", "[ a , b ]", "[]", "[ ]", "[a, b,]", "[a, [b]]", "[a, {b: c}]", "[yes, 0, 1.5, null]",
    "[a: b]", "[a #b]", "['x', y]", "[2024-01-01]", "[-1, x y]", "[a]b", "[a, b] # c",
    # unicode and characters YAML treats specially
    "中文标题", "Ünïcödé", "émoji 🚀 ok", "a\u2028b", "a\u2029b", "a\x85b", "a\ufeffb", "a\u00a0#b", "a\u00a0: b", "\u00a0x",
    "x\x7fy", "x\x07y", "a\rb", "①", "ǅungla", "Ωmega", "a\\b", "a'b", 'a"b', "a  ", "trailing   ",
]
KEYS = ["id", "type", "title", "memory_key", "tags", "confidence", "created", "key-x", "_k", "k_2", "Key", "yes", "on",
        "null", "No", "y", "n", "1key", "k ey", "k.y", "k" * 200, "k" * 1100, "é", "a:b", "?", "-", "\"q\"", "'q'"]
SEPARATORS = [": ", ": ", ": ", ":  ", ":", ":\t", " : ", ":\u00a0"]


def _same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (True == 1 and 1 == 1.0 in Python, not in YAML)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _pyyaml(text: str) -> Any:
    return yaml.load(text, Loader=notes._Loader)


def _random_frontmatter(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(0, 8)):
        r = rng.random()
        key = rng.choice(KEYS[:7]) if rng.random() < 0.6 else rng.choice(KEYS)
        if r < 0.55:
            lines.append(f"{key}{rng.choice(SEPARATORS)}{rng.choice(SCALARS)}")
        elif r < 0.8:
            lines.append(f"{key}:" + rng.choice(["", "", " ", "  "]))
            indent = rng.choice(["", "", "  ", "    "])
            for _ in range(rng.randint(0, 4)):
                item = rng.choice(SCALARS)
                lines.append(rng.choice([f"{indent}- {item}", f"{indent}- {item}", f"{indent}-  {item}",
                                         f"{rng.choice(['', ' ', '  '])}- {item}", f"{indent}-", f"{indent}-{item}",
                                         f"{indent}- - {item}", f"{indent}- a: {item}"]))
        else:
            lines.append(rng.choice(["", "# a comment", "...", "  continued", " - stray", "\t", "%YAML 1.1", "key",
                                     "  nested: 1", "- top", "a: b: c", "<<: *x", "? complex", "k: v # c", " ", "x:y"]))
    return "\n".join(lines) + rng.choice(["", "", "\n"])


def _check(text: str) -> bool:
    """Whether the fast path answered; if it did, PyYAML must agree exactly."""
    fast = flatyaml.load(text)
    if fast is None:
        return False
    want = _pyyaml(text) or {}  # raises if PyYAML calls the text broken: the fast path must not have answered
    assert _same(fast, want), (text, fast, want)
    return True


def test_fast_path_agrees_with_pyyaml_on_generated_frontmatter():
    rng = random.Random(20261204)
    answered = 0
    for _ in range(30_000):
        answered += _check(_random_frontmatter(rng))
    assert answered > 3_000  # the generator reaches the fast path often, not only its refusals


@pytest.mark.parametrize("value", SCALARS)
def test_fast_path_agrees_with_pyyaml_on_each_tricky_scalar(value):
    for text in (f"k: {value}", f"k:\n- {value}", f"k:\n  - {value}\n  - x", f"a: 1\nk: {value}\nz: [{value}]"):
        _check(text)


@pytest.mark.parametrize("text", ["k: yes", "k: 0.88", "k: 2024-02-17", "k: null", "k: [a, 1]", "k:", "k:\n- a\n- b",
                                  "k: 'it''s'", 'k: "a: b # c"', "k: 中文", "a: 1\n\nb: 2", ""])
def test_fast_path_answers_the_simple_form(text):
    assert _check(text), text


@pytest.mark.parametrize("text", [
    "k: &a x\nj: *a", "k: [*a]", "k: {a: 1}", "k: x # comment", "# c\nk: x", "k: |\n  lines", "k:\n  sub: 1", "k: 012",
    "k: 1.5e+3", "k: 0x1f", "k: a\n  continued", "k: 2024-02-30", "k\t: v", "k: v\r\nj: w", "k: v\nk: w", "yes: v", "k: 2024-02-17T14:00:00Z",
    "k: " + "x" * (flatyaml.MAX_CHARS + 1), "k:\n- a\n  - b",
])
def test_fast_path_leaves_everything_else_to_pyyaml(text):
    assert flatyaml.load(text) is None, text


TRICKY_STRINGS = ["plain", "a: b", "yes", "0.88", "012", "2024-01-01", "#x", "a #b", "it's", 'say "hi"', "  pad ",
                  "中文", "tab\tx", "line\nbreak", "null", "~", "", "- x", "[x]", "{x}", "&a", "*a", "!x", "%x", "@x",
                  "`x", "back\\slash", "x" * 200, "trailing ", "1:20", "é: ü", "\u00a0", "a\u2028b"]


def test_what_hive_brain_writes_is_read_by_the_fast_path_as_pyyaml_reads_it():
    rng = random.Random(7)
    answered = total = 0
    for _ in range(3_000):
        meta: dict[str, Any] = {
            "id": notes.new_memory_id(), "type": rng.choice(["fact", "decision", "preference"]),
            "title": rng.choice(TRICKY_STRINGS) + rng.choice(["", " title"]), "memory_key": "fact/x/y",
            "layer": rng.choice(["shared", "private"]), "tags": rng.sample(TRICKY_STRINGS, rng.randint(0, 3)),
            "aliases": rng.sample(TRICKY_STRINGS, rng.randint(0, 2)), "confidence": rng.choice([0.5, 0.88, 1.0, 0, 1]),
            "status": "active", "created": notes.now_iso(), "updated": notes.now_iso(),
            "content_hash": notes.content_hash(str(rng.random())), "supersedes": rng.choice([None, notes.new_memory_id()]),
            "extra": rng.choice([True, False, None, 3, dt.date(2024, 2, 17), "x"]),
        }
        text = notes._dump(notes._ordered(meta))
        total += 1
        answered += _check(text)
    assert answered > total * 0.6  # tricky titles need PyYAML's escapes; ordinary ones do not


def test_the_notes_hive_brain_ships_and_writes_take_the_fast_path(vault_path):
    from .helpers import remember

    remember("Deploy target", "We deploy the web app to Fly.io.", "decision")
    remember("Analytics: where", "Events go to ClickHouse # not Postgres.", "fact")
    texts = [p.read_text(encoding="utf-8") for p in sorted(Path(vault_path).rglob("*.md"))]
    fms = [s[0] for t in texts if (s := notes.split_frontmatter(t)) is not None]
    assert len(fms) >= 3
    for fm in fms:
        assert _check(fm), fm


def test_a_note_read_by_the_fast_path_is_the_note_pyyaml_gives(monkeypatch):
    text = ("---\nid: mem-1\ntype: fact\ntitle: 'Deploy: staging'\ntags:\n- a\n- b\nconfidence: 0.9\n"
            "created: \"2024-02-17T14:00:00Z\"\ndate: 2024-02-17\ndone: yes\n---\nbody\n")
    fast = notes.parse_text("Memory/x.md", text)
    monkeypatch.setattr(flatyaml, "load", lambda _text: None)
    slow = notes.parse_text("Memory/x.md", text)
    assert _same(fast.meta, slow.meta) and fast.body == slow.body and fast.extra == slow.extra and fast.problem is None


def test_an_impossible_date_or_a_huge_integer_is_a_broken_note_not_a_crash():
    for value in ("2024-02-30", "2024-01-01 25:00:00", "1" * 5000):
        note = notes.parse_text("Ideas/x.md", f"---\ntitle: x\ndate: {value}\n---\nbody\n")
        assert note.problem and note.problem.startswith("broken YAML frontmatter"), value
        assert note.meta == {}
