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


def _vault(vault_path: Path, notes: list[tuple[str, str, str]]) -> Engine:
    e = Engine.open(vault_path)
    e.memory.batch([{"type": t, "title": title, "content": body} for t, title, body in notes])
    return e


@pytest.fixture
def eng(vault_path: Path) -> Engine:
    """Lexical (no model): in a five-note vault e5 reads past the typos by itself."""
    return _vault(vault_path, NOTES)


@pytest.fixture
def hybrid(vault_path: Path, with_model: Path) -> Engine:
    return _vault(vault_path, NOTES)


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


# A vault where the wrong reading of each slip is the commoner word: "wait" and "attr" beside the
# stop words "what" and "after"; "locale" (stem "local") beside "local"; "set" beside "test"; "super"
# beside "summer"; and "staging" (stem "stage") behind ten notes whose words begin like it.
SLIPS = [
    ("fact", "Locale files", "Each locale file holds a locale's strings; the locale follows the phone's settings."),
    ("fact", "Local database", "The local database listens on port 6543."),
    ("fact", "Settings", "Set the flag, set the timeout, set the region: every set call is logged with its locale. Wait a bit."),
    ("fact", "Test runs", "Run the test suite before merging; wait for it, wait for the attr checks."),
    ("fact", "Super users", "Super users see the super console; a super user can load the attr table."),
    ("fact", "Summer timetables", "Summer timetables start in May."),
    *[("fact", f"Stack note {i}", f"The stack starts with stats and a star tag {i}; stab the stat.") for i in range(10)],
    ("procedure", "Deploys", "Deploy to staging first, then to production."),
]


@pytest.fixture
def slips(vault_path: Path) -> Engine:
    return _vault(vault_path, SLIPS)


@pytest.mark.parametrize(("typed", "meant"), [
    ("waht", "what"),      # was "wait": a stop word is in no index, so it was never offered
    ("aftr", "after"),     # was "attr", one substitution against one dropped letter
    ("lcoal", "local"),    # was "locale": its stem "local" is one edit away, and more passages use it
    ("tset", "test"),      # was "set": a dropped letter counted as much as two letters swapped
    ("stagign", "staging"),  # was nothing: "stage" is three edits away, the prefix "stag" meets "stack", "stat"...
    ("sumer", "summer"),   # was left as typed ("sum" + "er"); "super" is one substitution away too
    ("laod", "load"),      # was left as typed ("lao" + "d")
])
def test_the_likelier_slip_wins(slips, typed, meant):
    """Each failed before: the reading in the comment (or none)."""
    view = slips.view()
    assert spelling.correct(view.lexical, f"{typed} now")[1] == {typed: meant}


def test_an_ending_counts_only_where_english_writes_it_so():
    for word in ("laod", "sumer", "stoped"):  # "lao" + "d", "sum" + "er", "stop" + "ed": failed before
        assert not spelling.english(word), word
    for word in ("testers", "used", "opened", "boxes", "gases", "visited"):
        assert spelling.english(word), word


def test_typing_cost_prices_swaps_and_doubled_letters_below_other_edits():
    assert spelling.typing_cost("tset", "test") < spelling.typing_cost("tset", "set")
    assert spelling.typing_cost("sumer", "summer") < spelling.typing_cost("sumer", "super")
    assert spelling.typing_cost("word", "word") == 0
    assert spelling.typing_cost("wrd", "word") == spelling.typing_cost("wxrd", "word") == 2


def test_a_stop_word_slip_is_not_respelled_by_new_notes(slips):
    """A note being written with "wait" cannot change how "waht" reads (the stop word "what" comes
    first), so a recall need not wait for it; before, any term one edit away counted."""
    from hive_brain.index.predicates import In

    lex = slips.view().lexical
    where = In("note_path", ("new.md",))
    assert not spelling.could_respell(lex, "waht", "waht", {"wait"}, where)
    assert spelling.could_respell(lex, "stagign", "stagign", {"stage"}, where)
    assert spelling.could_respell(lex, "lcaol", "lcaol", {"local"}, where)
