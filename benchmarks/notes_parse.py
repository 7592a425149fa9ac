"""Notes parse + render: today's parser (``hive_brain.store.notes``) against python-frontmatter.

The corpus is a synthetic 10k-note vault (``fixtures.generate``) read into memory, with some notes
made the way hand edits make them: 2% CRLF line ends, 1% a UTF-8 BOM, 3% Obsidian keys (``aliases``,
``cssclasses``) after the typed keys.  Three ways to read and write a note, each timed over the whole
corpus (rounds interleaved so machine drift hits all alike; median of the rounds):

* ``today``: ``notes.parse_bytes`` + ``notes.render``.
* ``frontmatter.parse``: the library's own API with its YAML handler (it already uses PyYAML's
  ``CSafeLoader``/``CSafeDumper`` when libyaml is present), BOM and UTF-8 handled as today; render
  through ``frontmatter.dumps`` with today's key order and ``sort_keys=False``.
* ``frontmatter handler``: only the handler's ``load``/``export`` around today's own splitting and
  error handling (the most the library could be used for while keeping today's behaviour).

Fidelity is checked against ``today`` on the corpus and on a set of hand-edit edge cases (broken
YAML, unclosed frontmatter, a list instead of a mapping, CRLF, BOM, blank lines after the closing
``---``, keys named ``content``/``handler``, a non-string key): meta, body, problem reported, and the
rendered bytes.  Needs ``python-frontmatter`` installed; without it only ``today`` is timed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from .common import BenchConfig, log, print_table, standalone_main, summary_row, temp_dir

NAME = "notes_parse"
DEFAULT_NOTES = 10_000
DEFAULT_ROUNDS = 5
TOLERANCE = 1.10  # the brief: adopt only within ~10% of today's time

EDGE_CASES: dict[str, str] = {
    "broken YAML": "---\ntitle: [unclosed\n---\nbody\n",
    "unclosed frontmatter": "---\ntitle: x\nbody without closing\n",
    "list, not a mapping": "---\n- a\n- b\n---\nbody\n",
    "CRLF": "---\r\ntitle: x\r\ntags:\r\n- a\r\n---\r\n\r\nline one\r\nline two\r\n",
    "BOM": "\ufeff---\ntitle: x\n---\nbody\n",
    "blank lines after ---": "---\ntitle: x\n---\n\n\n   \nbody after blank lines\n",
    "trailing spaces kept": "---\ntitle: x\n---\nbody  \n\n",
    "key named content": "---\ntitle: x\ncontent: y\n---\nbody\n",
    "key named handler": "---\ntitle: x\nhandler: y\n---\nbody\n",
    "non-string key": "---\ntitle: x\n1: one\n---\nbody\n",
    "no frontmatter": "just a body\n",
    "horizontal rule in body": "---\ntitle: x\n---\nintro\n\n---\n\nmore\n",
    "dashes line in frontmatter": "---\ntitle: x\n-----\n---\nbody\n",
}


# --------------------------------------------------------------------------- corpus


def build_corpus(n: int) -> list[tuple[str, bytes]]:
    from .fixtures import generate

    out: list[tuple[str, bytes]] = []
    with temp_dir("hive-brain-notes-parse-") as root:
        generate(root, n, queries=0, init=False)
        paths = sorted(p for p in root.rglob("*.md"))
        for i, p in enumerate(paths):
            data = p.read_bytes()
            rel = p.relative_to(root).as_posix()
            if i % 33 == 5 and data.startswith(b"---\n"):
                data = data.replace(b"\n---\n", b"\naliases:\n- Other name\ncssclasses:\n- wide\n---\n", 1)
            if i % 50 == 7:
                data = data.replace(b"\n", b"\r\n")
            if i % 100 == 11:
                data = b"\xef\xbb\xbf" + data
            out.append((rel, data))
    return out


# --------------------------------------------------------------------------- the three ways


def _today() -> tuple[Any, Any]:
    from hive_brain.store import notes

    def parse(rel: str, data: bytes) -> tuple[dict[str, Any], str, str | None]:
        n = notes.parse_bytes(rel, data)
        return n.meta, n.body, n.problem

    return parse, notes.render


def _ordered(meta: dict[str, Any]) -> dict[str, Any]:
    from hive_brain.store.notes import KEY_ORDER, _plain

    ordered: dict[str, Any] = {k: meta[k] for k in KEY_ORDER if k in meta and meta[k] is not None}
    for k, v in meta.items():
        if k not in ordered and v is not None:
            ordered[k] = v
    return _plain(ordered)


def _decode(rel: str, data: bytes) -> str:
    """The checks and decoding today's ``parse_bytes`` does before it splits, so every variant pays them."""
    from hive_brain.errors import NoteError

    if b"\x00" in data[:8192]:
        raise NoteError(rel, "is a binary file, not a Markdown note")
    text = data.decode("utf-8")
    return text[1:] if text.startswith("\ufeff") else text


