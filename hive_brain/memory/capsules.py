"""Brain capsules: exporting a chosen set of memories to one ``.hivebrain`` file, and opening, searching
and importing one. The file format (checksums, index, encryption) is :mod:`hive_brain.store.capsule`.

The rules: a capsule always has an explicit scope (a project or named memory ids), holds current
memories only, and never carries a secret (text is scrubbed on the way out). Private and task layers
leave only when the owner names them (``include_private``); only the owner locks (encrypts) a capsule
or opens a locked one: agents trade unlocked capsules of shared notes. An import never writes memory:
it previews, or queues Brain Review proposals (kind ``import``) for the owner to decide.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import CapsuleRefused, NoteError, NotFound, Refused, UsageError
from ..store import capsule as fmt
from ..store.catalog import Entry
from ..store.fsutil import atomic_write_bytes
from ..store.notes import content_hash, new_ulid, read_note, render, to_text_list
from ..store.secrets import scrub
from .layers import PRIVATE, SHARED, TASK, require_owner
from .model import MemoryInput
from .patterns import parse_since
from .proposals import build_proposal, proposal_entries
from .store import MemoryStore

SUFFIX = ".hivebrain"


def passphrase_from_env(var: str | None) -> str | None:
    """The passphrase in environment variable ``var`` (None when no variable is named); refuses an
    unset or empty one rather than writing or trying an unlocked capsule."""
    if var is None:
        return None
    value = os.environ.get(var)
    if value is None:
        raise UsageError(f"--passphrase-env {var}: that environment variable is not set",
                         hint=f"set it first, e.g. read -s {var}; export {var}; the passphrase is never taken as an argument")
    if not value:
        raise UsageError(f"--passphrase-env {var}: that environment variable is empty", hint="set it to the passphrase")
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hive-brain")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _generation(store: MemoryStore) -> int | None:
    from ..index.generations import GenerationStore

    return GenerationStore(store.vault.state).pointer()


def _select(store: MemoryStore, project: str | None, memory_ids: list[str], include_private: bool) -> tuple[list[Entry], int]:
    """(entries to export, private/task memories left out of the project scope)."""
    cat = store.catalog
    allowed = {SHARED, PRIVATE, TASK} if include_private else {SHARED}
    if memory_ids:
        chosen: list[Entry] = []
        for mid in memory_ids:
            e = cat.by_id(mid)
            if e is None or e.kind != "memory" or (e.layer != SHARED and not include_private):
                if e is not None and e.kind == "memory" and not store.agent:
                    raise Refused(f"{mid} is in a {e.layer} layer; private and task memories leave only when named",
                                  hint="add --include-private to export it")
                raise NotFound(f"no shared memory with id {mid!r}", hint="find ids with `hive-brain recall ... --json`")
            if e.status != "active":
                raise Refused(f"{mid} is {e.status}; a capsule carries current memories only",
                              hint=f"export its current version{(' ' + e.next_id) if e.next_id else ''}")
            if e.problem:
                raise NoteError(e.path, e.problem, hint="fix the note by hand, or leave it out")
            if e not in chosen:
                chosen.append(e)
        return chosen, 0
    rows = [e for e in cat.memories() if e.status == "active" and not e.problem
            and str(e.meta.get("project") or "").strip() == project]
    kept = [e for e in rows if e.layer in allowed]
    return kept, len(rows) - len(kept)


def _record(store: MemoryStore, e: Entry) -> tuple[dict[str, Any], int]:
    """The capsule record of ``e`` with every secret scrubbed, and how many fields that changed."""
    note = read_note(store.vault.root / e.path, e.path, max_bytes=store.settings.max_note_bytes, scrub=True)
    if note.problem:
        raise NoteError(e.path, note.problem, hint="fix the note by hand, or leave it out")
    m = note.meta
    content = note.body.strip("\n")
    title = scrub(e.title)
    tags = [scrub(t) for t in to_text_list(m.get("tags"))]
    aliases = [scrub(a) for a in to_text_list(m.get("aliases"))]
    redacted = int(bool(note.extra.get("secrets")))
    conf = m.get("confidence")
    rec = {
        "memory_id": e.id, "memory_key": e.memory_key or None, "type": str(m.get("type") or "note"),
        "title": title, "project": str(m.get("project") or "") or None, "layer": e.layer,
        "agent": e.agent or None, "task": e.task or None, "tags": json.dumps(tags, ensure_ascii=False),
        "aliases": json.dumps(aliases, ensure_ascii=False),
        "confidence": float(conf) if isinstance(conf, int | float) and not isinstance(conf, bool) else None,
        "created": str(m.get("created") or "") or None, "updated": str(m.get("updated") or "") or None,
        "content": content, "content_hash": content_hash(content),
    }
    return rec, redacted


def export_capsule(store: MemoryStore, output: Path, *, project: str | None = None, memory_ids: list[str] | None = None,
                   include_private: bool = False, expires: str | None = None, passphrase: str | None = None,
                   force: bool = False, now: dt.datetime | None = None) -> dict[str, Any]:
    """Write the capsule of the memories in scope to ``output``; never "everything" by default."""
    memory_ids = [m.strip() for m in memory_ids or [] if m.strip()]
    project = (project or "").strip() or None
    if not project and not memory_ids:
        raise UsageError("a capsule needs an explicit scope; nothing was exported",
                         hint="name it: --project NAME or --memory-ids ID,ID")
    if project and memory_ids:
        raise UsageError("give one scope: --project or --memory-ids, not both")
    if passphrase is not None:
        if not passphrase:
            raise UsageError("the passphrase is empty", hint="set the variable --passphrase-env names")
        require_owner(store.settings, "locking a capsule", always=True)
    if include_private:
        require_owner(store.settings, "exporting private or task memories", always=True)
    output = Path(output)
    if output.suffix != SUFFIX:
        raise UsageError(f"{output}: a capsule's name ends in {SUFFIX}", hint=f"e.g. --output {output.stem}{SUFFIX}")
    if output.exists() and not force:
        raise Refused(f"{output} already exists; nothing was written", hint="choose another --output, or add --force")
    now = now or dt.datetime.now(dt.UTC)
    expires_at = parse_since(expires, now=now, ahead=True, option="--expires")
    if expires_at and expires_at <= _iso(now):
        raise UsageError(f"--expires {expires!r} is already past", hint="give an age like 30d or a future date")

    store.catalog.refresh()
    entries, left_out = _select(store, project, memory_ids, include_private)
    if not entries:
        raise UsageError(f"nothing to export: no current memory in project {project!r}" if project
                         else "nothing to export", hint="check the project name with `hive-brain browse`")
    records, redacted = [], 0
    for e in entries:
        rec, n = _record(store, e)
        records.append(rec)
        redacted += n
    manifest = {
        "capsule_id": "cap-" + new_ulid().lower(),
        "created": _iso(now),
        "expires": expires_at,
        "vault_id": store.vault.vault_id,
        "generation": _generation(store),
        "exporter": store.agent or "owner",
        "hive_brain_version": _version(),
        "scope": {"project": project, "memory_ids": memory_ids or None, "include_private": include_private},
        "encrypted": passphrase is not None,
    }
    data = fmt.build(records, manifest)
    if passphrase is not None:
        data = fmt.lock(data, passphrase, header_extra={"expires": expires_at})
    atomic_write_bytes(output, data)
    res: dict[str, Any] = {"status": "exported", "capsule": str(output), "capsuleId": manifest["capsule_id"],
                           "records": len(records), "bytes": len(data), "encrypted": passphrase is not None,
                           "expires": expires_at, "secretsRedacted": redacted}
    if project and not store.agent:
        res["privateLeftOut"] = left_out  # the owner's view; an agent is not told about others' layers
    return res


def read_capsule(settings: Settings, path: Path, *, passphrase: str | None = None,
                 now: dt.datetime | None = None) -> fmt.Capsule:
    """Open and verify a capsule file (the owner alone opens a locked one)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NotFound(f"no capsule at {path}", hint="give the .hivebrain file with --capsule") from None
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    if fmt.is_locked(data):
        require_owner(settings, "opening a locked capsule", always=True)
    return fmt.load(data, passphrase=passphrase, now=now)


