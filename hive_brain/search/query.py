"""A question analysed once: its words, the words a note should cover, its time intent (history,
cutoff, window) and the normalised text that titles, keys and aliases are matched against."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from . import temporal


@dataclass(slots=True)
class Query:
    text: str
    time: temporal.TimeIntent
    words: list[str]  # content words, first occurrence order: searched and weighted by rarity
    terms: list[str]  # the words a note should contain (coverage): ``words`` minus a served time phrase
    norm: str  # lower case, single spaces, no trailing ?!. (whole-title / key / alias matching)
    lexical: str  # what BM25 searches: ``text`` without a served time phrase ("two weeks ago" is no topic)
    cutoff: int | None  # unix seconds: recall as the vault stood then
    window: tuple[int, int] | None  # unix seconds [start, end) of a time the question names
    topic: int  # how many content words the question has besides its time phrase
    past: bool  # asks about what was ("what did we do ..."), not what to do ("let's fix it today")

    @property
    def history(self) -> bool:
        return self.time.history

    def time_only(self, params: Mapping[str, float]) -> bool:
        """Besides its time phrase, the question says little ("what did we talk about last Saturday"):
        being from that time is then evidence enough. "Finish the refactor today" still needs its words,
        and "let's fix it today" is no question about today's notes at all."""
        return self.window is not None and self.past and self.topic <= params["time_only_terms"]


def content_words(text: str) -> list[str]:
    from ..index.textproc import content_words as words

    return list(dict.fromkeys(words(text)))


def analyse(text: str, *, now: dt.datetime | None = None, as_of: str | None = None) -> Query:
    """``as_of`` (YYYY-MM-DD) overrides any cutoff the question names."""
    ti = temporal.parse(text, now=now)
    if as_of:
        from ..store.notes import date_of

        d = date_of(as_of)
        if d is None:
            from ..errors import UsageError

            raise UsageError(f"--as-of {as_of!r} is not a date", hint="use YYYY-MM-DD")
        ti.cutoff = d.replace(hour=23, minute=59, second=59)
    words = content_words(text)
    terms = words
    topic = len(words)
    lexical = text
    # A time phrase is served by its window or cutoff: a note need not repeat "3 June 2023" to cover
    # the question. A relative phrase's words are no topic either ("two weeks ago" must not find
    # "Profile two"), so BM25 does not search them; an absolute date's words are kept, since notes
    # write dates out ("on 8 May, 2023"; LoCoMo's temporal questions lost 0.012 any@5 without them).
    if ti.phrase and (ti.window or ti.cutoff):
        time_words = set(content_words(ti.phrase))
        terms = [t for t in words if t not in time_words]
        topic = len(terms)
        terms = terms or words
        if temporal.is_relative(ti.phrase):
            rest = " ".join(text.lower().replace(ti.phrase, " ").split())
            if content_words(rest):
                lexical = rest
    return Query(
        text=text,
        time=ti,
        words=words,
        terms=terms,
        norm=" ".join(text.lower().split()).strip(" ?!."),
        lexical=lexical,
        cutoff=int(ti.cutoff.timestamp()) if ti.cutoff else None,
        window=(int(ti.window[0].timestamp()), int(ti.window[1].timestamp())) if ti.window else None,
        topic=topic,
        past=temporal.about_the_past(text),
    )
