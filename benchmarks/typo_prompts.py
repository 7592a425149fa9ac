"""Typo tolerance (issue 29): does a question with a typo in every content word find what it finds
spelled right, and does no question that needs no memory start matching because of it?

    python -m benchmarks.typo_prompts --work /tmp/promptwork --sizes 0,500,3000

``--work``: the vaults ``benchmarks.prompt_hook --build-only --work DIR`` builds (the team memories of
``benchmarks/prompts/`` alone and with +500 / +3,000 reference notes). The data:
``benchmarks/prompts/typos.json``, 30 answerable questions about those memories written with typos
(each with its spelled-right form and the memory keys that answer it). Per size, in process (hybrid,
the second model reading as a ready server does), three recalls of each question: typed with
``search.spelling`` on, typed with it off (``PARAMS["spelling"] = 0``), and spelled right; ``hit@3`` =
a needed memory among the first three hits. Beside it, on the prompts of ``prompts.json`` that need no
memory, how many answers changed when spelling is on (``changed``) and how many of them recall no
longer abstains on (``newly answered``: off-topic prompts starting to match), and how many of them
recall abstains on at all (``abstained``). Writes ``benchmarks/results/typo_prompts.json``.

``--data FILE`` reads another set of the same shape instead (``typos_fresh.json``: 30 more, written
from the memories alone by a session that had not read the search code) and writes
``typo_prompts_<stem>.json``. A set whose entries carry no ``spelled`` form
(``imperatives.json``: 30 requests that need a memory, 15 that need none) is measured plain, spelling
on as shipped: hit@1 / hit@3 on the ones that need a memory, the share abstained on the ones that do
not, and beside them the same hit rates of ``prompts.json``'s ``question`` prompts (the yardstick).
Also what the prompt hook's own decision (``search.prompt.contextual_answer``, no transcript) injects:
``first`` (its first note is a needed memory), ``right`` (a needed memory among its notes), ``quiet``
(nothing, on the ones that need none; beside it, on ``prompts.json``'s no-memory prompts that are not
follow-ups).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from .common import log, print_table, write_result

DATA = Path(__file__).parent / "prompts"


def _recall(view: Any, q: str, spelling: bool) -> dict:
    from hive_brain.search.params import PARAMS
    from hive_brain.search.prompt import HOOK_POOL
    from hive_brain.search.recall import search

    was = PARAMS["spelling"]
    PARAMS["spelling"] = 1.0 if spelling else 0.0
    try:
        return search(view, q, agent=None, limit=6, pool=HOOK_POOL)
    finally:
        PARAMS["spelling"] = was


def _hits(view: Any, heads: dict[str, str], q: str, needs: list[str], spelling: bool = True
          ) -> tuple[dict[str, Any], bool, bool]:
    """The recall of ``q`` and whether a needed memory is first / among the first three hits."""
    need = {heads[k] for k in needs}
    res = _recall(view, q, spelling)
    paths = [h["path"] for h in res["hits"]]
    return res, bool(paths) and paths[0] in need, any(p in need for p in paths[:3])


def _nomem(view: Any, prompts: list[dict[str, Any]]) -> dict[str, int]:
    """On ``prompts.json``'s prompts that need no memory: abstained on, changed by spelling, newly answered."""
    changed = newly = abstained = 0
    for p in prompts:
        if p["needs"]:
            continue
        on, off = _recall(view, p["prompt"], True), _recall(view, p["prompt"], False)
        abstained += int(on["abstained"])
        if on.get("spelling"):
            changed += 1
            newly += int(off["abstained"] and not on["abstained"])
    return {"nomem_prompts": sum(1 for p in prompts if not p["needs"]), "nomem_abstained": abstained,
            "nomem_changed": changed, "nomem_newly_answered": newly}


