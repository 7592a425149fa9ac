"""The e5 pack's tokenizer without ``tokenizers``' Unigram model (issue 26: light when idle).

``tokenizers`` holds e5's 250k-piece Unigram vocabulary in ~280 MB of RSS.  Here the pieces and
scores are a table in one file (:class:`PieceTable`: a hash table of the pieces' UTF-8 bytes, their
offsets, the float64 scores; 7.7 MB for e5) mapped read-only, so they cost clean file pages, not
the process's own memory (a sentencepiece processor of the same pieces, used until issue 26's stop
38, held ~34 MB).  The search is ``tokenizers``' ``encode_optimized`` step for step, per word, with
its float64 sums (sentencepiece's own search sums in float32 and breaks ties and near-ties
differently: ``′′′`` = ``′``+``′′`` or ``′′``+``′``; long base64 words).  The rest of the pipeline is
``tokenizers``' own where it is cheap (its
Precompiled normalizer, a few hundred KB, which works per grapheme unlike sentencepiece's
normaliser) and redone here where it is plain (special tokens split off the raw text, Metaspace,
truncation, ``<s> ... </s>``).  The ids are those of ``tokenizer.json`` (checked on ~300k texts,
tests/test_spmtok.py), so vectors and ``pack_key`` do not change.

The table is derived once per tokenizer (keyed by its sha256) into the pack folder when writable,
else the user cache, by a child process, so a server never holds the full ``tokenizers`` model even
for a moment.  The child compares both tokenizers on fixed probe strings and stores the expected
ids; every load repeats the probes and refuses the table on any difference.  A ``tokenizer.json``
of another shape (a WordPiece pack, another pipeline) gets a marker file and stays on
``tokenizers``; so does everything when HIVE_BRAIN_TOKENIZER=tokenizers.
"""

from __future__ import annotations

import base64
import json
import mmap
import os
import re
import struct
import subprocess
import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = 2  # bump when the derived table or the probes change: old cache files are ignored
_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
_METASPACE = "▁"
_BUILD_TIMEOUT = 600
_UNK_PENALTY = 10.0  # tokenizers' K_UNK_PENALTY: an unknown character scores min_score - 10
_CACHE_WORDS = 1 << 15  # tokenised words kept (a few MB); cleared when full

# Strings the child and every load tokenise both ways; chosen to cross each step of the pipeline
# (special tokens, collapsing spaces, NFKC, graphemes, unknown pieces, truncation).
PROBES = (
    "",
    " ",
    "hello world",
    "  leading and trailing  ",
    "tabs\tand\nnew\r\nlines\u00a0nbsp\u200bzero\u200dwidth",
    "Ｆｕｌｌｗｉｄｔｈ ﬁ ① ㍿ e\u0301 Ａ\u0301 \u0301x",
    "中文检索 日本語のテキスト 한국어 텍스트 \u1100\u1161\u11a8",
    "مرحبا بالعالم \u200f\u202e עברית",
    "emoji 👨\u200d👩\u200d👧 🇫🇷 ✈\ufe0f",
    "<s>special</s> <pad><unk> <mask>x</s",
    "query: ▁▁ literal metaspace ▁",
    "\U0001f9ea\U000e0001 unknowns \ue000\ue001",
    "ties: ‴ ′′′ |---------------| hahahahaha !!!!!!!! ==========",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
    "word " * 600,
)


def cache_paths(folder: Path, sha256: str, max_tokens: int) -> tuple[Path, Path, Path]:
    """(piece table, probe ids, unsupported marker) for the tokenizer with this sha256 in ``folder``."""
    base = f"tokenizer.{sha256[:16]}-{max_tokens}-v{FORMAT}"
    return folder / f"{base}.pieces", folder / f"{base}.probes.json", folder / f"{base}.none"


# --------------------------------------------------------------------------- the piece table


