"""search.pending.could_change on a real tantivy index: when notes written but not yet indexed could
change a question's hits (the server's reads wait for those only; tests/test_server_writes.py has the
server side)."""

from __future__ import annotations

import pytest

from hive_brain.index.lexical import LexicalIndex, doc_terms
from hive_brain.search.pending import could_change

INDEXED = "Memory/editor.md"
NEW = "Memory/hosting.md"


def _doc(path: str, title: str, text: str, tags: list[str], questions: list[str] | None = None) -> dict:
    return {"passage_id": f"{path}#0", "note_path": path, "title": title, "text": text, "tags": tags,
            "questions": questions or [], "layer": "shared", "kind": "memory", "date": 1_700_000_000}


@pytest.fixture
def lexical(tmp_path):
    ix = LexicalIndex(tmp_path / "lex")
    with ix.writer() as w:
        w.add(_doc(INDEXED, "Editor", "The team edits in axolotl-vim.", ["tooling"]))
        w.add(_doc("Memory/billing.md", "Billing", "Billing records live in the ledger database.", ["billing"]))
        for i in range(6):
            w.add(_doc(f"Filler/f{i}.md", f"Filler {i}", f"Nothing to see in filler number {i}.", []))
    return ix


WRITTEN = doc_terms([_doc(NEW, "Hosting", "The web app runs on quokkahost.", ["infra"],
                          questions=["Which provider serves production?"])])


@pytest.mark.parametrize(("question", "paths", "vectors", "changes"), [
    ("Which database stores billing records?", [NEW], False, False),  # no word in common, nothing dated
    ("Which database stores billing records?", [NEW, INDEXED], False, False),  # nor with the indexed version
    ("Which database stores billing records?", [NEW], True, False),  # a new note has no vectors either way
    ("Which database stores billing records?", [INDEXED], True, True),  # its old vectors go at the catch-up
    ("where is quokkahost?", [NEW], False, True),  # a word of the new note
    ("who serves production?", [NEW], False, True),  # a word of the writer's questions (searched as the title)
    ("what do we edit with in axolotl-vim?", [INDEXED], False, True),  # a word of the version indexed now
    ("What did we write today?", [NEW], False, True),  # a time window: dated notes are candidates
    ("billing as of 2023-01-01", [NEW], False, True),  # a cutoff
    ("where is quokkahots?", [NEW], False, True),  # a misspelling one swap from the new word
    ("where is axolottl?", [INDEXED], False, True),  # read as a word of the version indexed now
    ("", [NEW], False, True),  # no words: nothing to rule out
])
def test_could_change(lexical, question, paths, vectors, changes):
    assert could_change(lexical, [question], WRITTEN, paths, vectors=vectors) is changes


def test_an_alternative_phrasing_counts_too(lexical):
    assert not could_change(lexical, ["billing database"], WRITTEN, [NEW], vectors=False)
    assert could_change(lexical, ["billing database", "the quokkahost web app"], WRITTEN, [NEW], vectors=False)
