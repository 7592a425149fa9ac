from __future__ import annotations

import random
import re

import pytest

from hive_brain.errors import NoteError
from hive_brain.store.notes import (
    memory_filename,
    new_memory_id,
    parse_bytes,
    parse_text,
    render,
    slugify,
    split_frontmatter,
)


@pytest.mark.parametrize(
    "title",
    ["../../etc/passwd", "..\\..\\windows\\system32", "CON", "nul", "a" * 300, "🎉🎉🎉", "a/b\\c:d*e?f\"g<h>i|j", ".hidden", " ", "中文标题"],
)
def test_memory_filenames_are_safe(title, tmp_path):
    name = memory_filename(title, new_memory_id())
    assert "/" not in name and "\\" not in name and ".." not in name
    assert not name.startswith(".")
    assert name.endswith(".md") and len(name.encode()) < 200
    stem = name.rsplit("-", 1)[0].split(".")[0].lower()
    assert stem not in ("con", "nul", "prn", "aux")
    # It really is a plain file inside the folder.
    p = tmp_path / name
    p.write_text("x")
    assert p.resolve().parent == tmp_path.resolve()


def test_unknown_keys_survive_rewrite():
    n = parse_text("a.md", "---\ntitle: x\ncssclasses: [wide]\nmy_key: {nested: 1}\n---\nbody\n")
    out = render({**n.meta, "status": "active"}, n.body)
    again = parse_text("a.md", out)
    assert again.meta["cssclasses"] == ["wide"] and again.meta["my_key"] == {"nested": 1}
    assert again.body.strip() == "body"


@pytest.mark.parametrize(
    "text,problem",
    [
        ("---\ntitle: [unclosed\n---\nbody", "broken YAML"),
        ("---\ntitle: x\nbody without closing", "not closed"),
        ("---\n- a\n- b\n---\nbody", "not a key/value"),
    ],
)
def test_broken_frontmatter_is_reported_not_raised(text, problem):
    n = parse_text("a.md", text)
    assert problem in n.problem
    assert n.meta == {} and n.body == text


def test_binary_raises_note_error_and_legacy_encodings_are_read():
    with pytest.raises(NoteError, match="binary"):
        parse_bytes("x.md", b"\x89PNG\r\n\x00\x00")
    latin = parse_bytes("x.md", b"caf\xe9 \x80")
    assert latin.body == "café €" and latin.extra["encoding"] == "cp1252"
    assert parse_bytes("x.md", b"\x81x").extra["encoding"] == "latin-1"  # undefined in CP-1252
    with pytest.raises(NoteError, match="limit"):
        parse_bytes("x.md", b"a" * 100, max_bytes=10)


def test_slugify_keeps_words():
    assert slugify("Use pnpm, not npm!") == "use-pnpm-not-npm"


# Hand-edit cases python-frontmatter's own parse/dumps would change (benchmarks/notes_parse.py measures
# them): hive-brain keeps these exactly, so a rewrite never alters what the user wrote.


def test_crlf_body_is_kept_and_bom_dropped():
    n = parse_bytes("a.md", b"\xef\xbb\xbf---\r\ntitle: x\r\n---\r\n\r\nline one\r\nline two\r\n")
    assert n.meta == {"title": "x"} and n.problem is None
    assert n.body == "\r\nline one\r\nline two\r\n"
    assert render(n.meta, n.body).endswith("\n\r\nline one\r\nline two\r\n")


def test_body_whitespace_is_kept():
    n = parse_text("a.md", "---\ntitle: x\n---\n\n\n   \nbody  \n\n")
    assert n.body == "\n\n   \nbody  \n\n"


@pytest.mark.parametrize("key", ["content", "handler", "metadata"])
def test_any_key_name_parses(key):
    n = parse_text("a.md", f"---\ntitle: x\n{key}: y\n---\nbody\n")
    assert n.meta == {"title": "x", key: "y"} and n.problem is None