def _note(rel: str, data: bytes, meta: dict[str, Any], body: str,
          problem: str | None) -> tuple[dict[str, Any], str, str | None]:
    """Build the ``Note`` (with the raw bytes' hash) the index needs, as today's parser does."""
    from hive_brain.store.fsutil import sha256_bytes
    from hive_brain.store.notes import Note

    n = Note(rel, meta, body, sha256_bytes(data), problem=problem)
    return n.meta, n.body, n.problem


def _library_api() -> tuple[Any, Any]:
    import frontmatter
    import yaml

    handler = frontmatter.YAMLHandler()

    def parse(rel: str, data: bytes) -> tuple[dict[str, Any], str, str | None]:
        text = _decode(rel, data)
        try:
            meta, body = frontmatter.parse(text, handler=handler)
        except yaml.YAMLError as e:
            return _note(rel, data, {}, text, f"broken YAML frontmatter: {str(e).splitlines()[0]}")
        return _note(rel, data, {str(k): v for k, v in meta.items()}, body, None)

    def render(meta: dict[str, Any], body: str) -> str:
        post = frontmatter.Post(body)
        post.metadata = _ordered(meta)  # Post(**meta) would fail on a key named "content" or "handler"
        return frontmatter.dumps(post, handler, sort_keys=False, width=1000) + "\n"

    return parse, render


def _library_handler() -> tuple[Any, Any]:
    import frontmatter
    import yaml

    from hive_brain.store import notes

    handler = frontmatter.YAMLHandler()

    def parse(rel: str, data: bytes) -> tuple[dict[str, Any], str, str | None]:
        text = _decode(rel, data)
        if not text.startswith("---"):
            return _note(rel, data, {}, text, None)
        split = notes.split_frontmatter(text)
        if split is None:
            return _note(rel, data, {}, text, "frontmatter is not closed by a '---' line")
        fm, body_at = split
        try:
            meta = handler.load(fm) or {}
        except yaml.YAMLError as e:
            return _note(rel, data, {}, text, f"broken YAML frontmatter: {str(e).splitlines()[0]}")
        if not isinstance(meta, dict):
            return _note(rel, data, {}, text, "frontmatter is not a key/value mapping")
        return _note(rel, data, {str(k): v for k, v in meta.items()}, text[body_at:], None)

    def render(meta: dict[str, Any], body: str) -> str:
        fm = handler.export(_ordered(meta), sort_keys=False, width=1000)
        body = body if body.endswith("\n") else body + "\n"
        return f"---\n{fm}\n---\n\n{body.lstrip(chr(10))}"

    return parse, render


def variants() -> dict[str, tuple[Any, Any] | str]:
    out: dict[str, tuple[Any, Any] | str] = {"today": _today()}
    try:
        out["frontmatter.parse"] = _library_api()
        out["frontmatter handler"] = _library_handler()
    except ImportError as e:
        out["frontmatter.parse"] = out["frontmatter handler"] = f"python-frontmatter not installed ({e})"
    return out


# --------------------------------------------------------------------------- fidelity and timing


def _run_one(parse: Any, render: Any, rel: str, data: bytes) -> dict[str, Any]:
    try:
        meta, body, problem = parse(rel, data)
    except Exception as e:  # a crash is a finding here, not a benchmark failure
        return {"error": f"{type(e).__name__}: {e}"}
    try:
        rendered = render(meta, body) if problem is None else None
    except Exception as e:
        return {"meta": meta, "body": body, "problem": problem, "error": f"render {type(e).__name__}: {e}"}
    return {"meta": meta, "body": body, "problem": problem, "rendered": rendered}


def _diff(ref: dict[str, Any], got: dict[str, Any]) -> list[str]:
    if "error" in got and "error" not in ref:
        return [f"raises {got['error']}"]
    what = []
    for key in ("meta", "body", "rendered"):
        if ref.get(key) != got.get(key):
            what.append(key)
    if (ref.get("problem") is None) != (got.get("problem") is None):
        what.append("problem " + ("not reported" if got.get("problem") is None else "invented"))
    return what


def fidelity(ways: dict[str, Any], corpus: list[tuple[str, bytes]]) -> dict[str, Any]:
    ref_parse, ref_render = ways["today"]
    out: dict[str, Any] = {}
    for name, way in ways.items():
        if name == "today" or isinstance(way, str):
            continue
        parse, render = way
        counts: dict[str, int] = {}
        examples: dict[str, str] = {}
        for rel, data in corpus:
            for d in _diff(_run_one(ref_parse, ref_render, rel, data), _run_one(parse, render, rel, data)):
                counts[d] = counts.get(d, 0) + 1
                examples.setdefault(d, rel)
        edges: dict[str, str] = {}
        for label, text in EDGE_CASES.items():
            data = text.encode("utf-8")
            diffs = _diff(_run_one(ref_parse, ref_render, label, data), _run_one(parse, render, label, data))
            edges[label] = ", ".join(diffs) if diffs else "same"
        out[name] = {"corpus_differences": counts, "corpus_examples": examples, "edge_cases": edges}
    return out