class PieceTable:
    """piece -> id and id -> score, read from a file mapped read-only (:meth:`write` makes it).

    Layout, little-endian: the header (magic, pieces ``n``, ``bits``, the unknown piece's id), the
    scores (float64 x n), the pieces' end offsets in the text (uint32 x n+1, from 0), the hash table
    (uint32 x 2**bits: id + 1 at crc32(piece) and the slots after it, 0 = empty) and the pieces' UTF-8
    text.  A lookup touches a slot or two and the piece's bytes: the pages of pieces never looked at
    stay on disk."""

    _MAGIC = b"hbpieces"
    _HEADER = struct.Struct("<8sIIi4x")

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        magic, n, bits, self.unk = self._HEADER.unpack_from(self._map, 0)
        sizes = (8 * n, 4 * (n + 1), 4 << bits)
        start = self._HEADER.size
        if magic != self._MAGIC or len(self._map) < start + sum(sizes):
            raise ValueError(f"{path} is not a piece table")
        view = memoryview(self._map)
        self.scores = view[start:start + sizes[0]].cast("d")
        self._ends = view[start + sizes[0]:start + sizes[0] + sizes[1]].cast("I")
        self._slots = view[start + sizes[0] + sizes[1]:start + sum(sizes)].cast("I")
        self._text = view[start + sum(sizes):]
        self._mask = (1 << bits) - 1
        if self._ends[n] != len(self._text):
            raise ValueError(f"{path} is not a piece table")

    def piece_id(self, piece: str) -> int:
        """The piece's id, or the unknown piece's when it is none (sentencepiece's ``piece_to_id``)."""
        key = piece.encode("utf-8", "surrogatepass")
        slot = zlib.crc32(key) & self._mask
        slots, ends, text = self._slots, self._ends, self._text
        while found := slots[slot]:
            if text[ends[found - 1]:ends[found]] == key:  # id found - 1 runs from ends[id] to ends[id + 1]
                return found - 1
            slot = (slot + 1) & self._mask
        return self.unk

    @classmethod
    def write(cls, path: Path, vocab: Sequence[tuple[str, float]], unk: int) -> None:
        pieces = [p.encode("utf-8") for p, _s in vocab]
        bits = max(4, (2 * len(pieces) - 1).bit_length())  # at most half full: a miss ends in a slot or two
        mask = (1 << bits) - 1
        slots = [0] * (1 << bits)
        for i, key in enumerate(pieces):
            slot = zlib.crc32(key) & mask
            while slots[slot]:
                slot = (slot + 1) & mask
            slots[slot] = i + 1
        ends = [0]
        for key in pieces:
            ends.append(ends[-1] + len(key))
        with open(path, "wb") as f:
            f.write(cls._HEADER.pack(cls._MAGIC, len(pieces), bits, unk))
            f.write(struct.pack(f"<{len(vocab)}d", *(s for _p, s in vocab)))
            f.write(struct.pack(f"<{len(ends)}I", *ends))
            f.write(struct.pack(f"<{len(slots)}I", *slots))
            f.write(b"".join(pieces))


# --------------------------------------------------------------------------- the tokenizer


@dataclass(frozen=True)
class Encoding:
    """What the embedder uses of a ``tokenizers.Encoding``."""

    ids: list[int]
    offsets: list[tuple[int, int]]
    special_tokens_mask: list[int]


