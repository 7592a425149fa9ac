"""A developer's own small vault: typed memories asked about in other words, prompts about something
else, memories that were evolved, and a few questions in other languages.

The memories (``smallvault/memories.json``: preferences, decisions, lessons, procedures, people,
projects of one made-up team) are written through the engine's ``batch`` (what ``hive-brain remember``
writes) and six of them are then ``evolve``d. Larger vaults add distractor notes from
:mod:`benchmarks.fixtures` (typed memories about made-up services, project notes, conversations).
The 20-note vault holds only the first 20 memories and is asked only about them.

Every question list (``smallvault/questions.json``) is split in two by position: even = **tune**
(the half ranking changes may be tuned on), odd = **held** (never tuned on). Both are reported.

Metrics, with recall as the warm server answers (hybrid, tiered, abstention on):
paraphrase hit@1 / hit@3 (an abstention is a miss) and the abstain rate on these answerable
questions; off-topic abstention rate and how many off-topic prompts the prompt hook would inject
into (out of 20 per half); evolved-head-first rate; the same hit@k for the mixed-language questions.
``e5 only`` ranks notes by their best passage cosine alone (the model's own ranking, no fusion).

--quick builds the 20-note and 70-note vaults; --full adds 500 and 2,000 notes. ``--work DIR`` keeps the
built vaults and reuses them (before/after comparisons on the same vaults). ``--usage`` adds a second
pass with usage logged for the tune half's right answers (:func:`usage_scenario`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .common import (
    BenchConfig,
    built_once,
    log,
    print_table,
    standalone_main,
    summary_row,
    vault_dir,
)

NAME = "smallvault"
DATA = Path(__file__).parent / "smallvault"
QUICK_SIZES = (20, 70)
FULL_SIZES = (20, 70, 500, 2000)
SMALL = 20  # the smallest vault: the first SMALL memories only
TARGETS = {"hit@1": 0.85, "hit@3": 0.97, "abstain_answerable": 0.03, "offtopic_abstain": 0.90,
           "hook_injected_per_20": 2, "evolved_first": 1.0}


def load_data() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    memories = json.loads((DATA / "memories.json").read_text(encoding="utf-8"))
    questions = json.loads((DATA / "questions.json").read_text(encoding="utf-8"))
    return memories, questions


def split_of(i: int) -> str:
    return "tune" if i % 2 == 0 else "held"


def build_vault(root: Path, size: int, memories: list[dict[str, Any]], evolutions: list[dict[str, Any]]) -> tuple[
        Any, dict[str, str], dict[str, str], dict[str, Any]]:
    """The vault of ``size`` notes; returns (engine, key -> path of the newest version, key -> first
    version's path, build info)."""
    from hive_brain.engine import Engine

    from .fixtures import generate
    from .systems import make_vault

    gold = memories[:SMALL] if size <= SMALL else memories
    t0 = time.perf_counter()
    if size - len(gold) >= 20:
        generate(root, size - len(gold), queries=0, init=True)
    else:
        make_vault(root)
    eng = Engine.open(root)
    eng.rebuild()
    t_distract = time.perf_counter() - t0
    first: dict[str, str] = {}
    for i in range(0, len(gold), 25):
        chunk = gold[i:i + 25]
        recs = [{"type": m["type"], "title": m["title"], "content": m["content"], "tags": m.get("tags") or [],
                 "aliases": m.get("aliases") or [], "memory_key": f"{m['type']}/{m['key']}"} for m in chunk]
        out = eng.memory.batch(recs)
        for m, r in zip(chunk, out["records"], strict=True):
            first[m["key"]] = r["path"]
    head = dict(first)
    ids = {k: eng.catalog.by_paths([p])[p].id for k, p in first.items()}
    for ev in evolutions:
        if ev["key"] in first:
            r = eng.memory.evolve(ids[ev["key"]], ev["content"])
            head[ev["key"]] = r["path"]
    n_notes = sum(1 for p in root.rglob("*.md") if not any(x.startswith(".") for x in p.relative_to(root).parts))
    info = {"notes": n_notes, "memories": len(gold), "distractors_s": round(t_distract, 1),
            "build_s": round(time.perf_counter() - t0, 1)}
    return eng, head, first, info


def e5_only(view: Any, query: str, k: int) -> list[str]:
    """Notes by their best passage cosine to the question: the model's own ranking."""
    from hive_brain.search.recall import KINDS_ALL, build_where

    qv = view.embedder.embed_queries([query])[0]
    hits = view.vectors.search(qv, where=build_where(agent=None, kinds=KINDS_ALL), limit=60)
    out: list[str] = []
    for h in sorted(hits, key=lambda h: -h.similarity):
        if h.note_path not in out:
            out.append(h.note_path)
    return out[:k]


def _resolve(eng: Any, view: Any, paths: list[str]) -> list[str]:
    """A superseded memory stands for its chain's head (as recall shows it)."""
    from hive_brain.search.recall import _head

    out: list[str] = []
    for p in paths:
        e = view.catalog.by_paths([p]).get(p)
        hp = _head(view.catalog, e, None).path if e is not None and e.status == "superseded" else p
        if hp not in out:
            out.append(hp)
    return out


def read_ahead(eng: Any, view: Any) -> int:
    """What the warm server does once it is ready (daemon/indexing.py): the second model reads every
    non-conversation note's passages ahead of questions (``search/rerank.py``, ``warm``), from and into
    the vault's embedding cache. Returns how many passages the model computed."""
    from hive_brain.index.embcache import EmbeddingCache
    from hive_brain.search import rerank

    model = rerank.model_for(view.embedder) if view.embedder is not None else None
    if model is None:
        return 0
    with EmbeddingCache(eng.vault.state / "embcache.sqlite") as store:
        return rerank.warm(model, view.lexical, rerank.warm_order(view.catalog), store=store)


def evaluate(eng: Any, view: Any, qs: list[dict[str, Any]], offtopic: list[dict[str, Any]],
             alternatives: Mapping[str, list[str]] | None = None, **recall_opts: Any) -> dict[str, Any]:
    """``alternatives``: question -> the asking agent's other phrasings, sent with it (off-topic prompts
    get none: nobody wrote them any). ``recall_opts``: more recall options (``deep``)."""
    from hive_brain.search.prompt import contextual_answer

    def recall(q: str, **opts: Any) -> dict:
        alts = (alternatives or {}).get(q)
        return eng.recall(q, view=view, **({"alternatives": alts} if alts else {}), **recall_opts, **opts)

    recs: list[dict[str, Any]] = []
    lat: list[float] = []
    for q in qs:
        t0 = time.perf_counter()
        res = recall(q["q"], limit=10)
        lat.append((time.perf_counter() - t0) * 1000)
        paths = [h["path"] for h in res["hits"]]
        raw = [h["path"] for h in recall(q["q"], limit=10, abstain=False, drop_ratio=0.0)["hits"]]
        e5 = _resolve(eng, view, e5_only(view, q["q"], 10)) if view.embedder is not None else []
        gold = set(q["gold"])
        rec = {**q, "gold": sorted(gold), "abstained": res["abstained"], "reason": res.get("reason"),
               "top": paths[:3], "rank": next((i for i, p in enumerate(paths) if p in gold), None),
               "rank_noabstain": next((i for i, p in enumerate(raw) if p in gold), None),
               "rank_e5": next((i for i, p in enumerate(e5) if p in gold), None)}
        if q["kind"] == "evolve":
            rec["head_first"] = bool(paths) and paths[0] == q["head"]
        recs.append(rec)
    off: list[dict[str, Any]] = []
    for q in offtopic:
        res = recall(q["q"], limit=10)
        pack = contextual_answer(recall, q["q"], budget=int(eng.settings.hook_budget_chars))
        off.append({**q, "abstained": res["abstained"], "top": [h["title"] for h in res["hits"][:2]],
                    "hook_injected": not pack.get("abstained"),
                    "gap": (res["hits"][0]["scoreDetails"].get("semanticGap") if res["hits"] else None)})
    return {"answerable": recs, "offtopic": off, "latency_ms_p50": round(sorted(lat)[len(lat) // 2], 1) if lat else None}


def metrics(ev: Mapping[str, Any], split: str) -> dict[str, Any]:
    def rate(xs: list[bool]) -> float | None:
        return round(sum(xs) / len(xs), 3) if xs else None

    rs = [r for r in ev["answerable"] if r["split"] == split]
    para = [r for r in rs if r["kind"] in ("paraphrase", "special")]
    multi = [r for r in rs if r["kind"] == "multilingual"]
    evo = [r for r in rs if r["kind"] == "evolve"]
    off = [r for r in ev["offtopic"] if r["split"] == split]
    ans = para + evo

    def hit(rows: list[dict[str, Any]], k: int, field: str = "rank") -> float | None:
        return rate([r[field] is not None and r[field] < k for r in rows])

    return {
        "n_paraphrase": len(para), "hit@1": hit(para, 1), "hit@3": hit(para, 3),
        "hit@1_noabstain": hit(para, 1, "rank_noabstain"), "hit@3_noabstain": hit(para, 3, "rank_noabstain"),
        "hit@1_e5": hit(para, 1, "rank_e5"), "hit@3_e5": hit(para, 3, "rank_e5"),
        "abstain_answerable": rate([r["abstained"] for r in ans]),
        "n_multilingual": len(multi), "multi_hit@1": hit(multi, 1), "multi_hit@3": hit(multi, 3),
        "n_evolve": len(evo), "evolved_first": rate([r["head_first"] for r in evo]),
        "n_offtopic": len(off), "offtopic_abstain": rate([r["abstained"] for r in off]),
        "hook_injected": sum(r["hook_injected"] for r in off),
        "hook_injected_per_20": round(20 * sum(r["hook_injected"] for r in off) / len(off), 1) if off else None,
    }


def questions_for(data: Mapping[str, Any], keys: set[str], head: Mapping[str, str],
                  first: Mapping[str, str]) -> list[dict[str, Any]]:
    def gold(key: str) -> list[str]:
        return sorted({head[key], first[key]})

    qs: list[dict[str, Any]] = []
    for i, (q, key) in enumerate(data["paraphrase"]):
        if key in keys:
            qs.append({"q": q, "kind": "paraphrase", "split": split_of(i), "gold": gold(key)})
    for i, (q, key, lang) in enumerate(data["multilingual"]):
        if key in keys:
            qs.append({"q": q, "kind": "multilingual", "lang": lang, "split": split_of(i), "gold": gold(key)})
    for i, (q, key, what) in enumerate(data["special"]):
        if key in keys:
            qs.append({"q": q, "kind": "special", "what": what, "split": split_of(i), "gold": [head[key]]})
    for i, ev in enumerate(data["evolve"]):
        if ev["key"] in keys:
            qs.append({"q": ev["q"], "kind": "evolve", "split": split_of(i), "gold": [head[ev["key"]]],
                       "head": head[ev["key"]]})
    return qs


def _open_or_build(work: Path, size: int, memories: list[dict[str, Any]], evolutions: list[dict[str, Any]]) -> tuple[
        Any, dict[str, str], dict[str, str], dict[str, Any]]:
    def build(root: Path) -> tuple[Any, dict[str, Any]]:
        eng, head, first, info = build_vault(root, size, memories, evolutions)
        return eng, {"head": head, "first": first, "info": info}

    eng, maps = built_once(work, build)
    return eng, maps["head"], maps["first"], maps["info"]


def run(cfg: BenchConfig, sizes: tuple[int, ...] | None = None, keep: Path | None = None,
        usage: bool = False, alternatives: Path | None = None, deep: bool = False) -> dict[str, Any]:
    from hive_brain.search.params import PARAMS

    memories, data = load_data()
    sizes = sizes or (QUICK_SIZES if cfg.quick else FULL_SIZES)
    offtopic = [{"q": q, "split": split_of(i)} for i, q in enumerate(data["offtopic"])]
    out: list[dict[str, Any]] = []
    for size in sizes:
        with vault_dir(keep, size, "hb-bench-smallvault-") as work:
            eng, head, first, info = _open_or_build(work, size, memories, data["evolve"])
            view = eng.view()
            read_ahead(eng, view)
            qs = questions_for(data, set(first), head, first)
            log(f"smallvault: {info['notes']} notes ({info['memories']} memories) built in {info['build_s']} s; "
                f"{len(qs)} answerable and {len(offtopic)} off-topic prompts; semantic {view.embedder is not None}")
            ev = evaluate(eng, view, qs, offtopic)
            row = {"size": size, **info, "semantic": view.embedder is not None,
                   "latency_ms_p50": ev["latency_ms_p50"],
                   "tune": metrics(ev, "tune"), "held": metrics(ev, "held"), "cases": ev}
            if usage:
                row["usage"] = usage_scenario(eng, view, qs, offtopic)
            levers: list[tuple[str, dict[str, Any]]] = []
            alts = json.loads(alternatives.read_text(encoding="utf-8")) if alternatives else None
            if alts:
                levers.append(("+alternatives", {"alternatives": alts}))
            if deep:
                levers.append(("+deep", {"deep": True}))
            if alts and deep:
                levers.append(("+alternatives+deep", {"alternatives": alts, "deep": True}))
            row["levers"] = {}
            for name, opts in levers:
                t0 = time.perf_counter()
                lev = evaluate(eng, view, qs, offtopic, **opts)
                row["levers"][name] = {"tune": metrics(lev, "tune"), "held": metrics(lev, "held"), "cases": lev,
                                       "latency_ms_p50": lev["latency_ms_p50"], "s": round(time.perf_counter() - t0, 1)}
                log(f"smallvault {info['notes']} notes {name}: held {row['levers'][name]['held']['hit@1']} / "
                    f"{row['levers'][name]['held']['hit@3']}, p50 {lev['latency_ms_p50']} ms")
            out.append(row)
    return {"sizes": list(sizes), "targets": TARGETS, "params": dict(PARAMS), "usage": usage, "vaults": out}


def usage_scenario(eng: Any, view: Any, qs: list[dict[str, Any]], offtopic: list[dict[str, Any]]) -> dict[str, Any]:
    """Usage logged as answers would log it: each tune-half answerable question's gold memories get one
    ``final-answer`` use (and one ``retrieved``); then both halves are asked again. The held half is the
    measure (its questions were never used); the tune half shows the ceiling of the cap. The log is
    emptied afterwards, so a kept vault (``--work``) is measured again from no usage."""
    from hive_brain.memory.operations import record_usage, usage_log

    log = usage_log(eng.vault.state)
    for p in log.files():
        p.unlink()
    used = 0
    for q in qs:
        if q["split"] != "tune":
            continue
        # What recall shows, hence what an answer logs: the head, not a superseded version.
        ids = [e.id for e in view.catalog.by_paths(q["gold"]).values() if e.id and e.status != "superseded"]
        if ids:
            record_usage(eng.vault.state, ids, "final-answer")
            record_usage(eng.vault.state, ids, "retrieved")
            used += 1
    ev = evaluate(eng, view, qs, offtopic)
    for p in log.files():
        p.unlink()
    return {"tune_questions_used": used, "tune": metrics(ev, "tune"), "held": metrics(ev, "held"), "cases": ev}


COLUMNS = ["vault", "half", "para n", "hit@1", "hit@3", "e5 hit@1/3", "abstain ans.", "multi hit@1/3",
           "evolved first", "off-topic abstain", "hook inj./20"]


def rows(result: Mapping[str, Any]) -> list[list[Any]]:
    out = []
    for v in result["vaults"]:
        for half, m in [(h, v[h]) for h in ("tune", "held")] + [
                (f"{h} +usage", v["usage"][h]) for h in ("tune", "held") if "usage" in v] + [
                (f"{h} {name}", lev[h]) for name, lev in (v.get("levers") or {}).items() for h in ("tune", "held")]:
            out.append([f"{v['notes']} notes", half, m["n_paraphrase"], m["hit@1"], m["hit@3"],
                        f"{m['hit@1_e5']}/{m['hit@3_e5']}", m["abstain_answerable"],
                        f"{m['multi_hit@1']}/{m['multi_hit@3']}", f"{m['evolved_first']} ({m['n_evolve']})",
                        m["offtopic_abstain"], f"{m['hook_injected']} of {m['n_offtopic']}"])
    return out


def report(result: Mapping[str, Any], console: Any) -> None:
    print_table(f"small developer vault ({result['mode']}): targets hit@1 >= 0.85, hit@3 >= 0.97, abstain on "
                f"answerable <= 0.03, off-topic abstain >= 0.90, hook <= 2 of 20, evolved head first 1.0",
                COLUMNS, rows(result), console)


def summary_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for v in result["vaults"]:
        m = v["held"]
        ok = (m["hit@1"] or 0) >= TARGETS["hit@1"] and (m["offtopic_abstain"] or 0) >= TARGETS["offtopic_abstain"]
        out.append(summary_row(NAME, "hive-brain", f"held hit@1 ({v['notes']} notes)", m["hit@1"],
                               target=f">= {TARGETS['hit@1']}", status="pass" if ok else "FAIL",
                               note=f"hit@3 {m['hit@3']}, off-topic abstain {m['offtopic_abstain']}, hook "
                                    f"{m['hook_injected']}/{m['n_offtopic']}, evolved first {m['evolved_first']}"))
    return out


def _args(ap: Any) -> None:
    ap.add_argument("--work", type=Path, default=None,
                    help="keep the built vaults in WORK/<size> and reuse them (the 2,000-note vault takes minutes "
                         "to embed); they are rebuilt when missing")
    ap.add_argument("--sizes", default=None, help="comma-separated vault sizes (default: by mode)")
    ap.add_argument("--usage", action="store_true",
                    help="also log final-answer usage for the tune half's answers and ask both halves again "
                         "(rows '+usage'; the held half is the measure)")
    ap.add_argument("--alternatives", type=Path, default=None, nargs="?", const=DATA / "alternatives.json",
                    help="also ask every question with the asking agent's alternatives from this file (default "
                         "smallvault/alternatives.json: written by a session that saw only the questions)")
    ap.add_argument("--deep", action="store_true", help="also ask in deep mode (recall --rerank)")


def _kwargs(args: Any) -> dict[str, Any]:
    return {"keep": args.work, "sizes": tuple(int(x) for x in args.sizes.split(",")) if args.sizes else None,
            "usage": args.usage, "alternatives": args.alternatives, "deep": args.deep}


if __name__ == "__main__":
    sys.exit(standalone_main(sys.modules[__name__], extra_args=_args, kwargs_from_args=_kwargs))
