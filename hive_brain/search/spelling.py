"""A mistyped word read as the vault spells it (issue 29): "how do i get a biuld to the testrs" asks
what "how do I get a build to the testers" asks.

Only a word the vault has never seen is touched (its analyzed term is in no passage's text or title),
and only when it is no English word either (bert-base-uncased's whole-word vocabulary, shipped for the
second model, with a plural or verb ending taken off): "give" and "sort" in a vault without them are
the user's words, and one edit from "live" and "port". Its replacement is a word the
vault itself holds or a stop word, cheapest slip first (:func:`_at_hand`, no automaton): a stop word
one swap of two neighbouring letters away ("waht" is "what", though the vault only has "wait"), the
vault's word one swap away ("tset" is "test", not "set"), a stop word one other edit away ("aftr").
Else it is found through tantivy's Levenshtein automaton over the term dictionary
(:meth:`LexicalIndex.near_texts`) and chosen on the surface forms: the fewest edits (a swap of two
letters is one), then the likelier slip (:func:`typing_cost`: "sumer" is "summer", not "super"), then
the word more of those passages use. An ending makes an English word only where English writes it
so ("laod" is no "lao" + "d", "sumer" no "sum" + "er"). A word of two or three letters is one edit
from dozens of others, so it is read by a stricter rule (:func:`_short`): only one of the two
commonest slips explains it (two neighbours swapped, a letter doubled or undoubled: "rnu", "og",
"wek"), only as a word the vault holds (or a stop word one swap away: "teh"), only when one reading
clearly leads on the vault's counts, and never when it is a common English word (the vocabulary's
:data:`COMMON_RANK` commonest), an abbreviation (no vowel: "vm", "db") or a rarer word than its
reading (a vocabulary word is read only as one English uses :data:`SHORT_RATIO` times as often: "io",
"ci" stay). A reading keeps the form the user typed (:func:`_as_typed`: "sytem" is "system" though the
vault only says "systems"). Anything that is no plain lower-case word (identifiers, paths, versions,
CJK) is left alone: a name the vault lacks is more often a name than a typo. No new
index and no model: a few term counts, and one automaton query per unknown word no swap explains, on
the hook's path too.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ..index.textproc import STOP_WORDS, query_terms

MIN_CHARS = 4  # shorter words are read by the stricter rule of _short
SHORT_CHARS = 2  # a single letter is left as typed
# The vocabulary lists its whole words in order of frequency in its corpus (from "the" at line 1,997):
# a short word above this line is common English ("son", "dad", "cup", "sue"), one below it a rare
# word, a name or an abbreviation ("cal", "og", "io").
COMMON_RANK = 10_000
SHORT_RATIO = 3  # a rare short word is read only as a word at least this many times commoner (by rank)
LONG_CHARS = 8  # from this length two edits are allowed, one below
MAX_LOOKUPS = 4  # unknown words looked up per question (a pasted log is mostly names the vault lacks)
MAX_WORDS = 12  # unknown words read at all per question (the swaps and stop words, no lookup)
NEAR_PASSAGES = 8  # passages read for the vault's spelling of one word

_WORD = re.compile(r"(?<![\w./@#-])[A-Za-z]+(?:'[a-z]+)?(?![\w/@#-]|\.\w)")
_SURFACE = re.compile(r"[a-z]+")


_ENDINGS = ("s", "es", "ed", "d", "ing", "ly", "er", "ers")
_DOUBLING = ("ed", "er", "ers", "ing")
_VOWELS = re.compile(r"[aeiou]+")
_CVC = re.compile(r"[^aeiou][aeiou][^aeiouwxy]$")
# The stop words a typo is read as before any vault word (the index holds none of them): "waht" is
# "what", not the vault's "wait"; "aftr" is "after", not "attr".
_STOPS = frozenset(w for w in STOP_WORDS if w.isalpha() and len(w) >= MIN_CHARS)
_SHORT_STOPS = frozenset(w for w in STOP_WORDS if w.isalpha() and len(w) >= SHORT_CHARS)
_VOWEL = re.compile(r"[aeiouy]")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@functools.lru_cache(maxsize=1)
def _ranks() -> dict[str, int]:
    """The vocabulary's whole words and their line numbers (the commoner, the lower)."""
    from ..embedding.vocab import RERANK_VOCAB

    try:
        lines = RERANK_VOCAB.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    return {w: n for n, w in enumerate(lines, 1) if w.isalpha()}


