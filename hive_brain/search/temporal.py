"""Temporal words in a question: history intent, an "as of" cutoff, or a date window.

Only phrases about *when* change recall; a date inside a title or "before" in a procedure step
("run tests before pushing") does not (the patterns require a date-like object after the word).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

HISTORY = re.compile(
    r"\b(used to|previously|historically|historical|history of|in the past|formerly|originally|earlier version"
    r"|before (?:we|i|they) (?:switched|moved|changed)|what did we use"
    # "what did we use before bun", "the tool we had before pnpm": before a name, not a date
    r"|(?:use|used|using|had|have|ran|run)\s+before\s+(?!\d)[a-z])", re.I)
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"], 1)}
_MON_RE = "|".join(list(_MONTHS) + [m[:3] for m in _MONTHS] + ["sept"])
_DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
        "nine": 9, "ten": 10, "couple of": 2, "few": 3}
_ISO = r"(\d{4}-\d{2}-\d{2}|\d{4}/\d{2}/\d{2})"
# Written dates, as people (and the LoCoMo questions) type them: "13 October, 2023", "Oct 13 2023".
_DMY = rf"(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MON_RE})\b\.?,?\s+(?P<y>\d{{4}})"
_MDY = rf"(?P<mon>{_MON_RE})\b\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})"
# The same without a year ("on May 3", "3rd of June"): the most recent such day.
_DM = rf"(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MON_RE})\b(?!\.?,?\s*\d)"
_MD = rf"(?P<mon>{_MON_RE})\b\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b(?!,?\s*\d)"
# Any of the above as one capture group (their named groups made anonymous); `_parse_date` reads it.
_DATE = r"(?:the\s+)?(" + "|".join(re.sub(r"\(\?P<\w+>", "(?:", x) for x in (_ISO[1:-1], _DMY, _MDY, _DM, _MD)) + ")"
_ORD = {"first": 0, "second": 1, "third": 2, "fourth": 3}
_PART = r"(beginning|start|early|end|late|middle|mid|first half|second half|(?:first|second|third|fourth|last) (?:week|weekend))"
_SEASONS = {"spring": (3, 6), "summer": (6, 9), "fall": (9, 12), "autumn": (9, 12), "winter": (12, 15)}
_SPAN_DAYS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "weekend": 3, "month": 31, "months": 31}


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


def _parse_date(s: str, today: dt.date) -> dt.date | None:
    """An ISO date or a written one ("October 13, 2023", "13 Oct 2023", "1st February, 2023"); without
    a year ("May 3") the most recent such day up to today."""
    s = s.strip().lower()
    try:
        if re.fullmatch(_ISO, s):
            return dt.date.fromisoformat(s.replace("/", "-"))
        m = re.fullmatch(_DMY, s) or re.fullmatch(_MDY, s)
        if m is not None:
            return dt.date(int(m["y"]), _month_of(m["mon"]), int(m["d"]))
        m = re.fullmatch(_DM, s) or re.fullmatch(_MD, s)
        if m is None:
            return None
        mon, day = _month_of(m["mon"]), int(m["d"])
        d = dt.date(today.year, mon, day)
        return d if d <= today else dt.date(today.year - 1, mon, day)
    except ValueError:
        return None


def _month_span(mon: int, year: int) -> tuple[dt.date, dt.date]:
    start = dt.date(year, mon, 1)
    return start, dt.date(year + (mon == 12), mon % 12 + 1, 1)


def _part_of_month(part: str, mon: int, year: int) -> tuple[dt.date, dt.date]:
    """"first weekend", "end", "second half"... of a month, as [start, end) dates."""
    start, end = _month_span(mon, year)
    if part in ("beginning", "start", "early"):
        return start, start + dt.timedelta(days=10)
    if part in ("end", "late"):
        return end - dt.timedelta(days=10), end
    if part in ("middle", "mid"):
        return start + dt.timedelta(days=9), start + dt.timedelta(days=21)
    if part.endswith("half"):
        return (start, start + dt.timedelta(days=15)) if part.startswith("first") else (start + dt.timedelta(days=15), end)
    which, unit = part.split()
    if unit == "weekend":
        sat = start + dt.timedelta(days=(5 - start.weekday()) % 7)
        weekends = [sat + dt.timedelta(days=7 * i) for i in range(5) if (sat + dt.timedelta(days=7 * i)).month == mon]
        d = weekends[-1] if which == "last" else weekends[min(_ORD[which], len(weekends) - 1)]
        return d, d + dt.timedelta(days=2)
    if which == "last":
        return end - dt.timedelta(days=7), end
    d = start + dt.timedelta(days=7 * _ORD[which])
    return d, min(end, d + dt.timedelta(days=7))


_PAST = re.compile(r"\b(?:did|was|were|had|said|told|went|saw|got|made|met|took)\b|\b\w{3,}ed\b")


def about_the_past(text: str) -> bool:
    """ "What did we decide", "what happened", "who was there": a question about what was."""
    return _PAST.search(text.lower()) is not None


def is_relative(phrase: str) -> bool:
    """"two weeks ago", "last Saturday", "yesterday": no calendar date written out (no digit, no month)."""
    return re.search(rf"\d|\b(?:{_MON_RE})\b", phrase, re.I) is None


def parse(question: str, now: dt.datetime | None = None) -> TimeIntent:
    now = now or dt.datetime.now(dt.UTC)
    today = now.date()
    q = question.lower()
    ti = TimeIntent(history=bool(HISTORY.search(q)))

    def window(a: dt.date, b: dt.date | dt.datetime, phrase: str) -> TimeIntent:
        ti.window = (_day_start(a), b if isinstance(b, dt.datetime) else _day_start(b))
        ti.phrase = phrase
        return ti

    m = re.search(r"\b(?:as of|as at|at the time of)\s+" + _DATE, q)
    if m and (d := _parse_date(m.group(1), today)):
        ti.cutoff = _day_start(d) + dt.timedelta(days=1) - dt.timedelta(seconds=1)
        ti.phrase = m.group(0)
        return ti
    # "as of June 2025", "as of 2025-03", "as of 2024": as things stood at the end of that month or year.
    m = re.search(rf"\b(?:as of|as at|at the time of)\s+(?:(?:the\s+)?(?:end\s+of\s+)?({_MON_RE})\b\.?,?\s+(\d{{4}})"
                  r"|(\d{4})-(\d{1,2})(?!-?\d)|((?:19|20)\d{2})(?![-/\d]))", q)
    if m:
        if m.group(1):
            end = _month_span(_month_of(m.group(1)), int(m.group(2)))[1]
        elif m.group(3) and 1 <= int(m.group(4)) <= 12:
            end = _month_span(int(m.group(4)), int(m.group(3)))[1]
        elif m.group(5):
            end = dt.date(int(m.group(5)) + 1, 1, 1)
        else:
            end = None
        if end is not None:
            ti.cutoff = _day_start(end) - dt.timedelta(seconds=1)
            ti.phrase = m.group(0)
            return ti
    # "the week before August 3, 2023" names a span that ends at the date, not a cutoff.
    m = re.search(r"\b(?:(\d+|a|an|one|two|three|four|couple of|few)\s+)?(days?|weeks?|weekend|months?)\s+before\s+" + _DATE, q)
    if m and (d := _parse_date(m.group(3), today)):
        n = 1 if not m.group(1) else int(m.group(1)) if m.group(1).isdigit() else _NUM[m.group(1)]
        return window(d - dt.timedelta(days=n * _SPAN_DAYS[m.group(2)]), d + dt.timedelta(days=1), m.group(0))
    m = re.search(r"\b(before|until|prior to)\s+" + _DATE, q)
    if m and (d := _parse_date(m.group(2), today)):
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
    m = re.search(r"\b(?:on|since|from)\s+" + _DATE, q)
    if m and (d := _parse_date(m.group(1), today)):
        return window(d, d + dt.timedelta(days=1) if m.group(0).startswith("on") else now, m.group(0))
    m = re.search(r"\b(?:last|this past)\s+(" + "|".join(_DAYS) + r")\b", q)
    # "what did we decide on Friday" means the last one; "let's deploy on Monday" names no past day.
    m = m or (re.search(r"\bon\s+(" + "|".join(_DAYS) + r")\b", q) if about_the_past(q) else None)
    if m:
        wd = _DAYS.index(m.group(1))
        d = today - dt.timedelta(days=(today.weekday() - wd) % 7 or 7)
        return window(d, d + dt.timedelta(days=1), m.group(0))
    m = re.search(r"\b(yesterday|today)\b", q)
    if m:
        d = today - dt.timedelta(days=1 if m.group(1) == "yesterday" else 0)
        return window(d, d + dt.timedelta(days=1), m.group(0))
    m = re.search(r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few)\s+(day|week|month|year)s?\s+ago\b", q)
    if m:
        n = int(m.group(1)) if m.group(1).isdigit() else _NUM[m.group(1)]
        unit = {"day": 1, "week": 7, "month": 30, "year": 365}[m.group(2)]
        center = today - dt.timedelta(days=n * unit)
        half = max(1, unit // 2 if unit > 1 else 1)
        # "Ago" is before today: the margin never reaches into it (with "1 day ago" it did, and the
        # memories written today sat inside the window beside yesterday's notes).
        end = min(center + dt.timedelta(days=half + 1), max(today, center + dt.timedelta(days=1)))
        return window(center - dt.timedelta(days=half), end, m.group(0))
    m = re.search(r"\blast\s+(week|month|year)\b(?!\s+of)", q)
    if m:
        unit = {"week": 7, "month": 31, "year": 366}[m.group(1)]
        return window(today - dt.timedelta(days=unit), now, m.group(0))
    m = re.search(rf"\b(?:the\s+)?{_PART}\s+of\s+({_MON_RE})\b,?\s+(\d{{4}})\b", q)
    if m:
        a, b = _part_of_month(m.group(1), _month_of(m.group(2)), int(m.group(3)))
        return window(a, b, m.group(0))
    # A bare date ("Deploy checklist 2024-05-01") is a name, not a time: only a preposition makes it one.
    m = re.search(rf"\b(?:in|during)\s+({_MON_RE})\b(?:,?\s+(\d{{4}})\b)?", q)
    if m:
        mon = _month_of(m.group(1))
        year = int(m.group(2)) if m.group(2) else (today.year if mon <= today.month else today.year - 1)
        a, b = _month_span(mon, year)
        return window(a, b, m.group(0))
    m = re.search(r"\b(spring|summer|fall|autumn|winter)\s+(?:of\s+)?(\d{4})\b", q)
    if m:
        a_mon, b_mon = _SEASONS[m.group(1)]
        year = int(m.group(2))
        return window(dt.date(year, a_mon, 1), dt.date(year + (b_mon > 12), (b_mon - 1) % 12 + 1, 1), m.group(0))
    m = re.search(r"\b(?:in|during|throughout)\s+(?:the\s+year\s+)?((?:19|20)\d{2})\b", q)
    if m:
        year = int(m.group(1))
        return window(dt.date(year, 1, 1), dt.date(year + 1, 1, 1), m.group(0))
    return ti