def test_non_string_keys_become_strings():
    assert parse_text("a.md", "---\n1: one\n2.5: half\n---\n").meta == {"1": "one", "2.5": "half"}


def test_a_longer_dash_line_does_not_close_the_frontmatter():
    n = parse_text("a.md", "---\ntitle: x\n-----\n---\nbody\n")
    assert n.problem and "broken YAML" in n.problem and n.meta == {}


def test_render_orders_known_keys_then_unknown_in_their_own_order():
    out = render({"zeta": 1, "title": "t", "alpha": 2, "id": "mem-1", "type": "fact"}, "b")
    assert out == "---\nid: mem-1\ntype: fact\ntitle: t\nzeta: 1\nalpha: 2\n---\n\nb\n"


# The frontmatter split as one regex, as it was written before split_frontmatter (kept as the spec).
_REFERENCE_FM_RE = re.compile(r"\A---[ \t]*\r?\n(.*?)(?:\r?\n)?^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)


def _reference_split(text: str) -> tuple[str, int] | None:
    m = _REFERENCE_FM_RE.match(text)
    return (m.group(1), m.end()) if m else None


@pytest.mark.parametrize(
    "text",
    ["---\n---\n", "---\n---", "---\n\n---\n", "---\r\n---\r\nb", "---\r\na: 1\r\n\r\n---\r\nb", "---  \na\n---\t\nb",
     "---\na\n----\n---\nb", "---\na\n --- \n---x\n---", "---\na\n---", "---\na\n--", "----\na\n---\n", "---a\n---\n",
     "---\n\r\n---\n", "---\na\r---\nb\n---\n", "---\na\n---\r", "---\na\n---\r\r\n---\n"],
)
def test_split_frontmatter_matches_the_regex_on_edge_cases(text):
    assert split_frontmatter(text) == _reference_split(text)


def test_split_frontmatter_matches_the_regex_on_random_text():
    rng = random.Random(20261201)
    pieces = ["---", "-", "\n", "\r\n", "\r", " ", "\t", "a", "k: v", "----", "\n---\n", "\n--- \n"]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        if rng.random() < 0.7:
            text = rng.choice(["---\n", "---\r\n", "--- \t\n"]) + text
        assert split_frontmatter(text) == _reference_split(text), repr(text)


HAND_WRITTEN = """---
# my own header comment
title: 'Deploy target'   # quoted my way
id: mem-01handwritten00000000000
type: decision
reviewed_by: alice  # my own key
tags:
  - infra
  - deploy
memory_key: decision/deploy-target
status: active
created: 2026-01-05T10:00:00Z
---

We deploy to Fly.io.
"""


def test_a_rewrite_keeps_the_users_comments_order_and_quoting():
    from hive_brain.store.notes import parse_text, render

    note = parse_text("Memory/x.md", HAND_WRITTEN)
    meta = {**note.meta, "tags": ["infra", "prod"], "updated": "2026-02-01T00:00:00Z"}
    out = render(meta, note.body, like=note)
    fm = out.split("---\n")[1]
    # Untouched lines stay byte for byte: comments, order, the user's quoting.
    for line in ("# my own header comment", "title: 'Deploy target'   # quoted my way",
                 "reviewed_by: alice  # my own key", "created: 2026-01-05T10:00:00Z"):
        assert line in fm.splitlines(), line
    keys = [ln.split(":")[0] for ln in fm.splitlines() if ln and ln[0].isalpha()]
    assert keys == ["title", "id", "type", "reviewed_by", "tags", "memory_key", "status", "created", "updated"]
    assert parse_text("Memory/x.md", out).meta == {**note.meta, "tags": ["infra", "prod"],
                                                   "updated": "2026-02-01T00:00:00Z"}
    # A removed key goes; a note hive-brain cannot patch exactly is rendered whole, never wrongly.
    gone = render({k: v for k, v in meta.items() if k != "reviewed_by"}, note.body, like=note)
    assert "reviewed_by" not in gone and "# my own header comment" in gone
    odd = parse_text("x.md", "---\ntitle: a\ntitle: b\n---\nbody\n")  # a duplicate key: whole render
    assert parse_text("x.md", render({**odd.meta, "type": "fact"}, odd.body, like=odd)).meta == {"title": "b", "type": "fact"}


def test_update_keeps_a_hand_written_frontmatter(vault_path):
    from .helpers import run

    p = vault_path / "Memory" / "Distillations" / "Agent Memory" / "deploy-target.md"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(HAND_WRITTEN, encoding="utf-8")
    run("update", "mem-01handwritten00000000000", "--tags", "infra,prod")
    text = p.read_text(encoding="utf-8")
    assert "reviewed_by: alice  # my own key" in text and "# my own header comment" in text
    assert "title: 'Deploy target'   # quoted my way" in text
    assert "- prod" in text and "We deploy to Fly.io." in text


def test_a_latin1_note_is_searchable_and_never_rewritten(vault_path):
    """Older editors save CP-1252 / Latin-1: such a note is read and found, not left unsearchable,
    and hive-brain refuses to rewrite it in another encoding."""
    from .helpers import run

    p = vault_path / "Memory" / "Distillations" / "Agent Memory" / "cafe.md"
    p.parent.mkdir(parents=True, exist_ok=True)
    raw = ("---\nid: mem-01latin1note000000000000\ntype: fact\ntitle: Café order\n---\n\n"
           "The café on the corner takes the crème brûlée order at noon.\n").encode("cp1252")
    p.write_bytes(raw)
    hits = run("recall", "crème brûlée order", "--lexical", "--scope", "full-vault")["hits"]
    assert [h["path"] for h in hits][:1] == ["Memory/Distillations/Agent Memory/cafe.md"]
    assert "brûlée" in hits[0]["passage"]["text"]
    assert "crème brûlée" in run("get", "mem-01latin1note000000000000")["content"]
    refused = run("update", "mem-01latin1note000000000000", "--tags", "food", ok=False)
    assert refused["_exit"] == 1 and "cp1252" in refused["message"] and "UTF-8" in refused["hint"]
    assert p.read_bytes() == raw


def test_status_counts_unreadable_notes(vault_path):
    from .helpers import run

    assert run("status")["unreadableNotes"] == 0
    (vault_path / "Ideas").mkdir(exist_ok=True)
    (vault_path / "Ideas" / "broken.md").write_text("---\ntitle: [unclosed\n---\nbody\n", encoding="utf-8")
    (vault_path / "Ideas" / "blob.md").write_bytes(b"\x00\x01binary")
    assert run("status")["unreadableNotes"] == 2


def test_inline_tags_and_merge_markers_match_the_plain_regexes_on_random_text():
    """The fast forms (a literal "#" before the look-behind, substring tests first) find exactly what
    the plain regexes find."""
    from hive_brain.store import notes
    from hive_brain.store.copies import has_git_markers

    tag = re.compile(r"(?<![\w&/#])#((?:[^\W\d_]|\d+[^\W\d_])[\w/-]*)")
    git_open, git_close = re.compile(r"^<{7} \S", re.M), re.compile(r"^>{7} \S", re.M)

    def reference(body: str) -> list[str]:
        return list(dict.fromkeys(m.group(1) for m in tag.finditer(notes._CODE_RE.sub(" ", body)))) if "#" in body else []

    rng = random.Random(20261204)
    pieces = ["#", "##", "# ", "#a", "#1", "#1a", "a#b", "&#x", "/#y", "##z", "`", "```", "~~~", "\n", " ", "k8s", "é",
              "_", "-", "/", "<<<<<<< ", ">>>>>>> ", "<<<<<<<", "=======", "x", "中"]
    for _ in range(20_000):
        body = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 25)))
        assert notes.inline_tags(body) == reference(body), repr(body)
        assert has_git_markers(body) == bool(git_open.search(body) and git_close.search(body)), repr(body)
