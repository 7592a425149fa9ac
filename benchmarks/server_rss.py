"""Server RSS over its life: where a warm hybrid server's memory goes and whether it stays flat.

One synthetic vault (``benchmarks/fixtures.py``) with the embedding pack, indexed and embedded by a
first server; then the server restarted on it once per *variant* (an environment for the server
process, e.g. ``MALLOC_ARENA_MAX=2``), rounds interleaved so machine load falls on every variant
alike. Per run: time to ``ready``, RSS (``/proc/<pid>/status``: VmRSS, RssAnon, RssFile, VmHWM) when
idle after ready, then after every ``--step`` of ``--recalls`` semantic recalls (the curve), and the
recalls' latency (p50/p95).

    python -m benchmarks.server_rss --notes 1000 --recalls 200 --before /work/main --variants before,base
    python -m benchmarks.server_rss --notes 1000 --work /tmp/rss1k     # keeps the embedded vault for the next run
    python -m benchmarks.server_rss --variants before,a,b --before /tmp/main --checkout a=/tmp/a --checkout b=/tmp/b

Each run also records the server's own ``ready in ...`` log line (wall and CPU per start phase).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import median
from typing import Any

from . import fixtures
from .common import (
    embedding_pack,
    latency_summary,
    load_average,
    log,
    model_dir,
    proc_memory_kb,
    restore_env,
    running_server,
    state_dir_at,
    temp_dir,
    temp_state_dir,
    wait_server_idle,
)

NAME = "server_rss"
QUIET_S = 5.0
AGENT = fixtures.QUERY_AGENT
# Environments for the server process, each on top of the defaults; ``--before PATH`` adds "before":
# the server run from another checkout (PYTHONPATH), e.g. main, for before/after in one interleaved run.
VARIANTS: dict[str, dict[str, str]] = {
    "base": {},
    "arena_env": {"MALLOC_ARENA_MAX": "2"},
    # The e5 tokenizer on tokenizers' own Unigram (~280 MB) instead of spmtok (issue 26).
    "tokenizers": {"HIVE_BRAIN_TOKENIZER": "tokenizers"},
    # glibc's mmap threshold fixed at 128 KB (issue 26, stop 38: lower peak, same idle, slower start).
    "mmap128k": {"MALLOC_MMAP_THRESHOLD_": "131072"},
}


def log_tail(state: Path, lines: int = 30) -> None:
    """The server's last log lines on stderr: the state dir is removed when the run fails."""
    try:
        print("\n".join((state / "server.log").read_text().splitlines()[-lines:]), file=sys.stderr)
    except OSError:
        pass


def mem_mb(pid: int) -> dict[str, float]:
    return {k: round(v / 1024, 1) for k, v in proc_memory_kb(pid).items()}


def one_run(vault: Path, state: Path, questions: Sequence[Mapping[str, Any]], env: Mapping[str, str],
            recalls: int, step: int) -> dict[str, Any]:
    from hive_brain.rpc import client

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the server inherits this process's environment (client.spawn_server)
    try:
        t0 = time.perf_counter()
        with running_server(vault, state, timeout=600.0) as srv:
            ready_s = time.perf_counter() - t0
            ready_cpu = process_cpu_s(srv["pid"])  # the server's own CPU from its start to ready
            restore_env(saved)  # at once: this process's own allocations are not measured
            wait_server_idle(state, timeout=1800.0)
            idle_s = time.perf_counter() - t0
            time.sleep(1.0)
            pid = srv["pid"]
            curve = [{"recalls": 0, **mem_mb(pid)}]
            lat = []
            for i in range(recalls):
                q = questions[i % len(questions)]
                t1 = time.perf_counter()
                client.call(state, "recall", {"query": q["question"], "agent": AGENT, "semantic": True, "limit": 10},
                            timeout=30.0)
                lat.append(time.perf_counter() - t1)
                if (i + 1) % step == 0:
                    curve.append({"recalls": i + 1, **mem_mb(pid)})
            time.sleep(QUIET_S)  # the server trims its heap once quiet (daemon/server.py, _trim_heap)
            curve.append({"recalls": recalls, "quiet_s": QUIET_S, **mem_mb(pid)})
            from hive_brain.daemon.server import BATCH_IDLE_S, LIFE_CHECK_S

            release_s = BATCH_IDLE_S + 2 * LIFE_CHECK_S + 1.0  # and releases the batch sessions when idle
            time.sleep(release_s - QUIET_S)
            curve.append({"recalls": recalls, "quiet_s": release_s, **mem_mb(pid)})
            return {"ready_s": round(ready_s, 2), "ready_cpu_s": ready_cpu, "idle_s": round(idle_s, 2), "curve": curve,
                    "latency": latency_summary(lat), "ready_line": ready_line(state)}
    finally:
        restore_env(saved)


def process_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds process ``pid`` has used so far (all its threads)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)


def ready_line(state: Path) -> str | None:
    """The server's last ``ready in ...`` log line (each start phase's wall and CPU time)."""
    try:
        lines = [ln for ln in (state / "server.log").read_text().splitlines() if "ready in " in ln]
    except OSError:
        return None
    return lines[-1].split("ready in ", 1)[1] if lines else None


