"""Operations: `mine-patterns` on a labelled synthetic event log, and the journal under 8 writers.

1. **Mining.** A seeded event log (several agents, hundreds of tasks running interleaved in time)
   with planted patterns: recurring failures (each in 4-12 distinct tasks, each followed by the
   fix), workflows (3-4 steps in order, in 4-10 tasks) and routines (one operation in 4-10 tasks),
   over one-off background work, near misses (the same failure or operation in only 2 tasks) and
   noise that must never become a suggestion: fixture and test-run tasks (`test-17`, `fixture-3`,
   `pytest-8`) repeating their own failures and workflows, a `test-agent` in real-looking tasks,
   `[test]`-titled events, and one task failing the same way 40 times. Measured: precision and
   recall of `memory.patterns.mine` against the planted labels, suggestions drawn from noise, and
   the time to mine. Targets: precision >= 0.9, recall 1.0, nothing from noise.
2. **Appends.** 8 writer processes append to one `store.oplog.EventLog` at once, through a
   rotation (the limit is lowered so the run crosses it): events/s, and the check that the live
   file plus one `.1` remain, each within the limit, every line valid JSON, and each writer's kept
   events exactly its newest ones (nothing lost or torn). `--full` writes 20 MB through the real
   8 MB limit. Also `hive-brain record-operation` as a whole process (p50, a few runs).
3. **Roll-up.** A vault of 1,000 one-per-run notes (a paper trade each) among 50 others:
   `consolidate --apply-rollups --confirm` (``memory.rollups.rollups``) timed (wall and CPU, beside
   the load average), with the checks that it made exactly one new generation, that every rolled-up
   note is still readable (``get``: superseded, ``rolled_up_into`` the summary), that a history
   question still finds one, and that ``replay`` at the generation before the roll-up answers a set
   of questions exactly as recall did before it.

    python -m benchmarks.operations [--tasks 300] [--per-writer 1000] [--rollup-notes 1000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .common import (
    BenchConfig,
    check_target,
    latency_summary,
    log,
    model_dir,
    print_table,
    standalone_main,
    summary_row,
    temp_dir,
    temp_state_dir,
)

NAME = "operations"
AGENTS = ("claude-code", "codex", "cursor", "aider", "gemini")
FAILURES = {  # failure key -> (operation it breaks, how tasks got past it)
    "db.migration-lock": ("deploy.web", "Waited for the other migration to finish, then re-ran deploy."),
    "ci.flaky-login-test": ("ci.run-tests", "Re-ran the login test alone; it passed on retry."),
    "npm.registry-timeout": ("deps.install", "Switched to the registry mirror and installed again."),
    "docker.disk-full": ("docker.build", "Pruned old images with docker system prune, then rebuilt."),
    "git.push-rejected": ("git.push", "Rebased on main and pushed again."),
    "k8s.image-pull-backoff": ("k8s.rollout", "Fixed the image tag in the manifest and rolled out again."),
}
WORKFLOWS = (
    ("release.bump-version", "release.changelog", "release.tag", "release.publish"),
    ("db.backup", "db.migrate", "db.verify"),
    ("pr.open", "pr.request-review", "pr.merge"),
    ("incident.ack", "incident.mitigate", "incident.postmortem"),
)
ROUTINES = ("deps.update-lockfile", "docs.rebuild", "cache.warm")
NOISE_TASKS = ("test", "fixture", "pytest")
DEFAULT_TASKS = 300
DEFAULT_PER_WRITER = 1000
WRITERS = 8


def _ulid(ms: int, rng: random.Random) -> str:
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    n = (ms << 80) | rng.getrandbits(80)
    return "".join(alphabet[(n >> (5 * i)) & 31] for i in reversed(range(26)))


def synthetic_log(tasks: int = DEFAULT_TASKS, seed: int = 7) -> tuple[list[dict[str, Any]], set[str], set[str]]:
    """(events in time order, planted pattern ids, noise pattern ids); ids as ``memory.patterns.pattern_id``."""
    rng = random.Random(seed)
    names = [f"TASK-{1000 + i}" for i in range(tasks)]
    plans: dict[str, list[list[tuple[str, str, str | None, str]]]] = {t: [] for t in names}
    planted: set[str] = set()

    def plant(block: list[tuple[str, str, str | None, str]], k: int, pool: list[str]) -> None:
        for t in rng.sample(pool, k):
            plans[t].append(block)

    for fk, (op, fix) in FAILURES.items():
        plant([(op, "failure", fk, f"{op} failed: {fk}"), (op, "success", None, fix)], rng.randint(4, 12), names)
        planted.add(f"failure:{fk}")
    for steps in WORKFLOWS:
        plant([(s, "success", None, f"Did {s}") for s in steps], rng.randint(4, 10), names)
        planted.add("workflow:" + " -> ".join(steps))
    for op in ROUTINES:
        for t in rng.sample(names, rng.randint(4, 10)):
            plans[t].append([(op, "success", None, f"Ran {op}")])
        planted.add(f"routine:{op}")
    # Near misses: the same failure, or the same operation, in only two tasks.
    for i in range(10):
        plant([(f"misc.op-{i}", "failure", f"misc.rare-failure-{i}", "Rare failure")], 2, names)
        plant([(f"misc.twice-{i}", "success", None, "Done twice")], 2, names)

    noise: set[str] = set()
    events: list[dict[str, Any]] = []
    t0 = int(datetime(2026, 10, 1, tzinfo=UTC).timestamp() * 1000)

    def emit(task: str, agent: str, blocks: list[list[tuple[str, str, str | None, str]]], start: int,
             title_prefix: str = "") -> None:
        ms = start
        seq: list[tuple[str, str, str | None, str]] = []
        rng.shuffle(blocks)
        for b in blocks:  # one-off work between blocks keeps planted runs apart
            for _ in range(rng.randint(1, 4)):
                seq.append((f"edit.{task.lower()}.{len(seq)}", "success", None, "One-off change"))
            if len(b) > 2 and rng.random() < 0.25:  # a retried step: collapsed, still the same workflow
                i = rng.randrange(len(b))
                b = [*b[:i + 1], b[i], *b[i + 1:]]
            seq += b
        for _ in range(rng.randint(1, 4)):
            seq.append((f"edit.{task.lower()}.{len(seq)}", "success", None, "One-off change"))
        for op, outcome, fk, title in seq:
            ms += rng.randint(2_000, 120_000)
            events.append({"id": "op-" + _ulid(ms, rng), "ts": datetime.fromtimestamp(ms / 1000, UTC).isoformat(
                timespec="seconds").replace("+00:00", "Z"), "title": title_prefix + title, "content": title,
                "operation_key": op, "failure_key": fk, "outcome": outcome, "task_id": task, "agent": agent})

    span = 30 * 24 * 3600 * 1000
    for t in names:
        emit(t, rng.choice(AGENTS), plans[t], t0 + rng.randrange(span))
    # Test noise: fixture and test-run tasks repeating a fake failure and a fake workflow...
    for i in range(60):
        task = f"{NOISE_TASKS[i % 3]}-{i}"
        emit(task, rng.choice(AGENTS), [[("fixture.op", "failure", "fixture.boom", "Boom"),
                                         ("fixture.op", "success", None, "ok")],
                                        [("fixture.setup", "success", None, "setup"),
                                         ("fixture.teardown", "success", None, "teardown")]],
             t0 + rng.randrange(span))
    noise |= {"failure:fixture.boom", "workflow:fixture.setup -> fixture.teardown", "routine:fixture.op",
              "routine:fixture.setup", "routine:fixture.teardown"}
    # ... a test agent in real-looking tasks, and [test]-marked events ...
    for i in range(12):
        emit(f"TASK-{9000 + i}", "test-agent", [[("ci.run-tests", "failure", "test.agent-failure", "fails")]],
             t0 + rng.randrange(span))
        emit(f"TASK-{9100 + i}", rng.choice(AGENTS), [[("ci.smoke", "failure", "test.marked-failure", "fails")]],
             t0 + rng.randrange(span), title_prefix="[test] ")
    noise |= {"failure:test.agent-failure", "failure:test.marked-failure"}
    # ... and one task repeating itself.
    repeat: list[tuple[str, str, str | None, str]] = [("cache.redis", "failure", "cache.redis-oom", "Redis OOM")] * 40
    emit("TASK-9999", "codex", [repeat], t0 + rng.randrange(span))
    emit("TASK-9998", "codex", [[("cache.redis", "failure", "cache.redis-oom", "Redis OOM")]], t0 + rng.randrange(span))
    noise.add("failure:cache.redis-oom")
    events.sort(key=lambda e: e["id"])
    return events, planted, noise


def score(report: dict[str, Any], planted: set[str], noise: set[str]) -> dict[str, Any]:
    from hive_brain.memory.patterns import pattern_id

    found = {pattern_id(p) for p in report["patterns"]}
    hits = found & planted
    return {"planted": len(planted), "suggested": len(found), "correct": len(hits),
            "precision": round(len(hits) / len(found), 4) if found else 0.0,
            "recall": round(len(hits) / len(planted), 4) if planted else 0.0,
            "from_noise": sorted(found & noise), "missed": sorted(planted - found),
            "unlabelled": sorted(found - planted - noise)}


def mining(tasks: int, seed: int = 7) -> dict[str, Any]:
    from hive_brain.memory.patterns import mine

    events, planted, noise = synthetic_log(tasks, seed)
    t0 = time.perf_counter()
    report = mine(events)
    dt = time.perf_counter() - t0
    agents = {e["agent"] for e in events}
    return {"events": len(events), "tasks": len({e["task_id"] for e in events}), "agents": len(agents),
            "test_noise_events": report["testNoise"], "mine_ms": round(dt * 1000, 1),
            "rejected": len(report["rejected"]), **score(report, planted, noise)}


# One appending process: waits for the start file, appends n events, prints its start and end times.
_WRITER = """
import os, sys, time
from pathlib import Path
from hive_brain.store import oplog
path, w, n, limit, pad, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
log = oplog.EventLog(Path(path), max_bytes=limit)
while not os.path.exists(go):
    time.sleep(0.005)
