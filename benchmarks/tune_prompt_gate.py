"""Fast experiments with the prompt hook's gate (``search.abstain.hook_gate``) on the prompt-hook set
(``benchmarks/prompts/``, the data of ``benchmarks/prompt_hook.py``).

``record`` runs every prompt once through ``search.prompt.contextual_answer`` on a warm in-process view
(hybrid, the second model reading every candidate as a ready server does) and keeps each recall call's
result; ``eval`` replays those results through ``contextual_answer`` under ``PARAMS`` overrides (no
model, no index: a fraction of a second per variant) and prints the benchmark's metrics. The gate reads
only the hits' ``scoreDetails``, so a replay decides exactly as the live hook would on the same hits.
Tune on ``--split tune``; quote final numbers from ``benchmarks.prompt_hook`` (the hook as installed).

    python -m benchmarks.tune_prompt_gate record --work /tmp/gate --size 0              # builds the vault
    python -m benchmarks.tune_prompt_gate record --work /tmp/gate --size 3000 --vault V --state S
    python -m benchmarks.tune_prompt_gate eval --work /tmp/gate --split tune --try '{"hook_rr_gap": 0.05}'
    python -m benchmarks.tune_prompt_gate curve --work /tmp/gate --split tune --param hook_rr_gap --values 0,0.02,0.04
    python -m benchmarks.tune_prompt_gate record --work /tmp/gate --size 500 --lexical     # the no-server answer
    python -m benchmarks.tune_prompt_gate curve --work /tmp/gate --sizes lex0,lex500 --param hook_lex --values 0.3,0.5
    python -m benchmarks.tune_prompt_gate talk --work /tmp/gate --sizes lex0,lex3000,0 --split held  # live, talk.json
    python -m benchmarks.tune_prompt_gate where --work /tmp/gate --sizes 0,3000   # live: the needed memory's place
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "prompts"


def load() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from .prompt_hook import load_data

    return load_data()


def _key(query: str, opts: dict[str, Any]) -> str:
    return json.dumps([query, sorted(opts.items())], ensure_ascii=False)


def build_memories(root: Path, mems: list[dict[str, Any]], *, refs: int = 0, embed: bool = True) -> Any:
    """The memories-only vault (or with ``refs`` reference notes of :mod:`benchmarks.prompt_refs`): every
    memory written as ``remember`` writes it, the evolved ones then evolved; ``embed=False`` indexes the
    words only (the ``--lexical`` recording needs no vectors, so any size builds in a minute)."""
    from hive_brain.engine import Engine

    from .prompt_refs import write_refs
    from .systems import make_vault

    make_vault(root)
    if refs:
        write_refs(root, refs)
    eng = Engine.open(root)
    for i in range(0, len(mems), 25):
        chunk = mems[i:i + 25]
        eng.memory.batch([{"type": m["type"], "title": m["title"], "content": m["content"], "tags": m.get("tags") or [],
                           "memory_key": f"{m['type']}/{m['key']}"} for m in chunk])
    eng.catalog.refresh()
    by_key = {e.memory_key: e for e in eng.catalog.all() if e.kind == "memory"}
    for m in mems:
        if m.get("evolve"):
            eng.memory.evolve(by_key[f"{m['type']}/{m['key']}"].id, m["evolve"])
    eng.rebuild(embed=embed)
    return eng


def gold(catalog: Any) -> tuple[dict[str, str], set[str]]:
    """Memory key (without its type) -> the current version's path; the paths of replaced versions."""
    heads: dict[str, str] = {}
    old: set[str] = set()
    for e in catalog.all():
        if e.kind != "memory" or not e.memory_key:
            continue
        k = e.memory_key.split("/", 1)[-1]
        if e.status == "superseded":
            old.add(e.path)
        else:
            heads[k] = e.path
    return heads, old