def timing(ways: dict[str, Any], corpus: list[tuple[str, bytes]], rounds: int) -> dict[str, Any]:
    runnable = {k: v for k, v in ways.items() if not isinstance(v, str)}
    parse_s: dict[str, list[float]] = {k: [] for k in runnable}
    render_s: dict[str, list[float]] = {k: [] for k in runnable}
    # Parse results are kept per variant so render always gets that variant's own output.
    for _ in range(rounds):
        for name, (parse, render) in runnable.items():
            t0 = time.perf_counter()
            parsed = [parse(rel, data) for rel, data in corpus]
            t1 = time.perf_counter()
            for meta, body, problem in parsed:
                if problem is None:
                    render(meta, body)
            t2 = time.perf_counter()
            parse_s[name].append(t1 - t0)
            render_s[name].append(t2 - t1)
    res: dict[str, Any] = {}
    base_total = statistics.median(p + r for p, r in zip(parse_s["today"], render_s["today"], strict=True))
    for name in runnable:
        totals = [p + r for p, r in zip(parse_s[name], render_s[name], strict=True)]
        total = statistics.median(totals)
        res[name] = {"parse_ms": round(statistics.median(parse_s[name]) * 1000, 1),
                     "render_ms": round(statistics.median(render_s[name]) * 1000, 1),
                     "total_ms": round(total * 1000, 1),
                     "us_per_note": round(total / len(corpus) * 1e6, 1),
                     "ratio_to_today": round(total / base_total, 3),
                     "rounds_total_ms": [round(t * 1000, 1) for t in totals]}
    return res


def run(cfg: BenchConfig, notes: int | None = None, rounds: int | None = None) -> dict[str, Any]:
    n = notes or (2_000 if cfg.quick else DEFAULT_NOTES)
    r = rounds or DEFAULT_ROUNDS
    log(f"notes_parse: building a {n}-note corpus")
    corpus = build_corpus(n)
    ways = variants()
    log(f"notes_parse: {r} rounds over {len(corpus)} notes, {len(ways)} variants")
    fid = fidelity(ways, corpus)
    times = timing(ways, corpus, r)
    import yaml

    versions: dict[str, str | None] = {"pyyaml": yaml.__version__, "libyaml": getattr(yaml, "__with_libyaml__", None)}
    try:
        from importlib.metadata import version

        versions["python-frontmatter"] = version("python-frontmatter")
    except Exception:
        versions["python-frontmatter"] = None
    return {"notes": len(corpus), "rounds": r, "tolerance": TOLERANCE, "versions": versions,
            "unavailable": {k: v for k, v in ways.items() if isinstance(v, str)},
            "timing": times, "fidelity": fid}


def report(result: dict[str, Any], console: Any) -> None:
    rows = [[name, t["parse_ms"], t["render_ms"], t["total_ms"], t["us_per_note"], f"{t['ratio_to_today']:.3f}"]
            for name, t in result["timing"].items()]
    rows += [[name, None, None, None, None, None] for name in result["unavailable"]]
    print_table(f"Notes: parse + render of {result['notes']} notes, median of {result['rounds']} rounds",
                ["variant", "parse ms", "render ms", "total ms", "us/note", "x today"], rows, console, digits=1)
    for name, f in result["fidelity"].items():
        diffs = ", ".join(f"{k}: {v}" for k, v in f["corpus_differences"].items()) or "none"
        console.print(f"{name}: corpus notes differing from today: {diffs}")
        print_table(f"{name}: hand-edit edge cases against today", ["case", "differs in"],
                    [[k, v] for k, v in f["edge_cases"].items()], console)
    for name, why in result["unavailable"].items():
        console.print(f"{name}: {why}")


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for name, t in result["timing"].items():
        f = result["fidelity"].get(name)
        faithful = f is None or (not f["corpus_differences"] and all(v == "same" for v in f["edge_cases"].values()))
        ok = t["ratio_to_today"] <= result["tolerance"] and faithful
        rows.append(summary_row(NAME, name, "parse+render ms", t["total_ms"], target=f"<= x{result['tolerance']}",
                                vs_baseline=f"x{t['ratio_to_today']}", status="ok" if ok else "differs",
                                note=None if faithful else "output differs from today's"))
    return rows


def _extra(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--notes", type=int, default=None, help=f"corpus size (default {DEFAULT_NOTES}; --quick 2000)")
    ap.add_argument("--rounds", type=int, default=None, help=f"timed rounds (default {DEFAULT_ROUNDS})")


if __name__ == "__main__":
    sys.exit(standalone_main(sys.modules[__name__], extra_args=_extra,
                             kwargs_from_args=lambda a: {"notes": a.notes, "rounds": a.rounds}))
