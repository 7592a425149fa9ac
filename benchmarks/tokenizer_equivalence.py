"""The e5 tokenizer both ways (``tokenizers`` from tokenizer.json, and embedding/spmtok.py): same ids?

Every string of the bench-data (LoCoMo, CMRC 2018, the converted queries and sessions), the
vault_template notes, edge cases and random Unicode (tests/test_spmtok.py's generator), long texts;
each bare, after ``passage: `` and after ``query: ``. Prints the counts and the first mismatches.

    python -m benchmarks.tokenizer_equivalence [--bench-data PATH] [--random 40000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from .common import bench_data_path, require_file

_PREFIXES = ("", "passage: ", "query: ")


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


def corpus(bench_data: Path, n_random: int) -> dict[str, list[str]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from test_spmtok import EDGES, _generated, _vault_texts  # the test's own generator and edge cases

    locomo: list[str] = []
    conversations = json.loads(require_file(bench_data / "locomo" / "locomo10.json").read_text())
    _strings(conversations, locomo)
    for conv in conversations:
        for turns in conv["conversation"].values():
            if isinstance(turns, list):
                locomo.append("\n".join(f"{t['speaker']}: {t['text']}" for t in turns))
    cmrc: list[str] = []
    _strings(json.loads(require_file(bench_data / "cmrc2018-trial" / "cmrc2018_trial.json").read_text()), cmrc)
    for name in ("queries.jsonl", "sessions.jsonl"):
        for line in require_file(bench_data / "locomo" / "converted" / name).read_text().splitlines():
            _strings(json.loads(line), cmrc)
    generated = _generated(n_random)
    pool = locomo + cmrc + generated
    rnd = random.Random(26)
    long_texts = [" ".join(rnd.sample(pool, 200)) for _ in range(50)]
    long_texts += ["x" * 5000, "中" * 3000, "a " * 2000, " " * 3000, "<s>" * 600, "word " * 509, "word " * 510]
    return {"locomo": locomo, "cmrc+converted": cmrc, "vault_template": _vault_texts(), "edge": list(EDGES),
            "random": generated, "long": long_texts}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bench-data", default=None)
    ap.add_argument("--random", type=int, default=40000)
    ap.add_argument("--offsets", type=int, default=20000, help="texts also compared on offsets")
    args = ap.parse_args(argv)
    from tokenizers import Tokenizer

    from hive_brain.embedding import pack as modelpack
    from hive_brain.embedding import spmtok

    from .common import embedding_pack

    pack, why = embedding_pack()
    if pack is None:
        raise SystemExit(f"needs the embedding pack: {why}")
    manifest = modelpack.read_manifest(pack)
    max_tokens = int(manifest["max_tokens"])
    path = pack / modelpack.TOKENIZER_FILE
    with tempfile.TemporaryDirectory() as folder:
        fast = spmtok.load(path, manifest["files"][modelpack.TOKENIZER_FILE]["sha256"], [Path(folder)],
                           max_tokens=max_tokens)
    if fast is None:
        raise SystemExit("spmtok refused this pack (probe mismatch or another tokenizer shape)")
    reference = Tokenizer.from_file(str(path))
    reference.no_padding()
    reference.enable_truncation(max_length=max_tokens)
    groups = corpus(bench_data_path(args.bench_data), args.random)
    texts = [p + t[: max_tokens * 64] for g in groups.values() for t in g for p in _PREFIXES]
    print(" ".join(f"{k} {len(v)}" for k, v in groups.items()), f"-> {len(texts)} texts with the prefixes")
    mismatches = 0
    for start in range(0, len(texts), 2000):
        chunk = texts[start : start + 2000]
        for text, want, got in zip(chunk, reference.encode_batch(chunk), fast.encode_batch(chunk), strict=True):
            if want.ids != got.ids:
                mismatches += 1
                if mismatches <= 10:
                    print("MISMATCH", repr(text[:120]), want.ids[:20], got.ids[:20])
    print(f"ids: {len(texts)} compared, {mismatches} mismatches")
    sample = random.Random(7).sample([t for t in texts if len(t) < 3000], min(args.offsets, len(texts)))
    bad = 0
    for text in sample:
        want = reference.encode(text)
        got = fast.encode(text, offsets=True)
        if (got.ids, got.offsets, got.special_tokens_mask) != (
            want.ids, list(want.offsets), list(want.special_tokens_mask)
        ):
            bad += 1
            if bad <= 10:
                print("OFFSETS MISMATCH", repr(text[:120]))
    print(f"ids + offsets + special mask: {len(sample)} compared, {bad} mismatches")
    return 1 if mismatches or bad else 0


if __name__ == "__main__":
    sys.exit(main())
