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

A third measure counts whole **notes**, as the indexer scrubs them (issue 28: the prose-password rule
refused ordinary text): technical text that ships with installed packages, nobody here wrote, and
no one wrote to hold secrets — the README (``METADATA`` description) of every distribution this Python
has installed, the ``.md``/README files in its site-packages, the system's package documentation
under ``/usr/share/doc`` (READMEs, ``.md`` and ``.txt``, gunzipped) when there is one, and the vault
template. A note with a finding is counted, once, and listed: documentation sometimes shows a
real-shaped example token (PyJWT's README prints a JWT), so the target is at most 1% of notes, not none.

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


def _corpora(data_dir: Path, synthetic: int) -> dict[str, tuple[list[str], list[tuple[str, str]]]]:
    """corpus name -> (passage texts, [(path, whole note text)])."""
    from .fixtures import generate
    from .locomo import convert

    out: dict[str, tuple[list[str], list[tuple[str, str]]]] = {}

    def whole(notes: list[Path], root: Path) -> list[tuple[str, str]]:
        return [(str(p.relative_to(root)), p.read_text(encoding="utf-8")) for p in notes]

    with temp_dir("hive-brain-secrets-fp-") as tmp:
        convert(data_dir / "locomo", tmp / "converted")
        notes = sorted((tmp / "converted" / "notes").rglob("*.md"))
        out["LoCoMo"] = (_split(notes), whole(notes, tmp))
        generate(tmp / "vault", synthetic)
        notes = sorted((tmp / "vault").rglob("*.md"))
        out[f"synthetic vault ({synthetic} notes)"] = (_split(notes), whole(notes, tmp))
        # Technical prose nobody here wrote: the standard library's own documentation (prompt_refs),
        # full of "token", "password", "secret", "key" and "pass" in ordinary sentences.
        from .prompt_refs import write_refs

        refs = write_refs(tmp / "refs", REFERENCE_NOTES)
        notes = sorted((tmp / "refs").rglob("*.md"))
        out[f"Python documentation ({refs['count']} notes)"] = (_split(notes), whole(notes, tmp))
    return out


NOTE_CAP = 100_000  # characters of one documentation file taken as a note (a changelog runs to megabytes)
INSTALLED_DOCS_TARGET = 0.01  # at most 1% of notes flagged


def _doc_file(path: Path) -> str | None:
    import gzip

    try:
        data = path.read_bytes()
        return (gzip.decompress(data) if path.name.endswith(".gz") else data).decode("utf-8")[:NOTE_CAP]
    except (OSError, EOFError, ValueError):  # unreadable, a bad gzip, not UTF-8 (gzip.BadGzipFile is an OSError)
        return None


def installed_docs(system_docs: Path | None = Path("/usr/share/doc")) -> dict[str, list[tuple[str, str]]]:
    """corpus name -> [(where, note text)]: documentation installed on this machine, one note per file."""
    import importlib.metadata as md
    import sysconfig

    readmes = {}
    for dist in md.distributions():
        body = str(dist.metadata.json.get("description") or "")  # the README: the body, or a Description field
        if len(body.strip()) >= 200:
            readmes[f"{dist.metadata['Name']} (METADATA)"] = body[:NOTE_CAP]
    site = Path(sysconfig.get_paths()["purelib"])
    for p in sorted(site.rglob("*")):
        low = p.name.lower()
        if (low.endswith(".md") or low.startswith("readme")) and p.is_file() and (text := _doc_file(p)) and len(text) >= 200:
            readmes[str(p.relative_to(site))] = text
    out = {"package READMEs (site-packages)": sorted(readmes.items())}
    if system_docs is not None and system_docs.is_dir():
        docs = []
        for p in sorted(system_docs.rglob("*")):
            low = p.name.lower()
            if not (low.startswith("readme") or ".md" in low or low.endswith((".txt", ".txt.gz"))) or not p.is_file():
                continue
            if (text := _doc_file(p)) and len(text) >= 200:
                docs.append((str(p), text))
        out[f"system package docs ({system_docs})"] = docs
    template = Path(__file__).resolve().parents[1] / "vault_template"
    out["vault template"] = [(str(p.relative_to(template)), p.read_text(encoding="utf-8"))
                             for p in sorted(template.rglob("*.md"))]
    return out


def measure_notes(notes: list[tuple[str, str]]) -> dict[str, Any]:
    """Whole notes through ``find_secrets`` (the indexer's scope): notes flagged, each finding listed."""
    from hive_brain.store.secrets import find_secrets

    hits: list[dict[str, Any]] = []
    flagged = 0
    t0 = time.process_time()
    for where, text in notes:
        found = find_secrets(text)
        flagged += bool(found)
        hits += [{"note": where, "kind": f.kind, "excerpt": text[max(0, f.start - 30):f.end + 30]} for f in found]
    cpu = time.process_time() - t0
    chars = sum(len(t) for _, t in notes)
    return {"notes": len(notes), "characters": chars, "flaggedNotes": flagged,
            "noteFalsePositiveRate": round(flagged / max(1, len(notes)), 5), "findings": len(hits), "hits": hits,
            "cpuSeconds": round(cpu, 3), "mbPerCpuSecond": round(chars / max(cpu, 1e-9) / 1e6, 2)}


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
    for name, (passages, notes) in corpora.items():
        log(f"secrets_fp: {name}: {len(passages)} passages of {len(notes)} notes")
        whole = measure_notes(notes)
        res["corpora"][name] = {**_measure(passages, rounds or DEFAULT_ROUNDS), "notes": len(notes),
                                "flaggedNotes": whole["flaggedNotes"], "noteHits": whole["hits"]}
    loco = res["corpora"]["LoCoMo"]
    found = {name: bool(find_secrets(f"note:\n{text}\nend")) for name, text in SAMPLES.items()}
    docs = {name: measure_notes(notes) for name, notes in installed_docs().items()}
    for name, d in docs.items():
        log(f"secrets_fp: {name}: {d['flaggedNotes']} of {d['notes']} notes flagged")
    n_docs = sum(d["notes"] for d in docs.values())
    flagged_docs = sum(d["flaggedNotes"] for d in docs.values())
    res["installedDocs"] = {"corpora": docs, "notes": n_docs, "flaggedNotes": flagged_docs,
                            "noteFalsePositiveRate": round(flagged_docs / max(1, n_docs), 5),
                            "target": INSTALLED_DOCS_TARGET}
    return {**res, "falsePositives": sum(c["falsePositives"] + c["flaggedNotes"] for c in res["corpora"].values()),
            "falsePositiveRate": loco["falsePositiveRate"], "hits": [h for c in res["corpora"].values() for h in c["hits"] + c["noteHits"]],
            "samplesFound": sum(found.values()), "samples": len(found), "missed": [k for k, v in found.items() if not v],
            "detectSecrets": _detect_secrets_hits(corpora["LoCoMo"][0])}


def report(result: dict[str, Any], console: Any) -> None:
    rows: list[list[Any]] = [
        [f"hive-brain on {name}", c["notes"], c["passages"], c["falsePositives"], c["falsePositiveRate"],
         c["flaggedNotes"], c["passagesPerSecond"], c["mbPerSecond"]] for name, c in result["corpora"].items()]
    ds = result["detectSecrets"]
    if "unavailable" not in ds:
        rows.append([f"detect-secrets 1.5 ({ds['plugins']} regex plugins, per line) on LoCoMo", None, ds["lines"],
                     ds["falsePositives"], None, None, None, ds["mbPerSecond"]])
    print_table("Secret detector on text holding no secret", ["detector / corpus", "notes", "passages",
                "false positives", "FP rate (passages)", "notes flagged (whole)", "passages/s", "MB/s"], rows, console)
    console.print(f"samples found: {result['samplesFound']}/{result['samples']}"
                  + (f"; detect-secrets: {ds['unavailable']}" if "unavailable" in ds else ""))
    inst = result["installedDocs"]
    print_table("Secret detector on installed documentation, whole notes (target: at most 1% of notes flagged)",
                ["corpus", "notes", "MB", "notes flagged", "rate", "MB per CPU-s"],
                [[name, d["notes"], round(d["characters"] / 1e6, 2), d["flaggedNotes"], d["noteFalsePositiveRate"],
                  d["mbPerCpuSecond"]] for name, d in inst["corpora"].items()]
                + [["all", inst["notes"], None, inst["flaggedNotes"], inst["noteFalsePositiveRate"], None]], console)
    doc_hits = [h for d in inst["corpora"].values() for h in d["hits"]]
    if doc_hits:
        print_table("Findings in installed documentation", ["kind", "note", "excerpt"],
                    [[h["kind"], h["note"][-60:], h["excerpt"]] for h in doc_hits[:30]], console)
    if result["hits"]:
        print_table("False positives", ["kind", "excerpt"], [[h["kind"], h["excerpt"]] for h in result["hits"][:30]], console)
    if result["missed"]:
        console.print(f"samples missed: {', '.join(result['missed'])}")


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        summary_row(NAME, "hive-brain", "false positives on LoCoMo", result["falsePositives"], target="~0",
                    status="ok" if result["falsePositiveRate"] < 0.001 else "missed"),
        summary_row(NAME, "hive-brain", "notes flagged in installed documentation (rate)",
                    result["installedDocs"]["noteFalsePositiveRate"], target=f"<= {INSTALLED_DOCS_TARGET}",
                    status="ok" if result["installedDocs"]["noteFalsePositiveRate"] <= INSTALLED_DOCS_TARGET else "missed"),
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