def _camel(d: dict[str, Any]) -> dict[str, Any]:
    return {k.split("_")[0] + "".join(w.title() for w in k.split("_")[1:]): (_camel(v) if isinstance(v, dict) else v)
            for k, v in d.items()}


def describe(cap: fmt.Capsule, path: Path, now: dt.datetime | None = None) -> dict[str, Any]:
    """What ``capsule-open`` shows: manifest, provenance, verification and expiry."""
    m = cap.manifest
    now = now or dt.datetime.now(dt.UTC)
    left = None
    when = fmt.expiry_time(m) if m.get("expires") else None
    if when is not None:
        secs = (when - now).total_seconds()
        left = f"{int(secs // 86400)}d {int(secs % 86400 // 3600)}h"
    layers: dict[str, int] = {}
    for r in cap.records:
        layers[r["layer"]] = layers.get(r["layer"], 0) + 1
    return {
        "capsule": str(path), "capsuleId": m.get("capsule_id"), "bytes": cap.size, "encrypted": cap.encrypted,
        "verified": True, "checks": cap.checks,
        "provenance": {"vaultId": m.get("vault_id"), "generation": m.get("generation"), "exporter": m.get("exporter"),
                       "created": m.get("created"), "hiveBrainVersion": m.get("hive_brain_version")},
        "scope": _camel(m.get("scope") or {}),
        "expiry": {"expires": m.get("expires"), "expired": False, "remaining": left},
        "manifest": {"format": m.get("format"), "formatVersion": m.get("format_version"),
                     "recordCount": m.get("record_count"), "recordsSha256": m.get("records_sha256")},
        "layers": layers,
        "records": [{"memoryId": r["memory_id"], "type": r["type"], "title": r["title"], "project": r["project"],
                     "layer": r["layer"], "sha256": r["record_sha256"]} for r in cap.records],
    }