t0 = time.time()
for i in range(n):
    log.append({"writer": w, "seq": i, "pad": "x" * pad})
print(t0, time.time())
"""


def append_concurrently(path: Path, *, writers: int = WRITERS, per_writer: int = 1000, max_bytes: int,
                        pad: int = 200) -> dict[str, Any]:
    """``writers`` processes append ``per_writer`` events each to the log at ``path`` at once (rotating
    at ``max_bytes``); returns throughput and :func:`check_log`'s verdict."""
    go = path.with_name(path.name + ".go")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                        os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(w), str(per_writer), str(max_bytes),
                               str(pad), str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for w in range(writers)]
    time.sleep(0.5)  # let every writer import and wait at the start line
    go.write_text("go")
    spans = []
    errors = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            errors.append(err.strip()[-300:])
        elif out.split():
            a, b = map(float, out.split()[:2])
            spans.append((a, b))
    go.unlink()
    wall = (max(b for _a, b in spans) - min(a for a, _b in spans)) if spans else float("nan")
    total = writers * per_writer
    return {"writers": writers, "per_writer": per_writer, "max_bytes": max_bytes, "wall_s": round(wall, 3),
            "events_per_s": round(total / wall) if wall and wall > 0 else None, "errors": errors,
            **check_log(path, max_bytes=max_bytes, writers=writers, per_writer=per_writer)}


