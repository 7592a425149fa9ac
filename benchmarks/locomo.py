"""LoCoMo retrieval quality: one vault holding all 272 sessions of the 10 conversations (pooled, as a
user's vault would hold them), questions of categories 1-4 (adversarial 5 skipped).

Session level (a hit is the note of an evidence session): recall@1/5/10 "any gold" and "all gold",
MRR@10 of the first gold note. Turn level: do the passages returned in the top 5/10 results contain
an evidence dialog id (e.g. "D3:4", from the note of its own conversation: ids repeat across
conversations)? Counted over every passage returned with a hit ("t"), and over each hit's first
passage only ("t1"). Turn level is reported only for systems that return passages smaller than a
note; ``bm25-turns`` (one BM25 document per turn) is its baseline. "ids/hit" (distinct dialog ids
returned per hit) and "ids/passage" show how much of a session a hit carries: if a hit returns the
whole session, turn recall is session recall.

--quick asks the questions of the first 2 conversations (the vault still holds all sessions).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .common import (
    BenchConfig,
    check_target,
    fmt,
    log,
    print_table,
    require_file,
    standalone_main,
    summary_row,
    temp_dir,
    temp_state_dir,
    timed,
)
from .metrics import dialog_ids_in, mean, session_scores, turn_scores, unique_in_order
from .systems import (
    BM25Retriever,
    GrepRetriever,
    Hit,
    HiveBrainRetriever,
    ScoreFn,
    collect_docs,
    evaluate_systems,
    find_result,
    make_vault,
    metric_value,
    status_notes,
    systems_columns,
    systems_rows,
)

NAME = "locomo"
NOTES_DIR = "Memory/Conversations/locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
QUICK_CONVERSATIONS = 2
K = 10
SESSION_METRICS = ["any@1", "all@1", "any@5", "all@5", "any@10", "all@10", "mrr"]
TURN_METRICS = ["turn_any@5", "turn_all@5", "turn_any@10", "turn_all@10", "turn1_any@5", "turn1_any@10",
                "turn1_all@10", "dialog_ids_per_hit", "dialog_ids_per_passage"]
TARGETS = {"any@5": 0.96, "all@5": 0.88, "mrr": 0.85, "turn_any@10": 0.85}
REFERENCE = {
    "issue: plain BM25, pooled sessions": {"any@5": 0.897, "all@5": 0.778, "mrr": 0.754},
    "issue: best simple hybrid, pooled sessions": {
        "any@5": 0.934, "any@10": 0.976, "all@5": 0.822, "mrr": 0.81},
    "bench-data README: plain BM25 within each conversation (n=1536)": {
        "any@5": 0.894, "any@10": 0.960, "all@5": 0.774, "turn_any@5": 0.490, "turn_any@10": 0.576,
        "turn_all@5": 0.406},
    "targets (hive-brain)": dict(TARGETS),
}
_TURN_LINE = re.compile(r"\(D\d+:\d+\)")


def split_turns(text: str) -> list[str]:
    """The turn lines of a converted session note ("**Speaker** (D3:4): text")."""
    return [line for line in text.splitlines() if _TURN_LINE.search(line)]


def session_note_id(conversation_id: str, dialog_id: str) -> str:
    """The converter's note id of the session holding a dialog id: ("conv-26", "D7:12") -> "conv-26-s07"."""
    return f"{conversation_id}-s{int(dialog_id[1:].split(':')[0]):02d}"


