"""Capsules: export, open (verify), search and import-preview of a 1,000-memory capsule.

A vault with N memories in project ``bench`` (plus 100 in another project, which must stay home) is
written through the public unit of work, then measured in-process (the core calls the CLI makes):

- **export**: `capsule-export --project bench`, unlocked and locked (AES-256-GCM, scrypt n=2^15);
  the file's size and its bytes per memory.
- **open**: reading and verifying the file (whole-file SHA-256, manifest, every record checksum;
  for the locked one, key derivation and decryption too).
- **search**: FTS5 bm25 queries over the open capsule (p50/p95 ms; a warm capsule, as a user
  searching one file repeatedly has it).
- **import preview**: what `capsule-import` would propose, against an empty second vault (every
  record new) and against the source vault (every record already there), plus `--enqueue` into
  the empty vault (N Brain Review proposals in one unit of work).

    python -m benchmarks.capsule [--quick|--full] [--memories 1000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

from .common import (
    BenchConfig,
    check_target,
    latency_summary,
    log,
    print_table,
    standalone_main,
    summary_row,
    temp_dir,
    temp_state_dir,
)

NAME = "capsule"
DEFAULT_MEMORIES = 1000
PASSPHRASE = "benchmark passphrase, not a secret"
TARGETS_S = {"export": 5.0, "open": 1.0, "import_preview": 5.0}
TARGET_SEARCH_P95_MS = 50.0
WORDS = (
    "deploy", "rollback", "postgres", "migration", "cache", "index", "queue", "worker", "retry", "timeout",
    "budget", "review", "release", "schema", "backup", "restore", "latency", "token", "rotate", "secret",
    "vault", "agent", "sync", "conflict", "generation", "recall", "answer", "lexical", "vector", "embedding",
    "model", "pack", "server", "socket", "lock", "journal", "pending", "catalog",
)
TYPES = ("fact", "decision", "procedure", "lesson", "preference")


def _fill(vault: Path, n: int, seed: int = 11) -> float:
    from hive_brain.engine import Engine
    from hive_brain.memory.model import MemoryInput

    rng = random.Random(seed)
    t0 = time.perf_counter()
    eng = Engine.open(vault)
    with eng.memory.transaction("benchmark fill") as tx:
        for i in range(n + 100):
            words = rng.choices(WORDS, k=40)
            tx.remember(MemoryInput(type=TYPES[i % len(TYPES)], title=f"{words[0].title()} {words[1]} note {i}",
                                    content=" ".join(words) + f". Item {i}.", project="bench" if i < n else "other",
                                    tags=[words[2], words[3]]))
    eng.memory.catalog.close()
    return time.perf_counter() - t0


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run(cfg: BenchConfig, memories: int = DEFAULT_MEMORIES) -> dict[str, Any]:
    from hive_brain.config import resolve
    from hive_brain.engine import Engine
    from hive_brain.memory.capsules import export_capsule, import_capsule, read_capsule, search_capsule
    from hive_brain.store.vault import init_vault

    queries = 30 if cfg.quick else 200
    result: dict[str, Any] = {"memories": memories, "queries": queries}
    with temp_state_dir(), temp_dir("hive-brain-capsule-") as tmp:
        src, dst = tmp / "vault", tmp / "other"
        init_vault(src, resolve(vault=str(src)))
        init_vault(dst, resolve(vault=str(dst)))
        log(f"capsule: writing {memories} + 100 memories")
        result["fill_s"] = round(_fill(src, memories), 2)
        store = Engine.open(src).memory
        settings = store.settings

        plain, locked = tmp / "bench.hivebrain", tmp / "bench-locked.hivebrain"
        log("capsule: export")
        res, t = _timed(lambda: export_capsule(store, plain, project="bench"))
        result["export"] = {"s": round(t, 3), "records": res["records"], "bytes": res["bytes"],
                            "bytes_per_memory": round(res["bytes"] / max(1, res["records"]))}
        res, t = _timed(lambda: export_capsule(store, locked, project="bench", passphrase=PASSPHRASE))
        result["export_locked"] = {"s": round(t, 3), "records": res["records"], "bytes": res["bytes"]}

        log("capsule: open and verify")
        cap, t = _timed(lambda: read_capsule(settings, plain))
        result["open"] = {"s": round(t, 3), "checks": cap.checks}
        cap_l, t = _timed(lambda: read_capsule(settings, locked, passphrase=PASSPHRASE))
        result["open_locked"] = {"s": round(t, 3), "checks": cap_l.checks}
        cap_l.conn.close()

        log(f"capsule: {queries} searches")
        rng = random.Random(5)
        times, hits = [], 0
        for _ in range(queries):
            q = " ".join(rng.sample(WORDS, 3))
            out, t = _timed(lambda q=q: search_capsule(cap, q, 10))
            times.append(t)
            hits += bool(out["hits"])
        result["search"] = {**latency_summary(times), "with_hits": hits}

        log("capsule: import preview and enqueue")
        other = Engine.open(dst).memory
        prev, t = _timed(lambda: import_capsule(other, cap))
        result["import_preview_new"] = {"s": round(t, 3), "counts": prev["counts"]}
        prev, t = _timed(lambda: import_capsule(store, cap))
        result["import_preview_existing"] = {"s": round(t, 3), "counts": prev["counts"]}
        prev, t = _timed(lambda: import_capsule(other, cap, enqueue=True))
        result["import_enqueue"] = {"s": round(t, 3), "counts": prev["counts"]}
        cap.conn.close()
        store.catalog.close()
        other.catalog.close()
    return result


def _rows(result: dict[str, Any]) -> list[list[Any]]:
    r = result
    s = r["search"]
    return [
        ["export (unlocked)", r["export"]["s"] * 1000, f"{r['export']['records']} memories, {r['export']['bytes']:,} bytes"
         f" ({r['export']['bytes_per_memory']} B/memory)"],
        ["export (locked, scrypt + AES-GCM)", r["export_locked"]["s"] * 1000, f"{r['export_locked']['bytes']:,} bytes"],
        ["open + verify (unlocked)", r["open"]["s"] * 1000, ", ".join(r["open"]["checks"])],
        ["open + verify (locked)", r["open_locked"]["s"] * 1000, "+ key derivation and decryption"],
        [f"search p50 ({s['n']} queries)", s["median_ms"], f"p95 {s['p95_ms']:.2f} ms, {s['with_hits']} with hits"],
        ["import preview (all new)", r["import_preview_new"]["s"] * 1000, str(r["import_preview_new"]["counts"])],
        ["import preview (all exist)", r["import_preview_existing"]["s"] * 1000,
         str(r["import_preview_existing"]["counts"])],
        ["import --enqueue (all new)", r["import_enqueue"]["s"] * 1000, str(r["import_enqueue"]["counts"])],
    ]


def report(result: dict[str, Any], console: Any) -> None:
    print_table(f"Capsules: {result['memories']} memories (vault filled in {result['fill_s']} s)",
                ["step", "ms", "detail"], _rows(result), console, digits=1)


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    n = result["memories"]

    rows = [summary_row(NAME, f"{n} memories: {step}", "s", result[key]["s"], target=f"< {TARGETS_S[tk]:.0f} s",
                        status=check_target(result[key]["s"], TARGETS_S[tk], higher_is_better=False))
            for step, key, tk in (("export", "export", "export"), ("open + verify", "open", "open"),
                                  ("import preview", "import_preview_new", "import_preview"))]
    p95 = result["search"]["p95_ms"]
    rows.append(summary_row(NAME, f"{n} memories: search", "p95 ms", p95, target=f"< {TARGET_SEARCH_P95_MS:.0f} ms",
                            status=check_target(p95, TARGET_SEARCH_P95_MS, higher_is_better=False)))
    return rows


def _extra(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--memories", type=int, default=DEFAULT_MEMORIES, help=f"memories exported (default {DEFAULT_MEMORIES})")


if __name__ == "__main__":
    sys.exit(standalone_main(sys.modules[__name__], extra_args=_extra,
                             kwargs_from_args=lambda a: {"memories": a.memories}))
