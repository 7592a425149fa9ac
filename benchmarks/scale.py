"""Scale: recall quality and latency of hive-brain against BM25 and grep on synthetic vaults of 1k,
10k and 100k notes (``benchmarks/fixtures.py``: typed memories, long notes, conversations; 200
paraphrased questions with one known answer each), all measured in the same run.

Per configuration (vault size x lexical/hybrid):

* lexical rebuild throughput (notes/s, median of repeated full rebuilds) and vector throughput
  (passages/s of ``Indexer.embed_pending``, hybrid only);
* recall@1/5/10 and MRR@10 plus latency p50/p95 (ms) of: ``Engine.recall`` in-process and warm (one
  ``view()`` reused; default tiered scope, and ``scope="full-vault"``), the ``recall`` op through the
  running server (``hive-brain serve``; a new socket connection per question, as the hook does), the
  prompt hook as a whole process (``python -m hive_brain hook prompt`` with hook JSON on stdin;
  server up, and server down), and the baselines: ``bm25`` (tantivy default tokenizer, whole notes),
  ``grep`` (notes ranked by distinct query terms contained, in-process) and ``grep -ril`` (a real
  subprocess per question on the query's rarest word, by document frequency; matching files in path
  order), plus ``python -c pass`` as the process floor. For the hook the quality column is "the
  answer note is in the injected context" (the hook injects up to 6 notes, or nothing when it
  abstains).

Quality runs ask for 10 results with abstention and the relative cut-off off (as in locomo.py). Every
question is asked as agent ``claude-code`` (shared layer plus its own private layer); the baselines
see every note (they have no layers).

--quick: 1k lexical, 1k hybrid (when an embedding pack is available), 10k lexical; hook processes
N=30. --full: adds 10k hybrid and 100k lexical (embedding 100k notes takes hours on 2 cores, so
100k is lexical only); hook processes N=50.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import fixtures
from .common import (
    BenchConfig,
    check_target,
    embedding_pack,
    hook_argv,
    hook_env,
    latency_summary,
    load_average,
    log,
    median,
    model_dir,
    print_table,
    proc_memory_kb,
    profile_top,
    run_process,
    running_server,
    save_plot,
    short_error,
    standalone_main,
    state_dir_at,
    state_sizes,
    summary_row,
    temp_dir,
    temp_state_dir,
    wait_server_idle,
)
from .metrics import aggregate, session_scores
from .systems import BM25Retriever, GrepRetriever, collect_docs, query_terms

NAME = "scale"
AGENT = fixtures.QUERY_AGENT
K = 10
METRICS = ["any@1", "any@5", "any@10", "mrr"]
QUICK_CONFIGS = [(1000, False), (1000, True), (10000, False)]
FULL_CONFIGS = [(1000, False), (1000, True), (10000, False), (10000, True), (100000, False)]
QUESTIONS = 200
HOOK_RUNS = {"quick": 30, "full": 50}
REBUILD_RUNS = {1000: 3, 10000: 3, 100000: 1}
QUICK_REBUILD_RUNS = {1000: 3, 10000: 1}
WARMUP = 5
PROFILE_QUERIES = 50
TARGETS = {
    # (system, size) -> (metric, threshold ms, text)
    ("recall in-process", 10000): ("median_ms", 20.0, "p50 < 20 ms at 10k"),
    ("recall in-process", 100000): ("median_ms", 60.0, "p50 < 60 ms at 100k"),
    ("hook, server up", 10000): ("median_ms", 60.0, "p50 < 60 ms at 10k"),
    ("hook, server up p95", 10000): ("p95_ms", 150.0, "p95 < 150 ms at 10k"),
    ("hook, server down", 10000): ("median_ms", 120.0, "p50 < 120 ms at 10k"),
}
REBUILD_TARGET = 2000.0  # notes/s, lexical
HOOK_MARK = re.compile(r"\[hive-brain: (hybrid recall|lexical recall only \(([^)]*)\))")


def configs(cfg: BenchConfig) -> list[tuple[int, bool]]:
    return QUICK_CONFIGS if cfg.quick else FULL_CONFIGS


def config_label(notes: int, semantic: bool) -> str:
    return f"{notes // 1000}k {'hybrid' if semantic else 'lexical'}"


# --------------------------------------------------------------------------- scoring


def score(q: Mapping[str, Any], ranked: Sequence[str | None]) -> dict[str, Any]:
    rec: dict[str, Any] = {"id": q["id"], "aspect": q["aspect"]}
    rec.update(session_scores(list(ranked), q["gold_docs"], ks=(1, 5, 10)))
    return rec


def run_queries(name: str, questions: Sequence[Mapping[str, Any]], search: Callable[[str], list[str | None]],
                *, warmup: int = WARMUP, description: str = "") -> dict[str, Any]:
    """Warm up, then time search(question) once per question and score its ranking."""
    out: dict[str, Any] = {"system": name, "description": description, "status": "ok"}
    try:
        for q in questions[:warmup]:
            search(q["question"])
    except Exception as e:  # noqa: BLE001 - reported as the row's status
        out.update(status="error", reason=short_error(e))
        return out
    records, lat, errors, first = [], [], 0, None
    for q in questions:
        t0 = time.perf_counter()
        try:
            ranked = search(q["question"])
        except Exception as e:  # noqa: BLE001
            errors += 1
            first = first or short_error(e)
            ranked = []
        lat.append(time.perf_counter() - t0)
        records.append(score(q, ranked))
    out["latency"] = latency_summary(lat)
    out["metrics"] = aggregate(records, METRICS, "aspect")
    out["errors"] = errors
    if first:
        out["first_error"] = first
    if errors == len(questions):
        out.update(status="error", reason=f"every query failed; first: {first}")
    return out


def _paths(res: Mapping[str, Any]) -> list[str | None]:
    return [h.get("path") for h in res.get("hits") or []]


def default_recall_stats(eng: Any, view: Any, questions: Sequence[Mapping[str, Any]], semantic: bool) -> dict[str, Any]:
    """``recall`` with its default options (abstention on, tiered): how often it answers, which tier,
    and whether the answer note is among the hits it keeps (what `hive-brain recall` shows)."""
    abstained, found = 0, 0
    tiers: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for q in questions:
        res = eng.recall(q["question"], view=view, semantic=semantic, limit=K)
        tiers[str(res.get("tier"))] = tiers.get(str(res.get("tier")), 0) + 1
        if res.get("abstained"):
            abstained += 1
            r = re.sub(r"\d+(\.\d+)?", "N", str(res.get("reason") or ""))[:80]
            reasons[r] = reasons.get(r, 0) + 1
        elif q["gold_docs"][0] in _paths(res)[:5]:
            found += 1
    n = len(questions) or 1
    return {"abstain_rate": round(abstained / n, 4), "answered_with_gold_in_top5": round(found / n, 4),
            "tiers": tiers, "abstain_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:5])}


# --------------------------------------------------------------------------- baselines


class RarestWordGrep:
    """``grep -ril WORD vault`` as a subprocess, WORD = the query's rarest term (document frequency
    from the BM25 baseline's index, the best a person could guess); matching files in path order."""

    def __init__(self, vault: Path, bm25: BM25Retriever) -> None:
        self.vault = vault
        self.bm25 = bm25
        self.words: list[str] = []

    def pick(self, query: str) -> str | None:
        searcher = self.bm25._searcher
        best: tuple[int, str] | None = None
        for t in query_terms(query):
            for tok in re.findall(r"[a-z0-9]+", t):
                df = searcher.doc_freq("text", tok)
                if df and (best is None or df < best[0]):
                    best = (df, tok)
        return best[1] if best else None

    def search(self, query: str) -> list[str | None]:
        word = self.pick(query)
        self.words.append(word or "")
        if not word:
            return []
        proc = subprocess.run(["grep", "-ril", "--include=*.md", "--exclude-dir=.hive-brain", word, "."],
                              cwd=self.vault, capture_output=True, text=True, timeout=120)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"grep failed ({proc.returncode}): {proc.stderr.strip()[:200]}")
        files = sorted(line[2:] if line.startswith("./") else line for line in proc.stdout.splitlines())
        return [*files[:K]]


