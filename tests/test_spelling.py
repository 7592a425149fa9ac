"""A mistyped word is searched as the vault spells it (issue 29, ``search.spelling``), on a real
index: a question with a typo in every content word finds the note it finds spelled right, and a
word that is English or the vault's own is never changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from hive_brain.engine import Engine
from hive_brain.search import spelling
from hive_brain.search.params import PARAMS

NOTES = [
    ("procedure", "Beta builds for testers", "To get a build to the testers, run make bump and fastlane beta by hand."),
    ("fact", "Local database port", "Locally the API reaches the database through the proxy on port 6543."),
    ("procedure", "Database migrations", "Migrations are goose files, never edited once applied; staging first."),
    ("preference", "Commit messages", "Conventional Commits with the app as scope; the PR title becomes the commit."),
    ("fact", "Where the logs are", "The harbor service's logs go to Grafana Loki, kept fourteen days."),
]


@pytest.fixture
def eng(vault_path: Path) -> Engine:
    """Lexical (no model): in a five-note vault e5 reads past the typos by itself."""
    e = Engine.open(vault_path)
    e.memory.batch([{"type": t, "title": title, "content": body} for t, title, body in NOTES])
    return e


@pytest.fixture
def hybrid(vault_path: Path, with_model: Path) -> Engine:
    e = Engine.open(vault_path)
    e.memory.batch([{"type": t, "title": title, "content": body} for t, title, body in NOTES])
    return e


def _top(eng: Engine, q: str) -> str | None:
    hits = eng.recall(q, limit=3)["hits"]
    return hits[0]["title"] if hits else None


@pytest.mark.parametrize(("typed", "title"), [
    ("how do i get a biuld to the testrs", "Beta builds for testers"),
    ("are migratoin fiels evr editted", "Database migrations"),
    ("comit mesage format?", "Commit messages"),
    ("wher are the harbr logz kept", "Where the logs are"),
])
def test_a_typo_in_every_content_word_finds_the_note_spelled_right_finds(eng, typed, title):
    """Before (and with ``PARAMS["spelling"]`` 0) each found nothing: no term of it is in the index."""
    res = eng.recall(typed, limit=3)
    assert res["spelling"], res
    assert res["hits"] and res["hits"][0]["title"] == title, (res["spelling"], [h["title"] for h in res["hits"]])
    was = PARAMS["spelling"]
    PARAMS["spelling"] = 0.0
    try:
        off = eng.recall(typed, limit=3)
    finally:
        PARAMS["spelling"] = was
    assert not off["spelling"] and (not off["hits"] or off["hits"][0]["title"] != title), [h["title"] for h in off["hits"]]


def test_english_words_and_the_vaults_own_words_are_left_as_typed(eng):
    view = eng.view()
    # "give", "sort" and "wait" are one edit from "live", "port" and "await"-like vault words, and
    # absent from this vault: a user's real word is never replaced.
    for text in ("give me the sort order, then wait", "parses the timestamps", "the database port"):
        assert spelling.correct(view.lexical, text) == (text, {}), text
    # A word only its stem brings near a vault word is not a typo of it ("beginner", stem "beginn",
    # was read as "region": two edits apart as stems, four as written).
    assert "beginner" not in spelling.correct(view.lexical, "explain it to a beginner in our region")[1]
    # Identifiers, paths and short words are names more often than typos.
    for text in ("harbr_db/migratoin.sql", "HarbrClient", "whn"):
        assert spelling.correct(view.lexical, text)[1] == {}, text


def test_an_off_topic_question_does_not_start_matching(hybrid):
    eng = hybrid
    for q in ("how to revrse a linked lsit in place", "waht does async awiat do in javscript"):
        res = eng.recall(q, limit=3)
        assert res["abstained"] or not res["hits"], (q, res["spelling"], [h["title"] for h in res["hits"]])


def test_edits_counts_a_swap_as_one():
    assert spelling.edits("biuld", "build", 2) == 1
    assert spelling.edits("testrs", "testers", 2) == 1
    assert spelling.edits("migratoin", "migration", 2) == 1
    assert spelling.edits("kotiln", "docker", 2) == 3  # "above most" is most + 1
