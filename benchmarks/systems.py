"""The retrieval systems compared by the benchmarks, the benchmark vault, and the run loop.

Systems (all over the same vault files, measured in the same run):

* ``grep``: ranks notes by how many distinct query terms they contain (case-insensitive substring,
  like counting ``grep -ril TERM`` matches). Terms: latin words of more than 2 characters minus a
  stop list, and CJK character bigrams.
* ``bm25``: tantivy, default tokenizer, one document per note (whole file text, one text field),
  queried with the lenient parser after query syntax is stripped.
* ``hive-brain``: the engine's in-process API (``hive_brain.engine.Engine``); "unavailable" with
  the reason while it cannot be imported or opened.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .common import latency_summary, log, median, short_error
from .metrics import aggregate

# --------------------------------------------------------------------------- documents and vault


@dataclass(frozen=True)
class Doc:
    doc_id: str  # vault-relative posix path
    path: Path


@dataclass
class Hit:
    doc_id: str | None  # vault-relative posix path of the note (None if it could not be mapped)
    passages: list[str] = field(default_factory=list)  # passage texts returned with this result


def make_vault(root: Path) -> dict[str, Any]:
    """Create an (empty) hive-brain vault at root; a plain folder when hive_brain.store.vault is not usable.

    Call inside :func:`benchmarks.common.temp_state_dir` so nothing touches the real state dir.
    """
    root.mkdir(parents=True, exist_ok=True)
    try:
        from hive_brain.config import resolve
        from hive_brain.store.vault import init_vault

        vault, _ = init_vault(root, resolve())
        return {"initialised": True, "vault_id": vault.vault_id}
    except Exception as e:  # the engine is under construction; baselines only need the files
        return {"initialised": False, "reason": short_error(e)}


def collect_docs(root: Path) -> list[Doc]:
    """Every Markdown note in the vault (hidden folders skipped), sorted by path."""
    docs = []
    for p in root.rglob("*.md"):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        docs.append(Doc(doc_id=rel.as_posix(), path=p))
    return sorted(docs, key=lambda d: d.doc_id)


# --------------------------------------------------------------------------- systems


class SystemUnavailable(Exception):
    """The system cannot run here (not importable yet, no index, ...); the reason is reported."""


class Retriever(Protocol):
    name: str
    granularity: str  # "note" (whole notes), "turn" (single turns), "passage" (whatever the system splits)
    description: str

    def open(self) -> None: ...

    def index(self, docs: Sequence[Doc]) -> None: ...

    def search(self, query: str, k: int) -> list[Hit]: ...

    def close(self) -> None: ...


_STOP_TEXT = """
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing done down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just let like may me
might more most much must my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there these they
this those through to too under until up upon very was we were what whats when where which while who whom
whose why will with would you your yours yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(r"[^\W_]+")


def query_terms(query: str) -> list[str]:
    """Distinct grep terms of a query: latin words (lowercased, >2 chars, not stop words) and CJK bigrams."""
    q = query.lower()
    terms: list[str] = []
    for run in _CJK_RUN.findall(q):
        terms.extend(run[i: i + 2] for i in range(len(run) - 1))
    for w in _WORD.findall(_CJK_RUN.sub(" ", q)):
        if len(w) > 2 and w not in STOP_WORDS:
            terms.append(w)
    return list(dict.fromkeys(terms))


def strip_query_syntax(query: str) -> str:
    """Words only, lowercased (so AND/OR/NOT are not operators): safe for tantivy's query parser."""
    return " ".join(re.findall(r"\w+", query.lower()))


class GrepRetriever:
    name = "grep"
    granularity = "note"
    description = "notes ranked by distinct query terms contained (grep -ril counting; CJK: bigrams)"

    def __init__(self) -> None:
        self._texts: list[tuple[str, str]] = []

    def open(self) -> None:
        pass

    def index(self, docs: Sequence[Doc]) -> None:
        self._texts = [(d.doc_id, d.path.read_text(encoding="utf-8").lower()) for d in docs]

    def search(self, query: str, k: int) -> list[Hit]:
        terms = query_terms(query)
        if not terms:
            return []
        scored = []
        for i, (doc_id, text) in enumerate(self._texts):
            n = sum(1 for t in terms if t in text)
            if n:
                scored.append((-n, i, doc_id))
        scored.sort()
        return [Hit(doc_id=doc_id) for _, _, doc_id in scored[:k]]

    def close(self) -> None:
        self._texts = []


