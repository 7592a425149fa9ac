"""Temporal words in a question: history intent, an "as of" cutoff, or a date window.

Only phrases about *when* change recall; a date inside a title or "before" in a procedure step
("run tests before pushing") does not (the patterns require a date-like object after the word).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

HISTORY = re.compile(r"\b(used to|previously|historically|in the past|formerly|before (?:we|i|they) (?:switched|moved|changed)|what did we use|originally)\b", re.I)
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"], 1)}
_MON_RE = "|".join(list(_MONTHS) + [m[:3] for m in _MONTHS] + ["sept"])
_DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
        "nine": 9, "ten": 10, "couple of": 2, "few": 3}
_ISO = r"(\d{4}-\d{2}-\d{2}|\d{4}/\d{2}/\d{2})"


@dataclass
class TimeIntent:
    history: bool = False
    cutoff: dt.datetime | None = None  # recall as it stood at this moment
    window: tuple[dt.datetime, dt.datetime] | None = None  # events inside this window
    phrase: str | None = None

    def describe(self) -> dict:
        return {
            "history": self.history,
            "cutoff": self.cutoff.isoformat() if self.cutoff else None,
            "window": [w.isoformat() for w in self.window] if self.window else None,
            "phrase": self.phrase,
        }


def _day_start(d: dt.date) -> dt.datetime:
    return dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC)


def _month_of(name: str) -> int:
    name = name.lower()
    for full, i in _MONTHS.items():
        if full.startswith(name[:3]):
            return i
    raise ValueError(name)


def _parse_date(s: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(s.replace("/", "-"))
    except ValueError:
        return None


def parse(question: str, now: dt.datetime | None = None) -> TimeIntent:
    now = now or dt.datetime.now(dt.UTC)
    today = now.date()
    q = question.lower()
    ti = TimeIntent(history=bool(HISTORY.search(q)))
    m = re.search(r"\b(?:as of|as at|at the time of)\s+" + _ISO, q)
    if m and (d := _parse_date(m.group(1))):
        ti.cutoff = _day_start(d) + dt.timedelta(days=1) - dt.timedelta(seconds=1)
        ti.phrase = m.group(0)
        return ti
    m = re.search(r"\b(before|until|prior to)\s+" + _ISO, q)
    if m and (d := _parse_date(m.group(2))):
        ti.cutoff = _day_start(d) - dt.timedelta(seconds=1)
        ti.phrase = m.group(0)
        return ti
    m = re.search(rf"\b(before|until|prior to)\s+({_MON_RE})\b(?:\s+(\d{{4}}))?", q)
    if m:
        mon = _month_of(m.group(2))
        year = int(m.group(3)) if m.group(3) else (today.year if mon <= today.month else today.year - 1)
        ti.cutoff = _day_start(dt.date(year, mon, 1)) - dt.timedelta(seconds=1)
        ti.phrase = m.group(0)
        return ti
    m = re.search(r"\b(?:on|since|from)\s+" + _ISO, q)
    if m and (d := _parse_date(m.group(1))):
        start = _day_start(d)
        ti.window = (start, start + dt.timedelta(days=1) if m.group(0).startswith("on") else now)
        ti.phrase = m.group(0)
        return ti
    m = re.search(r"\blast\s+(" + "|".join(_DAYS) + r")\b", q)
    if m:
        wd = _DAYS.index(m.group(1))
        delta = (today.weekday() - wd) % 7 or 7
        d = today - dt.timedelta(days=delta)
        ti.window = (_day_start(d), _day_start(d) + dt.timedelta(days=1))
        ti.phrase = m.group(0)
        return ti
    m = re.search(r"\b(yesterday|today)\b", q)
    if m:
        d = today - dt.timedelta(days=1 if m.group(1) == "yesterday" else 0)
        ti.window = (_day_start(d), _day_start(d) + dt.timedelta(days=1))
        ti.phrase = m.group(0)
        return ti
    m = re.search(r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few)\s+(day|week|month|year)s?\s+ago\b", q)
    if m:
        n = int(m.group(1)) if m.group(1).isdigit() else _NUM[m.group(1)]
        unit = {"day": 1, "week": 7, "month": 30, "year": 365}[m.group(2)]
        center = today - dt.timedelta(days=n * unit)
        half = max(1, unit // 2 if unit > 1 else 1)
        ti.window = (_day_start(center - dt.timedelta(days=half)), _day_start(center + dt.timedelta(days=half + 1)))
        ti.phrase = m.group(0)
        return ti
    m = re.search(r"\blast\s+(week|month|year)\b", q)
    if m:
        unit = {"week": 7, "month": 31, "year": 366}[m.group(1)]
        ti.window = (_day_start(today - dt.timedelta(days=unit)), now)
        ti.phrase = m.group(0)
        return ti
    m = re.search(rf"\bin\s+({_MON_RE})\s+(\d{{4}})\b", q)
    if m:
        mon, year = _month_of(m.group(1)), int(m.group(2))
        start = _day_start(dt.date(year, mon, 1))
        end = _day_start(dt.date(year + (mon == 12), mon % 12 + 1, 1))
        ti.window = (start, end)
        ti.phrase = m.group(0)
    return ti
