"""Time words in a question: what sets a hard cutoff, what only names a window, and what is left alone."""

from __future__ import annotations

import datetime as dt

import pytest

from hive_brain.engine import Engine
from hive_brain.search import temporal

NOW = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)  # a Monday


def _day(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s).replace(tzinfo=dt.UTC)


def window(q: str) -> tuple[str, str] | None:
    ti = temporal.parse(q, now=NOW)
    assert ti.cutoff is None, q
    return (ti.window[0].date().isoformat(), ti.window[1].date().isoformat()) if ti.window else None


@pytest.mark.parametrize("q, cutoff", [
    ("what database did we use as of 2025-03-01", "2025-03-01T23:59:59"),
    ("what database did we use as of March 1, 2025", "2025-03-01T23:59:59"),
    ("which queue before 2025-03-01", "2025-02-28T23:59:59"),
    ("which queue did we run before 13 October 2023", "2023-10-12T23:59:59"),
    ("how did we deploy before March", "2026-02-28T23:59:59"),
])
def test_cutoffs(q, cutoff):
    ti = temporal.parse(q, now=NOW)
    assert ti.cutoff == _day(cutoff) and ti.window is None


@pytest.mark.parametrize("q, span", [
    ("what did Melanie paint on October 13, 2023?", ("2023-10-13", "2023-10-14")),
    ("what did Gina find on 1 February, 2023?", ("2023-02-01", "2023-02-02")),
    ("what did I say on 1st Feb 2023", ("2023-02-01", "2023-02-02")),
    # "the week before <date>" is a span ending at the date, not a cutoff
    ("what did John do the week before August 3, 2023?", ("2023-07-27", "2023-08-04")),
    ("the puppy she got two weeks before August 11, 2023", ("2023-07-28", "2023-08-12")),
    ("what was Dave doing in the first weekend of October 2023?", ("2023-10-07", "2023-10-09")),
    ("where was Calvin in the last week of October 2023?", ("2023-10-25", "2023-11-01")),
    ("which tournament did Nate win at the beginning of November 2022?", ("2022-11-01", "2022-11-11")),
    ("was the first half of September 2022 good?", ("2022-09-01", "2022-09-16")),
    ("what did we decide in March 2025", ("2025-03-01", "2025-04-01")),
    ("which state did Joanna visit in summer 2021?", ("2021-06-01", "2021-09-01")),
    ("how often did she go to the beach in 2023?", ("2023-01-01", "2024-01-01")),
    ("what did we talk about last Saturday", ("2026-11-28", "2026-11-29")),
    ("what did we decide on Saturday", ("2026-11-28", "2026-11-29")),
    ("what happened this past Friday?", ("2026-11-27", "2026-11-28")),
    ("what did we discuss on monday", ("2026-11-23", "2026-11-24")),
    ("the bug we fixed two weeks ago", ("2026-11-13", "2026-11-20")),
    # "ago" ends before today: "1 day ago" reached into today, and today's memories outranked
    # yesterday's notes (test_a_time_only_question... failed whenever last Saturday was yesterday).
    ("what did we do 1 day ago?", ("2026-11-28", "2026-11-30")),
    ("what did we do 2 days ago?", ("2026-11-27", "2026-11-30")),
    ("what changed yesterday", ("2026-11-29", "2026-11-30")),
    # no year: the most recent such day or month
    ("what did we ship on May 3?", ("2026-05-03", "2026-05-04")),
    ("what did we ship on the 3rd of December", ("2025-12-03", "2025-12-04")),
    ("what broke the week before Nov 20", ("2026-11-13", "2026-11-21")),
    ("which hotel did we book in June", ("2026-06-01", "2026-07-01")),
    ("which hotel did we book in December", ("2025-12-01", "2026-01-01")),
])
def test_windows(q, span):
    assert window(q) == span


@pytest.mark.parametrize("q", [
    "Deploy checklist 2024-05-01",  # a date in a title is a name
    "release notes October 13, 2023",
    "run the tests before pushing",  # "before" in a procedure
    "may I ask about the 2023 roadmap",
    "what happens in the last week of the sprint",
    "what is our rate limit",
    "what did we decide in marketing",  # a month's letters inside a word
    "notes on Mayhem 3",
    "let's deploy on Monday",  # a day ahead, not one to look back at
    "schedule the review on friday",
])
def test_no_time_intent(q):
    ti = temporal.parse(q, now=NOW)
    assert ti.cutoff is None and ti.window is None and not ti.history