def record(args: argparse.Namespace) -> None:
    from hive_brain.engine import Engine
    from hive_brain.search.params import PARAMS
    from hive_brain.search.prompt import contextual_answer, transcript_context

    from .smallvault import read_ahead

    mems, prompts = load()
    out = Path(args.work) / (f"lex{args.size}" if args.lexical else f"size{args.size}")
    out.mkdir(parents=True, exist_ok=True)
    vault = Path(args.vault) if args.vault else out / "vault"
    state = Path(args.state) if args.state else out / "state"
    os.environ["HIVE_BRAIN_STATE_DIR"] = str(state)
    os.environ.pop("HIVE_BRAIN_VAULT", None)
    os.environ["HIVE_BRAIN_AUTOSTART"] = "0"
    os.environ["HIVE_BRAIN_USE_SERVER"] = "0"
    if not (vault / ".hive-brain").exists() and not args.vault:
        if args.size and not args.lexical:
            sys.exit("only the memories-only vault (--size 0) is built here; pass --vault/--state of a built one")
        print(f"building the vault ({args.size} reference notes) ...", file=sys.stderr)
        build_memories(vault, mems, refs=args.size, embed=not args.lexical)
    eng = Engine.open(vault)
    if args.lexical:
        # What the hook answers with when no server does: the read-only lexical view of hooks.lexical_view.
        from hive_brain.agents.hooks import lexical_view

        lex = lexical_view(eng.vault, eng.settings)
        if lex is None:
            sys.exit(f"nothing is indexed in {vault}: run `hive-brain --vault {vault} rebuild-index` first")
        view = lex
    else:
        view = eng.view()
        assert view.embedder is not None, "no embedding pack: set HIVE_BRAIN_MODEL_DIR"
        t0 = time.perf_counter()
        n = read_ahead(eng, view)
        print(f"read ahead: {n} passages in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    heads, old = gold(view.catalog)
    calls: dict[str, Any] = {}

    def rec(q: str, **o: Any) -> dict:
        res = _search(view, q, o)
        calls[_key(q, o)] = {"hits": res["hits"], "abstained": res["abstained"], "reason": res["reason"],
                             "tier": res.get("tier"), "semantic": res.get("semantic")}
        return res

    inf = float("inf")
    closed = {**PARAMS, "hook_conversational": 0.0, "hook_rr": inf, "hook_gap": inf, "hook_lex": inf,
              "hook_words": inf, "hook_clear": inf, "hook_referents": 0}
    recs = []
    with tempfile.TemporaryDirectory() as td:
        for p in prompts:
            ctx = ""
            if p.get("transcript"):
                tp = Path(td) / f"{p['id']}.jsonl"
                lines = [{"type": "user", "message": {"role": "user", "content": p.get("previous") or "go on"}},
                         {"type": "assistant", "message": {"role": "assistant",
                                                           "content": [{"type": "text", "text": p["transcript"]}]}}]
                tp.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
                ctx = transcript_context(str(tp))
            t1 = time.perf_counter()
            # A gate nothing passes, and no prompt skipped as talk: every search any replay can ask for runs.
            contextual_answer(rec, p["prompt"], ctx, budget=6000, params=closed)
            recs.append({"id": p["id"], "context": ctx, "ms": round((time.perf_counter() - t1) * 1000, 1)})
    (out / "calls.json").write_text(json.dumps({"calls": calls, "prompts": recs, "heads": heads, "old": sorted(old),
                                                "notes": len(view.catalog.all())}, ensure_ascii=False),
                                    encoding="utf-8")
    print(f"recorded {len(recs)} prompts, {len(calls)} recall calls -> {out / 'calls.json'}", file=sys.stderr)


def _search(view: Any, q: str, o: dict[str, Any]) -> dict:
    from hive_brain.search.recall import search

    return search(view, q, agent=None, **o)


def replay(work: Path, size: int | str, overrides: dict[str, float], split: str | None) -> list[dict[str, Any]]:
    from hive_brain.search.params import PARAMS
    from hive_brain.search.prompt import contextual_answer

    _mems, prompts = load()
    data = json.loads((work / _dir(size) / "calls.json").read_text(encoding="utf-8"))
    calls, heads, old = data["calls"], data["heads"], set(data["old"])
    ctx = {r["id"]: r["context"] for r in data["prompts"]}

    def rec(q: str, **o: Any) -> dict:
        r = calls[_key(q, o)]
        return {**r, "hits": json.loads(json.dumps(r["hits"]))}  # the gate writes into scoreDetails

    P = {**PARAMS, **overrides}
    rows = []
    for p in prompts:
        if split and p["split"] != split:
            continue
        pack = contextual_answer(rec, p["prompt"], ctx[p["id"]], budget=6000, params=P)
        items = [it["path"] for it in pack.get("items") or []]
        need = [heads[k] for k in p["needs"] if k in heads]
        ev = {g["path"]: g["evidence"] for g in pack.get("gate") or [] if g.get("basis") == "rerank"}
        rows.append({"id": p["id"], "style": p["style"], "needs": bool(p["needs"]), "items": items, "evidence": ev,
                     "chars": pack.get("chars") or 0, "right": any(x in need for x in items),
                     "first": bool(items) and items[0] in need, "old": sum(1 for x in items if x in old),
                     "kinds": [it.get("kind") for it in pack.get("items") or []]})
    return rows


def _dir(size: int | str) -> str:
    """``3000`` -> the hybrid recording ``size3000``; ``lex3000`` -> the lexical one (``record --lexical``)."""
    return str(size) if str(size).startswith("lex") else f"size{size}"


def metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    need = [r for r in rows if r["needs"]]
    none = [r for r in rows if not r["needs"]]
    chit = [r for r in none if r["style"] == "chitchat"]
    inj = [r for r in rows if r["items"]]
    fu = [r for r in need if r["style"] == "followup"]

    def rate(xs: list[Any], f: Any) -> float:
        return round(sum(1 for x in xs if f(x)) / len(xs), 3) if xs else float("nan")

    return {"n": len(rows), "right": rate(need, lambda r: r["right"]), "first": rate(need, lambda r: r["first"]),
            "quiet": rate(none, lambda r: not r["items"]), "quiet_chit": rate(chit, lambda r: not r["items"]),
            "items": round(sum(len(r["items"]) for r in inj) / len(inj), 2) if inj else 0.0,
            "chars_none": round(sum(r["chars"] for r in none) / len(none)) if none else 0,
            "old": sum(r["old"] for r in rows), "followup": rate(fu, lambda r: r["right"])}


def _print(label: str, m: dict[str, Any]) -> None:
    print(f"{label:28s} right {m['right']:.3f} first {m['first']:.3f} quiet {m['quiet']:.3f} chit {m['quiet_chit']:.3f} "
          f"items {m['items']:.2f} chars/none {m['chars_none']:5d} old {m['old']} followup {m['followup']:.3f}")


def objective(ms: list[dict[str, Any]]) -> float:
    """The balance the targets ask for, at the worst size: right memory injected and nothing injected
    when none is needed weigh alike; chit-chat that is not quiet, or an old version, disqualifies."""
    if any(m["quiet_chit"] < 1.0 or m["old"] for m in ms):
        return -1.0
    return min((m["right"] + m["first"]) / 2 + m["quiet"] for m in ms) / 2


def grid(work: Path, sizes: list[int | str], space: dict[str, list[float]], split: str | None, top: int) -> None:
    import itertools

    names = list(space)
    out = []
    for combo in itertools.product(*(space[n] for n in names)):
        v = dict(zip(names, combo, strict=True))
        ms = [metrics(replay(work, size, v, split)) for size in sizes]
        out.append((objective(ms), v, ms))
    out.sort(key=lambda x: -x[0])
    for obj, v, ms in out[:top]:
        print(f"{obj:.3f} {json.dumps(v)}")
        for size, m in zip(sizes, ms, strict=True):
            _print(f"   {size}", m)


def usage_calibration(work: Path, sizes: list[int | str], base: dict[str, float]) -> None:
    """Would calibrating the gate per vault from the Stop hook's usage signal help? Simulated: the tune
    half is asked under a permissive gate; every injected note is logged as retrieved, and as used
    (final-answer) when it is a memory the prompt needs (a reply that used it: the best case for the
    signal). Per vault, the second model's threshold is then the one that keeps the most used notes
    net of unused ones among those logged; the held half is asked with it and with the shared one."""
    from hive_brain.search.params import PARAMS

    loose = {**base, "hook_rr": 0.1, "hook_rr_note": 0.1}
    for size in sizes:
        data = json.loads((work / _dir(size) / "calls.json").read_text(encoding="utf-8"))
        heads = data["heads"]
        _m, prompts = load()
        need = {p["id"]: {heads[k] for k in p["needs"] if k in heads} for p in prompts}
        logged: list[tuple[float, bool, bool]] = []  # evidence, used, reference note
        for r in replay(work, size, loose, "tune"):
            for path, kind in zip(r["items"], r["kinds"], strict=True):
                ev = r["evidence"].get(path)
                if ev is not None:
                    logged.append((ev, path in need[r["id"]], kind != "memory"))
        best_t, best_v = PARAMS["hook_rr"], None
        for t in sorted({round(e, 3) for e, _u, _n in logged} | {PARAMS["hook_rr"]}):
            v = sum((1 if u else -1) for e, u, n in logged if e >= t and not n)
            if best_v is None or v > best_v:
                best_t, best_v = t, v
        shared = metrics(replay(work, size, base, "held"))
        cal = metrics(replay(work, size, {**base, "hook_rr": best_t}, "held"))
        print(f"{size}: {len(logged)} injections logged on tune ({sum(u for _e, u, _n in logged)} used); "
              f"calibrated hook_rr {best_t:.3f} (shared {PARAMS['hook_rr']:.3f})")
        _print("   held, shared", shared)
        _print("   held, calibrated", cal)


def talk(work: Path, sizes: list[int | str], split: str | None, overrides: dict[str, float]) -> None:
    """Live, on the recorded vaults: how often the hook injects anything for the prompts of
    ``prompts/talk.json`` that only talk to the agent (``talk``: it should not) and for the short ones
    that name a topic (``work``), with the conversational filter (``hook_conversational``) and without."""
    from hive_brain.search.params import PARAMS
    from hive_brain.search.prompt import contextual_answer

    data = json.loads((DATA / "talk.json").read_text(encoding="utf-8"))
    rows = [r for k in ("tune", "held") if split in (None, k) for r in data[k]]
    for size in sizes:
        view = _live_view(work, size)

        def rec(q: str, _view: Any = view, **o: Any) -> dict:
            return _search(_view, q, o)

        for on in (0.0, 1.0):
            P = {**PARAMS, **overrides, "hook_conversational": on}
            said: dict[str, list[str]] = {"talk": [], "work": []}
            for r in rows:
                if contextual_answer(rec, r["prompt"], "", budget=6000, params=P).get("items"):
                    said[r["kind"]].append(r["prompt"])
            n = {k: sum(1 for r in rows if r["kind"] == k) for k in said}
            print(f"{size!s:8s} filter {'on ' if on else 'off'} talk quiet {1 - len(said['talk']) / max(1, n['talk']):.3f} "
                  f"({n['talk'] - len(said['talk'])}/{n['talk']})  work answered {len(said['work'])}/{n['work']}  "
                  f"talk answered: {said['talk'][:6]}")


def _live_view(work: Path, size: int | str) -> Any:
    """The recorded vault of ``size`` opened in-process as ``record`` opened it (hybrid, or the lexical view)."""
    from hive_brain.agents.hooks import lexical_view
    from hive_brain.engine import Engine

    os.environ["HIVE_BRAIN_AUTOSTART"] = "0"
    os.environ["HIVE_BRAIN_USE_SERVER"] = "0"
    d = work / _dir(size)
    os.environ["HIVE_BRAIN_STATE_DIR"] = str(d / "state")
    eng = Engine.open(d / "vault")
    return lexical_view(eng.vault, eng.settings) if str(size).startswith("lex") else eng.view()


WHERE_DEPTH = 30  # as deep as the second model reads (``rr_top``): below it a note keeps its first-pass place


def where(work: Path, sizes: list[int | str], split: str | None) -> None:
    """Live, on the recorded vaults: for each prompt that needs a memory, where that memory stands in the
    hook's own search of the prompt (tiered, ``WHERE_DEPTH`` deep) and in typed memory alone, with the
    second model's gap and the first pass's place, and the words the speller changed, at each size side by
    side: the candidates' side of a miss, which ``misses`` (the hook's six hits per search) cannot show.
    Places are 0-based; ``-``: not in the list; ``unread``: the second model did not read the prompt or
    the note (another script, no English function word, a conversation, the lexical view)."""
    _mems, prompts = load()
    chosen = [p for p in prompts if p["needs"] and split in (None, p["split"])]
    cols: dict[int | str, dict[str, str]] = {}
    for size in sizes:
        view = _live_view(work, size)
        heads, _old = gold(view.catalog)
        cols[size] = {}
        for p in chosen:
            need = {heads[k] for k in p["needs"] if k in heads}
            cell = []
            for scope in ("tiered", "agent-memory"):
                res = _search(view, p["prompt"], {"scope": scope, "limit": WHERE_DEPTH, "pool": 60,
                                                  "detail": "overview", "abstain": False})
                at = next(((i, h) for i, h in enumerate(res["hits"]) if h["path"] in need), None)
                if at is None:
                    cell.append("-")
                    continue
                d = at[1].get("scoreDetails") or {}
                gap = d.get("rerankGap")
                cell.append(f"{at[0]}" + (f" {gap:.3f} fp{d.get('firstPassRank')}" if gap is not None else " unread"))
                if scope == "tiered":
                    cell[-1] = f"{res.get('tier', '')[:4]} {cell[-1]}"
            fixes = res.get("spelling") or {}
            cols[size][p["id"]] = " | ".join(cell) + (f" {fixes}" if fixes else "")
    print(f"{'prompt':14s} " + "  ".join(f"{str(s) + ': tier pos gap first-pass | typed-only pos gap':44s}" for s in sizes))
    for p in chosen:
        print(f"{p['id']:14s} " + "  ".join(f"{cols[s][p['id']]:44s}" for s in sizes) + f"  {p['prompt'][:50]!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=("record", "eval", "curve", "misses", "grid", "usage", "talk", "where"))
    ap.add_argument("--work", required=True)
    ap.add_argument("--size", type=int, default=None)
    ap.add_argument("--sizes", default="0")
    ap.add_argument("--lexical", action="store_true",
                    help="record: the no-server answer (lexical view; any --size is built, without vectors)")
    ap.add_argument("--vault")
    ap.add_argument("--state")
    ap.add_argument("--split", default="tune", help="tune | held | fresh | confirm | all")
    ap.add_argument("--try", dest="tries", action="append", default=[], help="JSON PARAMS overrides (repeatable)")
    ap.add_argument("--grid", help='JSON {param: [values]}: every combination, best (mean of right and quiet) first')
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--param")
    ap.add_argument("--values")
    args = ap.parse_args()
    split = None if args.split == "all" else args.split
    work = Path(args.work)
    if args.cmd == "record":
        args.size = args.size or 0
        record(args)
        return
    sizes: list[int | str] = ([args.size] if args.size is not None
                              else [x if x.startswith("lex") else int(x) for x in args.sizes.split(",")])
    variants = [json.loads(t) for t in args.tries] or [{}]
    if args.cmd == "talk":
        talk(work, sizes, None if args.split == "all" else args.split, variants[0])
        return
    if args.cmd == "where":
        where(work, sizes, split)
        return
    if args.cmd == "usage":
        usage_calibration(work, sizes, variants[0])
        return
    if args.cmd == "grid":
        grid(work, sizes, json.loads(args.grid), split, args.top)
        return
    if args.cmd == "curve":
        base = json.loads(args.tries[0]) if args.tries else {}  # --try: the other overrides the curve holds
        variants = [{**base, args.param: float(v)} for v in args.values.split(",")]
    for size in sizes:
        for v in variants:
            rows = replay(work, size, v, split)
            _print(f"{size} {json.dumps({args.param: v[args.param]} if args.cmd == 'curve' else v)[:20]}", metrics(rows))
            if args.cmd == "misses":
                for r in rows:
                    bad = (r["needs"] and not r["first"]) or (not r["needs"] and r["items"]) or r["old"]
                    if bad:
                        print(f"   {r['id']:16s} needs={r['needs']!s:5s} items={[x.rsplit('/', 1)[-1][:40] for x in r['items']]}")


if __name__ == "__main__":
    main()
