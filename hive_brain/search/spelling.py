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
so ("laod" is no "lao" + "d", "sumer" no "sum" + "er"). Short words are left alone (a 3-letter
word is one edit from dozens of others), and so is anything that is no plain lower-case word
(identifiers, paths, versions, CJK): a name the vault lacks is more often a name than a typo. No new
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

MIN_CHARS = 4  # shorter words are left as typed
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


@functools.lru_cache(maxsize=1)
def _english() -> frozenset[str]:
    from ..embedding.vocab import RERANK_VOCAB

    try:
        lines = RERANK_VOCAB.read_text(encoding="utf-8").split()
    except OSError:
        return frozenset()
    return frozenset(w for w in lines if w.isalpha())


def english(word: str) -> bool:
    """``word`` (lower case) is an English word or one with an ordinary ending ("parses", "testers")."""
    vocab = _english()
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
        best = _at_hand(low, lexical)
        if best is None and looked < MAX_LOOKUPS:
            looked += 1
            best = _nearest(low, term, lexical)
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
    (repeats too): not stop words, not English, not in the index."""
    for m in _WORD.finditer(text):
        word = m.group(0)
        low = word.lower()
        if len(low) < MIN_CHARS or not low.isalpha() or (word != low and not word.istitle()):
            continue
        terms = query_terms(low)
        if len(terms) != 1 or english(low) or lexical.known(terms[0]):
            continue  # a stop word, an English word, or a word the vault has
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


def could_respell(lexical: Any, word: str, term: str, terms: set[str], where: Any) -> bool:
    """Whether reading ``word`` (:func:`_at_hand`, then the lookup :func:`_nearest` with each of its
    :func:`_probes`) could meet one of ``terms`` (of notes not indexed yet) or a passage that ``where``
    selects in the index (their versions indexed now): if so, indexing those notes may change how the
    word is read. Distances with one edit to spare over the index's automaton."""
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
    ranked = sorted(((min(edits(word, w, most), edits(term, _stem(w), most)), typing_cost(word, w), -n, w)
                     for w, n in seen.items()
                     if len(w) >= MIN_CHARS - 1 and w != word and edits(word, w, most + 1) <= most + 1),
                    key=lambda x: x[:3])
    if not ranked or ranked[0][0] > most:
        return None
    return ranked[0][3]
