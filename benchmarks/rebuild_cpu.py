"""Lexical rebuild throughput in CPU seconds (issue 30): ``Engine.rebuild(embed=False)`` on a fixture vault.

    python -m benchmarks.rebuild_cpu --work /tmp/rebuildwork --notes 1000 --runs 3
    python -m benchmarks.rebuild_cpu --work /tmp/rebuildwork --against /tmp/base-src   # interleaved with another tree
    python -m benchmarks.rebuild_cpu --work /tmp/rebuildwork --profile                 # cProfile of one rebuild
    python -m benchmarks.rebuild_cpu --vault V --dump out.json [--tree DIR]            # what the rebuild derived
    python -m benchmarks.rebuild_cpu --work /tmp/rebuildwork --notes 10000 --pass promotion --against /tmp/base-src

Each run is a fresh process with a fresh state dir: imports first, then only the rebuild is timed
(``time.process_time`` for CPU, ``perf_counter`` for wall). The machine is shared, so CPU seconds
are the figure; wall is shown beside them. ``--against DIR`` runs the same child with
``PYTHONPATH=DIR`` (another checkout's source, e.g. ``git archive`` of the base commit) alternately
with this tree's, so load drift hits both alike. ``--dump`` writes every catalog row, every secret
finding, every stored object's hash and every tantivy document the rebuild added (as tantivy got it,
analyzed terms included), sorted: two dumps of the same vault from two trees must be equal.
``--pass promotion`` times the server's daily promotion pass instead (``BrainReview.promote``, dry run, on
a catalog the child has already walked, as a warm server's is): the fixture's private memories of three
agents, compared all pairs. Writes ``benchmarks/results/rebuild_cpu.json`` (``rebuild_cpu-promotion.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

NAME = "rebuild_cpu"
HERE = Path(__file__).resolve().parents[1]

# Run in a child whose PYTHONPATH is the tree under test: it must not import this package.
CHILD = r"""
import json, os, sys, time
vault, state, mode, out = sys.argv[1:5]
os.environ.update({"HIVE_BRAIN_STATE_DIR": state, "HIVE_BRAIN_VAULT": vault, "HIVE_BRAIN_SEMANTIC": "0",
                   "HIVE_BRAIN_AUTOSTART": "0"})
from hive_brain.config import resolve
from hive_brain.engine import Engine
import importlib
for mod in ("hive_brain.index.indexer", "hive_brain.index.lexical", "hive_brain.index.textproc", "hive_brain.index.passages",
            "hive_brain.index.generations", "hive_brain.index.embcache", "hive_brain.store.catalog", "hive_brain.store.journal",
            "hive_brain.store.secrets", "hive_brain.store.copies", "hive_brain.store.flatyaml", "hive_brain.memory.layers",
            "yaml", "tantivy"):
    try:  # imports are not timed: the figure is the rebuild's own (a tree may lack a module)
        importlib.import_module(mod)
    except ImportError:
        pass
eng = Engine.from_settings(resolve())
docs = []
if mode == "dump":
    from hive_brain.index import lexical
    real = lexical.LexicalWriter._writer
    class _Rec:
        def __init__(self, w): self._w = w
        def add_document(self, d):
            docs.append(d.to_dict()); return self._w.add_document(d)
        def __getattr__(self, k): return getattr(self._w, k)
    lexical.LexicalWriter._writer = lambda self: _Rec(real(self))
prof = None
if mode == "profile":
    import cProfile
    prof = cProfile.Profile()
if mode == "promotion":
    from hive_brain.memory.review import BrainReview
    review = BrainReview(eng.memory.for_agent(None, owner_verified=True))
    review.promote(dry_run=True)  # the catalog walk and first reads, which a warm server has behind it
c0, t0 = time.process_time(), time.perf_counter()
if prof: prof.enable()
if mode == "promotion":
    rep = review.promote(dry_run=True)
    res = {"indexed": rep["groups"], "passages": len(rep["skipped"]) + len(rep["proposed"]) + len(rep["extended"])}
else:
    res = eng.rebuild(embed=False)
if prof: prof.disable()
cpu, wall = time.process_time() - c0, time.perf_counter() - t0
notes = (eng.catalog if mode == "promotion" else eng.indexer.catalog).db.execute("SELECT COUNT(*) FROM notes").fetchone()[0]
import hive_brain
result = {"tree": os.path.dirname(os.path.dirname(hive_brain.__file__)), "cpu_s": cpu, "wall_s": wall, "notes": notes, "indexed": res.get("indexed"), "passages": res.get("passages")}
if prof:
    import io, pstats
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).strip_dirs().sort_stats("tottime").print_stats(40)
    pstats.Stats(prof, stream=buf).strip_dirs().sort_stats("cumulative").print_stats(50)
    result["profile"] = buf.getvalue()