def check_log(path: Path, *, max_bytes: int, writers: int, per_writer: int) -> dict[str, Any]:
    """What a concurrent append run left: files and sizes, invalid lines, and whether each writer's kept
    events are exactly its newest ones, in order (a contiguous run of sequence numbers ending at its last)."""
    rotated = path.with_name(path.name + ".1")
    files = [p for p in (rotated, path) if p.exists()]
    stray = sorted(p.name for p in path.parent.glob(path.name + ".*") if p.name not in (rotated.name, path.name + ".lock"))
    sizes = {p.name: p.stat().st_size for p in files}
    invalid = 0
    kept: dict[int, list[int]] = {w: [] for w in range(writers)}
    first_live_line = 0
    for p in files:
        lines = p.read_bytes().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        else:
            invalid += 1  # the file does not end with a newline: a torn last line
        for i, raw in enumerate(lines):
            if p == path and i == 0:
                first_live_line = len(raw) + 1
            try:
                rec = json.loads(raw)
                kept[int(rec["writer"])].append(int(rec["seq"]))
            except (ValueError, KeyError, TypeError):
                invalid += 1
    newest_kept = all(seqs == list(range(per_writer - len(seqs), per_writer)) for seqs in kept.values())
    full_before_rotation = (rotated.name not in sizes) or sizes[rotated.name] + first_live_line > max_bytes
    within = all(s <= max_bytes for s in sizes.values())
    return {"files": sizes, "stray_files": stray, "within_limit": within, "invalid_lines": invalid,
            "kept": sum(len(s) for s in kept.values()), "written": writers * per_writer,
            "each_writer_kept_its_newest": newest_kept, "rotated_only_when_full": full_before_rotation,
            "ok": within and not stray and invalid == 0 and newest_kept and full_before_rotation
            and len(files) == (2 if rotated.exists() else 1)}