def english(word: str) -> bool:
    """``word`` (lower case) is an English word or one with an ordinary ending ("parses", "testers")."""
    vocab = _ranks()
    return word in vocab or any(word.endswith(e) and word[: -len(e)] in vocab and _inflects(word[: -len(e)], e)
                                for e in _ENDINGS if len(word) - len(e) >= MIN_CHARS - 1)


def _inflects(stem: str, ending: str) -> bool:
    """Whether English writes ``stem`` + ``ending`` so: "-d" only after an "e" ("used"; "laod" is no
    "lao" + "d"), and a stem of one syllable ending consonant-vowel-consonant doubles its last letter
    before "-ed", "-er", "-ing" ("summer", "stopped"; "sumer" is no "sum" + "er")."""
    if ending == "d":
        return stem.endswith("e")
    if ending in _DOUBLING:
        return not (len(_VOWELS.findall(stem)) == 1 and _CVC.search(stem))
    return True


def edits(a: str, b: str, most: int) -> int:
    """Optimal-string-alignment distance (insert, delete, substitute, swap two neighbours), or
    ``most + 1`` once it is certainly above ``most``."""
    if abs(len(a) - len(b)) > most:
        return most + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > most:
            return most + 1
        prev2, prev = prev, cur
    return prev[-1]


