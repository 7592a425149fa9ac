"""Fast ranking experiments on the small developer vault (:mod:`benchmarks.smallvault`): open the kept
vaults once, cache each question's candidates, then re-rank them under different
`hive_brain.search.params.PARAMS` (seconds per variant after the first).

    python -m benchmarks.smallvault --full --work /tmp/svwork          # build the vaults (once)
    python -m benchmarks.tune_smallvault --work /tmp/svwork --sizes 20,70,500,2000 \\
        --try '{"w_li": 1.0}' --try '{"lin_sem": 2.0}'

Prints, per variant, vault and half, the numbers of the smallvault table (tune the tune half only;
the held half is for confirming). Candidates are cached per question, so the candidate-stage PARAMS
(``pool_window``, ``passage_rrf_k``, ``background_top``, the floor) keep the values of the first run.
Numbers for a change still come from ``python -m benchmarks.smallvault --full`` (the real path).
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any

from . import smallvault as S
from .common import state_dir_at


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="the folder `smallvault --work` built the vaults in")
    ap.add_argument("--sizes", default="20,70,500,2000", help="comma-separated vault sizes")
    ap.add_argument("--try", dest="variants", action="append", default=[], help="JSON dict of PARAMS overrides")
    args = ap.parse_args()

    from hive_brain.search import candidates
    from hive_brain.search import recall as R

    memories, data = S.load_data()
    offtopic = [{"q": q, "split": S.split_of(i)} for i, q in enumerate(data["offtopic"])]
    sizes = [int(x) for x in args.sizes.split(",")]
    opened: dict[int, tuple[Any, Any, list[dict[str, Any]]]] = {}
    for size in sizes:
        with state_dir_at(args.work / str(size) / "state"):
            eng, head, first, _info = S._open_or_build(args.work / str(size), size, memories, data["evolve"])
            view = eng.view()
            t0 = time.perf_counter()
            computed = S.read_ahead(eng, view)
            print(f"  {size}: read ahead ({computed} passages new to this process) in {time.perf_counter() - t0:.1f} s", flush=True)
            opened[size] = (eng, view, S.questions_for(data, set(first), head, first))

    cache: dict[tuple, Any] = {}
    original = candidates.gather

    def memo(view: Any, query: Any, where: Any, *, semantic: bool, qcache: dict | None = None, **kw: Any) -> Any:
        key = (id(view), query.text, repr(where), semantic, repr(sorted(kw.items(), key=lambda kv: kv[0])))
        if key not in cache:
            cache[key] = original(view, query, where, semantic=semantic, qcache=qcache, **kw)
        return copy.deepcopy(cache[key])

    candidates.gather = memo
    S.e5_only = lambda view, query, k: []  # the model's own ranking does not move
    base = dict(R.PARAMS)
    for label, overrides in [("as is", {}), *((v, json.loads(v)) for v in args.variants)]:
        R.PARAMS.clear()
        R.PARAMS.update({**base, **overrides})
        print(f"== {label}", flush=True)
        for size, (eng, view, qs) in opened.items():
            with state_dir_at(args.work / str(size) / "state"):
                t0 = time.process_time()
                ev = S.evaluate(eng, view, qs, offtopic)
                cpu = time.process_time() - t0
            for half in ("tune", "held"):
                m = S.metrics(ev, half)
                print(f"  {size:5d} {half}: hit@1 {m['hit@1']:.3f} hit@3 {m['hit@3']:.3f} abstained "
                      f"{m['abstain_answerable']:.3f} multi {m['multi_hit@1']}/{m['multi_hit@3']} evolved "
                      f"{m['evolved_first']:.2f} off-topic {m['offtopic_abstain']:.2f} hook {m['hook_injected']}"
                      + (f"  ({cpu:.0f} s CPU, recall p50 {ev['latency_ms_p50']} ms)" if half == "held" else ""),
                      flush=True)
    R.PARAMS.clear()
    R.PARAMS.update(base)


if __name__ == "__main__":
    main()
