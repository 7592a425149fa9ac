"""Reference notes nobody here wrote: the Python standard library's own documentation as Markdown.

    python -m benchmarks.prompt_refs --out /tmp/refs --count 3000     # writes Reference/python/...

Developers keep documentation in their vaults next to their team's notes; the prompt-hook benchmark
(:mod:`benchmarks.prompt_hook`) adds these notes to the team's memories so the hook has to tell the
team's world from generic text that shares its words (token, formatter, logs, release, test).

What becomes a note (``inspect``/``pydoc``, nothing written by hand):
- every pydoc topic (``pydoc_data.topics.topics``: the language reference's sections) →
  ``Reference/python/topics/<topic>.md``;
- every public standard-library module with a docstring (and its public submodules) →
  ``Reference/python/<module>.md``: the module docstring, then its functions and classes with their
  signatures and the first paragraph of each docstring;
- every public class with a docstring → ``Reference/python/<module>/<Class>.md``: its docstring and
  its own methods';
- every public function with a docstring of a paragraph or more → ``Reference/python/<module>/<function>.md``.

A note is capped near :data:`MAX_CHARS` (cut at a paragraph), as a user's pasted doc page would be.
The candidates are sorted by path, shuffled with a fixed seed and the first ``count`` written, so the
500-note set is the start of the 3,000-note set (a vault built from the larger set can reuse the smaller
one's embeddings) and the same Python writes the same bytes every run: the notes are produced in a child
interpreter with ``PYTHONHASHSEED=0`` (set reprs in signatures) and addresses (``at 0x...``) removed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import inspect
import io
import json
import os
import pkgutil
import random
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

SEED = 25
MAX_CHARS = 3000
MIN_CHARS = 200  # shorter docstrings make no note of their own
FOLDER = "Reference/python"

# Modules that act on import (open a browser, print, need a display), tests, tooling and internals.
SKIP = {"antigravity", "this", "idlelib", "turtledemo", "tkinter", "turtle", "test", "lib2to3", "ensurepip",
        "pydoc_data", "__hello__", "__phello__", "xxsubtype", "xxlimited", "xxlimited_35", "_testcapi",
        "msilib", "winreg", "winsound", "_winapi", "nt", "msvcrt", "_msi", "sre_compile", "sre_parse",
        "sre_constants", "distutils"}
SKIP_PARTS = {"test", "tests", "idle_test", "__main__"}
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _first_paragraph(doc: str) -> str:
    return doc.strip().split("\n\n", 1)[0].strip()


def _cap(text: str, limit: int = MAX_CHARS) -> str:
    """Whole paragraphs up to ``limit`` characters (at least the first)."""
    if len(text) <= limit:
        return text
    out: list[str] = []
    n = 0
    for para in text.split("\n\n"):
        if out and n + len(para) + 2 > limit:
            break
        out.append(para)
        n += len(para) + 2
    return "\n\n".join(out)[: limit * 2]


def _signature(name: str, obj: Any) -> str:
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return name
    return name + ADDRESS.sub("", sig)


def _doc(obj: Any) -> str:
    try:
        doc = inspect.getdoc(obj)
    except Exception:  # noqa: BLE001 - an odd object has no doc
        return ""
    return ADDRESS.sub("", doc or "").strip()


def _public(name: str) -> bool:
    return not name.startswith("_")


def module_names() -> list[str]:
    """Public standard-library modules and their public submodules, sorted."""
    names: set[str] = set()
    for top in sorted(sys.stdlib_module_names):
        if not _public(top) or top in SKIP:
            continue
        names.add(top)
        mod = _import(top)
        if mod is None or not hasattr(mod, "__path__"):
            continue
        for info in pkgutil.walk_packages(mod.__path__, prefix=top + ".", onerror=lambda _n: None):
            parts = info.name.split(".")
            if all(_public(p) and p not in SKIP_PARTS for p in parts[1:]):
                names.add(info.name)
    return sorted(names)


def _import(name: str) -> Any:
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            return importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - a module this platform lacks (curses, readline, ...)
            return None


def _own_members(mod: Any) -> Iterator[tuple[str, Any]]:
    """The module's public functions and classes defined in it (not imported from elsewhere)."""
    names = getattr(mod, "__all__", None)
    items = sorted(vars(mod).items())
    for name, obj in items:
        if not _public(name) or (names is not None and name not in names):
            continue
        if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)):
            continue
        if getattr(obj, "__module__", None) not in (mod.__name__, "_" + mod.__name__.rsplit(".", 1)[-1]) \
                and names is None:
            continue
        yield name, obj


def _note(title: str, body: str, tags: Sequence[str]) -> str:
    front = "---\ntags: [" + ", ".join(tags) + "]\nsource: python " + ".".join(map(str, sys.version_info[:2])) + \
        " documentation\n---\n"
    return f"{front}# {title}\n\n{body.strip()}\n"


