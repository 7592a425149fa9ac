"""Fast ranking experiments on LoCoMo: build the pooled vault once, cache each question's candidates,
then re-fuse them under different `hive_brain.search.params.PARAMS` (seconds per variant instead of minutes).

    python -m benchmarks.tune_locomo --work /tmp/locomo-tune            # build (once) + evaluate PARAMS as they are
    python -m benchmarks.tune_locomo --work /tmp/locomo-tune --every 3 \\
        --try '{"w_doc": 1.0}' --try '{"linear": 0.5, "lin_sem": 1.0}'

Tune on ``--split tune`` (the questions of conversations 3-10, which ``benchmarks.locomo --quick`` does not
ask) and keep ``--quick``'s first two conversations (``--split quick``) to confirm a choice, not to make it.
``--changes`` lists the questions whose first gold note moved against "as is". ``--replay`` re-scores
each variant from the features of the "as is" pass (``features.score`` alone, the whole set in a second):
for the weights that score reads (``rrf_k``, ``w_*``, ``linear``, ``cov_*`` ...), not for those that pick
candidates or shape features (``lex_sum``, ``sem_second``, ``spelling``, ``pool_window`` ...).

The embedding pack comes from $HIVE_BRAIN_MODEL_DIR (without one the numbers are lexical). Numbers
for a change to ranking still come from `python -m benchmarks.locomo --full` (the real recall path).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
from pathlib import Path
from typing import Any

from . import locomo
from .common import bench_data_path


def build(work: Path, data_dir: Path) -> list[dict[str, Any]]:
    qfile = work / "questions.json"
    if qfile.exists():
        return json.loads(qfile.read_text(encoding="utf-8"))
    from hive_brain.config import resolve
    from hive_brain.engine import Engine
    from hive_brain.store.vault import init_vault

    conv = work / "converted"
    conv.mkdir(parents=True, exist_ok=True)
    locomo.convert(data_dir, conv)
    vault = work / "vault"
    init_vault(vault, resolve())
    paths = locomo.place_notes(conv, vault)
    questions, _info = locomo.load_questions(data_dir, conv, paths, quick=False)
    Engine.open(vault).rebuild()
    qfile.write_text(json.dumps(questions), encoding="utf-8")
    return questions


def conversation_of(question: dict[str, Any]) -> str:
    """"conv-26-q000" -> "conv-26" (the converter's question ids)."""
    return str(question["id"]).rsplit("-q", 1)[0]


def split(questions: list[dict[str, Any]], which: str) -> list[dict[str, Any]]:
    """``quick``: the conversations ``benchmarks.locomo --quick`` asks; ``tune``: the others; ``all``."""
    if which == "all":
        return questions
    quick = set(list(dict.fromkeys(conversation_of(q) for q in questions))[: locomo.QUICK_CONVERSATIONS])
    return [q for q in questions if (conversation_of(q) in quick) == (which == "quick")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="Folder for the vault, state and questions (kept).")
    ap.add_argument("--bench-data", type=Path, default=None)
    ap.add_argument("--every", type=int, default=1, help="Use every Nth question (3 = a third, faster).")
    ap.add_argument("--try", dest="variants", action="append", default=[], help="JSON dict of PARAMS overrides.")
    ap.add_argument("--split", choices=("all", "tune", "quick"), default="all",
                    help="tune: conversations 3-10 (not asked by --quick); quick: the first two; all (default).")
    ap.add_argument("--changes", action="store_true", help="List the questions each variant moves against 'as is'.")
    ap.add_argument("--replay", action="store_true",
                    help="Re-score each variant from the 'as is' pass's features (milliseconds, not minutes): only "
                         "for PARAMS that features.score reads, not the candidate or feature-extraction ones.")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ["HIVE_BRAIN_STATE_DIR"] = str(args.work / "state")
    os.environ.pop("HIVE_BRAIN_VAULT", None)
    data_dir = bench_data_path(args.bench_data) / "locomo"
    questions = split(build(args.work, data_dir), args.split)[:: max(1, args.every)]

    from hive_brain.engine import Engine
    from hive_brain.search import candidates
    from hive_brain.search import recall as R

    view = Engine.open(args.work / "vault").view()
    cache: dict[tuple, Any] = {}
    original = candidates.gather

    # Candidates are cached per question, so the candidate-stage PARAMS (pool_window, passage_rrf_k,
    # background_top) keep the values of the first run; everything after them is re-fused.
    def memo(view: Any, query: Any, where: Any, *, semantic: bool, qcache: dict | None = None, **kw: Any) -> Any:
        key = (query.text, repr(where), semantic, repr(sorted(kw.items(), key=lambda kv: kv[0])))
        if key not in cache:
            cache[key] = original(view, query, where, semantic=semantic, qcache=qcache, **kw)
        return copy.deepcopy(cache[key])

    candidates.gather = memo
    base = dict(R.PARAMS)
    first: dict[str, int | None] = {}  # "as is": question id -> place of its first gold note (None: not in 10)
    scored: dict[str, list[tuple[str, Any]]] = {}  # --replay: question id -> (path, Features) of each candidate
    last: dict[str, list[tuple[str, Any]]] = {}
    if args.replay:
        from hive_brain.search import features

        extract = features.extract

        def keep(cands: Any, query: Any, *a: Any, **kw: Any) -> None:
            extract(cands, query, *a, **kw)
            last["cands"] = [(p, c.features) for p, c in cands.items()]

        features.extract = keep
    for label, overrides in [("as is", {}), *((v, json.loads(v)) for v in args.variants)]:
        R.PARAMS.clear()
        R.PARAMS.update({**base, **overrides})
        m = {"any@1": 0.0, "any@5": 0.0, "all@5": 0.0, "any@10": 0.0, "mrr": 0.0}
        moved: list[str] = []
        for q in questions:
            if overrides and args.replay:
                # Conversations are not re-read by the second model (search/rerank.py, reads), so the
                # first pass's order by score is the answer's order (checked on "as is" below).
                got = _by_score(scored[q["id"]], R.PARAMS)
                fixes: Any = ""
            else:
                res = R.search(view, q["question"], agent=None, scope="full-vault", limit=10, abstain=False,
                               drop_ratio=0.0)
                got = [h["path"] for h in res["hits"]]
                fixes = res.get("spelling") or ""
                if args.replay and not overrides:
                    scored[q["id"]] = last["cands"]
                    if _by_score(scored[q["id"]], R.PARAMS) != got:
                        print(f"  {q['id']}: replay differs from recall; --replay numbers are off", flush=True)
            gold = set(q["gold_docs"])
            at = next((i for i, p in enumerate(got) if p in gold), None)
            m["mrr"] += 1 / (at + 1) if at is not None else 0.0
            m["any@1"] += bool(set(got[:1]) & gold)
            m["any@5"] += bool(set(got[:5]) & gold)
            m["all@5"] += gold <= set(got[:5])
            m["any@10"] += bool(set(got[:10]) & gold)
            if not overrides:
                first[q["id"]] = at
            elif first.get(q["id"], at) != at:
                was = first[q["id"]]
                moved.append(f"  {q['id']}: {'-' if was is None else was + 1} -> {'-' if at is None else at + 1}"
                             f"  {q['question']!r} {fixes}")
        print(f"{label:40s}", {k: round(v / len(questions), 4) for k, v in m.items()}, f"n={len(questions)}", flush=True)
        if args.changes and moved:
            print("\n".join(moved), flush=True)


def _by_score(cands: list[tuple[str, Any]], params: dict[str, float]) -> list[str]:
    """The top 10 paths by ``features.score`` under ``params`` (ties in candidate order, as recall sorts)."""
    from hive_brain.search.features import score

    return [p for p, _f in sorted(cands, key=lambda pf: -score(pf[1], params))][:10]

if __name__ == "__main__":
    main()
