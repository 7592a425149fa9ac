"""Writes: `hive-brain remember` as a whole process, and eight concurrent CLI writers.

1. **Latency.** In a generated vault of 1k and 10k notes (lexical index built; vectors left queued, as
   a write never touches them), `hive-brain remember` runs through the installed entry point,
   round-robin with `python -c pass` (so drift hits both alike), N times each after a warm-up.
   Both the text output and `--json` are timed. First with no server (the path every write takes
   without one), then with `hive-brain serve` running, which takes the write (`hive_brain.writer`):
   the command then imports neither YAML nor the index. The server runs with vectors off
   (``HIVE_BRAIN_SEMANTIC=0``): the freshly built vault has none, and embedding it in the background
   would load the machine for the whole run. Targets: p50 < 150 ms at 1k, < 300 ms at 10k.
2. **Concurrency.** 8 writer processes each run 25 `hive-brain remember` (distinct memories) one
   after another, all at once, with the default lock timeout, optionally next to ``--busy`` busy
   loops to load the machine. Counted: created, pending (the lock could not be taken in time: kept
   and applied by the next write), failed; then one more write applies anything pending and the
   vault must hold every memory. Target: 200 created, 0 pending, 0 failed.

    python -m benchmarks.writes [--runs N] [--sizes 1000,10000] [--busy 2] [--skip-concurrent]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .common import (
    BenchConfig,
    check_target,
    latency_summary,
    load_average,
    log,
    print_table,
    standalone_main,
    summary_row,
    temp_dir,
    temp_state_dir,
)

NAME = "writes"
TARGETS_MS = {1000: 150.0, 10000: 300.0}
DEFAULT_RUNS = 20
DEFAULT_SIZES = (1000, 10000)
WRITERS = 8
PER_WRITER = 25
BASELINE = "python -c pass"

# One concurrent writer: 25 CLI remembers in a row; prints one JSON line per write.
_WRITER = """
import json, subprocess, sys, time
exe, w, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    t0 = time.perf_counter()
    p = subprocess.run([exe, "remember", "--type", "fact", "--title", f"writer {w} fact {i}",
                        "--content", f"Writer {w} recorded fact number {i}.", "--json"],
                       capture_output=True, text=True)
    dt = time.perf_counter() - t0
    try:
        res = json.loads(p.stdout)
    except ValueError:
        res = {"status": "error", "message": (p.stderr or p.stdout).strip()[-300:]}
    print(json.dumps({"rc": p.returncode, "s": dt, "status": res.get("status") or res.get("error"),
                      "message": res.get("message")}), flush=True)
