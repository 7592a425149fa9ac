"""Resources: memory of the server and of the prompt hook, disk used by the per-device state, and the
cost of generations and of replaying an old one.

Per configuration (synthetic vault from ``benchmarks/fixtures.py``; lexical, or with the embedding
pack):

* **server RSS** (``/proc/<pid>/status``: VmRSS now, VmHWM peak): started on a vault with no index,
  so it indexes everything itself (with the pack: lexical first, then it embeds every passage in
  the background; we wait until nothing is pending), then after 50 recalls; then restarted on the
  indexed vault: idle after start, and after 50 recalls. Target (DESIGN): under 600 MB at 100k notes.
* **hook RSS**: peak RSS of ``python -m hive_brain hook prompt`` processes (``os.wait4`` rusage,
  through a small launcher so the benchmark's own memory stays out of it), server up and server
  down, 10 runs each (median and max), next to ``python -c pass``.
* **disk**: the state dir by part (lexical index, vectors, generations with the object store,
  catalog, embedding cache, replay scratch), in bytes and per 1k notes.
* **generations**: a one-note write (``MemoryStore.remember``: journal, note, catch-up, new
  generation) x 10 (quick) / 20 (full): wall time and the bytes it adds to ``generations/``; the
  size of the rebuild's checkpoint (a full manifest, written every 50 generations).
* **replay** of the rebuild's generation after those writes: first (builds a scratch index from the
  object store) and again (cached under ``replay/<gen>/``).

--quick: 10k lexical and 1k with the pack; --full: adds 100k lexical.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import fixtures
from .common import (
    BenchConfig,
    check_target,
    dir_bytes,
    embedding_pack,
    hook_argv,
    hook_env,
    latency_summary,
    load_average,
    log,
    model_dir,
    peak_rss,
    print_table,
    proc_memory_kb,
    run_process,
    running_server,
    save_plot,
    short_error,
    standalone_main,
    state_sizes,
    summary_row,
    temp_dir,
    temp_state_dir,
    wait_server_idle,
)

NAME = "resources"
AGENT = fixtures.QUERY_AGENT
TARGET_SERVER_MB = 600.0
CONFIGS = {"quick": [(10000, False), (1000, True)], "full": [(10000, False), (100000, False), (1000, True)]}
RECALLS = 50
HOOK_RUNS = 10
WRITES = {"quick": 10, "full": 20}


def _mb(kb: int | None) -> float | None:
    return round(kb / 1024, 1) if kb else None


def mem_point(pid: int) -> dict[str, float | None]:
    m = proc_memory_kb(pid)
    return {"rss_mb": _mb(m.get("VmRSS")), "peak_mb": _mb(m.get("VmHWM"))}


def server_recalls(state: Path, questions: Sequence[Mapping[str, Any]], semantic: bool) -> dict[str, Any]:
    from hive_brain.rpc import client

    lat = []
    for q in list(questions)[:RECALLS]:
        t0 = time.perf_counter()
        client.call(state, "recall", {"query": q["question"], "agent": AGENT, "semantic": semantic, "limit": 10},
                    timeout=30.0)
        lat.append(time.perf_counter() - t0)
    return latency_summary(lat)


def hook_rss(vault: Path, questions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    env = hook_env(vault, AGENT)
    rss, secs = [], []
    for q in list(questions)[:HOOK_RUNS]:
        payload = json.dumps({"session_id": "res", "prompt": q["question"]})
        kb, _r = peak_rss(hook_argv(), input_text=payload, env=env)
        if kb:
            rss.append(kb)
        secs.append(run_process(hook_argv(), input_text=payload, env=env).seconds)
    floor, _r = peak_rss([sys.executable, "-c", "pass"])
    return {"runs": len(secs), "max_rss_mb": _mb(max(rss)) if rss else None,
            "median_rss_mb": _mb(sorted(rss)[len(rss) // 2]) if rss else None, "latency": latency_summary(secs),
            "python_c_pass_rss_mb": _mb(floor)}


def generation_costs(vault: Path, state: Path, writes: int) -> dict[str, Any]:
    from hive_brain.engine import Engine
    from hive_brain.memory.model import MemoryInput

    eng = Engine.open(vault, agent_id=None)
    gens = eng.indexer.gens
    first = gens.current_id()
    rebuild_gen = gens.load(first) if first is not None else None
    recs = []
    for i in range(writes):
        before = dir_bytes(state / "generations")
        t0 = time.perf_counter()
        res = eng.memory.remember(MemoryInput(type="fact", title=f"Generation probe {i}",
                                              content=f"Generation probe {i}: the nightly export runs at 0{i % 10}:30."))
        dt = time.perf_counter() - t0
        gid = gens.current_id()
        assert gid is not None, "a write publishes a generation"
        g = gens.load(gid)
        recs.append({"seconds": round(dt, 4), "bytes": dir_bytes(state / "generations") - before, "kind": g.kind,
                     "gen_file_bytes": gens._gen_path(g.id).stat().st_size, "path": res["path"]})
    deltas = [r for r in recs if r["kind"] == "delta"]
    cp_file = gens._gen_path(first).stat().st_size if first is not None else None
    return {
        "writes": len(recs),
        "latency": latency_summary([r["seconds"] for r in recs]),
        "delta_file_bytes_median": sorted(r["gen_file_bytes"] for r in deltas)[len(deltas) // 2] if deltas else None,
        "bytes_added_median": sorted(r["bytes"] for r in recs)[len(recs) // 2] if recs else None,
        "checkpoints_among_writes": sum(1 for r in recs if r["kind"] == "checkpoint"),
        "rebuild_checkpoint_file_bytes": cp_file,
        "rebuild_generation": first, "notes_in_checkpoint": rebuild_gen.note_count if rebuild_gen else None,
        "records": recs,
    }


def replay_costs(vault: Path, state: Path, gid: int, question: str, semantic: bool) -> dict[str, Any]:
    from hive_brain.engine import Engine

    eng = Engine.open(vault, agent_id=AGENT)
    out: dict[str, Any] = {"generation": gid}
    for label in ("first", "cached"):
        t0 = time.perf_counter()
        res = eng.replay(question, gid, semantic=semantic, limit=10, abstain=False)
        out[f"{label}_s"] = round(time.perf_counter() - t0, 3)
        out[f"{label}_hits"] = len(res.get("hits") or [])
    out["semantic"] = bool(res.get("semantic"))
    out["replay_dir_bytes"] = dir_bytes(state / "replay")
    return out


def run_config(cfg: BenchConfig, notes: int, pack: Path | None) -> dict[str, Any]:
    from hive_brain.engine import Engine

    semantic = pack is not None
    out: dict[str, Any] = {"notes": notes, "semantic": semantic, "load_start": load_average(), "status": "ok"}
    with temp_state_dir() as _root, temp_dir("hb-bench-res-") as work, model_dir(pack):
        vault = work / "vault"
        log(f"resources {notes} {'with pack' if semantic else 'lexical'}: generating")
        fx = fixtures.generate(vault, notes, queries=max(RECALLS, HOOK_RUNS))
        out["notes"] = fx["notes"]
        out["vault_bytes"] = dir_bytes(vault, apparent=True)  # the notes' sizes (allocated blocks: vault_disk)
        out["vault_disk"] = dir_bytes(vault)
        questions = fx["questions"]
        state = Engine.open(vault).vault.state
        # 1. A server that indexes the whole vault itself.
        log(f"resources {notes}: server on an unindexed vault")
        t0 = time.perf_counter()
        with running_server(vault, state, timeout=3600.0) as srv:
            pid = srv["pid"]
            fresh: dict[str, Any] = {"ready_s": round(time.perf_counter() - t0, 2), "at_ready": mem_point(pid)}
            if semantic:
                wait_server_idle(state, timeout=3600.0)
                fresh["embedded_s"] = round(time.perf_counter() - t0, 2)
            fresh["indexed"] = mem_point(pid)
            fresh["recall_latency"] = server_recalls(state, questions, semantic)
            fresh["after_recalls"] = mem_point(pid)
        out["server_fresh"] = fresh
        # 2. Restarted on the indexed vault.
        log(f"resources {notes}: server restarted on the indexed vault")
        t0 = time.perf_counter()
        with running_server(vault, state, timeout=600.0) as srv:
            pid = srv["pid"]
            warm: dict[str, Any] = {"ready_s": round(time.perf_counter() - t0, 2)}
            time.sleep(1.0)
            warm["idle"] = mem_point(pid)
            warm["recall_latency"] = server_recalls(state, questions, semantic)
            warm["after_recalls"] = mem_point(pid)
            out["hook_server_up"] = hook_rss(vault, questions)
        out["server_restart"] = warm
        out["hook_server_down"] = hook_rss(vault, questions)
        sizes = state_sizes(state)
        per_k = fx["notes"] / 1000
        out["state_bytes"] = sizes
        out["state_bytes_per_1k_notes"] = {k: round(v / per_k) for k, v in sizes.items()}
        gid = Engine.open(vault).indexer.gens.current_id()
        log(f"resources {notes}: {WRITES[cfg.mode]} one-note writes, then replay of generation {gid}")
        out["generations"] = generation_costs(vault, state, WRITES[cfg.mode])
        out["replay"] = replay_costs(vault, state, gid, questions[0]["question"], semantic) if gid else None
        out["state_bytes_after"] = state_sizes(state)
    peak = max(x for x in (out["server_fresh"]["indexed"]["peak_mb"], out["server_fresh"]["after_recalls"]["peak_mb"],
                           out["server_restart"]["after_recalls"]["peak_mb"]) if x is not None)
    out["server_peak_mb"] = peak
    out["load_end"] = load_average()
    return out


def run(cfg: BenchConfig, configs: Sequence[tuple[int, bool]] | None = None) -> dict[str, Any]:
    pack, why = embedding_pack()
    results = []
    for notes, with_pack in configs or CONFIGS[cfg.mode]:
        if with_pack and pack is None:
            results.append({"notes": notes, "semantic": True, "status": "unavailable", "reason": why})
            continue
        try:
            results.append(run_config(cfg, notes, pack if with_pack else None))
        except Exception as e:  # noqa: BLE001
            import traceback

            log(f"resources {notes}: failed: {short_error(e)}")
            results.append({"notes": notes, "semantic": with_pack, "status": "error", "reason": short_error(e),
                            "traceback": traceback.format_exc()})
    return {"target_server_mb": TARGET_SERVER_MB, "pack": str(pack) if pack else None, "configs": results}


def _label(c: Mapping[str, Any]) -> str:
    return f"{c['notes'] // 1000}k {'+ pack' if c['semantic'] else 'lexical'}"


def report(result: Mapping[str, Any], console: Any) -> None:
    ok = [c for c in result["configs"] if c.get("status") == "ok"]
    for c in result["configs"]:
        if c.get("status") != "ok":
            console.print(f"[bold]{_label(c)}[/bold]: {c['status']}: {c.get('reason')}")
    if not ok:
        return
    rows = []
    for c in ok:
        f, w = c["server_fresh"], c["server_restart"]
        rows += [
            [_label(c), "server: indexed the vault itself", f["indexed"]["rss_mb"], f["indexed"]["peak_mb"],
             f"ready {f['ready_s']} s" + (f", all embedded {f['embedded_s']} s" if "embedded_s" in f else "")],
            [_label(c), f"  ... after {RECALLS} recalls", f["after_recalls"]["rss_mb"], f["after_recalls"]["peak_mb"],
             f"recall p50 {f['recall_latency'].get('median_ms')} ms"],
            [_label(c), "server: restarted, idle", w["idle"]["rss_mb"], w["idle"]["peak_mb"], f"ready {w['ready_s']} s"],
            [_label(c), f"  ... after {RECALLS} recalls", w["after_recalls"]["rss_mb"], w["after_recalls"]["peak_mb"],
             f"recall p50 {w['recall_latency'].get('median_ms')} ms"],
            [_label(c), f"hook process, server up ({c['hook_server_up']['runs']} runs)", c["hook_server_up"]["median_rss_mb"],
             c["hook_server_up"]["max_rss_mb"], f"p50 {c['hook_server_up']['latency'].get('median_ms')} ms"],
            [_label(c), f"hook process, server down ({c['hook_server_down']['runs']} runs)",
             c["hook_server_down"]["median_rss_mb"], c["hook_server_down"]["max_rss_mb"],
             f"p50 {c['hook_server_down']['latency'].get('median_ms')} ms"],
        ]
    print_table(f"Resources: resident memory (MB; target: server < {result['target_server_mb']:.0f} MB at 100k notes)",
                ["config", "process", "RSS MB", "peak MB", "note"], rows, console, digits=1)
    parts = ["lexical", "vectors", "vector queue", "generations", "catalog", "embedding cache", "replay", "other",
             "total"]
    rows = []
    for c in ok:
        kb = c["state_bytes_per_1k_notes"]
        rows.append([_label(c), round(c["vault_bytes"] / c["notes"] * 1000 / 1e6, 2),
                     *(round(kb[p] / 1e6, 2) for p in parts)])
    print_table("Resources: state dir on disk per 1k notes (MB allocated), before replay; vault = the notes' own "
                "size",
                ["config", "vault", *parts], rows, console, digits=2)
    rows = []
    for c in ok:
        g, r = c["generations"], c.get("replay") or {}
        rows.append([_label(c), g["writes"], g["latency"].get("median_ms"), g["latency"].get("p95_ms"),
                     g["bytes_added_median"], g["delta_file_bytes_median"], g["rebuild_checkpoint_file_bytes"],
                     r.get("first_s"), r.get("cached_s"), round((r.get("replay_dir_bytes") or 0) / 1e6, 1)])
    print_table("Resources: a one-note write (new generation) and replay of the rebuild's generation",
                ["config", "writes", "write p50 ms", "p95 ms", "bytes added", "delta file B", "checkpoint file B",
                 "replay first s", "replay cached s", "replay dir MB"], rows, console, digits=1)


def summary_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for c in result["configs"]:
        if c.get("status") != "ok":
            rows.append(summary_row(NAME, _label(c), "-", None, status=c["status"], note=c.get("reason")))
            continue
        at100k = c["notes"] >= 100000 and not c["semantic"]
        rows.append(summary_row(NAME, f"{_label(c)}: server", "peak RSS MB", c["server_peak_mb"],
                                target=f"< {TARGET_SERVER_MB:.0f} MB at 100k" if at100k else None,
                                status=check_target(c["server_peak_mb"], TARGET_SERVER_MB, higher_is_better=False)
                                if at100k else "ok",
                                note=f"idle after restart {c['server_restart']['idle']['rss_mb']} MB"))
        rows.append(summary_row(NAME, f"{_label(c)}: hook", "peak RSS MB",
                                max(x for x in (c["hook_server_up"]["max_rss_mb"], c["hook_server_down"]["max_rss_mb"], 0)
                                    if x is not None)))
        rows.append(summary_row(NAME, f"{_label(c)}: state dir", "MB per 1k notes",
                                round(c["state_bytes_per_1k_notes"]["total"] / 1e6, 2),
                                note=f"vault {round(c['vault_bytes'] / c['notes'] * 1000 / 1e6, 2)} MB per 1k notes"))
        g = c["generations"]
        rows.append(summary_row(NAME, f"{_label(c)}: one-note write", "p50 ms", g["latency"].get("median_ms"),
                                note=f"{g['bytes_added_median']} bytes added to generations/"))
        r = c.get("replay") or {}
        rows.append(summary_row(NAME, f"{_label(c)}: replay old generation", "first s", r.get("first_s"),
                                note=f"cached {r.get('cached_s')} s"))
    return rows


def plot(result: Mapping[str, Any], out_dir: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    ok = [c for c in result["configs"] if c.get("status") == "ok"]
    if not ok:
        return []
    parts = ["lexical", "vectors", "vector queue", "generations", "catalog", "embedding cache", "other"]
    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = [0.0] * len(ok)
    labels = [_label(c) for c in ok]
    for p in parts:
        vals = [c["state_bytes_per_1k_notes"][p] / 1e6 for c in ok]
        ax.bar(labels, vals, bottom=bottom, label=p)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.plot(labels, [c["vault_bytes"] / c["notes"] * 1000 / 1e6 for c in ok], "k_", markersize=30, label="vault (notes)")
    ax.set_ylabel("MB per 1k notes")
    ax.set_title("State dir on disk per 1k notes")
    ax.legend(fontsize=7)
    return save_plot(fig, out_dir, "bench-state-disk.png")


def _extra(ap: Any) -> None:
    ap.add_argument("--configs", default=None, help="comma-separated, e.g. 10000,1000p (p = with the pack)")


if __name__ == "__main__":
    sys.exit(standalone_main(sys.modules[__name__], extra_args=_extra, kwargs_from_args=lambda a: {
        "configs": [(int(x.rstrip("p")), x.endswith("p")) for x in a.configs.split(",")] if a.configs else None}))
