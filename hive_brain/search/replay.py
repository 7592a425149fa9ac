"""Replay: answer a question exactly as the engine would have at an old generation.

The generation's manifest names every note and its content hash; the bodies come from the object
store. A scratch index for that generation (lexical + note catalog, and vectors from the embedding
cache when the generation was indexed with the installed pack) is built once under
``<state>/replay/<id>/`` and reused. Nothing is re-embedded that was embedded before.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import GenerationCorrupt
from ..memory.layers import path_readable
from ..memory.ports import EngineLike
from ..store.catalog import CATALOG_VERSION, Catalog, classify
from ..store.fsutil import atomic_write_text
from ..store.notes import parse_bytes

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder
    from ..index.indexer import Indexer
    from ..index.vectors import VectorIndex
    from ..store.vault import Vault
    from .recall import View


class Replaying(EngineLike, Protocol):
    """What :func:`compare` asks of an engine: a view of an old generation too."""

    def view(self, *, generation: int | None = None) -> View: ...


def replay_parts(vault: Vault, idx: Indexer, gid: int, *, semantic: bool = True) -> dict[str, Any]:
    """The parts of a View of generation `gid` of `vault` (lexical, catalog, vectors, embedder and why
    semantic search is off), through `idx` (an Indexer: its generation store, pack and embedding
    cache). Callers go through :func:`.view.open_view` (``generation=gid``), which assembles them."""
    from ..index.indexer import build_docs
    from ..index.lexical import LexicalIndex

    gens = idx.gens
    man = gens.manifest(gid)  # verifies every receipt on the way
    g = gens.load(gid)
    rdir: Path = vault.state / "replay" / f"{gid:08d}"
    marker = rdir / "complete.json"
    same_pack = semantic and idx.vectors is not None and g.index.get("pack") == idx.pack_key
    ok = False
    if marker.exists():
        try:
            m = json.loads(marker.read_text())
            # A scratch catalog of another version is emptied when opened: build it again.
            ok = (m.get("notes_hash") == g.notes_hash and (m.get("vectors") or not same_pack)
                  and m.get("catalog") == CATALOG_VERSION)
        except (OSError, ValueError):
            ok = False
    if not ok:
        shutil.rmtree(rdir, ignore_errors=True)
        rdir.mkdir(parents=True)
        lex = LexicalIndex(rdir / "lexical")
        cat = Catalog(vault, db_path=rdir / "catalog.sqlite")
        vec_rows: list[dict] = []
        with lex.writer() as w:
            for path, sha in sorted(man.items()):
                data = gens.get_object(sha)
                note = parse_bytes(path, data, scrub=True)
                cat.put_note(note, 0, len(data))
                kind, layer, agent, task = classify(path, note.meta)
                docs, rows = build_docs(path, data, kind=kind, layer=layer, agent=agent, task=task)
                for d in docs:
                    w.add(d)
                vec_rows.extend(rows)
        if same_pack:
            from ..index.embcache import embed_with_cache

            vi, model = _scratch_vectors(rdir, idx)
            vecs = embed_with_cache(model, idx.embcache, {r["text_hash"]: r["_embed_text"] for r in vec_rows})
            vi.upsert([{**{k: v for k, v in r.items() if k != "_embed_text"}, "vector": vecs[r["text_hash"]]} for r in vec_rows])
        atomic_write_text(marker, json.dumps({"notes_hash": g.notes_hash, "vectors": bool(same_pack),
                                              "catalog": CATALOG_VERSION}))
    lex = LexicalIndex(rdir / "lexical")
    cat = Catalog(vault, db_path=rdir / "catalog.sqlite")
    vectors = embedder = None
    off = None
    if same_pack:
        vectors, embedder = _scratch_vectors(rdir, idx)
    elif semantic:
        off = "generation was indexed without the installed embedding pack: replayed lexically"
    return {"lexical": lex, "catalog": cat, "vectors": vectors, "embedder": embedder, "off_reason": off}


def _scratch_vectors(rdir: Path, idx: Indexer) -> tuple[VectorIndex, Embedder]:
    """The replay's vector table and the model its question is embedded with."""
    from ..index.vectors import VectorIndex

    key, manifest, model = idx.pack_key, idx.pack_manifest, idx.embedder
    # Called when the index has vectors (same_pack): a pack is installed.
    assert key is not None and manifest is not None and model is not None
    return VectorIndex(rdir / "vectors", key, int(manifest["dim"])), model


def compare(engine: Replaying, query: str, a: int, b: int | None, **opts: Any) -> dict:
    gens = engine.indexer.gens
    if b is None:
        b = gens.current_id()
        if b is None:
            raise GenerationCorrupt("there is no current generation", hint="run `hive-brain rebuild-index`")
    ma, mb = gens.manifest(a), gens.manifest(b)
    agent = engine.settings.agent_id
    # Only paths the caller may read: a private note's file name is its title.
    ma = {p: s for p, s in ma.items() if path_readable(p, agent)}
    mb = {p: s for p, s in mb.items() if path_readable(p, agent)}
    added = sorted(p for p in mb if p not in ma)
    removed = sorted(p for p in ma if p not in mb)
    changed = sorted(p for p in mb if p in ma and ma[p] != mb[p])
    opts.setdefault("detail", "abstract")  # only which notes answer is compared, not their text
    ra = engine.recall(query, view=engine.view(generation=a), **opts)
    rb = engine.recall(query, view=engine.view(generation=b), **opts)
    pa = [h["path"] for h in ra["hits"]]
    pb = [h["path"] for h in rb["hits"]]
    return {
        "query": query,
        "from": a,
        "to": b,
        "notes": {"added": added, "removed": removed, "changed": changed},
        "answer": {
            "entered": [p for p in pb if p not in pa],
            "left": [p for p in pa if p not in pb],
            "moved": [{"path": p, "from": pa.index(p) + 1, "to": pb.index(p) + 1} for p in pb if p in pa and pa.index(p) != pb.index(p)],
            "fromHits": [{"path": h["path"], "id": h["id"], "title": h["title"], "status": h["status"]} for h in ra["hits"]],
            "toHits": [{"path": h["path"], "id": h["id"], "title": h["title"], "status": h["status"]} for h in rb["hits"]],
            "fromAbstained": ra["abstained"],
            "toAbstained": rb["abstained"],
        },
    }