class SpmTokenizer:
    """Drop-in for the embedder's use of ``tokenizers.Tokenizer`` (encode / encode_batch / ids).

    ``offsets`` are filled only by ``encode(..., offsets=True)`` (token vectors need them, a few
    texts at a time); the batch path leaves them empty.
    """

    def __init__(self, table: PieceTable, normalizer: Any, config: dict[str, Any], *, max_tokens: int) -> None:
        self._piece_id = table.piece_id
        self._scores = table.scores  # float64, as tokenizers holds them
        self._normalizer = normalizer
        self._bos = int(config["bos"])
        self._eos = int(config["eos"])
        self._unk = int(config["unk"])
        self._unk_score = float(config["min_score"]) - _UNK_PENALTY
        self._max_piece = int(config["max_piece_chars"])
        self._special_ids: dict[str, int] = dict(config["specials"])
        self._split = re.compile(
            "(" + "|".join(re.escape(s) for s in sorted(self._special_ids, key=len, reverse=True)) + ")"
        )
        self._cache: dict[str, tuple[tuple[int, int], ...]] = {}
        self.max_tokens = max_tokens
        self.pad_id = self._special_ids.get("<pad>", 0)

    # -- the pipeline, step by step as tokenizers runs it

    def _parts(self, text: str) -> list[tuple[str, int | None]]:
        """The text split around special tokens (matched on the raw text, as ``normalized=False``
        added tokens are): (text, None) for the parts between them, (token, id) for each one."""
        out: list[tuple[str, int | None]] = []
        for i, part in enumerate(self._split.split(text)):
            if i % 2:
                out.append((part, self._special_ids[part]))
            elif part:
                out.append((part, None))
        return out

    def _words(self, part: str) -> list[str]:
        # Normalizer, then Metaspace(prepend_scheme="always", split=True): spaces become ▁, one ▁
        # goes in front unless there is one already, and every ▁ starts a new word.
        text = self._normalizer.normalize_str(part).replace(" ", _METASPACE)
        if not text:
            return []
        if not text.startswith(_METASPACE):
            text = _METASPACE + text
        return [_METASPACE + w for w in text.split(_METASPACE)[1:]]

    def _tokens(self, word: str) -> tuple[tuple[int, int], ...]:
        """(id, characters) of each token of one word: tokenizers' Unigram ``encode_optimized``,
        step for step (float64 sums, the same candidate order and strict ``>``, so ties and
        near-ties fall the same way; sentencepiece's own search sums in float32 and does not),
        unknown runs fused into one token."""
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        n = len(word)
        piece_id, scores, unk = self._piece_id, self._scores, self._unk
        best = [0.0] * (n + 1)
        starts = [-1] * (n + 1)
        ids = [unk] * (n + 1)
        for i in range(n):
            here = best[i]
            single = False
            for j in range(i + 1, min(n, i + self._max_piece) + 1):
                found = piece_id(word[i:j])
                if found == unk:  # not a piece (<unk> itself never reaches here: it is split off)
                    continue
                score = scores[found] + here
                if starts[j] < 0 or score > best[j]:
                    best[j], starts[j], ids[j] = score, i, found
                if j == i + 1:
                    single = True
            if not single:
                score = self._unk_score + here
                if starts[i + 1] < 0 or score > best[i + 1]:
                    best[i + 1], starts[i + 1], ids[i + 1] = score, i, unk
        out: list[tuple[int, int]] = []
        end = n
        unk_end = -1
        while end > 0:
            start = starts[end]
            if ids[end] == unk:
                if unk_end < 0:
                    unk_end = end
            else:
                if unk_end >= 0:
                    out.append(self._fused(word, end, unk_end))
                    unk_end = -1
                out.append((ids[end], end - start))
            end = start
        if unk_end >= 0:
            out.append(self._fused(word, 0, unk_end))
        out.reverse()
        result = tuple(out)
        if len(self._cache) >= _CACHE_WORDS:
            self._cache.clear()
        self._cache[word] = result
        return result

    def _fused(self, word: str, start: int, end: int) -> tuple[int, int]:
        # tokenizers looks the fused string up like any token: unknown unless it is a piece.
        found = self._piece_id(word[start:end]) if end - start <= self._max_piece else self._unk
        return found, end - start

    def _finish(self, ids: list[int]) -> list[int]:
        # Truncation (LongestFirst, right, to max_tokens with the two template specials counted),
        # then the TemplateProcessing "<s> $A </s>".
        return [self._bos, *ids[: max(0, self.max_tokens - 2)], self._eos]

    def encode_batch(self, texts: Sequence[str]) -> list[Encoding]:
        return [self.encode(t) for t in texts]

    def encode(self, text: str, *, offsets: bool = False, add_special_tokens: bool = True) -> Encoding:
        if offsets:
            return self._encode_with_offsets(text)
        ids: list[int] = []
        for part, special in self._parts(text):
            if special is not None:
                ids.append(special)
                continue
            for word in self._words(part):
                ids.extend(token_id for token_id, _n in self._tokens(word))
        if not add_special_tokens:  # as tokenizers: truncated to max_tokens, no room kept for <s> </s>
            ids = ids[: self.max_tokens]
            return Encoding(ids, [], [0] * len(ids))
        ids = self._finish(ids)
        return Encoding(ids, [], [1] + [0] * (len(ids) - 2) + [1])

    def _encode_with_offsets(self, text: str) -> Encoding:
        """As ``encode``, with each token's (start, end) characters in ``text`` the way tokenizers
        reports them: its own PreTokenizedString does the normalisation and Metaspace (and so the
        alignments), split into single characters, and the tokens count off those characters."""
        from tokenizers import PreTokenizedString, Regex, pre_tokenizers

        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        start = 0
        for part, special in self._parts(text):
            if special is not None:
                ids.append(special)
                offsets.append((start, start + len(part)))
            else:
                pts = PreTokenizedString(part)
                pts.normalize(self._normalizer.normalize)
                pre_tokenizers.Sequence([
                    pre_tokenizers.Metaspace(replacement=_METASPACE, prepend_scheme="always", split=False),
                    pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated"),
                ]).pre_tokenize(pts)
                chars = [c[1] for c in pts.get_splits(offset_referential="original", offset_type="char")]
                pos = 0
                for word in self._words(part):
                    for token_id, length in self._tokens(word):
                        ids.append(token_id)
                        offsets.append((start + chars[pos][0], start + chars[pos + length - 1][1]))
                        pos += length
            start += len(part)
        keep = max(0, self.max_tokens - 2)
        # Special tokens written in the text count as text: tokenizers' special_tokens_mask marks
        # only the two the template adds.
        return Encoding(
            [self._bos, *ids[:keep], self._eos],
            [(0, 0), *offsets[:keep], (0, 0)],
            [1, *[0] * len(ids[:keep]), 1],
        )


