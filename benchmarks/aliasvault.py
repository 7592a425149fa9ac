"""Writer-supplied aliases and questions (issue 29), measured honestly.

``aliasvault/memories.json`` holds 40 typed memories of one made-up team, each with the ``aliases`` and
3-5 ``questions`` its writing agent would add; it was committed before any test question existed. The
test questions (``aliasvault/questions.json``, ``[[question, key], ...]``) were written afterwards by a
separate session that saw only each memory's title and content, never its aliases or questions.

Each vault (the 40 memories alone, and with +500 / +2,000 distractor notes from
:mod:`benchmarks.fixtures`, the ones smallvault uses) is built once with the memories written *without*
their names and asked every question; then the memories' notes get their ``aliases`` (as a person adds
them in Obsidian: a frontmatter edit the index catches up on), asked again; then their ``questions``
too, asked again. The same notes, the same distractors and the same questions in all three rows, so
the rows differ only by what the writer supplied. Split by position like smallvault (even = tune,
odd = held); off-topic prompts are smallvault's.

Metrics, with recall as the warm server answers (hybrid, tiered, abstention on): hit@1 / hit@3 (an
abstention is a miss), the abstain rate on these answerable questions, off-topic abstention. ``--deep``
asks every stage again in deep mode (``recall --rerank``): the writer's names and deep mode together.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .common import BenchConfig, built_once, log, print_table, standalone_main, summary_row, vault_dir

NAME = "aliasvault"
DATA = Path(__file__).parent / "aliasvault"
QUICK_SIZES = (40,)
FULL_SIZES = (40, 540, 2040)
STAGES = ("plain", "+aliases", "+aliases+questions")
NAMES = ("aliases", "questions")  # the writer-supplied frontmatter fields
TARGETS = {"hit@1": 0.85, "hit@3": 0.95}


def load_data(questions: Path | None = None) -> tuple[list[dict[str, Any]], list[list[str]], list[str]]:
    from .smallvault import load_data as smallvault_data

    memories = json.loads((DATA / "memories.json").read_text(encoding="utf-8"))
    qs = json.loads((questions or DATA / "questions.json").read_text(encoding="utf-8"))
    return memories, qs, smallvault_data()[1]["offtopic"]


def build_vault(root: Path, size: int, memories: list[dict[str, Any]]) -> tuple[Any, dict[str, str], dict[str, Any]]:
    """``size`` notes: the memories (without their names) plus distractors; returns (engine, key -> path, info)."""
    from hive_brain.engine import Engine

    from .fixtures import generate
    from .systems import make_vault

    t0 = time.perf_counter()
    if size - len(memories) >= 20:
        generate(root, size - len(memories), queries=0, init=True)
    else:
        make_vault(root)
    eng = Engine.open(root)
    eng.rebuild()
    recs = [{"type": m["type"], "title": m["title"], "content": m["content"], "tags": m["tags"]} for m in memories]
    paths: dict[str, str] = {}
    for i in range(0, len(recs), 25):
        done = eng.memory.batch(recs[i:i + 25])["records"]
        paths.update({m["key"]: r["path"] for m, r in zip(memories[i:i + 25], done, strict=True)})
    n_notes = sum(1 for p in root.rglob("*.md") if not any(x.startswith(".") for x in p.relative_to(root).parts))
    return eng, paths, {"notes": n_notes, "build_s": round(time.perf_counter() - t0, 1)}


def add_names(root: Path, paths: Mapping[str, str], memories: list[dict[str, Any]], fields: tuple[str, ...]) -> None:
    """Give each memory's note exactly ``fields`` of the writer's names in its frontmatter (a hand edit, as in
    Obsidian); the other names go, so a kept vault (``--work``) asked again starts from none."""
    from hive_brain.store.notes import parse_text, render

    for m in memories:
        p = root / paths[m["key"]]
        note = parse_text(paths[m["key"]], p.read_text(encoding="utf-8"))
        meta = {k: v for k, v in note.meta.items() if k not in NAMES}
        meta.update({f: list(m[f]) for f in fields})
        if meta != dict(note.meta):
            p.write_text(render(meta, note.body, like=note), encoding="utf-8")


def _open_or_build(work: Path, size: int, memories: list[dict[str, Any]]) -> tuple[Any, dict[str, str], dict[str, Any]]:
    def build(root: Path) -> tuple[Any, dict[str, Any]]:
        eng, paths, info = build_vault(root, size, memories)
        return eng, {"paths": paths, "info": info}

    eng, maps = built_once(work, build)
    return eng, maps["paths"], maps["info"]


def evaluate(eng: Any, view: Any, qs: list[dict[str, Any]], offtopic: list[str], **recall_opts: Any) -> dict[str, Any]:
    """``recall_opts``: more recall options (``deep``)."""
    recs = []
    for q in qs:
        res = eng.recall(q["q"], view=view, limit=10, **recall_opts)
        paths = [h["path"] for h in res["hits"]]
        rank = next((i for i, p in enumerate(paths) if p == q["gold"]), None)
        top = res["hits"][0]["scoreDetails"] if res["hits"] else {}
        recs.append({**q, "rank": rank, "abstained": res["abstained"], "top": [h["title"] for h in res["hits"][:3]],
                     "topQuestionMatch": top.get("questionMatch"), "topQuestionSim": top.get("questionSim")})
    off = [{"q": q, "split": "tune" if i % 2 == 0 else "held",
            "abstained": eng.recall(q, view=view, limit=10, **recall_opts)["abstained"]} for i, q in enumerate(offtopic)]
    return {"answerable": recs, "offtopic": off}


def metrics(ev: Mapping[str, Any], split: str) -> dict[str, Any]:
    rs = [r for r in ev["answerable"] if r["split"] == split]
    off = [r for r in ev["offtopic"] if r["split"] == split]

    def rate(xs: list[bool]) -> float | None:
        return round(sum(xs) / len(xs), 3) if xs else None

    return {"n": len(rs), "hit@1": rate([r["rank"] is not None and r["rank"] < 1 for r in rs]),
            "hit@3": rate([r["rank"] is not None and r["rank"] < 3 for r in rs]),
            "abstain_answerable": rate([r["abstained"] for r in rs]),
            "offtopic_abstain": rate([r["abstained"] for r in off]), "n_offtopic": len(off)}


def run(cfg: BenchConfig, sizes: tuple[int, ...] | None = None, questions: Path | None = None,
        deep: bool = False, keep: Path | None = None) -> dict[str, Any]:
    from hive_brain.search.params import PARAMS

    from .smallvault import read_ahead

    memories, raw_qs, offtopic = load_data(questions)
    sizes = sizes or (QUICK_SIZES if cfg.quick else FULL_SIZES)
    keys = {m["key"] for m in memories}
    unknown = sorted({k for _q, k in raw_qs} - keys)
    if unknown:
        raise SystemExit(f"aliasvault: questions name unknown memory keys: {', '.join(unknown)}")
    out: list[dict[str, Any]] = []
    for size in sizes:
        with vault_dir(keep, size, "hb-bench-aliasvault-") as work:
            root = work / "vault"
            eng, paths, info = _open_or_build(work, max(size, len(memories)), memories)
            qs = [{"q": q, "key": k, "gold": paths[k], "split": "tune" if i % 2 == 0 else "held"}
                  for i, (q, k) in enumerate(raw_qs)]
            stages = []
            for stage, fields in zip(STAGES, ((), ("aliases",), ("aliases", "questions")), strict=True):
                add_names(root, paths, memories, fields)
                t0 = time.perf_counter()
                view = eng.view()  # catches up on the edited notes (and embeds them)
                read_ahead(eng, view)
                catch_up_s = round(time.perf_counter() - t0, 1)
                ev = evaluate(eng, view, qs, offtopic)
                stages.append({"stage": stage, "catch_up_s": catch_up_s, "semantic": view.embedder is not None,
                               "tune": metrics(ev, "tune"), "held": metrics(ev, "held"), "cases": ev})
                log(f"aliasvault: {info['notes']} notes, {stage}: held {stages[-1]['held']}")
                if deep:  # the same notes and questions in deep mode (recall --rerank): the two levers together
                    dv = evaluate(eng, view, qs, offtopic, deep=True)
                    stages[-1]["deep"] = {"tune": metrics(dv, "tune"), "held": metrics(dv, "held"), "cases": dv}
                    log(f"aliasvault: {info['notes']} notes, {stage} +deep: held {metrics(dv, 'held')}")
            out.append({"size": size, **info, "stages": stages})
    return {"sizes": list(sizes), "targets": TARGETS, "params": dict(PARAMS), "deep": deep, "vaults": out}


COLUMNS = ["vault", "writer supplied", "half", "n", "hit@1", "hit@3", "abstain ans.", "off-topic abstain"]


def rows(result: Mapping[str, Any]) -> list[list[Any]]:
    out = []
    for v in result["vaults"]:
        for s in v["stages"]:
            for mode, res in [("", s)] + ([(" +deep", s["deep"])] if "deep" in s else []):
                for half in ("tune", "held"):
                    m = res[half]
                    out.append([f"{v['notes']} notes", s["stage"] + mode, half, m["n"], m["hit@1"], m["hit@3"],
                                m["abstain_answerable"], m["offtopic_abstain"]])
    return out


def report(result: Mapping[str, Any], console: Any) -> None:
    print_table(f"writer-supplied aliases and questions ({result['mode']}): targets held hit@1 >= 0.85, hit@3 >= 0.95",
                COLUMNS, rows(result), console)


def summary_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for v in result["vaults"]:
        plain, named = v["stages"][0]["held"], v["stages"][-1]["held"]
        ok = (named["hit@1"] or 0) >= TARGETS["hit@1"] and (named["hit@3"] or 0) >= TARGETS["hit@3"]
        out.append(summary_row(NAME, "hive-brain", f"held hit@1 with questions ({v['notes']} notes)", named["hit@1"],
                               target=f">= {TARGETS['hit@1']}", status="pass" if ok else "FAIL",
                               note=f"hit@3 {named['hit@3']}; without: {plain['hit@1']}/{plain['hit@3']}"))
    return out


def _args(ap: Any) -> None:
    ap.add_argument("--sizes", default=None, help="comma-separated vault sizes (default: by mode)")
    ap.add_argument("--work", type=Path, default=None,
                    help="keep the built vaults in WORK/<size> and reuse them (the 2,040 size takes 10-15 min to "
                         "embed); each run strips the writer's names first, so its stages start from none")
    ap.add_argument("--questions", type=Path, default=None, help="the question file (default: aliasvault/questions.json)")
    ap.add_argument("--deep", action="store_true", help="also ask every stage in deep mode (recall --rerank)")


def _kwargs(args: Any) -> dict[str, Any]:
    return {"sizes": tuple(int(x) for x in args.sizes.split(",")) if args.sizes else None, "questions": args.questions,
            "deep": args.deep, "keep": args.work}


if __name__ == "__main__":
    sys.exit(standalone_main(sys.modules[__name__], extra_args=_args, kwargs_from_args=_kwargs))