# --------------------------------------------------------------------------- the hook as a process


def hook_runs(name: str, vault: Path, questions: Sequence[Mapping[str, Any]], n: int, state_root: Path,
              *, description: str) -> dict[str, Any]:
    """Spawn the prompt hook once per question (N runs after 2 untimed warm-ups)."""
    env = hook_env(vault, AGENT)
    argv = hook_argv()
    qs = list(questions[:n])
    out: dict[str, Any] = {"system": name, "description": description, "status": "ok", "argv": argv}
    status_file = state_root / "hooks" / "status.json"

    def once(q: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
        payload = json.dumps({"session_id": "bench", "hook_event_name": "UserPromptSubmit", "prompt": q["question"],
                              "cwd": str(vault)})
        r = run_process(argv, input_text=payload, env=env, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"hook exited {r.returncode}: {r.stderr.strip()[-300:]}")
        ctx = ""
        if r.stdout.strip():
            doc = json.loads(r.stdout.strip().splitlines()[-1])
            ctx = ((doc.get("hookSpecificOutput") or {}).get("additionalContext") or doc.get("systemMessage") or "")
        mode = None
        try:
            mode = json.loads(status_file.read_text())["last"]["prompt"].get("mode")
        except (OSError, ValueError, KeyError, TypeError):
            m = HOOK_MARK.search(ctx)
            mode = m.group(1) if m else None
        gold = q["gold_docs"][0]
        return r.seconds, {"id": q["id"], "in_context": 1.0 if gold in ctx else 0.0, "injected": bool(ctx),
                           "mode": mode, "chars": len(ctx)}

    try:
        for q in qs[:2]:
            once(q)
    except Exception as e:  # noqa: BLE001
        out.update(status="error", reason=short_error(e))
        return out
    lat, recs = [], []
    for q in qs:
        try:
            dt, rec = once(q)
        except Exception as e:  # noqa: BLE001
            out.update(status="error", reason=short_error(e))
            return out
        lat.append(dt)
        recs.append(rec)
    modes: dict[str, int] = {}
    for r in recs:
        modes[str(r["mode"])] = modes.get(str(r["mode"]), 0) + 1
    out.update(latency=latency_summary(lat), modes=modes,
               in_context=round(sum(r["in_context"] for r in recs) / len(recs), 4) if recs else None,
               injected=sum(1 for r in recs if r["injected"]), records=recs)
    return out


def process_floor(n: int) -> dict[str, Any]:
    lat = [run_process([sys.executable, "-c", "pass"]).seconds for _ in range(n)]
    return {"system": "python -c pass", "description": "bare interpreter start: the floor of any process",
            "status": "ok", "latency": latency_summary(lat)}


_HOOK_PROFILE = """
import cProfile, json, sys, time
prof = cProfile.Profile()
prof.enable()
from hive_brain.agents import hooks
payload = json.loads({payload!r})
settings = hooks._settings(payload, [])
t0 = time.monotonic()
pack = hooks.answer_for_hook(settings, payload["prompt"], "", budget=int(settings.hook_budget_chars),
                             deadline=t0 + float(settings.hook_deadline))
prof.disable()
sys.path.insert(0, {repo!r})
from benchmarks.common import pstats_lines
print("@@PROFILE@@ mode=" + str(pack.get("mode")))
print("\\n".join(pstats_lines(prof, 25)))
"""


def hook_profile(vault: Path, question: str) -> list[str]:
    """cProfile of the prompt hook's work in a fresh process, in the main thread (the real hook runs it
    in a worker thread under a deadline): imports and ``answer_for_hook``; interpreter start not."""
    from .common import REPO_ROOT

    payload = json.dumps({"session_id": "bench-profile", "prompt": question})
    code = _HOOK_PROFILE.format(repo=str(REPO_ROOT), payload=payload)
    r = run_process([sys.executable, "-c", code], env=hook_env(vault, AGENT), timeout=120)
    if "@@PROFILE@@" not in r.stdout:
        return [f"profile failed ({r.returncode}): {r.stderr.strip()[-300:]}"]
    return r.stdout.split("@@PROFILE@@", 1)[1].strip().splitlines()


def import_time_top(vault: Path, question: str, n: int = 12) -> list[dict[str, Any]]:
    """`python -X importtime -m hive_brain hook prompt`: the costliest imports (cumulative, top level)."""
    payload = json.dumps({"session_id": "bench-importtime", "prompt": question})
    r = run_process([sys.executable, "-X", "importtime", "-m", "hive_brain", "hook", "prompt"], input_text=payload,
                    env=hook_env(vault, AGENT), timeout=60)
    rows: list[dict[str, Any]] = []
    for line in r.stderr.splitlines():
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3 or "cumulative" in line:
            continue
        name = parts[2][1:] if parts[2].startswith(" ") else parts[2]
        depth = (len(name) - len(name.lstrip(" "))) // 2
        if depth <= 1:
            rows.append({"module": name.strip(), "depth": depth, "cumulative_ms": int(parts[1]) / 1000})
    rows.sort(key=lambda r: -r["cumulative_ms"])
    return rows[:n]


# --------------------------------------------------------------------------- one configuration


def _state(work: Path | None, notes: int, semantic: bool) -> Any:
    """The run's $HIVE_BRAIN_STATE_DIR: a temp dir, or with ``--work`` one kept per configuration (its
    embedding cache makes a second hybrid run re-embed nothing)."""
    if work is None:
        return temp_state_dir()
    return state_dir_at(work / f"state-{config_label(notes, semantic).replace(' ', '-')}")


@contextmanager
def _fixture(work: Path | None, notes: int, questions: int) -> Iterator[tuple[Path, dict[str, Any], float]]:
    """(vault, fixture, seconds to generate it): generated in a temp dir, or with ``--work`` once into
    ``<work>/vault-<notes>`` and reused (the generator is seeded: the same vault every time)."""
    if work is None:
        with temp_state_dir(), temp_dir("hb-bench-scale-") as tmp:
            t0 = time.perf_counter()
            fx = fixtures.generate(tmp / "vault", notes, queries=questions)
            yield tmp / "vault", fx, time.perf_counter() - t0
        return
    work.mkdir(parents=True, exist_ok=True)
    vault, saved = work / f"vault-{notes}", work / f"fixture-{notes}-{questions}.json"
    if vault.exists() and saved.exists():
        yield vault, json.loads(saved.read_text(encoding="utf-8")), 0.0
        return
    with state_dir_at(work / "state-generate"):
        t0 = time.perf_counter()
        fx = fixtures.generate(vault, notes, queries=questions)
        gen_s = time.perf_counter() - t0
    saved.write_text(json.dumps(fx), encoding="utf-8")
    yield vault, fx, gen_s


def run_config(cfg: BenchConfig, vault: Path, fx: Mapping[str, Any], notes: int, semantic: bool,
               pack: Path | None, work: Path | None = None) -> dict[str, Any]:
    from hive_brain.engine import Engine
    from hive_brain.rpc import client

    label = config_label(notes, semantic)
    questions = fx["questions"]
    n_hook = HOOK_RUNS[cfg.mode]
    out: dict[str, Any] = {"label": label, "notes": fx["notes"], "semantic": semantic, "status": "ok",
                           "load_start": load_average()}
    systems: list[dict[str, Any]] = []
    out["systems"] = systems
    with _state(work, notes, semantic) as state_root, model_dir(pack if semantic else None):
        eng = Engine.open(vault, agent_id=AGENT)
        state = eng.vault.state
        runs = (QUICK_REBUILD_RUNS if cfg.quick else REBUILD_RUNS).get(notes, 1)
        times, res = [], {}
        for i in range(runs):
            log(f"scale {label}: lexical rebuild {i + 1}/{runs}")
            t0 = time.perf_counter()
            res = eng.rebuild(embed=False)
            times.append(time.perf_counter() - t0)
        med = median(times)
        out["rebuild"] = {"runs_s": [round(t, 3) for t in times], "median_s": round(med, 3),
                          "notes": res.get("indexed"), "passages": res.get("passages"),
                          "notes_per_s": round(res.get("indexed", 0) / med) if med else None}
        if semantic:
            pending = eng.indexer.pending_count()
            log(f"scale {label}: embedding {pending} passages")
            t0 = time.perf_counter()
            vres = eng.indexer.embed_pending()
            dt = time.perf_counter() - t0
            out["vectors"] = {"passages": pending, "seconds": round(dt, 2),
                              "passages_per_s": round(pending / dt, 1) if dt else None,
                              "left": vres.get("pending")}
        out["state_bytes"] = state_sizes(state)

        # -- in-process, warm ------------------------------------------------------------------
        log(f"scale {label}: in-process recall, {len(questions)} questions")
        view = eng.view(semantic=semantic)
        out["view_semantic"] = view.embedder is not None

        def inproc(scope: str | None) -> Callable[[str], list[str | None]]:
            opts = {"scope": scope} if scope else {}
            return lambda q: _paths(eng.recall(q, view=view, semantic=semantic, limit=K, abstain=False,
                                               drop_ratio=0.0, **opts))

        systems.append(run_queries("recall in-process", questions, inproc(None),
                                   description="Engine.recall(view=v) warm, default tiered scope"))
        systems.append(run_queries("recall in-process, full-vault", questions, inproc("full-vault"),
                                   description="Engine.recall(view=v, scope='full-vault') warm"))
        first = eng.recall(questions[0]["question"], view=view, semantic=semantic, limit=K)
        out["recall_info"] = {k: first.get(k) for k in ("tier", "semantic", "semanticOff", "warnings", "timing")}
        out["defaults"] = default_recall_stats(eng, view, questions, semantic)
        qs = [q["question"] for q in questions[:PROFILE_QUERIES]]
        out["recall_profile"] = profile_top(
            lambda: [eng.recall(q, view=view, semantic=semantic, limit=K, abstain=False, drop_ratio=0.0) for q in qs],
            25)

        # -- baselines ---------------------------------------------------------------------------
        docs = collect_docs(vault)
        bm25 = BM25Retriever("bm25")
        bm25.open()
        t0 = time.perf_counter()
        bm25.index(docs)
        bm25_index_s = time.perf_counter() - t0
        row = run_queries("bm25", questions, lambda q: [h.doc_id for h in bm25.search(q, K)],
                          description="tantivy BM25, default tokenizer, whole notes, in-process")
        row["index"] = {"seconds": round(bm25_index_s, 3), "notes_per_s": round(len(docs) / bm25_index_s)}
        systems.append(row)
        grep_rare = RarestWordGrep(vault, bm25)
        row = run_queries("grep -ril", questions, grep_rare.search, warmup=2,
                          description="`grep -ril WORD` subprocess, WORD = rarest query term; files in path order")
        row["words_sample"] = grep_rare.words[2:12]
        systems.append(row)
        bm25.close()
        grep = GrepRetriever()
        t0 = time.perf_counter()
        grep.index(docs)
        row = run_queries("grep count", questions, lambda q: [h.doc_id for h in grep.search(q, K)],
                          description="notes ranked by distinct query terms contained (in-process substring)")
        row["index"] = {"seconds": round(time.perf_counter() - t0, 3)}
        systems.append(row)
        grep.close()
        del docs

        # -- processes ---------------------------------------------------------------------------
        systems.append(process_floor(n_hook))
        log(f"scale {label}: prompt hook, server down, N={n_hook}")
        systems.append(hook_runs("hook, server down", vault, questions, n_hook, state_root,
                                 description="`python -m hive_brain hook prompt`, no server: lexical in-process"))
        try:
            with running_server(vault, state) as srv:
                out["server"] = {"pid": srv["pid"], "start_s": srv["start_s"]}
                # Timed in the steady state: the reranker's read-ahead (search/rerank.py) finished first.
                t_idle = time.perf_counter()
                wait_server_idle(state, timeout=1800.0)
                out["server"]["idle_s"] = round(time.perf_counter() - t_idle, 1)
                log(f"scale {label}: server up (pid {srv['pid']}, {srv['start_s']:.1f}s); recall op and hook")

                def via_server(q: str) -> list[str | None]:
                    res = client.call(state, "recall", {"query": q, "agent": AGENT, "semantic": semantic,
                                                        "limit": K, "abstain": False, "drop_ratio": 0.0},
                                      timeout=30.0)
                    return _paths(res)

                row = run_queries("recall via server", questions, via_server,
                                  description="client.call(state, 'recall'): new socket per question")
                st = client.call(state, "status", timeout=10.0)
                row["server_semantic"] = (st.get("semantic") or {}).get("on")
                systems.append(row)
                systems.append(hook_runs("hook, server up", vault, questions, n_hook, state_root,
                                         description="`python -m hive_brain hook prompt`, server up"))
                mem = proc_memory_kb(srv["pid"]) if srv["pid"] else {}
                out["server"].update(rss_mb=round(mem["VmRSS"] / 1024, 1) if "VmRSS" in mem else None,
                                     peak_mb=round(mem["VmHWM"] / 1024, 1) if "VmHWM" in mem else None)
                if notes == 10000 and not semantic:
                    out["hook_profile_server_up"] = hook_profile(vault, questions[0]["question"])
                    out["hook_imports_server_up"] = import_time_top(vault, questions[0]["question"])
        except Exception as e:  # noqa: BLE001 - server missing or broken: those rows are unavailable
            reason = short_error(e)
            log(f"scale {label}: server unavailable: {reason}")
            for name in ("recall via server", "hook, server up"):
                systems.append({"system": name, "status": "unavailable", "reason": reason})
        if notes == 10000 and not semantic:
            out["hook_profile_server_down"] = hook_profile(vault, questions[0]["question"])
            out["hook_imports_server_down"] = import_time_top(vault, questions[0]["question"])
            rb = out["rebuild"]["notes_per_s"] or 0
            if rb < REBUILD_TARGET:
                log(f"scale {label}: profiling one rebuild ({rb} notes/s < {REBUILD_TARGET:.0f})")
                out["rebuild_profile"] = profile_top(lambda: eng.rebuild(embed=False), 30, sort="tottime")
    out["load_end"] = load_average()
    return out


# --------------------------------------------------------------------------- run / report


def run(cfg: BenchConfig, only: Sequence[tuple[int, bool]] | None = None, questions: int = QUESTIONS,
        work: Path | None = None) -> dict[str, Any]:
    pack, why = embedding_pack()
    results = []
    by_size: dict[int, list[bool]] = {}
    for n, sem in (only or configs(cfg)):
        by_size.setdefault(n, []).append(sem)
    for notes, modes in by_size.items():
        log(f"scale: generating a {notes}-note vault" + (f" (or reusing it in {work})" if work else ""))
        with _fixture(work, notes, questions) as (vault, fx, gen_s):
            fixture = {"notes": fx["notes"], "seconds": round(gen_s, 2), "counts": fx["counts"], "stats": fx["stats"],
                       "questions": len(fx["questions"]), "example_questions": [
                           {"question": q["question"], "gold": q["gold_docs"][0]} for q in fx["questions"][:5]]}
            for sem in modes:
                label = config_label(notes, sem)
                if sem and pack is None:
                    results.append({"label": label, "notes": fx["notes"], "semantic": True, "status": "unavailable",
                                    "reason": why, "fixture": fixture, "systems": []})
                    continue
                try:
                    r = run_config(cfg, vault, fx, notes, sem, pack, work)
                except Exception as e:  # noqa: BLE001 - one broken configuration must not hide the others
                    import traceback

                    log(f"scale {label}: failed: {short_error(e)}")
                    r = {"label": label, "notes": fx["notes"], "semantic": sem, "status": "error",
                         "reason": short_error(e), "traceback": traceback.format_exc(), "systems": []}
                r["fixture"] = fixture
                results.append(r)
    return {"agent": AGENT, "k": K, "pack": str(pack) if pack else None, "pack_unavailable": why,
            "targets": {f"{s} @ {n}": t[2] for (s, n), t in TARGETS.items()},
            "rebuild_target_notes_per_s": REBUILD_TARGET, "configs": results}


def find_system(conf: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return next((s for s in conf.get("systems", []) if s["system"] == name), None)


def _lat(s: Mapping[str, Any] | None, key: str) -> float | None:
    if not s or s.get("status") != "ok":
        return None
    return (s.get("latency") or {}).get(key)


def _metric(s: Mapping[str, Any] | None, m: str) -> float | None:
    if not s or s.get("status") != "ok" or "metrics" not in s:
        return None
    return s["metrics"]["pooled"].get(m)


def target_checks(conf: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The DESIGN budgets that apply to this configuration, with met/missed."""
    out = []
    notes = conf["notes"]
    size = 100000 if notes >= 100000 else 10000 if notes >= 10000 else 1000
    for (system, n), (key, thr, text) in TARGETS.items():
        if n != size:
            continue
        s = find_system(conf, system.replace(" p95", ""))
        v = _lat(s, key)
        out.append({"what": f"{system.replace(' p95', '')} ({'hybrid' if conf['semantic'] else 'lexical'})",
                    "target": text, "value": v, "status": check_target(v, thr, higher_is_better=False)})
    rb = (conf.get("rebuild") or {}).get("notes_per_s")
    if rb is not None:
        out.append({"what": "lexical rebuild", "target": f">= {REBUILD_TARGET:.0f} notes/s", "value": rb,
                    "status": check_target(float(rb), REBUILD_TARGET)})
    return out


def report(result: Mapping[str, Any], console: Any) -> None:
    for conf in result["configs"]:
        if conf.get("status") != "ok":
            console.print(f"[bold]{conf['label']}[/bold]: {conf['status']}: {conf.get('reason')}")
            continue
        bm = find_system(conf, "bm25")
        floor = find_system(conf, "python -c pass")
        rows = []
        for s in conf["systems"]:
            if s.get("status") != "ok":
                rows.append([s["system"], None, None, None, None, None, None, None, f"{s['status']}: {s.get('reason')}"])
                continue
            lat = s.get("latency", {})
            quality = _metric(s, "any@5")
            # Latency against the baseline of the same kind: bm25 in-process, a bare Python for processes.
            base, base_name = (floor, "py") if s["system"].startswith(("hook", "grep -ril")) else (bm, "bm25")
            ratio = None
            if _lat(base, "median_ms") and lat.get("median_ms") is not None and s is not base and s is not floor:
                ratio = f"x{lat['median_ms'] / _lat(base, 'median_ms'):.1f} {base_name}"
            note = ""
            if "in_context" in s:
                quality = s["in_context"]
                note = f"answer in injected context; {s.get('injected')}/{lat.get('n')} injected; modes {s.get('modes')}"
            rows.append([s["system"], lat.get("n"), _metric(s, "any@1"), quality, _metric(s, "mrr"),
                         lat.get("median_ms"), lat.get("p95_ms"), ratio, note or s.get("description", "")])
        rb = conf.get("rebuild", {})
        vec = conf.get("vectors")
        fx = conf["fixture"]
        cap = (f"vault: {fx['notes']} notes ({fx['counts']['memories']} typed memories), generated in {fx['seconds']} s; "
               f"{fx['questions']} paraphrased questions (mean share of question words found in the answer note "
               f"{fx['stats']['overlap_mean']}). Lexical rebuild {rb.get('notes_per_s')} notes/s "
               f"(median of {len(rb.get('runs_s', []))}, {rb.get('passages')} index docs)"
               + (f"; vectors {vec['passages_per_s']} passages/s ({vec['passages']} passages, {vec['seconds']} s)"
                  if vec else "")
               + (f". Server (after these queries): RSS {conf['server'].get('rss_mb')} MB, peak "
                  f"{conf['server'].get('peak_mb')} MB, started in {conf['server'].get('start_s')} s"
                  if conf.get("server") else "")
               + f". Default recall (abstention on): abstains on {conf.get('defaults', {}).get('abstain_rate')} "
                 f"of the questions. Load average {conf.get('load_start')} -> {conf.get('load_end')}.")
        print_table(f"Scale {conf['label']}: recall@1/@5, MRR@10, latency (ms); p50 against bm25 (in-process) or "
                    "`python -c pass` (processes)",
                    ["system", "n", "R@1", "R@5", "MRR", "p50 ms", "p95 ms", "p50 vs", "what"], rows, console,
                    caption=cap)
        checks = target_checks(conf)
        if checks:
            print_table(f"Scale {conf['label']}: DESIGN budgets", ["what", "target", "value", "status"],
                        [[c["what"], c["target"], c["value"], c["status"]] for c in checks], console, digits=1)


def summary_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for conf in result["configs"]:
        label = conf["label"]
        if conf.get("status") != "ok":
            rows.append(summary_row(NAME, label, "-", None, status=conf["status"], note=conf.get("reason")))
            continue
        bm = find_system(conf, "bm25")
        hb = find_system(conf, "recall in-process")
        r5, b5 = _metric(hb, "any@5"), _metric(bm, "any@5")
        rows.append(summary_row(NAME, f"{label}: recall in-process", "R@5", r5,
                                vs_baseline=f"{r5 - b5:+.3f} vs bm25" if r5 is not None and b5 is not None else None,
                                note=f"MRR {_metric(hb, 'mrr')}; grep -ril R@5 "
                                     f"{_metric(find_system(conf, 'grep -ril'), 'any@5')}"))
        checks = {c["what"].split(" (")[0] + c["target"]: c for c in target_checks(conf)}
        for name in ("recall in-process", "recall via server", "hook, server up", "hook, server down"):
            s = find_system(conf, name)
            if s is None:
                continue
            if s.get("status") != "ok":
                rows.append(summary_row(NAME, f"{label}: {name}", "p50 ms", None, status=s["status"],
                                        note=s.get("reason")))
                continue
            tgt = [c for k, c in checks.items() if k.startswith(name)]
            p50 = _lat(s, "median_ms")
            base = _lat(bm, "median_ms") if "hook" not in name else _lat(find_system(conf, "grep -ril"), "median_ms")
            rows.append(summary_row(
                NAME, f"{label}: {name}", "p50 ms", p50, target="; ".join(c["target"] for c in tgt) or None,
                vs_baseline=(f"x{p50 / base:.1f} {'grep -ril' if 'hook' in name else 'bm25'}"
                             if p50 and base else None),
                status=("FAIL" if any(c["status"] == "FAIL" for c in tgt) else "pass") if tgt else "ok",
                note=f"p95 {_lat(s, 'p95_ms')} ms" + (f"; in context {s.get('in_context')}" if "in_context" in s else "")))
        rb = conf.get("rebuild", {}).get("notes_per_s")
        if rb is not None:
            rows.append(summary_row(NAME, f"{label}: rebuild", "notes/s", rb, target=f">= {REBUILD_TARGET:.0f}",
                                    status=check_target(float(rb), REBUILD_TARGET)))
        if conf.get("vectors"):
            rows.append(summary_row(NAME, f"{label}: vectors", "passages/s", conf["vectors"]["passages_per_s"],
                                    note="bounded by the model"))
    return rows


def plot(result: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """Latency (p50, log scale) and recall@5 vs vault size per system; PNG written to out_dir.

    Solid lines: lexical configurations; hollow markers joined by dotted lines: hybrid.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    ok = [c for c in result["configs"] if c.get("status") == "ok"]
    lex = [c for c in ok if not c["semantic"]]
    hyb = [c for c in ok if c["semantic"]]
    if len(lex) < 2:
        return []
    names = ["recall in-process", "recall via server", "hook, server up", "hook, server down", "bm25", "grep -ril",
             "grep count", "python -c pass"]
    colors = dict(zip(names, plt.get_cmap("tab10").colors, strict=False))  # type: ignore[attr-defined]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5))

    def quality(s: Mapping[str, Any] | None) -> float | None:
        return s.get("in_context") if s and "in_context" in s and s.get("status") == "ok" else _metric(s, "any@5")

    for confs, style, suffix in ((lex, {"ls": "-", "marker": "o"}, ""),
                                 (hyb, {"ls": ":", "marker": "o", "mfc": "none", "ms": 8}, " (hybrid)")):
        sizes = [c["notes"] for c in confs]
        for name in names:
            if suffix and name in ("bm25", "grep -ril", "grep count", "python -c pass"):
                continue  # the baselines do not change with the pack
            pts = [(x, _lat(find_system(c, name), "median_ms")) for x, c in zip(sizes, confs, strict=True)]
            pts = [(x, y) for x, y in pts if y]
            if pts:
                ax1.plot(*zip(*pts, strict=True), color=colors[name], label=name + suffix, **style)
            if name in ("recall via server", "python -c pass"):
                continue  # same ranking as in-process / no ranking at all
            qp = [(x, quality(find_system(c, name))) for x, c in zip(sizes, confs, strict=True)]
            qp = [(x, y) for x, y in qp if y is not None]
            if qp:
                ax2.plot(*zip(*qp, strict=True), color=colors[name], label=name + suffix, **style)
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xlabel("notes in the vault")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_yscale("log")
    ax1.set_ylabel("p50 latency, ms (log)")
    ax1.set_title("Latency vs vault size")
    for y, text in ((20, "20 ms: recall budget at 10k"), (60, "60 ms: recall at 100k / hook up at 10k"),
                    (120, "120 ms: hook down at 10k")):
        ax1.axhline(y, color="grey", ls="--", lw=0.8)
        ax1.text(0.01, y * 1.04, text, fontsize=7, color="grey", transform=ax1.get_yaxis_transform())
    ax1.legend(fontsize=7, loc="lower right")
    ax1.set_ylim(0.03, 2000)
    ax2.set_ylabel("recall@5 (hooks: answer in the injected context)")
    ax2.set_ylim(0, 1.02)
    ax2.set_title("Quality vs vault size")
    ax2.legend(fontsize=7, loc="lower left")
    return save_plot(fig, out_dir, "bench-scale-latency.png")


def _extra(ap: Any) -> None:
    ap.add_argument("--sizes", default=None,
                    help="comma-separated configs, e.g. 1000,1000h,10000 (h = hybrid); default per mode")
    ap.add_argument("--questions", type=int, default=QUESTIONS)
    ap.add_argument("--work", type=Path, default=None,
                    help="keep the generated vaults and state dirs here and reuse them (a second hybrid run "
                         "reads its vectors from the embedding cache: its vector throughput is not the model's)")


def _kwargs(a: Any) -> dict[str, Any]:
    only = None
    if a.sizes:
        only = [(int(x.rstrip("h")), x.endswith("h")) for x in a.sizes.split(",") if x.strip()]
    return {"only": only, "questions": a.questions, "work": a.work}


if __name__ == "__main__":
    sys.exit(standalone_main(sys.modules[__name__], extra_args=_extra, kwargs_from_args=_kwargs))