def convert(data_dir: Path, out: Path) -> dict[str, Any]:
    """Run the bench-data converter (stdlib only) on locomo10.json into ``out``."""
    converter = require_file(data_dir / "convert_locomo.py")
    src = require_file(data_dir / "locomo10.json")
    proc = subprocess.run([sys.executable, str(converter), "--input", str(src), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"convert_locomo.py failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return json.loads((out / "stats.json").read_text(encoding="utf-8"))


def place_notes(converted: Path, vault: Path) -> dict[str, str]:
    """Move the converted session notes under ``<vault>/NOTES_DIR/<conv-id>/``; note id -> vault path."""
    dest_root = vault / NOTES_DIR
    dest_root.mkdir(parents=True, exist_ok=True)
    note_paths: dict[str, str] = {}
    for conv_dir in sorted((converted / "notes").iterdir()):
        dest = dest_root / conv_dir.name
        shutil.move(str(conv_dir), str(dest))
        for note in dest.glob("*.md"):
            note_paths[note.stem] = note.relative_to(vault).as_posix()
    return note_paths


def load_questions(data_dir: Path, converted: Path, note_paths: Mapping[str, str],
                   quick: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Questions of categories 1-4 with usable evidence, gold mapped to vault paths."""
    shipped = data_dir / "converted" / "queries.jsonl"
    generated = converted / "queries.jsonl"
    source = shipped if shipped.is_file() else generated
    lines = source.read_text(encoding="utf-8").splitlines()
    fresh = generated.read_text(encoding="utf-8").splitlines()
    info: dict[str, Any] = {"source": str(source), "matches_fresh_conversion": lines == fresh}
    rows = [json.loads(x) for x in lines if x.strip()]
    convs = list(dict.fromkeys(r["conversation_id"] for r in rows))
    keep_convs = set(convs[:QUICK_CONVERSATIONS]) if quick else set(convs)
    questions, skipped_no_evidence, skipped_adversarial = [], 0, 0
    for r in rows:
        if r["category"] not in CATEGORIES:
            skipped_adversarial += 1
            continue
        if not r["evidence_dialog_ids"]:
            skipped_no_evidence += 1
            continue
        if r["conversation_id"] not in keep_convs:
            continue
        gold = [note_paths[n] for n in r["evidence_note_ids"]]
        evidence = {d: note_paths[session_note_id(r["conversation_id"], d)] for d in r["evidence_dialog_ids"]}
        questions.append({"id": r["id"], "question": r["question"], "category": CATEGORIES[r["category"]],
                          "gold_docs": gold, "evidence": evidence})
    info.update(conversations=sorted(keep_convs), questions=len(questions),
                skipped_category_5=skipped_adversarial, skipped_without_evidence=skipped_no_evidence)
    return questions, info


def make_scorer(granularity: str) -> ScoreFn:
    def score(q: Mapping[str, Any], hits: list[Hit]) -> dict[str, Any]:
        ranked = [h.doc_id for h in hits]
        rec: dict[str, Any] = {"id": q["id"], "category": q["category"],
                               "top": [Path(d).stem for d in unique_in_order(ranked)[:K]]}
        rec.update(session_scores(ranked, q["gold_docs"], ks=(1, 5, 10)))
        if granularity != "note":  # a whole-note "passage" holds every turn of the session
            rec.update(turn_scores([(h.doc_id, h.passages) for h in hits], q["evidence"], ks=(5, 10)))
            first = turn_scores([(h.doc_id, h.passages[:1]) for h in hits], q["evidence"], ks=(5, 10))
            rec.update({k.replace("turn_", "turn1_"): v for k, v in first.items()})
            top = hits[:K]
            texts = [t for h in top for t in h.passages]
            rec["dialog_ids_per_passage"] = mean([len(dialog_ids_in(t)) for t in texts]) if texts else None
            per_hit = [len(set().union(*map(dialog_ids_in, h.passages))) for h in top]
            rec["dialog_ids_per_hit"] = mean(per_hit) if per_hit else None
        return rec

    return score


def build_systems(vault: Path) -> list[tuple[Any, int]]:
    """(system, index runs): baselines are cheap, so their indexing time is a median of 3."""
    return [
        (GrepRetriever(), 3),
        (BM25Retriever("bm25"), 3),
        (BM25Retriever("bm25-turns", units=split_turns, fetch=200), 3),
        (HiveBrainRetriever(vault), 1),
    ]


def run(cfg: BenchConfig, systems: Callable[[Path], list[tuple[Any, int]]] | None = None) -> dict[str, Any]:
    data_dir = cfg.bench_data / "locomo"
    require_file(data_dir / "locomo10.json")
    with temp_state_dir(), temp_dir("hb-bench-locomo-") as work:
        vault = work / "vault"
        vault_info = make_vault(vault)
        stats, convert_s = timed(lambda: convert(data_dir, work / "converted"))
        note_paths = place_notes(work / "converted", vault)
        questions, qinfo = load_questions(data_dir, work / "converted", note_paths, cfg.quick)
        docs = collect_docs(vault)
        log(f"locomo: vault with {len(note_paths)} session notes ({len(docs)} notes in all), "
            f"{len(questions)} questions")
        results = evaluate_systems((systems or build_systems)(vault), docs, questions, make_scorer,
                                   SESSION_METRICS + TURN_METRICS, "category", k=K)
    return {
        "vault": {**vault_info, "session_notes": len(note_paths), "notes_total": len(docs),
                  "notes_dir": NOTES_DIR, "convert_s": round(convert_s, 2),
                  "converter_stats": {k: v for k, v in stats.items() if k != "evidence_tokens_dropped"}},
        "questions": qinfo,
        "k": K,
        "reference": REFERENCE,
        "targets": TARGETS,
        "systems": results,
    }


def _delta(a: float | None, b: float | None) -> str | None:
    return None if a is None or b is None else f"{a - b:+.3f}"


def report(result: Mapping[str, Any], console: Any) -> None:
    systems = result["systems"]
    q = result["questions"]
    cols = ["any@1", "any@5", "any@10", "all@5", "all@10", "mrr", "turn_any@5", "turn_any@10", "turn_all@10",
            "turn1_any@10", "dialog_ids_per_hit", "dialog_ids_per_passage"]
    heads = ["s any@1", "s any@5", "s any@10", "s all@5", "s all@10", "MRR@10", "t any@5", "t any@10",
             "t all@10", "t1 any@10", "ids/hit", "ids/passage"]
    print_table(f"LoCoMo, pooled vault ({result['vault']['notes_total']} notes), categories 1-4, "
                f"{q['questions']} questions from {len(q['conversations'])} conversations ({result['mode']})",
                systems_columns(heads), systems_rows(systems, cols), console,
                caption="s = session level (note of an evidence session); t = turn level (evidence dialog id "
                        "in a passage returned with a hit; '-' for whole-note systems); t1 = first passage "
                        "of each hit only; ids/hit, ids/passage = distinct dialog ids returned"
                        + (f"\n{notes}" if (notes := status_notes(systems)) else ""))
    cat_cols = ["any@5", "any@10", "all@5", "mrr", "turn_any@10"]
    rows = []
    for cat in CATEGORIES.values():
        for r in systems:
            m = r.get("metrics", {}).get(cat)
            if m:
                rows.append([cat, r["system"], m["n"], *(m.get(c) for c in cat_cols)])
    if rows:
        print_table("LoCoMo per category",
                    ["category", "system", "n", "s any@5", "s any@10", "s all@5", "MRR@10", "t any@10"], rows,
                    console)
    ref_cols = ["any@5", "any@10", "all@5", "mrr", "turn_any@5", "turn_any@10"]
    ref_rows = [[name, *(vals.get(c) for c in ref_cols)] for name, vals in result["reference"].items()]
    bm25 = find_result(systems, "bm25")
    ref_rows.append(["this run: bm25", *(metric_value(bm25, c) for c in ref_cols)])
    print_table("LoCoMo reference numbers", ["source", "s any@5", "s any@10", "s all@5", "MRR", "t any@5",
                                             "t any@10"], ref_rows, console)


def summary_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Headline rows; hive-brain is compared with bm25 (session) and bm25-turns (turn) of the same run."""
    systems = result["systems"]
    baselines = {"session": find_result(systems, "bm25"), "turn": find_result(systems, "bm25-turns")}
    rows = []
    for r in systems:
        name = r["system"]
        is_hb = name == "hive-brain"
        if r["status"] != "ok":
            for i, m in enumerate(TARGETS if is_hb else ["pooled"]):
                rows.append(summary_row(NAME, name, m, None, target=f">= {TARGETS[m]}" if is_hb else None,
                                        status=r["status"], note=r.get("reason") if i == 0 else "(as above)"))
            continue
        metrics = ["any@5", "all@5", "mrr"]
        if r["granularity"] != "note":
            metrics += ["turn_any@10", "turn1_any@10"]
        for m in metrics:
            v = metric_value(r, m)
            base = baselines["turn" if m.startswith("turn") else "session"]
            note = None
            if m.startswith("turn"):
                note = (f"{'first passage of each hit; ' if m.startswith('turn1') else ''}"
                        f"{fmt(metric_value(r, 'dialog_ids_per_hit'), 1)} dialog ids/hit")
            rows.append(summary_row(
                NAME, name, m, v, target=f">= {TARGETS[m]}" if is_hb and m in TARGETS else None,
                vs_baseline=None if base is r else _delta(v, metric_value(base, m)),
                status=check_target(v, TARGETS[m]) if is_hb and m in TARGETS else "ok", note=note))
        note = f"p95 {r['latency'].get('p95_ms')} ms; index {r['index']['notes_per_s']} notes/s"
        rows.append(summary_row(NAME, name, "query p50 ms", r["latency"].get("median_ms"), note=note))
    return rows


if __name__ == "__main__":
    sys.exit(standalone_main(sys.modules[__name__]))
