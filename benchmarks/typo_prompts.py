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
longer abstains on (``newly answered``: off-topic prompts starting to match). Writes
``benchmarks/results/typo_prompts.json``.
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


def run_size(d: Path) -> dict[str, Any]:
    from hive_brain.engine import Engine

    from .smallvault import read_ahead
    from .tune_prompt_gate import gold

    os.environ["HIVE_BRAIN_STATE_DIR"] = str(d / "state")
    eng = Engine.open(d / "vault")
    view = eng.view()
    assert view.embedder is not None, "no embedding pack: set HIVE_BRAIN_MODEL_DIR"
    read_ahead(eng, view)
    heads, _old = gold(view.catalog)
    typos = json.loads((DATA / "typos.json").read_text(encoding="utf-8"))
    rows = []
    for t in typos:
        need = {heads[k] for k in t["needs"]}
        row: dict[str, Any] = {"id": t["id"]}
        for label, q, sp in (("on", t["prompt"], True), ("off", t["prompt"], False), ("spelled", t["spelled"], True)):
            res = _recall(view, q, sp)
            paths = [h["path"] for h in res["hits"]]
            row[label] = any(p in need for p in paths[:3])
            row[label + "@1"] = bool(paths) and paths[0] in need
            if label == "on":
                row["fixes"] = res.get("spelling") or {}
        rows.append(row)
    prompts = json.loads((DATA / "prompts.json").read_text(encoding="utf-8"))
    changed = newly = 0
    for p in prompts:
        if p["needs"]:
            continue
        on, off = _recall(view, p["prompt"], True), _recall(view, p["prompt"], False)
        if on.get("spelling"):
            changed += 1
            newly += int(off["abstained"] and not on["abstained"])
    n = len(rows)

    def rate(k: str) -> float:
        return round(sum(r[k] for r in rows) / n, 3)

    return {"notes": len(view.catalog.all()), "hit3_on": rate("on"), "hit3_off": rate("off"),
            "hit3_spelled": rate("spelled"), "hit1_on": rate("on@1"), "hit1_off": rate("off@1"),
            "hit1_spelled": rate("spelled@1"), "nomem_prompts": sum(1 for p in prompts if not p["needs"]),
            "nomem_changed": changed, "nomem_newly_answered": newly, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--sizes", default="0,500,3000")
    args = ap.parse_args()
    os.environ.pop("HIVE_BRAIN_VAULT", None)
    os.environ["HIVE_BRAIN_AUTOSTART"] = "0"
    os.environ["HIVE_BRAIN_USE_SERVER"] = "0"
    out = {}
    for size in (int(x) for x in args.sizes.split(",")):
        log(f"typo_prompts: {size} ...")
        out[str(size)] = run_size(args.work / str(size))
    cols = ["size", "notes", "hit@3 typed, spelling on", "off", "spelled right", "hit@1 on", "off", "spelled",
            "no-memory prompts changed", "newly answered"]
    print_table("typo prompts (30): recall hit@3 / hit@1", cols,
                [[s, r["notes"], r["hit3_on"], r["hit3_off"], r["hit3_spelled"], r["hit1_on"], r["hit1_off"],
                  r["hit1_spelled"], f"{r['nomem_changed']}/{r['nomem_prompts']}", r["nomem_newly_answered"]]
                 for s, r in out.items()])
    write_result("typo_prompts", {"sizes": out})


if __name__ == "__main__":
    main()