@contextlib.contextmanager
def _workplace(work: Path | None) -> Any:
    """``work`` (kept, reused when it already holds the vault) or a temp dir removed after."""
    if work is None:
        with temp_state_dir(), temp_dir("hb-bench-rss-") as tmp:
            yield tmp
        return
    work.mkdir(parents=True, exist_ok=True)
    with state_dir_at(work / "state"):
        yield work


def run(notes: int, recalls: int, step: int, rounds: int, variants: Sequence[str],
        work_dir: Path | None = None) -> dict[str, Any]:
    pack, why = embedding_pack()
    if pack is None:
        raise SystemExit(f"server_rss needs the embedding pack: {why}")
    from hive_brain.engine import Engine

    out: dict[str, Any] = {"notes": notes, "recalls": recalls, "load_start": load_average(), "runs": []}
    with _workplace(work_dir) as work, model_dir(pack):
        # A runtime dir of its own: a `serve --stop --all` elsewhere on the machine must not stop these
        # servers mid-run (seen: a run's first server vanished while it embedded).
        os.environ["XDG_RUNTIME_DIR"] = str(work / "run")
        (work / "run").mkdir(mode=0o700, exist_ok=True)
        vault = work / "vault"
        made = work / "questions.json"
        if not made.is_file():
            shutil.rmtree(vault, ignore_errors=True)
            fx = fixtures.generate(vault, notes, queries=min(recalls, 200))
            made.write_text(json.dumps(fx["questions"]))
        questions = json.loads(made.read_text())
        state = Engine.open(vault).vault.state
        log(f"server_rss {notes}: first server indexes and embeds the vault (a kept one: catches up)")
        t0 = time.perf_counter()
        try:
            with running_server(vault, state, timeout=3600.0):
                wait_server_idle(state, timeout=3600.0)
        except Exception:
            log_tail(state)
            raise
        out["index_s"] = round(time.perf_counter() - t0, 1)
        for r in range(rounds):
            for name in variants:
                log(f"server_rss {notes}: round {r + 1}, {name}")
                res = one_run(vault, state, questions, VARIANTS[name], recalls, step)
                out["runs"].append({"variant": name, "round": r + 1, **res})
    out["load_end"] = load_average()
    return out


def summary(result: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    names = list(dict.fromkeys(r["variant"] for r in result["runs"]))
    for name in names:
        runs = [r for r in result["runs"] if r["variant"] == name]
        idle = median(r["curve"][0]["VmRSS"] for r in runs)
        anon = median(r["curve"][0].get("RssAnon", 0) for r in runs)
        end = median(r["curve"][-2]["VmRSS"] for r in runs)
        idle_end = median(r["curve"][-1]["VmRSS"] for r in runs)
        peak = max(r["curve"][-1].get("VmHWM", 0) for r in runs)
        p50 = median(r["latency"]["median_ms"] for r in runs)
        p95 = median(r["latency"]["p95_ms"] for r in runs)
        ready = median(r["ready_s"] for r in runs)
        cpus = [r["ready_cpu_s"] for r in runs if r.get("ready_cpu_s") is not None]
        ready_cpu = median(cpus) if cpus else None
        rows.append([name, len(runs), ready, ready_cpu, idle, anon, end, idle_end, peak, round(p50, 1), round(p95, 1)])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--recalls", type=int, default=200)
    ap.add_argument("--step", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--variants", default="base")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--before", type=Path, default=None, help="a checkout whose server is the 'before' variant")
    ap.add_argument("--work", type=Path, default=None, help="keep the embedded vault here and reuse it")
    ap.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH",
                    help="a variant NAME whose server runs PATH's hive_brain (repeatable), like --before")
    a = ap.parse_args(argv)
    if a.before is not None:
        VARIANTS["before"] = {"PYTHONPATH": str(a.before.resolve())}
    for spec in a.checkout:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            ap.error(f"--checkout wants NAME=PATH, got {spec!r}")
        VARIANTS[name] = {"PYTHONPATH": str(Path(path).resolve())}
    variants = a.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r} (known: {', '.join(VARIANTS)})")
    result = run(a.notes, a.recalls, a.step, a.rounds, variants, a.work)
    head = ["variant", "runs", "ready s", "ready CPU-s", "idle RSS MB", "idle anon MB", f"RSS after {a.recalls} + {QUIET_S:g} s quiet MB",
            "then idle 35 s MB", "peak MB",
            "recall p50 ms", "p95 ms"]
    print(f"server RSS, {result['notes']} notes hybrid, load {result['load_start']} -> {result['load_end']}")
    print(" | ".join(head))
    for row in summary(result):
        print(" | ".join(str(x) for x in row))
    for r in result["runs"]:
        print(r["variant"], r["round"], "curve VmRSS:", [c["VmRSS"] for c in r["curve"]])
        print(r["variant"], r["round"], "ready in", r.get("ready_line"))
    path = a.json or Path("benchmarks/results") / f"{NAME}-{result['notes']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