class BM25Retriever:
    """tantivy BM25 with the default tokenizer, in RAM.

    With ``units`` unset every note is one document (granularity "note"); with a splitter every
    unit it returns (e.g. one conversation turn) is a document and its text comes back as the
    passage (granularity "turn"); then ``search`` fetches ``fetch`` units so that enough distinct
    notes are ranked.
    """

    def __init__(self, name: str = "bm25", units: Callable[[str], list[str]] | None = None,
                 fetch: int = 200, description: str | None = None) -> None:
        self.name = name
        self.units = units
        self.fetch = fetch
        self.granularity = "turn" if units else "note"
        self.description = description or (
            "tantivy BM25, default tokenizer, whole notes" if units is None
            else "tantivy BM25, default tokenizer, one document per turn")
        self._unit_docs: list[tuple[str, str]] = []
        self._index: Any = None
        self._searcher: Any = None

    def open(self) -> None:
        import tantivy  # noqa: F401  (fail early, as unavailable, if tantivy is missing)

    def index(self, docs: Sequence[Doc]) -> None:
        import tantivy

        sb = tantivy.SchemaBuilder()
        sb.add_unsigned_field("uid", stored=True, indexed=False)
        sb.add_text_field("text", stored=False)
        index = tantivy.Index(sb.build())
        writer = index.writer(heap_size=64_000_000, num_threads=1)
        units: list[tuple[str, str]] = []
        for d in docs:
            text = d.path.read_text(encoding="utf-8")
            for u in (self.units(text) if self.units else [text]):
                writer.add_document(tantivy.Document(uid=len(units), text=u))
                units.append((d.doc_id, u))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self._index, self._searcher, self._unit_docs = index, index.searcher(), units

    def search(self, query: str, k: int) -> list[Hit]:
        q = strip_query_syntax(query)
        if not q:
            return []
        parsed, _errors = self._index.parse_query_lenient(q, ["text"])
        limit = max(k, self.fetch) if self.units else k
        hits = []
        for _score, addr in self._searcher.search(parsed, limit).hits:
            uid = self._searcher.doc(addr)["uid"][0]
            doc_id, text = self._unit_docs[uid]
            hits.append(Hit(doc_id=doc_id, passages=[text] if self.units else []))
        return hits

    def close(self) -> None:
        self._index = self._searcher = None
        self._unit_docs = []


class HiveBrainRetriever:
    """hive-brain's in-process engine: ``Engine.open(vault)``, ``rebuild``, ``recall``."""

    name = "hive-brain"
    granularity = "passage"
    description = "hive_brain.engine.Engine.recall(scope='full-vault')"

    def __init__(self, vault_root: Path, scope: str = "full-vault") -> None:
        self.vault_root = vault_root.resolve()
        self.scope = scope
        self._eng: Any = None
        self.info: dict[str, Any] = {}

    def open(self) -> None:
        try:
            from hive_brain.engine import Engine

            self._eng = Engine.open(self.vault_root)
        except (ImportError, AttributeError) as e:
            raise SystemUnavailable(short_error(e)) from e

    def index(self, docs: Sequence[Doc]) -> None:
        try:
            out = self._eng.rebuild()
        except (ImportError, AttributeError, NotImplementedError) as e:  # index layer not built yet
            raise SystemUnavailable(f"rebuild: {short_error(e)}") from e
        if isinstance(out, Mapping):
            self.info["rebuild"] = {k: v for k, v in out.items() if isinstance(v, str | int | float | bool)}

    def reset_counters(self) -> None:
        self.info.pop("abstained", None)

    def _doc_id(self, path: str) -> str:
        p = Path(path)
        if p.is_absolute():
            try:
                return p.resolve().relative_to(self.vault_root).as_posix()
            except ValueError:
                return p.as_posix()
        return p.as_posix()

    def search(self, query: str, k: int) -> list[Hit]:
        try:
            # Retrieval quality is measured on the full ranking: no abstention, no relative cut-off.
            res = self._eng.recall(query, limit=k, scope=self.scope, abstain=False, drop_ratio=0.0)
        except (ImportError, NotImplementedError) as e:  # recall layer not built yet
            raise SystemUnavailable(f"recall: {short_error(e)}") from e
        if "first_recall" not in self.info:  # what the engine says about itself (mode, semantic, ...)
            self.info["first_recall"] = {k: v for k, v in res.items()
                                         if k != "hits" and isinstance(v, str | int | float | bool)}
        if res.get("abstained"):
            self.info["abstained"] = self.info.get("abstained", 0) + 1
        hits = []
        for h in res.get("hits") or []:
            passages = []
            for p in [h.get("passage"), *(h.get("passages") or [])]:
                if isinstance(p, Mapping) and isinstance(p.get("text"), str):
                    passages.append(p["text"])
            path = h.get("path")
            hits.append(Hit(doc_id=self._doc_id(path) if path else None, passages=passages))
        return hits

    def close(self) -> None:
        if self._eng is not None and hasattr(self._eng, "close"):
            self._eng.close()
        self._eng = None


# --------------------------------------------------------------------------- the run loop

ScoreFn = Callable[[Mapping[str, Any], list[Hit]], dict[str, Any]]


