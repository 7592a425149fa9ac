"""Deep mode's latency (issue 29): ``recall --rerank`` as users meet it (a warm server) and where its
time goes (in-process, by phase), next to the fast path.

A vault already embedded, in the layout ``server_rss.py --work DIR`` and ``smallvault.py --work DIR``
keep (``DIR/vault``, ``DIR/state``): e.g. ``DIR = /tmp/sv/2000`` or a 10k ``server_rss`` work dir.

    python -m benchmarks.deep_latency --work /tmp/sv/2000 --recalls 30            # server: fast vs deep
    python -m benchmarks.deep_latency --work /tmp/sv/2000 --phases --recalls 20   # in-process phase table
    python -m benchmarks.deep_latency --work /tmp/v10k --questions /tmp/v10k/questions.json

Server mode: one server with its own ``XDG_RUNTIME_DIR``, waited on until it has nothing left to
embed or read ahead; then the questions in turn, each asked on the fast path and in deep mode
(interleaved, so load falls on both alike): wall p50/p95 of the ``recall`` op, the server's own CPU
over each (all its threads, ``/proc/<pid>/stat``), and the phase timings the server reports. The
server is stopped after. ``--phases``: the same questions in this process (after the read-ahead a
server does), each phase's time per recall (the functions timed are wrapped, not changed).
``--cold N``: deep mode right after a start (issue 29, stop 39): N times, a fresh server, and as soon
as it says ready (before its read-ahead of the second model's vectors is done) one deep recall, then a
second deep recall of another question: wall, the server's CPU, how many candidates the second model
left unread (``rerankCold`` in ``scoreDetails``). The vault's state is copied first, each time, so the
run leaves the work dir's embedding cache as it was. Run alone, not by ``run``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .common import latency_summary, load_average, log, print_table, running_server, state_dir_at

NAME = "deep_latency"
SMALLVAULT_QUESTIONS = Path(__file__).parent / "smallvault" / "questions.json"


def questions(path: Path | None) -> list[str]:
    """``server_rss.py``'s questions.json (``[{"question": ...}]``) or, by default, smallvault's paraphrases."""
    if path is not None:
        return [q["question"] if isinstance(q, dict) else str(q) for q in json.loads(path.read_text(encoding="utf-8"))]
    return [q for q, _key in json.loads(SMALLVAULT_QUESTIONS.read_text(encoding="utf-8"))["paraphrase"]]


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _own_runtime_dir() -> Iterator[None]:
    """A runtime dir of this run's own: a `serve --stop --all` elsewhere must not stop its server."""
    saved = os.environ.get("XDG_RUNTIME_DIR")
    with tempfile.TemporaryDirectory(prefix="hb-deep-run-") as d:
        os.chmod(d, 0o700)
        os.environ["XDG_RUNTIME_DIR"] = d
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("XDG_RUNTIME_DIR", None)
            else:
                os.environ["XDG_RUNTIME_DIR"] = saved


def server_run(work: Path, qs: Sequence[str], recalls: int) -> dict[str, Any]:
    from hive_brain.engine import Engine
    from hive_brain.rpc import client

    from .common import wait_server_idle

    out: dict[str, Any] = {"load_start": load_average()}
    with state_dir_at(work / "state"), _own_runtime_dir():
        vault = work / "vault"
        state = Engine.open(vault).vault.state
        t0 = time.perf_counter()
        with running_server(vault, state, timeout=1800.0) as srv:
            wait_server_idle(state, timeout=1800.0)
            out["ready_idle_s"] = round(time.perf_counter() - t0, 1)
            pid = int(srv["pid"])
            rows: dict[str, list[dict[str, Any]]] = {"fast": [], "deep": []}
            for i in range(recalls + 1):  # the first round warms both paths and is not counted
                q = qs[i % len(qs)]
                for mode in ("fast", "deep"):
                    args = {"query": q, "semantic": True, "limit": 10, **({"deep": True} if mode == "deep" else {})}
                    c0, t1 = process_cpu_s(pid), time.perf_counter()
                    res = client.call(state, "recall", args, timeout=120.0)
                    wall, cpu = time.perf_counter() - t1, process_cpu_s(pid) - c0
                    if i:
                        rows[mode].append({"wall_s": wall, "cpu_s": cpu, "timing": res.get("timing") or {},
                                           "abstained": res.get("abstained")})
    out["load_end"] = load_average()
    out["modes"] = {m: summarise(r) for m, r in rows.items()}
    return out


