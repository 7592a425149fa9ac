"""Text analysis shared by indexing and querying (DESIGN "Recall": CJK, accent folding, stemming).

The lexical index stores the *output* of :func:`analyze` joined by spaces in fields that tantivy
splits on whitespace only, and queries are built from :func:`query_terms` of the same function, so
index-time and query-time analysis cannot drift apart. Any change to the output of ``analyze``
must bump :data:`ANALYZER_VERSION` (the lexical index refuses to mix versions).

Rules, in order:

* NFKC (full-width letters, ligatures) and, for Latin/Greek letters only, accent folding
  (``café`` -> ``cafe``, ``Ångström`` -> ``angstrom``, ``ß`` -> ``ss``). Folding is never applied to
  kana or Hangul: stripping the dakuten from ``が`` or decomposing Hangul syllables would change words.
* Han, kana and Hangul (and Thai, Lao, Khmer, Myanmar, which are also written without spaces) are
  emitted as character unigrams *and* overlapping bigrams, so words are found without a dictionary
  and a long unspaced run never becomes one oversized token (tantivy's default tokenizer silently
  drops tokens over 40 bytes; here no run is dropped).
* Other words: split on non-word characters; ``snake_case`` and ``camelCase`` identifiers yield
  their parts plus the joined identifier (an exact-identifier match then scores higher);
  English stop words removed; Snowball English stem for ASCII-letter words; numbers kept.
* Terms are capped at :data:`MAX_TERM_CHARS` (same cap on both sides, so a long hash or blob is
  still matched by its prefix instead of being dropped by the index).

Speed: one ``re.findall`` over the text and one dict lookup per token; the expensive per-token work
(folding, stop words, Snowball at ~20 us/word) runs once per distinct token and is cached.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata

import snowballstemmer

ANALYZER_VERSION = 1
MAX_TERM_CHARS = 64

# Scripts written without spaces between words: bigram + unigram analysis.
_SEGMENTLESS = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1100-\u11ff"  # Hangul Jamo
    "\u1780-\u17ff"  # Khmer
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u3005-\u3007"  # 々 〆 〇
    "\u3040-\u30ff"  # Hiragana, Katakana (incl. ー)
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7af"  # Hangul syllables
    "\ud7b0-\ud7ff"  # Hangul Jamo extended B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width katakana (NFKC usually maps these already)
    "\U00020000-\U0003134f"  # CJK extensions B..G
)
# Marks that belong inside a word: Python's \w does not match combining marks, so without these
# Hindi, Hebrew or Thai words with vowel signs would be cut into fragments.
_WORD_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
    "\u0900-\u0dff\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3099\u309a"
)
_WORD = rf"(?:\w|[{_WORD_MARKS}])"
# A token: letters, digits, marks, underscores, with inner apostrophes kept so the stemmer can strip
# possessives ("user's" -> "user"). CJK runs are tokens here too and are split into script runs
# afterwards: a character class over all the CJK ranges costs ~2 ms to compile, which every
# English-only process (the hook path) would pay at import, so it is compiled on first use.
_TOKEN_RE = re.compile(rf"{_WORD}+(?:['\u2019]{_WORD}+)*")
_FIRST_SEGMENTLESS = "\u0e00"  # no segmentless character sorts below this
_seg_re: tuple[re.Pattern[str], re.Pattern[str]] | None = None


def _seg() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(one segmentless character, alternating runs of segmentless / other characters)."""
    global _seg_re
    if _seg_re is None:
        _seg_re = (re.compile(f"[{_SEGMENTLESS}]"), re.compile(f"[{_SEGMENTLESS}]+|[^{_SEGMENTLESS}]+"))
    return _seg_re


_CAMEL_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+|[^A-Za-z0-9]+")