def run_system(system: Retriever, docs: Sequence[Doc], questions: Sequence[Mapping[str, Any]],
               score: ScoreFn, *, k: int = 10, index_runs: int = 1, warmup: int = 3) -> dict[str, Any]:
    """Open, index (``index_runs`` times, median), then search every question once and score it.

    Never raises for the system's own failures: the result's ``status`` is "ok", "unavailable"
    (cannot be imported/opened) or "error" (failed while opening, indexing or on every query).
    """
    out: dict[str, Any] = {"system": system.name, "granularity": system.granularity,
                           "description": system.description, "status": "ok"}
    try:
        t0 = time.perf_counter()
        system.open()
        out["open_s"] = round(time.perf_counter() - t0, 4)
        runs = []
        for _ in range(max(1, index_runs)):
            t0 = time.perf_counter()
            system.index(docs)
            runs.append(time.perf_counter() - t0)
        med = median(runs)
        out["index"] = {"notes": len(docs), "runs_s": [round(r, 4) for r in runs],
                        "first_s": round(runs[0], 4), "median_s": round(med, 4),
                        "notes_per_s": round(len(docs) / med) if med > 0 else None}
    except SystemUnavailable as e:
        out.update(status="unavailable", reason=str(e))
        _safe_close(system)
        return out
    except Exception as e:
        out.update(status="error", reason=short_error(e))
        _safe_close(system)
        return out

    records, latencies = [], []
    errors, first_error = 0, None
    try:
        for q in questions[:warmup]:
            try:
                system.search(q["question"], k)
            except SystemUnavailable:
                raise
            except Exception:
                break
        if hasattr(system, "reset_counters"):
            system.reset_counters()
        for q in questions:
            t0 = time.perf_counter()
            try:
                hits = system.search(q["question"], k)
            except SystemUnavailable:
                raise
            except Exception as e:
                errors += 1
                first_error = first_error or short_error(e)
                hits = []
            latencies.append(time.perf_counter() - t0)
            records.append(score(q, hits))
    except SystemUnavailable as e:
        _safe_close(system)
        out.update(status="unavailable", reason=str(e))
        return out
    _safe_close(system)
    out["latency"] = latency_summary(latencies)
    out["query_errors"] = errors
    if first_error:
        out["first_query_error"] = first_error
    if questions and errors == len(questions):
        out.update(status="error", reason=f"every query failed; first: {first_error}")
    info = getattr(system, "info", None)
    if info:
        out["info"] = info
    out["records"] = records
    return out


def _safe_close(system: Retriever) -> None:
    try:
        system.close()
    except Exception:
        pass


def evaluate_systems(systems: Sequence[tuple[Retriever, int]], docs: Sequence[Doc],
                     questions: Sequence[Mapping[str, Any]], scorer: Callable[[str], ScoreFn],
                     metrics: Sequence[str], group_key: str | None = None, *, k: int = 10,
                     warmup: int = 3) -> list[dict[str, Any]]:
    """:func:`run_system` for each (system, index_runs), with metric means pooled and per group."""
    results = []
    for system, index_runs in systems:
        log(f"{system.name}: index {len(docs)} notes x{index_runs}, then {len(questions)} questions")
        r = run_system(system, docs, questions, scorer(system.granularity), k=k, index_runs=index_runs,
                       warmup=warmup)
        if r.get("records"):
            r["metrics"] = aggregate(r["records"], metrics, group_key)
        log(f"{system.name}: {r['status']}" + (f" ({r['reason']})" if r.get("reason") else ""))
        results.append(r)
    return results


def find_result(results: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((r for r in results if r["system"] == name), None)


def metric_value(result: Mapping[str, Any] | None, metric: str, group: str = "pooled") -> float | None:
    if not result or result.get("status") != "ok":
        return None
    return result.get("metrics", {}).get(group, {}).get(metric)


def status_text(result: Mapping[str, Any]) -> str:
    return result["status"] + (f": {result['reason']}" if result.get("reason") else "")


def systems_rows(results: Sequence[Mapping[str, Any]], metrics: Sequence[str],
                 group: str = "pooled") -> list[list[Any]]:
    """Table rows: system, n, the metrics, index notes/s, query p50/p95 ms, status."""
    rows = []
    for r in results:
        m = r.get("metrics", {}).get(group, {}) if r.get("status") == "ok" else {}
        lat = r.get("latency", {}) if r.get("status") == "ok" else {}
        rows.append([r["system"], m.get("n"), *(m.get(x) for x in metrics),
                     r.get("index", {}).get("notes_per_s") if r.get("status") == "ok" else None,
                     lat.get("median_ms"), lat.get("p95_ms"), r["status"]])
    return rows


def status_notes(results: Sequence[Mapping[str, Any]]) -> str | None:
    """Why systems did not run (a table caption), or None when all ran."""
    notes = [f"{r['system']}: {status_text(r)}" for r in results if r.get("status") != "ok"]
    return "\n".join(notes) or None


def systems_columns(metric_headers: Sequence[str]) -> list[str]:
    return ["system", "n", *metric_headers, "index notes/s", "q p50 ms", "q p95 ms", "status"]