def search_capsule(cap: fmt.Capsule, query: str, limit: int = 10) -> dict[str, Any]:
    if not query.strip():
        raise UsageError("the query is empty", hint='e.g. hive-brain capsule-search "deploy" --capsule atlas.hivebrain')
    hits = [{"memoryId": h["memory_id"], "title": h["title"], "type": h["type"], "project": h["project"],
             "score": h["score"], "snippet": h["snippet"]} for h in cap.search(query, limit)]
    return {"query": query, "capsuleId": cap.manifest.get("capsule_id"), "hits": hits}


def _json_list(value: Any) -> list[Any]:
    try:
        v = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return []
    return v if isinstance(v, list) else []


def _plan(store: MemoryStore, cap: fmt.Capsule) -> list[dict[str, Any]]:
    """Per record: what an import would propose, and whether the memory already exists here (same
    memory_key or same content in shared memory) or is already waiting in Brain Review."""
    cat = store.catalog
    pending = {e.content_hash: e.id for e in proposal_entries(cat, "pending")}
    plan = []
    for r in cap.records:
        content = scrub(r["content"])  # a capsule made elsewhere is not trusted to be clean
        h = content_hash(content)
        inp = MemoryInput(type=str(r["type"]), title=scrub(str(r["title"])), content=content,
                          memory_key=r["memory_key"], project=r["project"],
                          tags=[scrub(str(t)) for t in _json_list(r["tags"])],
                          aliases=[scrub(str(a)) for a in _json_list(r["aliases"])], confidence=r["confidence"])
        try:
            # A capsule is untrusted input: each record meets the rules every write meets (text, type,
            # sizes, secrets) before it may become a proposal.
            store._validate(inp)
        except (UsageError, Refused) as e:
            plan.append({"memoryId": r["memory_id"], "type": r["type"], "title": inp.title, "memoryKey": r["memory_key"],
                         "project": r["project"], "layer": r["layer"], "redacted": False, "exists": None,
                         "evolves": None, "action": "refused", "reason": e.message, "_inp": None})
            continue
        same_content = next((e for e in cat.by_content_hash(h)
                             if e.kind == "memory" and e.layer == SHARED and e.status == "active"), None)
        same_key = next((e for e in cat.by_key(r["memory_key"])
                         if e.kind == "memory" and e.layer == SHARED and e.status == "active"), None) \
            if r["memory_key"] else None
        item: dict[str, Any] = {"memoryId": r["memory_id"], "type": inp.type, "title": inp.title,
                                "memoryKey": r["memory_key"], "project": r["project"], "layer": r["layer"],
                                "redacted": content != r["content"], "exists": None, "evolves": None}
        if same_content is not None:
            item.update(action="skip", exists={"by": "content", "id": same_content.id},
                        reason=f"already in shared memory as {same_content.id} (same content)")
        elif h in pending:
            item.update(action="skip", reason=f"an identical proposal is already waiting: {pending[h]}")
        elif same_key is not None:
            item.update(action="propose", exists={"by": "memoryKey", "id": same_key.id}, evolves=same_key.id,
                        reason=f"{same_key.id} has the same memory_key: the proposal would evolve it")
        else:
            item.update(action="propose", reason="new to this vault")
        item["_inp"] = inp
        plan.append(item)
    return plan


