"""CMRC 2018 trial (Chinese Wikipedia): every paragraph becomes one note, every question should find
the paragraph it was written on. Metrics: recall@1/5/10 and MRR@10 (one gold note per question).

Baselines: ``grep`` counts the distinct query character bigrams a note contains; ``bm25`` is tantivy
with its default tokenizer, which keeps whole runs of Chinese characters as one token, so it is
expected to do badly: that is the point of the comparison. Target for hive-brain: MRR >= 0.98.

--quick asks 200 questions (a fixed random sample); the vault always holds all 256 paragraphs.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .common import (
    BenchConfig,
    check_target,
    log,
    print_table,
    require_file,
    standalone_main,
    summary_row,
    temp_dir,
    temp_state_dir,
)
from .metrics import session_scores, unique_in_order
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

NAME = "cmrc"
DATA_FILE = "cmrc2018-trial/cmrc2018_trial.json"
NOTES_DIR = "Projects/cmrc2018"
QUICK_QUESTIONS = 200
SAMPLE_SEED = 2018
K = 10
METRICS = ["any@1", "any@5", "any@10", "mrr"]
TARGETS = {"mrr": 0.98}


def note_text(title: str, para_id: str, context: str) -> str:
    return (f"---\ntitle: {json.dumps(title, ensure_ascii=False)}\nparagraph_id: {json.dumps(para_id)}\n"
            f"source: \"CMRC 2018 trial, CC BY-SA 4.0\"\n---\n\n# {title}\n\n{context.strip()}\n")


def write_notes(data: Mapping[str, Any], vault: Path) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """One note per paragraph under NOTES_DIR; returns (paragraph id -> vault path, all questions)."""
    dest = vault / NOTES_DIR
    dest.mkdir(parents=True, exist_ok=True)
    paths: dict[str, str] = {}
    questions: list[dict[str, Any]] = []
    for article in data["data"]:
        for para in article["paragraphs"]:
            pid = para["id"]
            if pid in paths:
                raise ValueError(f"duplicate paragraph id {pid}")
            path = dest / f"{pid}.md"
            path.write_text(note_text(article.get("title", pid), pid, para["context"]), encoding="utf-8")
            paths[pid] = path.relative_to(vault).as_posix()
            for qa in para["qas"]:
                questions.append({"id": qa["id"], "question": qa["question"], "gold_docs": [paths[pid]]})
    return paths, questions


def sample_questions(questions: list[dict[str, Any]], quick: bool) -> list[dict[str, Any]]:
    if not quick or len(questions) <= QUICK_QUESTIONS:
        return questions
    keep = set(random.Random(SAMPLE_SEED).sample(range(len(questions)), QUICK_QUESTIONS))
    return [q for i, q in enumerate(questions) if i in keep]


def make_scorer(granularity: str) -> ScoreFn:
    def score(q: Mapping[str, Any], hits: list[Hit]) -> dict[str, Any]:
        ranked = [h.doc_id for h in hits]
        rec: dict[str, Any] = {"id": q["id"], "top": [Path(d).stem for d in unique_in_order(ranked)[:K]]}
        rec.update(session_scores(ranked, q["gold_docs"], ks=(1, 5, 10)))
        return rec

    return score


def build_systems(vault: Path) -> list[tuple[Any, int]]:
    return [(GrepRetriever(), 3), (BM25Retriever("bm25"), 3), (HiveBrainRetriever(vault), 1)]


def run(cfg: BenchConfig, systems: Callable[[Path], list[tuple[Any, int]]] | None = None) -> dict[str, Any]:
    src = require_file(cfg.bench_data / DATA_FILE)
    data = json.loads(src.read_text(encoding="utf-8"))
    with temp_state_dir(), temp_dir("hb-bench-cmrc-") as work:
        vault = work / "vault"
        vault_info = make_vault(vault)
        paths, all_questions = write_notes(data, vault)
        questions = sample_questions(all_questions, cfg.quick)
        docs = collect_docs(vault)
        log(f"cmrc: vault with {len(paths)} paragraph notes ({len(docs)} notes in all), "
            f"{len(questions)} of {len(all_questions)} questions")
        results = evaluate_systems((systems or build_systems)(vault), docs, questions, make_scorer, METRICS,
                                   k=K)
    return {
        "vault": {**vault_info, "paragraph_notes": len(paths), "notes_total": len(docs),
                  "notes_dir": NOTES_DIR},
        "questions": {"total": len(all_questions), "asked": len(questions),
                      "sample": f"random.Random({SAMPLE_SEED}).sample, {QUICK_QUESTIONS}"
                      if cfg.quick else "all"},
        "k": K,
        "targets": TARGETS,
        "systems": results,
    }


def report(result: Mapping[str, Any], console: Any) -> None:
    print_table(f"CMRC 2018 trial: question -> its paragraph ({result['vault']['notes_total']} notes, "
                f"{result['questions']['asked']} questions, {result['mode']}); target hive-brain MRR >= "
                f"{TARGETS['mrr']}",
                systems_columns(["R@1", "R@5", "R@10", "MRR@10"]), systems_rows(result["systems"], METRICS),
                console, caption=status_notes(result["systems"]))


def summary_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    bm25 = metric_value(find_result(result["systems"], "bm25"), "mrr")
    for r in result["systems"]:
        name = r["system"]
        if r["status"] != "ok":
            rows.append(summary_row(NAME, name, "mrr", None, status=r["status"], note=r.get("reason"),
                                    target=f">= {TARGETS['mrr']}" if name == "hive-brain" else None))
            continue
        v = metric_value(r, "mrr")
        is_hb = name == "hive-brain"
        rows.append(summary_row(
            NAME, name, "mrr", v, target=f">= {TARGETS['mrr']}" if is_hb else None,
            vs_baseline=None if name == "bm25" or v is None or bm25 is None else f"{v - bm25:+.3f}",
            status=check_target(v, TARGETS["mrr"]) if is_hb else "ok",
            note=f"R@1 {metric_value(r, 'any@1')}, R@5 {metric_value(r, 'any@5')}; "
                 f"query p50 {r['latency'].get('median_ms')} ms"))
    return rows


if __name__ == "__main__":
    sys.exit(standalone_main(sys.modules[__name__]))