def test_history_words():
    assert temporal.parse("what database did we use to run", now=NOW).history is False
    assert temporal.parse("what database did we used to run", now=NOW).history is True
    assert temporal.parse("previously, which queue", now=NOW).history is True


def test_a_named_date_lifts_the_note_from_that_day(vault_path):
    """The same words on two days: naming the day ranks that day's note first, and a talk a few
    days after the window still counts (people report an event after it happens)."""
    conv = vault_path / "Conversations"
    conv.mkdir(exist_ok=True)
    for day, name in (("2023-06-03", "early"), ("2023-09-20", "late")):
        (conv / f"{name}.md").write_text(
            f'---\ntitle: "Chat {name}"\ndate: "{day}"\nkind: conversation\n---\n\n'
            "**Sam**: We went hiking by the lake and saw herons.\n", encoding="utf-8")
    eng = Engine.open()
    eng.rebuild(embed=False)
    for q, first in (("where did Sam go hiking on 3 June, 2023", "early"),
                     ("where did Sam go hiking in September 2023", "late"),
                     ("where did Sam go hiking the week before 18 September, 2023", "late")):
        res = eng.recall(q, semantic=False, scope="full-vault", limit=5)
        assert [h["path"] for h in res["hits"]][:1] == [f"Conversations/{first}.md"], (q, res["time"])


def test_the_named_day_beats_the_days_after_it(vault_path):
    """The grace after a window (people report an event later) must not make a note from two days
    later count as much as one from the day the question names."""
    conv = vault_path / "Memory/Conversations"
    conv.mkdir(parents=True, exist_ok=True)
    for day, name in (("2026-11-28", "sat"), ("2026-11-30", "mon")):
        (conv / f"{name}.md").write_text(
            f'---\ntitle: "Session {name}"\ndate: "{day}"\n---\n\n**User**: The flaky upload test failed again.\n',
            encoding="utf-8")
    eng = Engine.open()
    eng.rebuild(embed=False)
    res = eng.recall("what did we say about the flaky upload test on November 28?", semantic=False, now=NOW)
    assert [h["path"] for h in res["hits"]][:1] == ["Memory/Conversations/sat.md"], res["hits"]
    res = eng.recall("what did we say about the flaky upload test on November 30?", semantic=False, now=NOW)
    assert [h["path"] for h in res["hits"]][:1] == ["Memory/Conversations/mon.md"], res["hits"]


def test_a_time_only_question_is_answered_by_that_days_notes_not_by_todays_memories(vault_path):
    """In a vault of typed memories, "what did we work on last Saturday?" matched memories by "work"
    (and memories written today counted as inside the window's grace) and never reached Saturday's
    conversation: typed memory answered the tier. The day's notes must come first."""
    from hive_brain.memory.model import MemoryInput

    eng = Engine.open()
    for title, content in (("Issue tracker", "Work items live in Linear; we do not use Jira."),
                           ("Incident postmortems", "Postmortems are written within a week of the work to fix it."),
                           ("Editor tabs", "Do use four spaces, never tabs."),
                           ("Hosting", "The web app runs on Fly.io.")):
        eng.memory.remember(MemoryInput(type="fact", title=title, content=content))
    now = dt.datetime.now(dt.UTC)
    sat = now.date() - dt.timedelta(days=(now.weekday() - 5) % 7 or 7)
    conv = vault_path / "Memory/Conversations"
    conv.mkdir(parents=True, exist_ok=True)
    for day, text in ((sat, "We fixed the flaky upload test and renamed the media bucket."),
                      (sat - dt.timedelta(days=3), "Refactored the billing module.")):
        (conv / f"{day}.md").write_text(f'---\ntitle: "Session {day}"\ndate: "{day}"\n---\n\n**User**: {text}\n',
                                        encoding="utf-8")
    eng.rebuild(embed=False)
    for q in ("what did we work on last Saturday?", f"what did we do {(now.date() - sat).days} days ago?"):
        res = eng.recall(q, semantic=False)
        assert not res["abstained"], q
        assert res["hits"][0]["path"] == f"Memory/Conversations/{sat}.md", (q, [h["path"] for h in res["hits"]])