def load(tokenizer_json: Path, sha256: str, folders: Sequence[Path], *, max_tokens: int) -> SpmTokenizer | None:
    """The piece-table tokenizer for this ``tokenizer.json``, or None (use ``tokenizers``).

    Looks in each folder in turn (the pack itself, then the user cache) and derives the table into
    the first writable one when none has it (a child process, see the module doc).  None when the
    tokenizer is of another shape, or the probes disagree.
    """
    if os.environ.get("HIVE_BRAIN_TOKENIZER") == "tokenizers":
        return None
    found = None
    for folder in folders:
        model_path, probes_path, none_path = cache_paths(folder, sha256, max_tokens)
        if none_path.exists():
            return None
        if model_path.exists() and probes_path.exists():
            found = model_path, probes_path
            break
    if found is None:
        target = next((f for f in folders if _writable(f)), None)
        if target is None or not derive(tokenizer_json, sha256, target, max_tokens=max_tokens):
            return None
        found = cache_paths(target, sha256, max_tokens)[:2]
    model_path, probes_path = found
    try:
        expected = json.loads(probes_path.read_text(encoding="utf-8"))
        tok = _open(expected["config"], model_path, max_tokens=max_tokens)
    except Exception:  # a damaged or truncated cache file: tokenizers
        return None
    if expected.get("max_tokens") != max_tokens or expected.get("probes") != list(PROBES):
        return None
    got = [e.ids for e in tok.encode_batch(PROBES)] + [tok.encode(p, offsets=True).ids for p in PROBES]
    if got != expected["ids"] * 2:
        return None
    return tok


def derive(tokenizer_json: Path, sha256: str, folder: Path, *, max_tokens: int) -> bool:
    """Run :func:`build` in a child process (it loads the full ``tokenizers`` model to compare
    with); True when the model and its probe ids are in ``folder``."""
    try:
        subprocess.run(
            [sys.executable, "-m", __name__, str(tokenizer_json), sha256, str(folder), str(max_tokens)],
            check=False, timeout=_BUILD_TIMEOUT, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    model_path, probes_path, _none = cache_paths(folder, sha256, max_tokens)
    return model_path.exists() and probes_path.exists()


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)


def _open(config: dict[str, Any], model_path: Path, *, max_tokens: int) -> SpmTokenizer:
    return SpmTokenizer(PieceTable(model_path), _normalizer_from(config["normalizer"]), config, max_tokens=max_tokens)


def _normalizer_from(spec: dict[str, Any]) -> Any:
    from tokenizers import Regex, normalizers

    precompiled, replace = spec["normalizers"]
    return normalizers.Sequence([
        normalizers.Precompiled(base64.b64decode(precompiled["precompiled_charsmap"])),
        normalizers.Replace(Regex(replace["pattern"]["Regex"]), replace["content"]),
    ])


# --------------------------------------------------------------------------- reading tokenizer.json


class Unsupported(Exception):
    """The tokenizer.json is not the pipeline this module reproduces."""


def _pipeline(tokenizer_json: Path) -> dict[str, Any]:
    """The small sections of the tokenizer.json, checked to be exactly the pipeline reproduced here."""
    text = tokenizer_json.read_text(encoding="utf-8")
    decoder = json.JSONDecoder()
    sections: dict[str, Any] = {}
    for name in ("added_tokens", "normalizer", "pre_tokenizer", "post_processor", "truncation"):
        match = re.search(r'\n?\s*"' + name + r'"\s*:\s*', text)
        if match is None:
            raise Unsupported(f"no {name}")
        sections[name], _end = decoder.raw_decode(text, match.end())
    model_at = re.search(r'"model"\s*:\s*\{\s*"type"\s*:\s*"(\w+)"', text)
    if model_at is None or model_at.group(1) != "Unigram":
        raise Unsupported("model is not Unigram")
    del text
    return _check(sections)