def _typo_rows(view: Any, heads: dict[str, str], data: list[dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for t in data:
        row: dict[str, Any] = {"id": t["id"]}
        for label, q, sp in (("on", t["prompt"], True), ("off", t["prompt"], False), ("spelled", t["spelled"], True)):
            res, at1, at3 = _hits(view, heads, q, t["needs"], sp)
            row[label], row[label + "@1"] = at3, at1
            if label == "on":
                row["fixes"] = res.get("spelling") or {}
                row["top3"] = [h["path"] for h in res["hits"][:3]]
        rows.append(row)
    n = len(rows)

    def rate(k: str) -> float:
        return round(sum(r[k] for r in rows) / n, 3)

    return {"hit3_on": rate("on"), "hit3_off": rate("off"), "hit3_spelled": rate("spelled"),
            "hit1_on": rate("on@1"), "hit1_off": rate("off@1"), "hit1_spelled": rate("spelled@1"), "rows": rows}


def _hook(view: Any, heads: dict[str, str], q: str, needs: list[str]) -> tuple[bool, bool, bool]:
    """What the prompt hook's own decision (``contextual_answer``, no transcript) injects for ``q``:
    a needed memory first, a needed memory at all, nothing at all."""
    from hive_brain.search.prompt import contextual_answer

    from .tune_prompt_gate import _search

    def rec(query: str, **o: Any) -> dict:
        return _search(view, query, o)

    items = [i["path"] for i in contextual_answer(rec, q, "", budget=6000).get("items", [])]
    need = {heads[k] for k in needs}
    return bool(items) and items[0] in need, any(i in need for i in items), not items


def _plain_rows(view: Any, heads: dict[str, str], data: list[dict[str, Any]],
                prompts: list[dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for t in data:
        res, at1, at3 = _hits(view, heads, t["prompt"], t["needs"]) if t["needs"] else (
            _recall(view, t["prompt"], True), False, False)
        first, right, quiet = _hook(view, heads, t["prompt"], t["needs"])
        rows.append({"id": t["id"], "needs": t["needs"], "@1": at1, "@3": at3, "abstained": res["abstained"],
                     "top3": [h["path"] for h in res["hits"][:3]], "hook_first": first, "hook_right": right,
                     "hook_quiet": quiet})
    need = [r for r in rows if r["needs"]]
    none = [r for r in rows if not r["needs"]]
    questions = [p for p in prompts if p["style"] == "question" and p["needs"]]
    asked = [_hits(view, heads, p["prompt"], p["needs"]) for p in questions]
    hooked = [_hook(view, heads, p["prompt"], p["needs"]) for p in questions]
    # The yardstick for quiet: prompts.json's no-memory prompts that stand alone (no previous reply).
    alone = [_hook(view, heads, p["prompt"], []) for p in prompts if not p["needs"] and p["style"] != "followup"]

    def rate(xs: list[Any]) -> float:
        return round(sum(xs) / len(xs), 3) if xs else 0.0

    return {"need": len(need), "hit1": rate([r["@1"] for r in need]), "hit3": rate([r["@3"] for r in need]),
            "none": len(none), "abstained": rate([r["abstained"] for r in none]),
            "hook_first": rate([r["hook_first"] for r in need]), "hook_right": rate([r["hook_right"] for r in need]),
            "hook_quiet": rate([r["hook_quiet"] for r in none]),
            "questions": len(asked), "questions_hit1": rate([a[1] for a in asked]),
            "questions_hit3": rate([a[2] for a in asked]), "questions_hook_first": rate([h[0] for h in hooked]),
            "questions_hook_right": rate([h[1] for h in hooked]), "nomem_alone": len(alone),
            "nomem_hook_quiet": rate([h[2] for h in alone]), "rows": rows}


def run_size(d: Path, data: list[dict[str, Any]]) -> dict[str, Any]:
    from hive_brain.engine import Engine

    from .smallvault import read_ahead
    from .tune_prompt_gate import gold

    os.environ["HIVE_BRAIN_STATE_DIR"] = str(d / "state")
    eng = Engine.open(d / "vault")
    view = eng.view()
    assert view.embedder is not None, "no embedding pack: set HIVE_BRAIN_MODEL_DIR"
    read_ahead(eng, view)
    heads, _old = gold(view.catalog)
    prompts = json.loads((DATA / "prompts.json").read_text(encoding="utf-8"))
    body = _typo_rows(view, heads, data) if is_typo_set(data) else _plain_rows(view, heads, data, prompts)
    return {"notes": len(view.catalog.all()), **body, **_nomem(view, prompts)}


def is_typo_set(data: list[dict[str, Any]]) -> bool:
    """A typo set gives every prompt its spelled-right form; a plain set (imperatives) does not."""
    return all("spelled" in t for t in data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--sizes", default="0,500,3000")
    ap.add_argument("--data", type=Path, default=DATA / "typos.json",
                    help="the prompt set (default: benchmarks/prompts/typos.json)")
    args = ap.parse_args()
    try:
        data = json.loads(args.data.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"typo_prompts: cannot read --data {args.data}: {e}; give a JSON list of prompts") from e
    os.environ.pop("HIVE_BRAIN_VAULT", None)
    os.environ["HIVE_BRAIN_AUTOSTART"] = "0"
    os.environ["HIVE_BRAIN_USE_SERVER"] = "0"
    out = {}
    for size in (int(x) for x in args.sizes.split(",")):
        log(f"typo_prompts: {args.data.name}, {size} ...")
        out[str(size)] = run_size(args.work / str(size), data)
    if is_typo_set(data):
        cols = ["size", "notes", "hit@3 typed, spelling on", "off", "spelled right", "hit@1 on", "off", "spelled",
                "no-memory abstained", "changed", "newly answered"]
        print_table(f"{args.data.name} ({len(data)}): recall hit@3 / hit@1", cols,
                    [[s, r["notes"], r["hit3_on"], r["hit3_off"], r["hit3_spelled"], r["hit1_on"], r["hit1_off"],
                      r["hit1_spelled"], f"{r['nomem_abstained']}/{r['nomem_prompts']}",
                      f"{r['nomem_changed']}/{r['nomem_prompts']}", r["nomem_newly_answered"]]
                     for s, r in out.items()])
    else:
        cols = ["size", "notes", "hit@1", "hit@3", "abstained (need none)", "questions hit@1", "hit@3",
                "hook first", "right", "quiet (need none)", "questions first", "right", "no-memory quiet"]
        print_table(f"{args.data.name}: recall (and the hook's decision) on prompts needing a memory / on the others",
                    cols, [[s, r["notes"], r["hit1"], r["hit3"], f"{r['abstained']} of {r['none']}", r["questions_hit1"],
                            r["questions_hit3"], r["hook_first"], r["hook_right"], r["hook_quiet"],
                            r["questions_hook_first"], r["questions_hook_right"],
                            f"{r['nomem_hook_quiet']} of {r['nomem_alone']}"] for s, r in out.items()])
    name = "typo_prompts" if args.data.resolve() == (DATA / "typos.json").resolve() else f"typo_prompts_{args.data.stem}"
    write_result(name, {"data": args.data.name, "sizes": out})


if __name__ == "__main__":
    main()