def test_a_day_alone_finds_that_days_conversation(vault_path):
    """ "What did we talk about last Saturday?" shares no word with Saturday's conversation; the day
    it names is enough. Only notes strictly inside the window come this way, and a question with
    no time words still abstains on an absent topic."""
    conv = vault_path / "Memory/Conversations"
    conv.mkdir(parents=True, exist_ok=True)
    for day, name, text in (("2026-11-28", "sat", "We fixed the flaky upload test and renamed the bucket."),
                            ("2026-11-25", "wed", "Refactored the billing module."),
                            ("2026-11-30", "today", "Planned the offsite.")):
        (conv / f"{name}.md").write_text(f'---\ntitle: "Session {name}"\ndate: "{day}"\n---\n\n**User**: {text}\n',
                                         encoding="utf-8")
    eng = Engine.open()
    eng.rebuild(embed=False)
    res = eng.recall("what did we talk about last Saturday?", semantic=False, now=NOW)
    assert not res["abstained"]
    assert [h["path"] for h in res["hits"]] == ["Memory/Conversations/sat.md"]
    assert res["hits"][0]["scoreDetails"]["windowRank"] == 0
    assert eng.recall("what did we discuss yesterday", semantic=False, now=NOW)["abstained"]  # nothing dated then
    assert eng.recall("what is the capital of peru", semantic=False, now=NOW)["abstained"]
    # A prompt that only mentions a day ("... today") is not answered with that day's notes alone.
    assert eng.recall("let's migrate the payroll exporter today", semantic=False, now=NOW)["abstained"]


@pytest.mark.parametrize("q, cutoff", [
    ("which database did we use as of June 2025", "2025-06-30T23:59:59"),
    ("what was the deploy target as of 2025-03", "2025-03-31T23:59:59"),
    ("how did releases work as of 2024", "2024-12-31T23:59:59"),
    ("our CI provider as of the end of Feb 2024", "2024-02-29T23:59:59"),
])
def test_month_and_year_cutoffs(q, cutoff):
    ti = temporal.parse(q, now=NOW)
    assert ti.cutoff == _day(cutoff) and ti.window is None, q


@pytest.mark.parametrize("q", ["what did we use before bun", "the historical package manager",
                               "the history of our deploy target", "which tool did we have before pnpm"])
def test_more_history_phrases(q):
    ti = temporal.parse(q, now=NOW)
    assert ti.history and ti.cutoff is None and ti.window is None, q


def _dated(vault_path, rel: str, day: str, title: str, body: str) -> None:
    p = vault_path / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f'---\ntitle: "{title}"\ndate: "{day}"\n---\n\n{body}\n', encoding="utf-8")


def test_time_phrase_words_do_not_score_lexically(vault_path):
    """Found in an ordinary vault: "two weeks ago" matched a memory titled "Profile two"."""
    _dated(vault_path, "Memory/Notes/profile.md", "2026-06-01", "Profile two", "The second user profile keeps two avatars.")
    _dated(vault_path, "Memory/Conversations/fri.md", "2026-11-16", "Session Nov 16",
           "**User**: We discussed moving the staging cluster to arm64 runners.")
    _dated(vault_path, "Memory/Conversations/nov28.md", "2026-11-28", "Session",
           "**User**: We talked through the quarterly budget and the hiring plan.")
    _dated(vault_path, "Memory/Notes/nov30.md", "2026-11-30", "November planning",
           "November planning: budget review moved to November 30; talk to finance about the budget.")
    eng = Engine.open()
    eng.rebuild(embed=False)
    res = eng.recall("what did we discuss two weeks ago", semantic=False, now=NOW, scope="full-vault")
    paths = [h["path"] for h in res["hits"]]
    assert "Memory/Notes/profile.md" not in paths and paths[:1] == ["Memory/Conversations/fri.md"], paths
    # A written-out date keeps its words (notes write dates out); the day's conversation is found.
    res = eng.recall("what did we talk about on November 28 about the budget", semantic=False, now=NOW,
                     scope="full-vault")
    assert "Memory/Conversations/nov28.md" in [h["path"] for h in res["hits"]][:2], res["hits"]