def module_notes(name: str) -> Iterator[tuple[str, str]]:
    mod = _import(name)
    if mod is None:
        return
    doc = _doc(mod)
    members = list(_own_members(mod))
    folder = f"{FOLDER}/{name}"
    funcs = [(n, o) for n, o in members if not inspect.isclass(o)]
    classes = [(n, o) for n, o in members if inspect.isclass(o)]
    if len(doc) >= MIN_CHARS or (doc and members):
        parts = [_cap(doc, MAX_CHARS // 2)]
        if funcs:
            parts.append("## Functions\n\n" + "\n\n".join(
                f"`{_signature(n, o)}`: {_first_paragraph(_doc(o))}" if _doc(o) else f"`{_signature(n, o)}`"
                for n, o in funcs))
        if classes:
            parts.append("## Classes\n\n" + "\n\n".join(
                f"`{n}`: {_first_paragraph(_doc(o))}" if _doc(o) else f"`{n}`" for n, o in classes))
        summary = re.split(r"(?<=\.)\s", " ".join(_first_paragraph(doc).split()), maxsplit=1)[0] if doc else ""
        title = f"{name}: {summary.rstrip('.')}" if summary and len(summary) < 80 else name
        yield f"{FOLDER}/{name}.md", _note(title, _cap("\n\n".join(parts)), ["python", "reference", "module"])
    for n, o in classes:
        cdoc = _doc(o)
        if len(cdoc) < MIN_CHARS // 2:
            continue
        parts = [_cap(cdoc, MAX_CHARS // 2)]
        methods = []
        long_methods = []
        for mn, mo in sorted(vars(o).items()):
            if not _public(mn) or not callable(mo) and not isinstance(mo, classmethod | staticmethod | property):
                continue
            md = _doc(getattr(o, mn, mo))
            if md and md != cdoc:
                sig = _signature(mn, getattr(o, mn, mo))
                methods.append(f"### {mn}\n\n`{sig}`\n\n{_cap(md, 600)}")
                if len(md) >= MIN_CHARS:
                    long_methods.append((mn, sig, md))
        if methods:
            parts.append("## Methods\n\n" + "\n\n".join(methods))
        yield f"{folder}/{n}.md", _note(f"{name}.{n}", _cap("\n\n".join(parts)), ["python", "reference", "class"])
        for mn, sig, md in long_methods:  # a long method doc is a page of its own, as in the library docs
            yield f"{folder}/{n}.{mn}.md", _note(f"{name}.{n}.{mn}", f"`{sig}`\n\n{_cap(md)}",
                                                 ["python", "reference", "method"])
    for n, o in funcs:
        fdoc = _doc(o)
        if len(fdoc) < MIN_CHARS // 2:
            continue
        body = f"`{_signature(name + '.' + n, o)}`\n\n{_cap(fdoc)}"
        yield f"{folder}/{n}.md", _note(f"{name}.{n}", body, ["python", "reference", "function"])


def topic_notes() -> Iterator[tuple[str, str]]:
    from pydoc_data.topics import topics

    for key in sorted(topics):
        text = topics[key].strip()
        if len(text) < MIN_CHARS:
            continue
        lines = text.splitlines()
        # A topic starts with its section title underlined by '*' or '='.
        title = lines[0].strip() if len(lines) > 1 and set(lines[1].strip()) <= set("*=-") else key
        body = "\n".join(lines[2:]) if title != key else text
        body = re.sub(r"\n([^\n]+)\n([=\-*~^])\2{2,}\n", lambda m: f"\n## {m.group(1).strip()}\n", "\n" + body)
        yield f"{FOLDER}/topics/{key}.md", _note(title, _cap(body), ["python", "reference", "language"])


def candidates() -> dict[str, str]:
    """Every note this Python can write: path -> Markdown."""
    out: dict[str, str] = {}
    for path, text in topic_notes():
        out.setdefault(path, text)
    for name in module_names():
        for path, text in module_notes(name):
            out.setdefault(path, text)
    return out


def choose(paths: Sequence[str], count: int, seed: int = SEED) -> list[str]:
    """``count`` paths in the seeded order: the first n of a larger count are the same n."""
    order = sorted(paths)
    random.Random(seed).shuffle(order)
    return order[:count]


def write_notes(root: Path, count: int, seed: int = SEED) -> dict[str, Any]:
    """Write ``count`` notes under ``root`` (in this process); their paths and a digest of all bytes."""
    notes = candidates()
    if count > len(notes):
        raise SystemExit(f"this Python documents only {len(notes)} notes, fewer than {count}")
    chosen = choose(list(notes), count, seed)
    digest = hashlib.sha256()
    for rel in chosen:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(notes[rel], encoding="utf-8")
        digest.update(rel.encode() + b"\0" + notes[rel].encode() + b"\0")
    return {"count": count, "available": len(notes), "seed": seed, "sha256": digest.hexdigest(),
            "chars": sum(len(notes[r]) for r in chosen), "python": sys.version.split()[0], "paths": chosen}


def write_refs(root: Path, count: int, seed: int = SEED, python: str | None = None) -> dict[str, Any]:
    """:func:`write_notes` in a child interpreter with a fixed hash seed (the same bytes every run)."""
    if count <= 0:
        return {"count": 0, "paths": [], "sha256": None}
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    r = subprocess.run([python or sys.executable, "-m", "benchmarks.prompt_refs", "--out", str(root), "--count",
                        str(count), "--seed", str(seed), "--json"], env=env, capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[1], timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"prompt_refs failed: {r.stderr.strip()[-500:]}")
    return dict(json.loads(r.stdout))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.prompt_refs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="the vault (or any folder) to write into")
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--json", action="store_true", help="print the manifest as JSON (paths included)")
    args = ap.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0":
        res = write_refs(args.out, args.count, args.seed)
    else:
        res = write_notes(args.out, args.count, args.seed)
    if args.json:
        print(json.dumps(res))
    else:
        print(f"wrote {res['count']} of {res['available']} notes ({res['chars']:,} chars) under "
              f"{args.out / FOLDER}; sha256 {res['sha256'][:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