def typing_cost(typed: str, meant: str) -> int:
    """The edits from ``meant`` to ``typed`` weighed by how often fingers make them, in half edits: a
    swap of two neighbours, or a letter doubled or undoubled beside itself, costs 1, any other edit 2."""

    def slip(w: str, k: int) -> int:  # w[k] added or dropped: cheap beside the same letter
        return 1 if (k > 0 and w[k - 1] == w[k]) or (k + 1 < len(w) and w[k + 1] == w[k]) else 2

    prev2: list[int] = []
    prev = [0]
    for j in range(len(meant)):
        prev.append(prev[-1] + slip(meant, j))
    for i in range(1, len(typed) + 1):
        cur = [prev[0] + slip(typed, i - 1)] + [0] * len(meant)
        for j in range(1, len(meant) + 1):
            cur[j] = min(prev[j] + slip(typed, i - 1), cur[j - 1] + slip(meant, j - 1),
                         prev[j - 1] + 2 * (typed[i - 1] != meant[j - 1]))
            if i > 1 and j > 1 and typed[i - 1] == meant[j - 2] and typed[i - 2] == meant[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def correct(lexical: Any, text: str) -> tuple[str, dict[str, str]]:
    """``text`` with each word the vault lacks replaced by the vault's nearest spelling of it, and
    what was replaced (typed -> used). ``lexical``: the view's :class:`LexicalIndex` (None: as typed)."""
    if lexical is None or not text or not hasattr(lexical, "near_texts"):
        return text, {}
    fixes: dict[str, str] = {}
    read: set[str] = set()
    looked = 0
    for low, term in unknown_words(lexical, text):
        if low in read:
            continue
        if len(read) >= MAX_WORDS:
            break
        read.add(low)
        if len(low) < MIN_CHARS:
            best = _short(low, lexical)
        else:
            best = _at_hand(low, lexical)
            if best is None and looked < MAX_LOOKUPS:
                looked += 1
                best = _nearest(low, term, lexical)
            if best and best not in _STOPS:
                best = _as_typed(low, best)
        if best:
            fixes[low] = best
    if not fixes:
        return text, {}

    def sub(m: re.Match[str]) -> str:
        w = m.group(0)
        return fixes.get(w.lower(), w)

    return _WORD.sub(sub, text), fixes


def unknown_words(lexical: Any, text: str) -> Iterator[tuple[str, str]]:
    """The words of ``text`` that :func:`correct` may look up, each with its term, in text order
    (repeats too): not stop words, not English (of two or three letters: :func:`_rare`), not in the index."""
    for m in _WORD.finditer(text):
        word = m.group(0)
        low = word.lower()
        if len(low) < SHORT_CHARS or not low.isalpha() or (word != low and not word.istitle()):
            continue
        if not (_rare(low) if len(low) < MIN_CHARS else not english(low)):
            continue  # an English word, or a short word that is common or an abbreviation
        terms = query_terms(low)
        if len(terms) != 1 or lexical.known(terms[0]):
            continue  # a stop word, or a word the vault has
        yield low, terms[0]


def _most(word: str) -> int:
    """The edits a lookup allows: two from ``LONG_CHARS`` letters, one below."""
    return 2 if len(word) >= LONG_CHARS else 1


def _swaps(word: str) -> list[tuple[str, str]]:
    """``word`` with two neighbouring letters swapped (the commonest slip), each way it can be, with
    its term ("" for a stop word or more than one term)."""
    out = []
    for i in range(len(word) - 1):
        if word[i] != word[i + 1]:
            w = word[:i] + word[i + 1] + word[i] + word[i + 2:]
            terms = query_terms(w)
            out.append((w, terms[0] if len(terms) == 1 else ""))
    return out


def _stop_word(word: str, swaps: list[tuple[str, str]], *, swapped: bool) -> str | None:
    """The stop word ``word`` mistypes: one swap from it (``swapped``), else one other edit."""
    if swapped:
        return next((w for w, _t in swaps if w in _STOPS), None)
    return next((s for s in sorted(_STOPS) if edits(word, s, 1) == 1), None)


def _at_hand(word: str, lexical: Any) -> str | None:
    """How ``word`` reads with no lookup of the index's automaton, cheapest edit first: a stop word
    one swap away ("waht", "shuold"), else the vault's word one swap away that more passages hold
    ("lcoal" is "local", not "locale", its stem one edit away; "tset" is "test", not "set"; "stagign"
    is "staging", whose stem "stage" is three edits away), else a stop word one other edit away
    ("aftr"). None: look it up."""
    swaps = _swaps(word)
    stop = _stop_word(word, swaps, swapped=True)
    if stop:
        return stop
    known = [(n, w) for w, t in swaps if t and (n := lexical.frequency(t))]
    if known:
        return max(known)[1]
    return _stop_word(word, swaps, swapped=False)


def _rare(word: str) -> bool:
    """A short word :func:`_short` may read: it has a vowel (no abbreviation: "vm", "db", "npm")
    and is no common English word."""
    return bool(_VOWEL.search(word)) and _ranks().get(word, COMMON_RANK) >= COMMON_RANK


def _slips(word: str) -> list[tuple[str, str]]:
    """``word`` after one of the cheapest slips (:func:`typing_cost` 1) undone: two neighbours
    swapped, a letter doubled or undoubled; each with its term ("" for a stop word or more than one)."""
    out = dict(_swaps(word))
    for i, c in enumerate(word):
        for w in (word[:i] + c + word[i:], word[:i] + word[i + 1:] if word[i + 1: i + 2] == c else ""):
            if len(w) >= SHORT_CHARS and w not in out:
                terms = query_terms(w)
                out[w] = terms[0] if len(terms) == 1 else ""
    return list(out.items())


def _commoner(word: str, reading: str) -> bool:
    """``reading`` is an English word likelier than ``word`` itself: ``word`` is in no vocabulary,
    or ``reading`` is one English uses :data:`SHORT_RATIO` times as often (by their ranks). A reading
    the vocabulary lacks is no English word but the vault's own name ("etl" is no slip of "elt")."""
    ranks = _ranks()
    return reading in ranks and (word not in ranks or ranks[word] >= SHORT_RATIO * ranks[reading])


def _short_stop(word: str) -> str | None:
    """The stop word one swap from a short ``word`` and commoner than it ("teh" is "the")."""
    return next((w for w, _t in _swaps(word) if w in _SHORT_STOPS and _commoner(word, w)), None)


def _short(word: str, lexical: Any) -> str | None:
    """How a rare short word (:func:`_rare`) reads, or None: a stop word one swap away ("teh"), else
    the vault's word one of the cheapest slips away (:func:`_slips`: "rnu" is "run", "og" "go", "wek"
    "week") that is commoner than the word typed (:func:`_commoner`) and held by at least twice as
    many passages as any other such reading (at three letters a slip has several readings, and a
    close second means the typed word does not say which)."""
    stop = _short_stop(word)
    if stop:
        return stop
    known = sorted(((n, w) for w, t in _slips(word) if t and _commoner(word, w) and (n := lexical.frequency(t))),
                   reverse=True)
    if not known or (len(known) > 1 and known[0][0] < 2 * known[1][0]):
        return None
    return known[0][1]


def could_respell(lexical: Any, word: str, term: str, terms: set[str], where: Any) -> bool:
    """Whether reading ``word`` (:func:`_at_hand`, then the lookup :func:`_nearest` with each of its
    :func:`_probes`) could meet one of ``terms`` (of notes not indexed yet) or a passage that ``where``
    selects in the index (their versions indexed now): if so, indexing those notes may change how the
    word is read. Distances with one edit to spare over the index's automaton."""
    if len(word) < MIN_CHARS:
        if _short_stop(word):
            return False  # read as the stop word whatever the notes hold
        slipped = [t for w, t in _slips(word) if t and _commoner(word, w)]
        return bool(set(slipped) & terms) or any(lexical.near_texts(t, 0, 1, where=where) for t in slipped)
    swaps = _swaps(word)
    if _stop_word(word, swaps, swapped=True):
        return False  # read as the stop word whatever the notes hold
    swapped = [t for _w, t in swaps if t]
    if set(swapped) & terms or any(lexical.near_texts(t, 0, 1, where=where) for t in swapped):
        return True
    if _stop_word(word, swaps, swapped=False):
        return False
    probes = _probes(word, term)
    if any(lexical.near_texts(probe, d, 1, prefix=prefix, where=where) for probe, d, prefix in probes):
        return True
    for t in terms:
        for probe, d, prefix in probes:
            if prefix and any(edits(probe, t[:k], d + 1) <= d + 1 for k in range(len(probe) - 1, len(probe) + 2)):
                return True
            if not prefix and abs(len(t) - len(probe)) <= d + 1 and edits(probe, t, d + 1) <= d + 1:
                return True
    return False


def _probes(word: str, term: str) -> list[tuple[str, int, bool]]:
    """The index searches a lookup of ``word`` makes, in order, as (text, edits, prefix): its term
    within :func:`_most` edits; for a long word, when that finds nothing, its beginning as a prefix
    within one edit (the index holds stems: "migratoin" is three edits from "migrat" but one from
    "migration", and a term beginning near the word's beginning finds the passages that spell it)."""
    probes = [(term, _most(word), False)]
    if len(word) > MIN_CHARS + 2:
        probes.append((word[: len(word) - 3], 1, True))
    return probes


def _one_edit(word: str) -> set[str]:
    """Every string one edit (:func:`edits`) from ``word``."""
    out = set()
    for i in range(len(word) + 1):
        head, tail = word[:i], word[i:]
        if tail:
            out.add(head + tail[1:])
        if len(tail) > 1:
            out.add(head + tail[1] + tail[0] + tail[2:])
        for c in _LETTERS:
            out.add(head + c + tail)
            if tail:
                out.add(head + c + tail[1:])
    out.discard(word)
    return out


def _as_typed(word: str, reading: str) -> str:
    """``reading`` in the form the user typed: the English word one edit from ``word`` with the
    reading's stem, when it is the likelier slip (:func:`typing_cost`). The vault's surface form
    carries the vault's ending ("sytem" met "systems", "gradualy" met "gradual"); the index reads the
    stem either way, but both models read the words, and the user asked about one "system", "gradually"."""
    stem = _stem(reading)
    ranks = _ranks()
    forms = sorted((typing_cost(word, f), f) for f in _one_edit(word) if f in ranks and f != reading and _stem(f) == stem)
    return forms[0][1] if forms and forms[0][0] < typing_cost(word, reading) else reading


def _stem(word: str) -> str:
    terms = query_terms(word)
    return terms[0] if len(terms) == 1 else word


def _nearest(word: str, term: str, lexical: Any) -> str | None:
    """The vault's word nearest ``word``: fewest edits, then most passages using it; None when no
    word is within :func:`_most` edits (the automaton matched a stem, the surface forms are compared)."""
    most = _most(word)
    seen: Counter[str] = Counter()
    for probe, d, prefix in _probes(word, term):
        if seen:
            break
        for t in lexical.near_texts(probe, d, NEAR_PASSAGES, prefix=prefix):
            seen.update(set(_SURFACE.findall(t.lower())))
    # On the stems too: "mesage" is two edits from the vault's "messages", one from its stem "messag".
    # The surface forms stay within one edit more than that: stems alone made "beginner" (stem
    # "beginn") two edits from "region", four apart as written.
    # Equal edits go to the likelier slip as typed (:func:`typing_cost`): "sumer" is "summer", not "super".
    # A full tie goes by spelling, not by the order of a set (each process's hash seed: "logz" was "log"
    # in one process and "logs" in the next).
    ranked = sorted((min(edits(word, w, most), edits(term, _stem(w), most)), typing_cost(word, w), -n, w)
                    for w, n in seen.items()
                    if len(w) >= MIN_CHARS - 1 and w != word and edits(word, w, most + 1) <= most + 1)
    if not ranked or ranked[0][0] > most:
        return None
    return ranked[0][3]