"""


def console_script() -> str:
    from .startup import console_script as find

    exe = find()
    if exe is None:
        raise RuntimeError("the `hive-brain` console script is not installed next to this Python")
    return exe


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=300)
    return time.perf_counter() - t0, p


def _memory_count(vault: Path) -> int:
    return sum(1 for _ in (vault / "Memory").rglob("*.md"))


def _build(vault: Path, notes: int) -> dict[str, Any]:
    from hive_brain.engine import Engine

    from . import fixtures

    t0 = time.perf_counter()
    fixtures.generate(vault, notes, queries=1)
    eng = Engine.open(vault)
    res = eng.rebuild(embed=False)
    eng.memory.catalog.close()
    return {"notes": notes, "build_s": round(time.perf_counter() - t0, 1), "generation": res.get("generation"),
            "pending_vectors": res.get("vectors", {}).get("pending")}


SERVER_LABELS = ("remember, server up", "remember --json, server up")


def latency(exe: str, vault: Path, runs: int, env: dict[str, str],
            labels: tuple[str, ...] = ("remember", "remember --json")) -> dict[str, Any]:
    py = sys.executable
    times: dict[str, list[float]] = {BASELINE: [], **{label: [] for label in labels}}
    errors: list[str] = []
    statuses: dict[str, int] = {}

    def argv(label: str, i: int) -> list[str]:
        if label == BASELINE:
            return [py, "-c", "pass"]
        extra = ["--json"] if "--json" in label else []
        return [exe, "remember", "--type", "fact", "--title", f"latency {label} {i}",
                "--content", f"Bench write {i} ({label}).", *extra]

    for label in times:  # warm-up: page cache and .pyc files; also checks the command works
        _, p = _timed(argv(label, -1), env)
        if p.returncode != 0:
            errors.append(f"{label}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}")
    for i in range(runs):
        for label in times:
            dt, p = _timed(argv(label, i), env)
            times[label].append(dt)
            if "--json" in label:
                try:
                    st = json.loads(p.stdout).get("status")
                except ValueError:
                    st = f"exit {p.returncode}"
                statuses[str(st)] = statuses.get(str(st), 0) + 1
            elif p.returncode != 0:
                errors.append(f"{label}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}")
    out: dict[str, Any] = {"commands": {}, "json_statuses": statuses, "errors": errors[:5]}
    base = latency_summary(times[BASELINE])
    for label, ts in times.items():
        s = latency_summary(ts)
        if label != BASELINE and base.get("median_ms"):
            s["ratio_to_baseline"] = round(s["median_ms"] / base["median_ms"], 2)
            s["overhead_ms"] = round(s["median_ms"] - base["median_ms"], 2)
        out["commands"][label] = s
    return out


def with_server(exe: str, env: dict[str, str], work: Any) -> Any:
    """``work(env=env)`` while `hive-brain serve` runs for the vault in ``env``."""
    p = subprocess.run([exe, "serve", "--detach"], capture_output=True, text=True, env=env, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"hive-brain serve --detach failed: {(p.stderr or p.stdout).strip()[-300:]}")
    try:
        return work(env=env)
    finally:
        subprocess.run([exe, "serve", "--stop"], capture_output=True, env=env, timeout=120)


def concurrent(exe: str, vault: Path, env: dict[str, str], busy: int) -> dict[str, Any]:
    before = _memory_count(vault)
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(1.0 if busy else 0.0)
        load_before = load_average()
        t0 = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", _WRITER, exe, str(w), str(PER_WRITER)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(WRITERS)]
        lines: list[dict[str, Any]] = []
        for p in procs:
            out, _err = p.communicate(timeout=3600)
            lines += [json.loads(x) for x in out.splitlines() if x.strip()]
        wall = time.perf_counter() - t0
        load_after = load_average()
    finally:
        for lp in loops:
            lp.kill()
            lp.wait()
    counts: dict[str, int] = {}
    for r in lines:
        counts[str(r["status"])] = counts.get(str(r["status"]), 0) + 1
    after_writers = _memory_count(vault) - before
    # One more write applies whatever was left pending; then every memory must be there.
    _timed([exe, "remember", "--type", "fact", "--title", "after the writers", "--content", "Applies pending writes."],
           env)
    final = _memory_count(vault) - before
    return {"writers": WRITERS, "per_writer": PER_WRITER, "busy_loops": busy, "wall_s": round(wall, 1),
            "load_before": load_before, "load_after": load_after, "statuses": counts,
            "created": counts.get("created", 0), "pending": counts.get("pending", 0),
            "failed": len(lines) - counts.get("created", 0) - counts.get("pending", 0),
            "memories_after_writers": after_writers, "memories_after_next_write": final,
            "expected_after_next_write": WRITERS * PER_WRITER + 1,
            "latency": latency_summary([r["s"] for r in lines]),
            "messages": sorted({str(r.get("message"))[:200] for r in lines if r["status"] != "created"})[:5]}


def run(cfg: BenchConfig, runs: int | None = None, sizes: tuple[int, ...] = DEFAULT_SIZES, busy: int = 2,
        skip_concurrent: bool = False) -> dict[str, Any]:
    n = runs or (DEFAULT_RUNS if not cfg.quick else max(5, DEFAULT_RUNS // 2))
    exe = console_script()
    result: dict[str, Any] = {"runs": n, "targets_ms": {str(k): v for k, v in TARGETS_MS.items()}, "sizes": {},
                              "load_average_start": load_average()}
    for size in sizes:
        with temp_state_dir(), temp_dir("hive-brain-writes-") as tmp:
            vault = tmp / "vault"
            log(f"writes: building a {size}-note vault")
            info = _build(vault, size)
            env = {**os.environ, "HIVE_BRAIN_VAULT": str(vault), "HIVE_BRAIN_USE_SERVER": "0"}
            log(f"writes: {n} rounds of remember at {size} notes")
            lat = latency(exe, vault, n, env)
            log(f"writes: {n} rounds of remember at {size} notes, server up")
            lat_srv = with_server(exe, {**env, "HIVE_BRAIN_USE_SERVER": "1", "HIVE_BRAIN_SEMANTIC": "0"},
                                  functools.partial(latency, exe, vault, n, labels=SERVER_LABELS))
            lat["commands"].update({k: v for k, v in lat_srv["commands"].items() if k != BASELINE})
            lat["errors"] += lat_srv["errors"]
            lat["server_json_statuses"] = lat_srv["json_statuses"]
            target = TARGETS_MS.get(size)
            for label, s in lat["commands"].items():
                if label != BASELINE and target:
                    s["target"] = f"p50 < {target:.0f} ms"
                    s["target_status"] = check_target(s["median_ms"], target, higher_is_better=False)
            entry: dict[str, Any] = {"vault": info, "latency": lat}
            if not skip_concurrent and size == min(sizes):
                log(f"writes: {WRITERS} writers x {PER_WRITER} remembers at {size} notes, {busy} busy loops")
                entry["concurrent"] = concurrent(exe, vault, env, busy)
            result["sizes"][str(size)] = entry
    return result


def report(result: dict[str, Any], console: Any) -> None:
    rows = []
    for size, e in result["sizes"].items():
        for label, s in e["latency"]["commands"].items():
            rows.append([size, label, s.get("n"), s.get("median_ms"), s.get("p95_ms"), s.get("max_ms"),
                         s.get("ratio_to_baseline"), s.get("overhead_ms"), s.get("target_status")])
    print_table(f"Writes: whole-process wall time, N={result['runs']} each, round-robin (server down, then up)",
                ["notes", "command", "n", "p50 ms", "p95 ms", "max ms", "x baseline", "+ms", "target"], rows, console,
                digits=1)
    for size, e in result["sizes"].items():
        c = e.get("concurrent")
        if not c:
            continue
        lat = c["latency"]
        print_table(f"Writes: {c['writers']} CLI writers x {c['per_writer']} remembers at {size} notes, "
                    f"{c['busy_loops']} busy loops (load {c['load_before']} -> {c['load_after']})",
                    ["created", "pending", "failed", "memories after", "after next write (expected)", "wall s",
                     "p50 ms", "p95 ms", "max ms"],
                    [[c["created"], c["pending"], c["failed"], c["memories_after_writers"],
                      f"{c['memories_after_next_write']} ({c['expected_after_next_write']})", c["wall_s"],
                      lat.get("median_ms"), lat.get("p95_ms"), lat.get("max_ms")]], console, digits=1)
        if c["messages"]:
            console.print("messages: " + " | ".join(c["messages"]))


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for size, e in result["sizes"].items():
        for label, s in e["latency"]["commands"].items():
            if label == BASELINE:
                continue
            rows.append(summary_row(NAME, f"{size} notes: {label}", "p50 ms", s.get("median_ms"),
                                    target=s.get("target"),
                                    vs_baseline=f"x{s.get('ratio_to_baseline')} (+{s.get('overhead_ms')} ms)",
                                    status=s.get("target_status", "ok")))
        c = e.get("concurrent")
        if c:
            ok = c["created"] == WRITERS * PER_WRITER and c["memories_after_next_write"] == c["expected_after_next_write"]
            rows.append(summary_row(NAME, f"{size} notes: {WRITERS}x{PER_WRITER} writers", "created/pending/failed",
                                    f"{c['created']}/{c['pending']}/{c['failed']}", target="200/0/0",
                                    status="pass" if ok else "FAIL"))
    return rows


def _extra(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--runs", type=int, default=None, help=f"runs per command (default {DEFAULT_RUNS})")
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="vault sizes in notes")
    ap.add_argument("--busy", type=int, default=2, help="busy loops during the concurrent run (default 2)")
    ap.add_argument("--skip-concurrent", action="store_true")


if __name__ == "__main__":
    sys.exit(standalone_main(
        sys.modules[__name__], extra_args=_extra,
        kwargs_from_args=lambda a: {"runs": a.runs, "sizes": tuple(int(x) for x in a.sizes.split(",")),
                                    "busy": a.busy, "skip_concurrent": a.skip_concurrent}))