def cold_run(work: Path, qs: Sequence[str], starts: int) -> dict[str, Any]:
    import shutil

    from hive_brain.engine import Engine
    from hive_brain.rpc import client

    out: dict[str, Any] = {"load_start": load_average()}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hb-deep-cold-") as tmp:
        for i in range(starts):
            copy = Path(tmp) / str(i)
            shutil.copytree(work, copy, symlinks=True)
            with state_dir_at(copy / "state"), _own_runtime_dir():
                vault = copy / "vault"
                state = Engine.open(vault).vault.state
                with running_server(vault, state, timeout=600.0) as srv:
                    pid = int(srv["pid"])
                    for k, q in enumerate((qs[(2 * i) % len(qs)], qs[(2 * i + 1) % len(qs)])):
                        c0, t1 = process_cpu_s(pid), time.perf_counter()
                        res = client.call(state, "recall", {"query": q, "semantic": True, "limit": 10, "deep": True},
                                          timeout=300.0)
                        rows.append({"start": i, "recall": k + 1, "start_s": srv["start_s"],
                                     "wall_s": time.perf_counter() - t1, "cpu_s": process_cpu_s(pid) - c0,
                                     "cold": sum(1 for h in res.get("hits") or [] if (h.get("scoreDetails") or {}).get("rerankCold")),
                                     "warnings": [w for w in res.get("warnings") or [] if "deep" in w]})
            shutil.rmtree(copy, ignore_errors=True)
    out["rows"] = rows
    out["load_end"] = load_average()
    return out


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    cpu = sorted(r["cpu_s"] for r in rows)
    keys = sorted({k for r in rows for k in r["timing"]})
    timing = {k: round(sorted(r["timing"].get(k, 0.0) for r in rows)[len(rows) // 2], 1) for k in keys}
    return {"wall": latency_summary([r["wall_s"] for r in rows]),
            "cpu_ms_p50": round(1000 * cpu[len(cpu) // 2], 0), "cpu_ms_p95": round(1000 * cpu[int(0.95 * (len(cpu) - 1))], 0),
            "timing_p50_ms": timing, "abstained": sum(bool(r["abstained"]) for r in rows)}


def phases_run(work: Path, qs: Sequence[str], recalls: int, warm_pass: bool = False) -> dict[str, Any]:
    """Each phase's time per deep recall in this process (wrapped functions; nested rows indented).
    ``warm_pass``: instead of the whole vault's read-ahead (at 10k notes, longer than a run), each
    question asked once in deep mode before the clock, so the second model holds its candidates'
    vectors as a server that has read ahead does."""
    from hive_brain.engine import Engine
    from hive_brain.search import candidates, features, late, recall, rerank

    from .smallvault import read_ahead

    spent: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)

    def wrap(obj: Any, name: str, label: str) -> None:
        f: Callable[..., Any] = getattr(obj, name)

        def timed(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                spent[label] += time.perf_counter() - t0
                calls[label] += 1

        setattr(obj, name, timed)

    out: dict[str, Any] = {"load_start": load_average()}
    with state_dir_at(work / "state"):
        eng = Engine.open(work / "vault")
        view = eng.view()
        if warm_pass:
            for q in [qs[(i + 1) % len(qs)] for i in range(recalls)]:
                eng.recall(q, view=view, deep=True, limit=10)
        else:
            out["read_ahead_computed"] = read_ahead(eng, view)
        model = rerank.model_for(view.embedder)
        wrap(candidates, "gather", "candidates (BM25 + e5 search)")
        wrap(view.vectors, "search", "  e5 vector search (LanceDB)")
        wrap(view.lexical, "get_docs", "passage text reads")
        wrap(features, "extract", "features")
        wrap(rerank, "rerank", "second model")
        wrap(type(model), "embed_passages", "  its passage vectors computed")
        wrap(late, "rerank", "late interaction")
        wrap(type(view.embedder), "token_vectors", "  e5 token vectors computed")
        wrap(rerank, "fuse", "final fusion")
        wrap(recall, "_hits", "hits")
        for mode in ("fast", "deep"):
            eng.recall(qs[0], view=view, deep=mode == "deep", limit=10)  # warm-up, not counted
            spent.clear()
            calls.clear()
            lat, cpu0 = [], time.process_time()
            for q in [qs[(i + 1) % len(qs)] for i in range(recalls)]:
                t0 = time.perf_counter()
                eng.recall(q, view=view, deep=mode == "deep", limit=10)
                lat.append(time.perf_counter() - t0)
            out[mode] = {"wall": latency_summary(lat), "cpu_ms_mean": round(1000 * (time.process_time() - cpu0) / recalls),
                         "phases_ms": {k: round(1000 * v / recalls, 1) for k, v in spent.items()},
                         "calls": {k: round(v / recalls, 1) for k, v in calls.items()}}
    out["load_end"] = load_average()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True, help="holds vault/ and state/ (embedded)")
    ap.add_argument("--questions", type=Path, default=None, help="server_rss's questions.json (default: smallvault's)")
    ap.add_argument("--recalls", type=int, default=30)
    ap.add_argument("--phases", action="store_true", help="in-process phase table instead of the server")
    ap.add_argument("--warm-pass", action="store_true",
                    help="with --phases: each question once before the clock instead of the vault's read-ahead")
    ap.add_argument("--cold", type=int, default=0, metavar="N",
                    help="N fresh servers, each asked in deep mode as soon as it is ready (no read-ahead)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    qs = questions(a.questions)
    if a.cold:
        res = cold_run(a.work, qs, a.cold)
        print_table(f"deep_latency, deep recall right after a start, {a.work} (load {res['load_start']} -> {res['load_end']})",
                    ["start", "recall", "server start s", "wall ms", "server CPU ms", "hits left unread", "warning"],
                    [[r["start"], r["recall"], r["start_s"], round(1000 * r["wall_s"]), round(1000 * r["cpu_s"]), r["cold"],
                      "; ".join(r["warnings"])[:60]] for r in res["rows"]])
    elif a.phases:
        res = phases_run(a.work, qs, a.recalls, a.warm_pass)
        labels = list(dict.fromkeys([*res["fast"]["phases_ms"], *res["deep"]["phases_ms"]]))
        print_table(f"deep_latency phases, {a.work} ({a.recalls} recalls, load {res['load_start']} -> {res['load_end']})",
                    ["phase", "fast ms/recall", "deep ms/recall", "deep calls/recall"],
                    [[k, res["fast"]["phases_ms"].get(k), res["deep"]["phases_ms"].get(k), res["deep"]["calls"].get(k)]
                     for k in labels]
                    + [[f"total wall p50 (CPU ms mean {res['fast']['cpu_ms_mean']} / {res['deep']['cpu_ms_mean']})",
                        res["fast"]["wall"]["median_ms"], res["deep"]["wall"]["median_ms"], None]])
    else:
        log(f"deep_latency: a server on {a.work}, {a.recalls} questions fast and deep")
        res = server_run(a.work, qs, a.recalls)
        print_table(f"deep_latency, server, {a.work} ({a.recalls} recalls each, load {res['load_start']} -> {res['load_end']})",
                    ["mode", "wall p50 ms", "wall p95 ms", "server CPU p50 ms", "p95 ms", "abstained", "server timing p50 (ms)"],
                    [[m, r["wall"]["median_ms"], r["wall"]["p95_ms"], r["cpu_ms_p50"], r["cpu_ms_p95"], r["abstained"],
                      ", ".join(f"{k} {v}" for k, v in r["timing_p50_ms"].items())] for m, r in res["modes"].items()])
    path = a.json or Path(__file__).parent / "results" / f"{NAME}{'-cold' if a.cold else '-phases' if a.phases else ''}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"work": str(a.work), **res}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