if mode == "dump":
    import hashlib, sqlite3
    db = eng.indexer.catalog.db
    cols = [c[1] for c in db.execute("PRAGMA table_info(notes)")]
    rows = [dict(zip(cols, r)) for r in db.execute("SELECT * FROM notes ORDER BY path")]
    for r in rows:
        r.pop("mtime_ns", None)  # a copied vault has other mtimes; everything else must match
    secrets = [list(r) for r in db.execute("SELECT path, line, kind FROM secrets ORDER BY path, line, kind")]
    odb = sqlite3.connect(str(eng.indexer.gens.objects_path))
    objects = sorted((k, hashlib.sha256(v).hexdigest()) for k, v in odb.execute("SELECT sha, data FROM objects"))
    def key(d):
        return (d.get("passage_id") or [""])[0]
    for d in docs:
        for k, v in d.items():
            d[k] = [x.hex() if isinstance(x, bytes) else x for x in v]
    docs.sort(key=key)
    json.dump({"notes": rows, "secrets": secrets, "objects": objects, "documents": docs}, open(out, "w"),
              ensure_ascii=False, indent=0, sort_keys=True)
print(json.dumps(result))
"""


def fixture_vault(work: Path, notes: int) -> Path:
    """The vault ``cli_latency.py --work`` keeps (``vault-N``), generated when missing."""
    vault = work / f"vault-{notes}"
    if not (vault / ".hive-brain").exists() and not any(vault.glob("*.md")):
        from . import fixtures
        from .common import state_dir_at

        with state_dir_at(work / "state-generate"):
            fixtures.generate(vault, notes, queries=0)
    return vault


def child(tree: Path, vault: Path, mode: str = "time", out: Path | None = None) -> dict[str, Any]:
    """One run in a fresh process and state dir; ``mode``: time (a rebuild), promotion, profile, dump."""
    with tempfile.TemporaryDirectory(prefix="hb-rebuild-state-") as state:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        # cwd elsewhere: ``python -c`` puts the working directory first on sys.path, before PYTHONPATH.
        p = subprocess.run([sys.executable, "-c", CHILD, str(vault), state, mode, str(out or "")], env=env, cwd=state,
                           capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"rebuild child failed ({tree}): {p.stderr[-2000:]}")
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    cpu = [r["cpu_s"] for r in runs]
    wall = [r["wall_s"] for r in runs]
    n = runs[0]["notes"]
    return {"notes": n, "cpu_s": [round(c, 3) for c in cpu], "wall_s": [round(w, 3) for w in wall],
            "notes_per_cpu_s": [round(n / c) for c in cpu], "notes_per_wall_s": [round(n / w) for w in wall],
            "median_notes_per_cpu_s": round(n / sorted(cpu)[len(cpu) // 2])}


def main(argv: Sequence[str] | None = None) -> int:
    from .common import enable_bytecode_cache, git_commit, load_average, log, print_table, write_result

    ap = argparse.ArgumentParser(prog="python -m benchmarks.rebuild_cpu", description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "hb-rebuild-work")
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--vault", type=Path, default=None, help="an existing vault instead of the fixture")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--against", type=Path, default=None, help="another source tree, run interleaved")
    ap.add_argument("--label", default="this tree")
    ap.add_argument("--profile", action="store_true", help="print a cProfile (tottime) of one rebuild")
    ap.add_argument("--dump", type=Path, default=None, help="write what one rebuild derived, then stop")
    ap.add_argument("--tree", type=Path, default=HERE, help="the source tree --dump and --profile run (default: this one)")
    ap.add_argument("--pass", dest="what", choices=["rebuild", "promotion"], default="rebuild",
                    help="what is timed: the lexical rebuild, or the daily promotion pass (groups in 'indexed')")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    enable_bytecode_cache()  # as an installed package: modules imported during the rebuild are not compiled each run
    vault = args.vault or fixture_vault(args.work, args.notes)
    if args.dump:
        r = child(args.tree, vault, "dump", args.dump)
        log(f"{r['tree']}: {r['notes']} notes, {r['passages']} documents: wrote {args.dump}")
        return 0
    if args.profile:
        print(child(args.tree, vault, "profile")["profile"])
        return 0
    trees = {args.label: HERE, **({f"against {args.against}": args.against} if args.against else {})}
    mode = "promotion" if args.what == "promotion" else "time"
    child(HERE, vault, mode)  # warm the page cache and the bytecode
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
    load0 = load_average()
    for i in range(args.runs):
        for label, tree in trees.items():
            runs[label].append(r := child(tree, vault, mode))
            log(f"run {i + 1} {label} ({r['tree']}): {r['cpu_s']:.3f} CPU s, {r['wall_s']:.3f} s wall")
    results = {k: summarize(v) for k, v in runs.items()}
    res: dict[str, Any] = {"commit": git_commit(), "vault": str(vault), "load": [load0, load_average()],
                           "trees": {k: str(v) for k, v in trees.items()}, "results": results}
    what = "Promotion pass (dry run, warm catalog)" if mode == "promotion" else "Lexical rebuild"
    print_table(f"{what}, {next(iter(results.values()))['notes']:,} notes (fresh state each run)",
                ["tree", "CPU s", "notes per CPU-s", "wall s", "notes/s wall"],
                [[k, " / ".join(f"{c:.2f}" for c in s["cpu_s"]), " / ".join(f"{x:,}" for x in s["notes_per_cpu_s"]),
                  " / ".join(f"{w:.2f}" for w in s["wall_s"]), " / ".join(f"{x:,}" for x in s["notes_per_wall_s"])]
                 for k, s in results.items()])
    print(f"load average {res['load']}")
    log(f"wrote {write_result(NAME if mode == 'time' else f'{NAME}-promotion', res)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