def _check(s: dict[str, Any]) -> dict[str, Any]:
    norm = s["normalizer"]
    if not (isinstance(norm, dict) and norm.get("type") == "Sequence" and len(norm["normalizers"]) == 2
            and norm["normalizers"][0].get("type") == "Precompiled"
            and norm["normalizers"][1] == {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}):
        raise Unsupported("normalizer")
    if s["pre_tokenizer"] != {"type": "Metaspace", "replacement": _METASPACE, "prepend_scheme": "always",
                              "split": True}:
        raise Unsupported("pre_tokenizer")
    post = s["post_processor"]
    single = post.get("single") if isinstance(post, dict) else None
    if not (post.get("type") == "TemplateProcessing" and single == [
        {"SpecialToken": {"id": "<s>", "type_id": 0}},
        {"Sequence": {"id": "A", "type_id": 0}},
        {"SpecialToken": {"id": "</s>", "type_id": 0}},
    ]):
        raise Unsupported("post_processor")
    specials: dict[str, int] = {}
    for tok in s["added_tokens"]:
        if not (tok["special"] and not tok["normalized"] and not tok["lstrip"] and not tok["rstrip"]
                and not tok["single_word"]):
            raise Unsupported(f"added token {tok['content']!r}")
        specials[tok["content"]] = int(tok["id"])
    if set(specials) != set(_SPECIALS):
        raise Unsupported("special tokens")
    trunc = s["truncation"]
    if trunc is not None and (trunc.get("direction") != "Right" or trunc.get("stride") != 0):
        raise Unsupported("truncation")
    template_ids = post["special_tokens"]
    bos, eos = template_ids["<s>"]["ids"], template_ids["</s>"]["ids"]
    if bos != [specials["<s>"]] or eos != [specials["</s>"]]:
        raise Unsupported("template ids")
    return {"normalizer": norm, "specials": specials, "bos": bos[0], "eos": eos[0]}


# --------------------------------------------------------------------------- deriving the table


def build(tokenizer_json: Path, sha256: str, folder: Path, max_tokens: int) -> bool:
    """Derive the piece table and the probe ids (the child process); False, with a marker, if the
    tokenizer is of another shape or the two tokenizers disagree on a probe."""
    from tokenizers import Tokenizer

    model_path, probes_path, none_path = cache_paths(folder, sha256, max_tokens)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        config = _pipeline(tokenizer_json)
        data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
        model = data["model"]
        if model.get("byte_fallback") or model.get("unk_id") is None:
            raise Unsupported("byte fallback or no unknown piece")
        vocab = [(str(p), float(s)) for p, s in model["vocab"]]
        for content, token_id in config["specials"].items():
            if token_id >= len(vocab) or vocab[token_id][0] != content:
                raise Unsupported(f"special {content!r} is not piece {token_id}")
        config["unk"] = int(model["unk_id"])
        config["min_score"] = min(score for _p, score in vocab)  # as tokenizers computes it
        config["max_piece_chars"] = max(len(piece) for piece, _s in vocab)
        if len(set(piece for piece, _s in vocab)) != len(vocab):
            raise Unsupported("a piece listed twice")  # the table would keep one id of the two
        del data, model
    except (Unsupported, KeyError, TypeError, ValueError) as exc:
        _write(none_path, f"{exc}\n".encode())
        return False
    tmp = model_path.with_name(f"{model_path.name}.tmp{os.getpid()}")
    PieceTable.write(tmp, vocab, config["unk"])
    del vocab
    try:
        tok = _open(config, tmp, max_tokens=max_tokens)
        reference = Tokenizer.from_file(str(tokenizer_json))
        reference.no_padding()
        reference.enable_truncation(max_length=max_tokens)
        expected = [e.ids for e in reference.encode_batch(list(PROBES))]
        got = [e.ids for e in tok.encode_batch(PROBES)]
        offsets_ok = all(tok.encode(p, offsets=True).offsets[1:-1] == list(reference.encode(p).offsets[1:-1])
                         for p in PROBES)
        if got != expected or not offsets_ok:
            _write(none_path, b"probe mismatch\n")
            return False
        os.replace(tmp, model_path)
    finally:
        tmp.unlink(missing_ok=True)
    _write(probes_path, json.dumps({"max_tokens": max_tokens, "probes": list(PROBES), "ids": expected, "config": config}).encode())
    return True


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _main(argv: list[str]) -> int:
    folder, sha256, max_tokens = Path(argv[3]), argv[2], int(argv[4])
    try:
        return 0 if build(Path(argv[1]), sha256, folder, max_tokens) else 1
    except Exception as exc:  # noted once, not retried by every load (delete the file to retry)
        _write(cache_paths(folder, sha256, max_tokens)[2], f"{type(exc).__name__}: {exc}\n".encode())
        return 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