def import_capsule(store: MemoryStore, cap: fmt.Capsule, *, enqueue: bool = False) -> dict[str, Any]:
    """Preview (default) or queue, as Brain Review proposals of kind ``import``, the capsule's memories.
    Never writes a memory: the owner approves and applies each proposal."""
    m = cap.manifest
    source = f"capsule {m.get('capsule_id')} (vault {m.get('vault_id')}, exported by {m.get('exporter')} at {m.get('created')})"
    if not enqueue:
        store.catalog.refresh()
        plan = _plan(store, cap)
    else:
        with store.transaction("capsule import") as tx:
            plan = _plan(store, cap)
            taken: set[str] = set()
            for item, rec in zip(plan, cap.records, strict=True):
                if item["action"] != "propose":
                    continue
                inp = item["_inp"]
                fields = {"type": inp.type, "title": inp.title, "memory_key": inp.memory_key, "project": inp.project,
                          "tags": inp.tags or None, "aliases": inp.aliases or None, "confidence": inp.confidence}
                path, meta, _text = build_proposal(
                    kind="import", proposed_by=store.agent or "owner", fields=fields, content=inp.content,
                    reason=f"imported from {source}" + (f"; would evolve {item['evolves']}" if item["evolves"] else ""),
                    sources=[f"capsule:{m.get('capsule_id')}#{rec['memory_id']}"], evolves=item["evolves"],
                    taken=taken, exists=lambda q: store.vault.abs(q).exists())
                meta["capsule"] = m.get("capsule_id")
                tx.write(path, render(meta, inp.content), expect_old="")
                item.update(action="proposed", proposal=meta["id"], path=path)
    for item in plan:
        item.pop("_inp", None)
    counts: dict[str, int] = {}
    for item in plan:
        counts[item["action"]] = counts.get(item["action"], 0) + 1
    return {"capsuleId": m.get("capsule_id"), "dryRun": not enqueue, "counts": counts, "records": plan,
            "hint": None if enqueue else "a preview: nothing was written; --enqueue queues the proposals for Brain Review"}


__all__ = ["CapsuleRefused", "describe", "export_capsule", "import_capsule", "passphrase_from_env", "read_capsule",
           "search_capsule"]