# English stop words (the usual Snowball/NLTK list plus contractions without apostrophes).
_STOP_WORDS_TEXT = """
    a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here
    here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
    let's me more most mustn't my myself no nor not of off on once only or other ought our ours ourselves
    out over own same shan't she she'd she'll she's should shouldn't so some such than that that's the
    their theirs them themselves then there there's these they they'd they'll they're they've this those
    through to too under until up very was wasn't we we'd we'll we're we've were weren't what what's when
    when's where where's which while who who's whom why why's will with won't would wouldn't you you'd
    you'll you're you've your yours yourself yourselves
    s t d ll m re ve dont doesnt didnt isnt arent wasnt werent cant couldnt wont wouldnt shouldnt im ive
    youre theyre thats whats lets hes shes
"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORDS_TEXT.split())


def _build_fold_table() -> dict[int, str | None]:
    """Latin and Greek letters -> unaccented base letters (case kept, so camelCase still splits)."""
    special = {
        "ß": "ss", "ẞ": "SS", "æ": "ae", "Æ": "Ae", "œ": "oe", "Œ": "Oe", "ø": "o", "Ø": "O",
        "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "þ": "th", "Þ": "Th", "ł": "l", "Ł": "L",
        "ı": "i", "ħ": "h", "Ħ": "H", "ŋ": "n", "Ŋ": "N", "ſ": "s", "ƒ": "f",
        "\u2019": "'", "\u02bc": "'",
    }
    table: dict[int, str | None] = {cp: None for cp in range(0x300, 0x370)}
    ranges = [(0xC0, 0x250), (0x370, 0x400), (0x1E00, 0x1F00), (0x1F00, 0x2000)]
    for lo, hi in ranges:
        for cp in range(lo, hi):
            ch = chr(cp)
            if ch in special:
                continue
            base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
            if base and base != ch:
                table[cp] = base
    for ch, rep in special.items():
        table[ord(ch)] = rep
    return table


_FOLD = _build_fold_table()
_stem = snowballstemmer.stemmer("english").stemWord

# raw token -> analyzed terms; bounded so a vault full of hashes cannot grow it without limit.
_CACHE: dict[str, tuple[str, ...]] = {}
_CACHE_PARTS: dict[str, tuple[str, ...]] = {}  # same, without joined identifiers (content_words)
_CACHE_MAX = 300_000
_EMPTY: tuple[str, ...] = ()


def _word(tok: str) -> str | None:
    """One folded, lowercase word -> its term, or None for a stop word."""
    if tok in STOP_WORDS:
        return None
    if "'" in tok:
        if tok.isascii():
            tok = _stem(tok)
        tok = tok.replace("'", "")
        if not tok or tok in STOP_WORDS:
            return None
    elif tok.isalpha() and tok.isascii():
        tok = _stem(tok)
    return tok[:MAX_TERM_CHARS]


def _segmentless(run: str, bigrams: bool) -> list[str]:
    out = list(run)
    if bigrams and len(run) > 1:
        out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def _token(tok: str, compounds: bool) -> tuple[str, ...]:
    if not tok.isascii():
        tok = tok.replace("\u2019", "'").translate(_FOLD)
    if "_" not in tok and (tok.islower() or tok.isupper() or not tok.isalnum() or tok.isdigit()):
        # Plain word (or an all-caps acronym, or one with apostrophes): the common case.
        t = _word(tok.lower())
        return (t,) if t else _EMPTY
    parts: list[str] = []
    for piece in tok.split("_"):
        if not piece:
            continue
        if piece.islower() or piece.isupper() or "'" in piece:
            parts.append(piece)
        else:
            parts.extend(p for p in _CAMEL_RE.findall(piece) if p)
    out = [t for t in (_word(p.lower()) for p in parts) if t]
    if compounds and len(parts) > 1:
        out.append(tok.strip("_").lower()[:MAX_TERM_CHARS])
    return tuple(out)


def _clean(text: str) -> str:
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates cannot cross into tantivy (Rust strings); a raw prompt may contain them.
        text = text.encode("utf-8", "replace").decode("utf-8")
    return unicodedata.normalize("NFKC", text)


def _analyze(text: str, *, bigrams: bool, compounds: bool) -> list[str]:
    if not text:
        return []
    text = _clean(text)
    out: list[str] = []
    extend = out.extend
    cache = _CACHE if compounds else _CACHE_PARTS
    for tok in _TOKEN_RE.findall(text):
        hit = cache.get(tok)
        if hit is not None:
            extend(hit)
            continue
        if not tok.isascii() and max(tok) >= _FIRST_SEGMENTLESS:
            one, runs = _seg()
            if one.search(tok):
                # Tokens with CJK are long and rarely repeat: not worth caching.
                for run in runs.findall(tok):
                    if one.match(run):
                        extend(_segmentless(run, bigrams))
                    else:
                        extend(_token_cached(run, compounds, cache))
                continue
        res = _token(tok, compounds)
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        cache[tok] = res
        extend(res)
    return out


def _token_cached(tok: str, compounds: bool, cache: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    res = cache.get(tok)
    if res is None:
        res = _token(tok, compounds) if tok.strip("'\u2019_") else _EMPTY
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        cache[tok] = res
    return res


def analyze(text: str) -> list[str]:
    """Index-time analysis: the list of terms (with repeats, in text order) for ``text``."""
    if not isinstance(text, str):
        return []
    return _analyze(text, bigrams=True, compounds=True)


def analyze_joined(text: str) -> str:
    """``analyze`` joined by single spaces: what the lexical index feeds its whitespace tokenizer."""
    return " ".join(analyze(text))


def query_terms(text: str) -> list[str]:
    """Terms of a raw user prompt: same analysis as :func:`analyze`, deduplicated, first-seen order.

    Query syntax (``AND``, ``title:x``, quotes, ``*``, ``~``, brackets) has no meaning here: those
    characters are separators and ``and`` is a stop word, so any input is safe. Never raises.
    """
    try:
        return list(dict.fromkeys(analyze(text)))
    except Exception:  # noqa: BLE001 - the hook path must never fail on a prompt
        return []


def content_words(text: str) -> list[str]:
    """Distinct terms without CJK bigrams or joined identifiers, for query-coverage features.

    Coverage counts how many of the *words* of a query a passage contains; bigrams and compound
    identifiers are redundant with their parts and would double-count.
    """
    if not isinstance(text, str):
        return []
    try:
        return list(dict.fromkeys(_analyze(text, bigrams=False, compounds=False)))
    except Exception:  # noqa: BLE001
        return []


def has_segmentless(text: str) -> bool:
    """True when ``text`` contains CJK (or another script written without spaces)."""
    if text.isascii() or max(text) < _FIRST_SEGMENTLESS:
        return False
    return bool(_seg()[0].search(text))


def count_segmentless(text: str) -> int:
    if text.isascii() or max(text) < _FIRST_SEGMENTLESS:
        return 0
    return len(_seg()[0].findall(text))


def without_segmentless(text: str) -> str:
    """``text`` with every CJK (etc.) character replaced by a space."""
    if text.isascii() or max(text) < _FIRST_SEGMENTLESS:
        return text
    return _seg()[0].sub(" ", text)


# Words whose stems differ between Snowball English revisions (and a few ordinary ones).
_STEM_PROBE_TEXT = (
    "installing installed installation generously generous agreed feed dying lying news skies sky "
    "skis tying succeeding proceeding exceeding cannings innings outings earring herring gently "
    "singly ugly early only atlas cosmos bias andes consign consigning knightly kneeling hopefulness "
    "relational conditional rational valency past paste pasted during"
)


@functools.lru_cache(maxsize=1)
def analyzer_fingerprint() -> str:
    """``v<ANALYZER_VERSION>-<hash of the stems of a probe list>``.

    The version covers this module's own rules; the hash covers the installed Snowball
    implementation, which this module does not control (about 1 ms, computed once per process).
    """
    digest = hashlib.sha256(" ".join(_stem(w) for w in _STEM_PROBE_TEXT.split()).encode("utf-8")).hexdigest()[:16]
    return f"v{ANALYZER_VERSION}-{digest}"