def cli_latency(runs: int) -> dict[str, Any]:
    from .writes import console_script

    exe = console_script()
    with temp_dir("hive-brain-ops-") as tmp:
        env = {**os.environ, "HIVE_BRAIN_STATE_DIR": str(tmp / "state"), "HIVE_BRAIN_VAULT": str(tmp / "vault"),
               "HIVE_BRAIN_USE_SERVER": "0"}
        subprocess.run([exe, "init", str(tmp / "vault")], env=env, capture_output=True, check=True)
        times = []
        for i in range(runs + 1):
            t0 = time.perf_counter()
            p = subprocess.run([exe, "record-operation", "--title", f"Ran step {i}", "--content", "ok",
                                "--operation-key", "bench.step", "--outcome", "success", "--task-id", f"T-{i}",
                                "--json"], env=env, capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError(f"record-operation failed: {(p.stderr or p.stdout).strip()[-300:]}")
            if i:  # the first run warms the page cache
                times.append(time.perf_counter() - t0)
    return latency_summary(times)


ROLLUP_TICKERS = ("AAPL", "MSFT", "NVDA", "TSLA", "AMZN", "GOOG", "META", "NFLX", "AMD", "INTC")
ROLLUP_SIGNALS = ("momentum", "mean-reversion", "breakout", "earnings-drift", "gap-fill", "pairs", "volume-spike")
ROLLUP_QUESTIONS = ("what did we buy in paper trade #417?", "paper trade NVDA breakout result",
                    "which broker do we paper-trade at?", "how did the TSLA gap-fill paper trades close?",
                    "what is our release checklist?")


def rollup(n: int = 1000, others: int = 50) -> dict[str, Any]:
    """Roll up ``n`` per-run notes in a fresh vault (lexical: the model is not what is measured)."""
    from hive_brain.config import resolve
    from hive_brain.engine import Engine
    from hive_brain.memory.model import MemoryInput
    from hive_brain.memory.rollups import rollups
    from hive_brain.store.vault import init_vault

    with temp_state_dir("hive-brain-rollup-") as state, model_dir(None):
        root = state / "vault"
        init_vault(root, resolve())
        eng = Engine.open(root, autostart=False)
        store = eng.memory
        ids: list[str] = []
        for start in range(0, n, 250):
            with store.transaction("seed") as tx:
                for i in range(start, min(n, start + 250)):
                    t = ROLLUP_TICKERS[i % len(ROLLUP_TICKERS)]
                    why = ROLLUP_SIGNALS[i % len(ROLLUP_SIGNALS)]
                    _p, meta = tx.remember(MemoryInput(
                        type="event", title=f"Paper trade #{i} {t}",
                        content=f"Bought {10 + i % 40} {t} at {100 + i * 0.37:.2f} on the {why} signal; closed "
                                f"{'+' if i % 3 else '-'}{i % 9}.{i % 7}% by the bell (run {i})."))
                    ids.append(meta["id"])
        with store.transaction("seed others") as tx:
            for i in range(others):
                tx.remember(MemoryInput(type="fact", title=f"Team fact {chr(65 + i % 26)}{chr(65 + i // 26)}",
                                        content=f"Fact {chr(65 + i % 26)}{chr(65 + i // 26)} about the release checklist and "
                                                f"the broker (Alpaca) we paper-trade at, variant {chr(97 + i % 26)}."))
        gen0 = int(eng.generations()["current"])
        def answer(hits: list[dict[str, Any]]) -> tuple[str | None, list[float]]:
            return (hits[0]["id"] if hits else None), [round(h["score"], 6) for h in hits]

        live = {q: answer(eng.recall(q, semantic=False)["hits"]) for q in ROLLUP_QUESTIONS}
        before_hits = {q: eng.replay(q, gen0)["hits"] for q in ROLLUP_QUESTIONS}
        man0 = dict(eng.indexer.gens.manifest(gen0))
        before = {q: answer(h) for q, h in before_hits.items()}
        load = os.getloadavg()[0]
        c0, t0 = time.process_time(), time.perf_counter()
        res = rollups(store, confirm=True)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        gen1 = int(eng.generations()["current"])
        summary = res["runs"][0]["summary"]["id"] if res["runs"] else None
        t1 = time.perf_counter()
        readable = sum(1 for mid in ids if (g := store.get(mid))["status"] == "superseded"
                       and g["meta"].get("rolled_up_into") == summary)
        get_ms = (time.perf_counter() - t1) * 1000 / max(1, len(ids))
        # Replayed from the generation store again, not from the scratch index built before the roll-up.
        shutil.rmtree(eng.vault.state / "replay", ignore_errors=True)
        # "As before": the generation's notes are all still there byte for byte (a fresh engine reads the
        # manifest and every object back), and the replay scores its top 5 exactly as before. Not the same
        # ids in that order: two builds of one generation's scratch index already break exact score ties
        # differently (seen without a roll-up in between), and near-identical per-run notes tie.
        gens = Engine.open(root, autostart=False).indexer.gens
        man = gens.manifest(gen0)
        intact = man == man0 and all(hashlib.sha256(gens.get_object(sha)).hexdigest() == sha for sha in man.values())
        after_hits = {q: eng.replay(q, gen0)["hits"] for q in ROLLUP_QUESTIONS}
        after = {q: answer(h) for q, h in after_hits.items()}
        replay_same = {q: after[q][1][:5] == before[q][1][:5] for q in ROLLUP_QUESTIONS}
        same_order = sum([h["id"] for h in after_hits[q]] == [h["id"] for h in before_hits[q]] for q in ROLLUP_QUESTIONS)
        live_top = sum(live[q][1][:5] == before[q][1][:5] for q in ROLLUP_QUESTIONS)
        k = min(417, n - 1)
        hist = eng.recall(f"which paper trade #{k} did we make previously?", semantic=False)["hits"]
        history_found = any(h.get("historical") and h["id"] == ids[k] for h in hist[:5])
        after_top = eng.recall(ROLLUP_QUESTIONS[0], semantic=False)["hits"]
    return {"notes": n, "others": others, "summaries": res["summaries"], "rolled_up": res["notes"],
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load_avg_1m": round(load, 2),
            "generations_made": gen1 - gen0, "readable": readable, "get_ms_each": round(get_ms, 2),
            "replay_unchanged": sum(replay_same.values()), "questions": len(replay_same), "replay_same_order": same_order, "generation_intact": intact,
            "replay_as_live": live_top,
            "history_finds_note": history_found,
            "summary_answers_now": bool(after_top) and after_top[0]["id"] == summary,
            "ok": gen1 - gen0 == 1 and readable == n and all(replay_same.values()) and history_found
            and intact}


def run(cfg: BenchConfig, tasks: int | None = None, per_writer: int | None = None,
        rollup_notes: int | None = None) -> dict[str, Any]:
    tasks = tasks or (DEFAULT_TASKS if cfg.quick else 5 * DEFAULT_TASKS)
    per_writer = per_writer or (DEFAULT_PER_WRITER if cfg.quick else 10 * DEFAULT_PER_WRITER)
    log(f"operations: mining a synthetic log of {tasks} tasks")
    mine_res = mining(tasks)
    log(f"operations: {WRITERS} writers x {per_writer} appends")
    with temp_dir("hive-brain-oplog-") as tmp:
        # ~250-byte events. --full writes 20 MB through the real 8 MB limit; a smaller run lowers the
        # limit to about a third of what it writes, so it still rotates two or three times, the oldest
        # events age out, and the check sees that exactly the newest remain.
        from hive_brain.store.oplog import MAX_BYTES

        total = WRITERS * per_writer * 250
        limit = MAX_BYTES if total >= 2 * MAX_BYTES else max(64 * 1024, int(total * 0.35))
        app = append_concurrently(tmp / "operational-events.jsonl", per_writer=per_writer, max_bytes=limit)
    log("operations: record-operation as a process")
    cli = cli_latency(5 if cfg.quick else 20)
    log(f"operations: roll-up of {rollup_notes or 1000} per-run notes")
    roll = rollup(rollup_notes or 1000)
    return {"mining": mine_res, "appends": app, "cli": cli, "rollup": roll,
            "targets": {"precision": 0.9, "recall": 1.0, "from_noise": 0}}


def report(result: dict[str, Any], console: Any) -> None:
    m = result["mining"]
    print_table(f"mine-patterns on a labelled log: {m['events']} events, {m['tasks']} tasks, {m['agents']} agents, "
                f"{m['test_noise_events']} test-noise events",
                ["planted", "suggested", "correct", "precision", "recall", "from noise", "missed", "mine ms"],
                [[m["planted"], m["suggested"], m["correct"], m["precision"], m["recall"], len(m["from_noise"]),
                  len(m["missed"]), m["mine_ms"]]], console)
    for k in ("from_noise", "missed", "unlabelled"):
        if m[k]:
            console.print(f"{k}: {', '.join(m[k])}")
    a = result["appends"]
    print_table(f"Journal appends: {a['writers']} processes x {a['per_writer']} events, rotation at {a['max_bytes']:,} B",
                ["events/s", "wall s", "files", "within limit", "invalid lines", "kept/written", "newest kept", "ok"],
                [[a["events_per_s"], a["wall_s"], ", ".join(f"{k} {v:,}" for k, v in a["files"].items()),
                  a["within_limit"], a["invalid_lines"], f"{a['kept']}/{a['written']}",
                  a["each_writer_kept_its_newest"], a["ok"]]], console)
    c = result["cli"]
    print_table("hive-brain record-operation as a process", ["n", "p50 ms", "p95 ms", "max ms"],
                [[c.get("n"), c.get("median_ms"), c.get("p95_ms"), c.get("max_ms")]], console, digits=1)
    r = result.get("rollup")
    if r:
        print_table(f"consolidate --apply-rollups: {r['notes']} per-run notes among {r['others']} others",
                    ["wall s", "cpu s", "load 1m", "generations", "readable", "get ms each", "gen intact",
                     "replay as before (same order)", "replay = live", "history finds", "summary answers", "ok"],
                    [[r["wall_s"], r["cpu_s"], r["load_avg_1m"], r["generations_made"], f"{r['readable']}/{r['notes']}",
                      r["get_ms_each"], r["generation_intact"], f"{r['replay_unchanged']}/{r['questions']} ({r['replay_same_order']})",
                      f"{r['replay_as_live']}/{r['questions']}", r["history_finds_note"],
                      r["summary_answers_now"], r["ok"]]], console)


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    m, a, c = result["mining"], result["appends"], result["cli"]
    return [
        summary_row(NAME, "mine-patterns", "precision", m["precision"], target=">= 0.9",
                    status=check_target(m["precision"], 0.9)),
        summary_row(NAME, "mine-patterns", "recall", m["recall"], target="1.0", status=check_target(m["recall"], 1.0)),
        summary_row(NAME, "mine-patterns", "suggestions from noise", len(m["from_noise"]), target="0",
                    status="pass" if not m["from_noise"] else "FAIL"),
        summary_row(NAME, f"journal, {a['writers']} writers", "events/s", a["events_per_s"],
                    status="pass" if a["ok"] else "FAIL", note="live + .1 within limit, none lost or torn"
                    if a["ok"] else "integrity check failed"),
        summary_row(NAME, "record-operation", "p50 ms", c.get("median_ms")),
    ] + ([summary_row(NAME, f"roll-up of {r['notes']} notes", "wall s", r["wall_s"],
                      status="pass" if r["ok"] else "FAIL",
                      note=f"{r['generations_made']} generation, {r['readable']}/{r['notes']} readable, replay "
                           f"{r['replay_unchanged']}/{r['questions']} unchanged")] if (r := result.get("rollup")) else [])


def _extra(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--tasks", type=int, default=None, help=f"tasks in the synthetic log (default {DEFAULT_TASKS})")
    ap.add_argument("--rollup-notes", type=int, default=None, help="per-run notes to roll up (default 1000)")
    ap.add_argument("--per-writer", type=int, default=None,
                    help=f"appends per writer process (default {DEFAULT_PER_WRITER})")


if __name__ == "__main__":
    sys.exit(standalone_main(sys.modules[__name__], extra_args=_extra,
                             kwargs_from_args=lambda a: {"tasks": a.tasks, "per_writer": a.per_writer,
                                                         "rollup_notes": a.rollup_notes}))
