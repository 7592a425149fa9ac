"""The secret detector on ordinary text: false positives and speed.

Two corpora that hold no secret, split into passages exactly as the indexer splits them: every
LoCoMo session note (272 notes, 5,882 turns of everyday conversation, written by people) and the
synthetic engineering vault of ``fixtures.py`` (typed memories, long notes, conversations about
made-up services: full of "key", "token" and URLs), and 3,000 notes of Python's own documentation
(``prompt_refs.py``: real technical prose about tokens, passwords, secrets and keys). Each passage goes through
``store.secrets.find_secrets`` (what the indexer runs on every note and writes run on every field).
A finding on this text is a false positive: the table lists each one (kind and a short excerpt).
Timed per corpus, best of N rounds: passages/s and MB/s of ``scrub`` (the index-time call). A positive control runs the 20+ sample secrets of ``SAMPLES`` through the same
detector (each must be found).

With ``detect-secrets`` importable (it is not a dependency: docs/security.md), its regex plugins
(high-entropy plugins off: they flag most English words) run over the same passages, for comparison.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .common import BenchConfig, log, print_table, standalone_main, summary_row, temp_dir

NAME = "secrets_fp"
DEFAULT_ROUNDS = 3
SYNTHETIC_NOTES = {"quick": 1000, "full": 5000}
REFERENCE_NOTES = 3000

# One sample of each kind the docs promise (values made up; shapes real).
SAMPLES: dict[str, str] = {
    "AWS access key": "AKIAIOSFODNN7EXAMPLE",
    "AWS access key (zero-width space inside)": "AKIA\u200bIOSFODNN7EXAMPLE",
    "AWS secret key (labelled)": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS secret key (bare)": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8PLEKEY1",
    "GCP API key": "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "GCP OAuth token": "ya29.a0AfH6SMBx3kQ9zVt7cRZ1_abcdefGHIJ",
    "Azure storage key": "AccountKey=" + "Ab1+" * 22,
    "GitHub token": "ghp_" + "a1B2" * 9,
    "GitLab token": "glpat-Ab12Cd34Ef56Gh78Ij90",
    "Slack token": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "Slack webhook": "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "Stripe key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "OpenAI key": "sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    "Anthropic key": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz-ABCD",
    "JWT": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "PEM key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1234567890abcdefghijklmn\n-----END RSA PRIVATE KEY-----",
    "PEM body without BEGIN": "MIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
                              "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n",
    "URL password": "postgres://app:s3cr3tpassw0rd@db.internal:5432/app",
    "URL password with /": "mysql://root:pa/ss9w0rd@db:3306",
    "redis://:pw@host": "redis://:Rz9pW0rdx@cache:6379",
    "DB_PASSWORD=": "DB_PASSWORD=hunter2xyz",
    "export GITHUB_TOKEN=": "export GITHUB_TOKEN=abcd1234efgh5678",
    "password in prose": "prod db password is hunter2-Xy9!kLm",
    "npm token": "npm_" + "A1b2C3d4E5" * 3 + "f6G7h8",
}


def _split(notes: list[Path]) -> list[str]:
    from hive_brain.index.indexer import PASSAGE_WORDS
    from hive_brain.index.passages import split_passages
    from hive_brain.store.notes import parse_bytes

    out: list[str] = []
    for p in notes:
        note = parse_bytes(p.name, p.read_bytes())
        out += [x.text for x in split_passages(note.title, note.body, max_words=PASSAGE_WORDS)]
    return out


def _corpora(data_dir: Path, synthetic: int) -> dict[str, tuple[list[str], int]]:
    """corpus name -> (passage texts, note count)."""
    from .fixtures import generate
    from .locomo import convert

    out: dict[str, tuple[list[str], int]] = {}
    with temp_dir("hive-brain-secrets-fp-") as tmp:
        convert(data_dir / "locomo", tmp / "converted")
        notes = sorted((tmp / "converted" / "notes").rglob("*.md"))
        out["LoCoMo"] = (_split(notes), len(notes))
        generate(tmp / "vault", synthetic)
        notes = sorted((tmp / "vault").rglob("*.md"))
        out[f"synthetic vault ({synthetic} notes)"] = (_split(notes), len(notes))
        # Technical prose nobody here wrote: the standard library's own documentation (prompt_refs),
        # full of "token", "password", "secret", "key" and "pass" in ordinary sentences.
        from .prompt_refs import write_refs

        refs = write_refs(tmp / "refs", REFERENCE_NOTES)
        notes = sorted((tmp / "refs").rglob("*.md"))
        out[f"Python documentation ({refs['count']} notes)"] = (_split(notes), len(notes))
    return out


def _detect_secrets_hits(passages: list[str]) -> dict[str, Any]:
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import transient_settings
    except ImportError:
        return {"unavailable": "detect-secrets is not installed"}
    t0 = time.perf_counter()
    import detect_secrets.core.scan  # noqa: F401 - timed above with its plugins
    names = [c.__name__ for c in get_mapping_from_secret_type_to_class().values() if "HighEntropy" not in c.__name__]
    hits: Counter[str] = Counter()
    lines = [line for p in passages for line in p.splitlines()]
    with transient_settings({"plugins_used": [{"name": n} for n in names]}):
        t1 = time.perf_counter()
        for line in lines:
            for s in scan_line(line):
                hits[s.type] += 1
        secs = time.perf_counter() - t1
    return {"plugins": len(names), "lines": len(lines), "falsePositives": sum(hits.values()), "byKind": dict(hits),
            "linesPerSecond": round(len(lines) / secs), "mbPerSecond": round(sum(map(len, lines)) / secs / 1e6, 2),
            "setupSeconds": round(t1 - t0, 3)}


def _measure(passages: list[str], rounds: int) -> dict[str, Any]:
    from hive_brain.store.secrets import find_secrets, scrub

    hits: list[dict[str, Any]] = []
    for i, p in enumerate(passages):
        for f in find_secrets(p):
            hits.append({"passage": i, "kind": f.kind, "excerpt": p[max(0, f.start - 30):f.end + 30]})
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for p in passages:
            scrub(p)
        best = min(best, time.perf_counter() - t0)
    chars = sum(len(p) for p in passages)
    flagged = len({h["passage"] for h in hits})
    return {"passages": len(passages), "characters": chars, "falsePositives": len(hits),
            "falsePositivePassages": flagged, "falsePositiveRate": round(flagged / max(1, len(passages)), 5),
            "byKind": dict(Counter(h["kind"] for h in hits)), "hits": hits, "scrubSeconds": round(best, 4),
            "passagesPerSecond": round(len(passages) / best), "mbPerSecond": round(chars / best / 1e6, 2)}


def run(cfg: BenchConfig, rounds: int | None = None, synthetic: int | None = None) -> dict[str, Any]:
    from hive_brain.store.secrets import find_secrets

    corpora = _corpora(cfg.bench_data, synthetic or SYNTHETIC_NOTES[cfg.mode])
    res: dict[str, Any] = {"corpora": {}}
    for name, (passages, n_notes) in corpora.items():
        log(f"secrets_fp: {name}: {len(passages)} passages of {n_notes} notes")
        res["corpora"][name] = {"notes": n_notes, **_measure(passages, rounds or DEFAULT_ROUNDS)}
    loco = res["corpora"]["LoCoMo"]
    found = {name: bool(find_secrets(f"note:\n{text}\nend")) for name, text in SAMPLES.items()}
    return {**res, "falsePositives": sum(c["falsePositives"] for c in res["corpora"].values()),
            "falsePositiveRate": loco["falsePositiveRate"], "hits": [h for c in res["corpora"].values() for h in c["hits"]],
            "samplesFound": sum(found.values()), "samples": len(found), "missed": [k for k, v in found.items() if not v],
            "detectSecrets": _detect_secrets_hits(corpora["LoCoMo"][0])}


def report(result: dict[str, Any], console: Any) -> None:
    rows: list[list[Any]] = [
        [f"hive-brain on {name}", c["notes"], c["passages"], c["falsePositives"], c["falsePositiveRate"],
         c["passagesPerSecond"], c["mbPerSecond"]] for name, c in result["corpora"].items()]
    ds = result["detectSecrets"]
    if "unavailable" not in ds:
        rows.append([f"detect-secrets 1.5 ({ds['plugins']} regex plugins, per line) on LoCoMo", None, ds["lines"],
                     ds["falsePositives"], None, None, ds["mbPerSecond"]])
    print_table("Secret detector on text holding no secret", ["detector / corpus", "notes", "passages",
                "false positives", "FP rate (passages)", "passages/s", "MB/s"], rows, console)
    console.print(f"samples found: {result['samplesFound']}/{result['samples']}"
                  + (f"; detect-secrets: {ds['unavailable']}" if "unavailable" in ds else ""))
    if result["hits"]:
        print_table("False positives", ["kind", "excerpt"], [[h["kind"], h["excerpt"]] for h in result["hits"][:30]], console)
    if result["missed"]:
        console.print(f"samples missed: {', '.join(result['missed'])}")


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        summary_row(NAME, "hive-brain", "false positives on LoCoMo", result["falsePositives"], target="~0",
                    status="ok" if result["falsePositiveRate"] < 0.001 else "missed"),
        *[summary_row(NAME, "hive-brain", f"scrub passages/s ({name})", c["passagesPerSecond"])
          for name, c in result["corpora"].items()],
    ]


def _extra(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--rounds", type=int, default=None, help=f"timed rounds (default {DEFAULT_ROUNDS})")
    ap.add_argument("--synthetic", type=int, default=None,
                    help=f"notes in the synthetic vault (default {SYNTHETIC_NOTES['quick']}; --full {SYNTHETIC_NOTES['full']})")


if __name__ == "__main__":
    sys.exit(standalone_main(sys.modules[__name__], extra_args=_extra,
                             kwargs_from_args=lambda a: {"rounds": a.rounds, "synthetic": a.synthetic}))
