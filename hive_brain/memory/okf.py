"""Open Knowledge Format (OKF) v0.1: export shared, current notes as a bundle, and validate bundles.

The spec is GoogleCloudPlatform/knowledge-catalog ``okf/SPEC.md`` at "Version 0.1 — Draft": a bundle is
a directory tree of Markdown concept files, each with YAML frontmatter holding a non-empty ``type``
(recommended: ``title``, ``description``, ``resource``, ``tags``, ``timestamp``); ``index.md`` and
``log.md`` are reserved at every level; ``.okfignore`` at the root lists ``.md`` files that are not
concepts; a concept's id is its path without ``.md``. Conformance (§9): every concept has parseable
frontmatter with a non-empty ``type``; an ``index.md`` carries no frontmatter except the root one's
single ``okf_version`` key; a ``log.md`` uses ``YYYY-MM-DD`` date headings.

What leaves: shared memories and conversations that are current (the catalog's derived status, not the
note's own: a stale ``active`` that another memory supersedes stays behind), never private or task
notes, never a sync copy, always scrubbed of secrets. Each concept file is named after its note's
title plus a short code from its memory id (a conversation: its session id), so two notes sharing a
title get two files, each under the same name on every export.

The default bundle lives inside the vault (:data:`~hive_brain.store.vault.OKF_EXPORT_DIR`), is skipped
by the indexer (its notes are indexed where they live) and is kept current by the server:
:func:`prune_default` drops the concepts whose note is gone, archived or superseded after each
catch-up that published a new generation. A manifest (``.hive-brain-okf.json``, a dot file, so neither
OKF nor Obsidian reads it) records which files an export wrote, so a later export or prune removes
only its own files and never touches anything else.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import NoteError, Refused, UsageError
from ..store.catalog import Catalog, Entry
from ..store.fsutil import atomic_write_text
from ..store.notes import date_of, memory_filename, parse_bytes, read_note, slugify, to_text_list
from ..store.vault import OKF_EXPORT_DIR, Vault

OKF_VERSION = "0.1"
MANIFEST = ".hive-brain-okf.json"
MANIFEST_FORMAT = 1
RESERVED = ("index.md", "log.md")
INCLUDES: dict[str, tuple[str, ...]] = {
    "agent-memory": ("memory",),
    "conversations": ("conversation",),
    "all": ("memory", "conversation"),
}
FOLDERS = {"memory": "agent-memory", "conversation": "conversations"}  # one sub-folder per kind of note
SECTIONS = {"memory": "Agent Memory", "conversation": "Conversations"}
RETIRED = ("superseded", "archived")
DESCRIPTION_CHARS = 200
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # the C emitter: 10x faster on 1,000 concepts


# -- what leaves ---------------------------------------------------------------------------------
def is_current(e: Entry, kinds: Iterable[str] = ("memory", "conversation")) -> bool:
    """A shared note of an exported kind that is its id's head and neither superseded nor archived
    (derived status, read from the whole chain: ``store.catalog.Catalog.derive``)."""
    return (e.kind in kinds and e.layer == "shared" and not e.copy_of and e.problem is None
            and e.status not in RETIRED)


def exportable(catalog: Catalog, include: str) -> list[Entry]:
    kinds = INCLUDES[include]
    marks = ",".join("?" * len(kinds))
    rows = catalog.select(f"kind IN ({marks}) AND layer = 'shared' AND copy_of = '' AND problem IS NULL", kinds)
    return sorted((e for e in rows if is_current(e, kinds)), key=lambda e: e.path)


def _source(e: Entry) -> str:
    """What identifies the note across renames: its memory id, a conversation's session id, else its path."""
    return e.id or str(e.meta.get("session_id") or "") or e.path


def concept_path(e: Entry) -> str:
    """``<folder>/<title slug>-<code>.md``: the code comes from the memory id (or session id), so the
    name is the same on every export while the title is."""
    src = _source(e)
    code_from = src if src != e.path else hashlib.sha256(src.encode("utf-8")).hexdigest()
    return f"{FOLDERS[e.kind]}/{memory_filename(e.title, code_from)}"


def _resource(e: Entry) -> str:
    if e.id:
        return f"hive-brain:memory/{e.id}"
    sid = str(e.meta.get("session_id") or "")
    return f"hive-brain:conversation/{sid}" if sid else f"hive-brain:note/{e.path}"


def _timestamp(meta: dict[str, Any]) -> str | None:
    for k in ("updated", "date", "created"):
        d = date_of(meta.get(k))
        if d is not None:
            return d.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return None


_MARKUP = re.compile(r"[*_`>#]+|\[\[([^\]|]*\|)?|\]\]")


def describe(body: str) -> str:
    """One line for ``description``: the body's first line of prose, without Markdown markup."""
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith(("#", "---", "```")):
            continue
        s = " ".join(_MARKUP.sub("", s).split())
        s = re.sub(r"^(User|Assistant):\s*", "", s)
        if not s:
            continue
        if len(s) > DESCRIPTION_CHARS:
            s = s[:DESCRIPTION_CHARS].rsplit(" ", 1)[0].rstrip(",.;:") + "…"
        return s
    return ""


def _concept_type(e: Entry) -> str:
    if e.kind == "conversation":
        return "Conversation"
    t = str(e.meta.get("type") or "memory").strip()
    return t[:1].upper() + t[1:]


def render_concept(vault: Vault, e: Entry) -> tuple[str, str]:
    """(the concept file of one note: OKF frontmatter, then the note's body, secrets scrubbed; its
    description)."""
    note = read_note(vault.root / e.path, e.path, scrub=True)
    meta = note.meta  # scrubbed like the body
    fm: dict[str, Any] = {"type": _concept_type(e), "title": note.title}
    desc = describe(note.body)
    if desc:
        fm["description"] = desc
    fm["resource"] = _resource(e)
    tags = to_text_list(meta.get("tags"))
    if tags:
        fm["tags"] = tags
    ts = _timestamp(meta)
    if ts:
        fm["timestamp"] = ts
    # Extensions (OKF allows any): where it came from, in this vault's terms.
    extra = {"memory_type": meta.get("type") if e.kind == "memory" else None, "project": meta.get("project"),
             "agent": meta.get("agent") if e.kind == "conversation" else None,
             "confidence": meta.get("confidence"), "source_note": e.path}
    fm.update({k: v for k, v in extra.items() if v not in (None, "", [])})
    fm = json.loads(json.dumps(fm, default=str))  # dates and odd YAML values as plain strings
    head = yaml.dump(fm, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000)
    body = note.body.lstrip("\n")
    return f"---\n{head}---\n\n{body if body.endswith(chr(10)) else body + chr(10)}", desc


def _index_text(concepts: dict[str, dict]) -> str:
    """The root ``index.md``: the version (its one permitted key), then one section per kind."""
    out = ["---", f'okf_version: "{OKF_VERSION}"', "---", ""]
    by_kind: dict[str, list[tuple[str, dict]]] = {}
    for path, c in concepts.items():
        by_kind.setdefault(c["kind"], []).append((path, c))
    for kind in ("memory", "conversation"):
        rows = sorted(by_kind.get(kind, []), key=lambda pc: (pc[1]["title"].lower(), pc[0]))
        if not rows:
            continue
        out += [f"# {SECTIONS[kind]}", ""]
        for path, c in rows:
            title = re.sub(r"([\[\]\\])", r"\\\1", c["title"])
            desc = f" - {c['description']}" if c.get("description") else ""
            out.append(f"* [{title}]({path}){desc}")
        out.append("")
    if len(out) == 4:
        out += ["Nothing is exported yet.", ""]
    return "\n".join(out)


# -- the bundle on disk --------------------------------------------------------------------------
@dataclass
class Bundle:
    root: Path
    manifest: dict[str, Any]

    @property
    def concepts(self) -> dict[str, dict]:
        return self.manifest.setdefault("concepts", {})


def _load_manifest(root: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"format": MANIFEST_FORMAT, "concepts": {}}  # damaged: rebuilt by the export that follows
    return data if isinstance(data, dict) and isinstance(data.get("concepts"), dict) else \
        {"format": MANIFEST_FORMAT, "concepts": {}}


def _write_if_changed(path: Path, text: str) -> bool:
    try:
        if path.read_text(encoding="utf-8") == text:
            return False  # no write, no file event: the server's watcher stays quiet
    except (OSError, UnicodeDecodeError):
        pass
    # Whole or not at all (a reader never sees half a concept), but not fsynced: a copy lost to a power
    # cut is rewritten by the next export, which compares every file.
    atomic_write_text(path, text, durable=False)
    return True


def _remove(root: Path, rel: str) -> None:
    p = root / rel
    try:
        p.unlink()
    except FileNotFoundError:
        pass
    d = p.parent
    while d != root and d.is_dir() and root in d.parents:
        try:
            d.rmdir()  # only when empty
        except OSError:
            break
        d = d.parent


def _save(bundle: Bundle) -> None:
    _write_if_changed(bundle.root / "index.md", _index_text(bundle.concepts))
    _write_if_changed(bundle.root / MANIFEST, json.dumps(bundle.manifest, indent=2, ensure_ascii=False) + "\n")


def _resolve_output(vault: Vault, output: str | os.PathLike | None) -> tuple[Path, bool]:
    """(bundle dir, is it the default one). A folder inside the vault other than the default is refused:
    its copies would be indexed beside the notes they copy."""
    default = vault.root / OKF_EXPORT_DIR
    if output is None:
        return default, True
    root = Path(output).expanduser().resolve()
    if root == default:
        return root, True
    if root == vault.root or vault.root in root.parents:
        raise UsageError(f"{root} is inside the vault, where every exported copy would be indexed a second time",
                         hint=f"leave out --output (the default is {OKF_EXPORT_DIR}/) or pick a folder outside the vault")
    if root in vault.root.parents:
        raise UsageError(f"{root} holds the vault itself", hint="pick an empty folder outside the vault")
    return root, False


def export(vault: Vault, catalog: Catalog, *, include: str = "agent-memory", output: str | os.PathLike | None = None,
           clean: bool = False, generator: str = "hive-brain") -> dict[str, Any]:
    """Write (or bring up to date) an OKF bundle of the shared, current notes. The caller holds the
    vault lock and has refreshed ``catalog``. Only files inside the bundle change; files an earlier
    export wrote that this one does not are removed, and ``clean`` also removes every other ``.md``
    file there (hand-added ones)."""
    if include not in INCLUDES:
        raise UsageError(f"unknown --include {include!r}", hint=f"one of {', '.join(INCLUDES)}")
    root, is_default = _resolve_output(vault, output)
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root} is a file, not a folder", hint="pick a folder for the bundle")
    old = _load_manifest(root) if root.is_dir() else None
    if old is None and root.is_dir() and not is_default and any(root.iterdir()):
        raise Refused(f"{root} is not empty and holds no earlier hive-brain export; nothing was written",
                      hint="pick a new or empty folder (an export replaces index.md and removes files it wrote before)")
    entries = exportable(catalog, include)
    concepts: dict[str, dict] = {}
    written = unchanged = 0
    seen_names: dict[str, str] = {}
    for e in entries:
        rel = concept_path(e)
        if rel in seen_names:
            # Two notes whose title slug and short code collide: the longer code keeps them apart.
            digest = hashlib.sha256(_source(e).encode("utf-8")).hexdigest()[:10]
            rel = f"{FOLDERS[e.kind]}/{slugify(e.title)}-{digest}.md"
        seen_names[rel] = e.path
        try:
            text, desc = render_concept(vault, e)
        except NoteError:
            continue  # unreadable since the catalog looked: the next export takes it
        if _write_if_changed(root / rel, text):
            written += 1
        else:
            unchanged += 1
        concepts[rel] = {"source": _source(e), "path": e.path, "kind": e.kind, "title": e.title,
                         "description": desc}
    removed = [rel for rel in sorted((old or {}).get("concepts", {})) if rel not in concepts]
    for rel in removed:
        _remove(root, rel)
    if clean and root.is_dir():
        for p in sorted(root.rglob("*.md")):
            rel = p.relative_to(root).as_posix()
            if rel not in concepts and rel != "index.md" and not any(x.startswith(".") for x in Path(rel).parts):
                _remove(root, rel)
                removed.append(rel)
    root.mkdir(parents=True, exist_ok=True)
    bundle = Bundle(root, {"format": MANIFEST_FORMAT, "okf_version": OKF_VERSION, "generator": generator,
                           "vault_id": vault.vault_id, "include": include, "concepts": concepts})
    _save(bundle)
    report = validate(root)
    return {"output": str(root), "default": is_default, "include": include, "concepts": len(concepts),
            "written": written, "unchanged": unchanged, "removed": removed, "valid": report["ok"],
            "problems": report["errors"]}


def prune(vault: Vault, catalog: Catalog, root: Path) -> list[str]:
    """Remove from the bundle at ``root`` the concepts whose note is deleted, archived, superseded,
    no longer shared, or a copy; returns their paths in the bundle. Cheap: one manifest read and
    one catalog query per concept; nothing is written when every concept is still current."""
    manifest = _load_manifest(root)
    if manifest is None:
        return []
    bundle = Bundle(root, manifest)
    gone = []
    for rel, c in sorted(bundle.concepts.items()):
        src, path = str(c.get("source") or ""), str(c.get("path") or "")
        e = catalog.by_id(src) if c.get("kind") == "memory" and src != path else None  # by id: moves keep it
        if e is None:
            found = catalog.by_paths([path]) if path else {}
            e = found.get(path)
        if e is None or not is_current(e) or (e.kind == "conversation" and src != _source(e)):
            gone.append(rel)
    if gone:
        for rel in gone:
            _remove(root, rel)
            bundle.concepts.pop(rel, None)
        _save(bundle)
    return gone


def prune_default(vault: Vault, catalog: Catalog) -> list[str]:
    """:func:`prune` of the default bundle inside the vault; nothing (one stat) when there is none."""
    root = vault.root / OKF_EXPORT_DIR
    if not (root / MANIFEST).is_file():
        return []
    return prune(vault, catalog, root)


# -- validation (any bundle) ---------------------------------------------------------------------
_DATE_HEADING = re.compile(r"^##\s+(.*?)\s*$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _okfignore(root: Path) -> list[str]:
    try:
        lines = (root / ".okfignore").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [s.strip() for s in lines if s.strip() and not s.strip().startswith("#")]


def _glob_re(pattern: str) -> re.Pattern[str]:
    """The gitignore-style subset of SPEC §3.2: ``*`` and ``?`` stay inside one segment, ``**`` spans any."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def ignored(rel: str, patterns: list[str]) -> bool:
    for pat in patterns:
        if pat.startswith("/"):
            if _glob_re(pat[1:]).match(rel):
                return True
        elif "/" not in pat:
            if fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], pat):
                return True
        elif _glob_re(pat).match(rel):
            return True
    return False


def _frontmatter(data: bytes, rel: str) -> tuple[dict[str, Any] | None, str | None, str]:
    """(frontmatter mapping or None when absent, problem, body)."""
    try:
        note = parse_bytes(rel, data)
    except NoteError as e:
        return None, e.problem, ""
    if note.problem:
        return None, note.problem, note.body
    if "frontmatter" not in note.extra:
        return None, None, note.body
    return note.meta, None, note.body


def validate(root: str | os.PathLike) -> dict[str, Any]:
    """Check a bundle against OKF v0.1 conformance (SPEC §9). ``errors`` make it non-conformant;
    ``warnings`` are the spec's soft guidance (never a reason to reject a bundle)."""
    base = Path(root).expanduser()
    if not base.is_dir():
        raise UsageError(f"{base} is not a folder", hint="give the bundle's folder, e.g. `hive-brain okf validate ./bundle`")
    patterns = _okfignore(base)
    errors: list[dict[str, str]] = []
    warnings: list[dict[str, str]] = []
    concepts: list[str] = []
    lower: dict[str, str] = {}
    files = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))  # .git and friends are not the bundle
        for name in sorted(filenames):
            if name.endswith(".md"):
                files.append(Path(dirpath, name).relative_to(base).as_posix())
    for rel in sorted(files):
        name = rel.rsplit("/", 1)[-1]
        try:
            data = (base / rel).read_bytes()
        except OSError as e:
            errors.append({"path": rel, "problem": f"cannot be read: {e.strerror}"})
            continue
        if name in RESERVED:
            _check_reserved(rel, name, data, errors)
            continue
        if ignored(rel, patterns):
            continue
        meta, problem, _body = _frontmatter(data, rel)
        if problem:
            errors.append({"path": rel, "problem": f"frontmatter does not parse: {problem}"})
            continue
        if meta is None:
            errors.append({"path": rel, "problem": "a concept must start with YAML frontmatter holding `type` "
                                                   "(or list the file in .okfignore)"})
            continue
        t = meta.get("type")
        if not isinstance(t, str) or not t.strip():
            errors.append({"path": rel, "problem": "frontmatter has no non-empty `type`"})
            continue
        cid = rel[:-3]
        concepts.append(cid)
        if cid.lower() in lower:
            warnings.append({"path": rel, "problem": f"differs from {lower[cid.lower()]}.md only in case"})
        lower.setdefault(cid.lower(), cid)
        for key in ("title", "description"):
            if not meta.get(key):
                warnings.append({"path": rel, "problem": f"no `{key}` (recommended)"})
    return {"ok": not errors, "okfVersion": OKF_VERSION, "bundle": str(base), "concepts": len(concepts),
            "errors": errors, "warnings": warnings}


def _check_reserved(rel: str, name: str, data: bytes, errors: list[dict[str, str]]) -> None:
    meta, problem, body = _frontmatter(data, rel)
    if name == "index.md":
        if problem:
            errors.append({"path": rel, "problem": f"index.md frontmatter does not parse: {problem}"})
        elif meta is not None:
            if "type" in meta:
                errors.append({"path": rel, "problem": "index.md is a reserved name (a directory listing) and cannot be "
                                                       "a concept; rename the file"})
            elif rel != "index.md" or set(meta) != {"okf_version"}:
                errors.append({"path": rel, "problem": "only the bundle-root index.md may carry frontmatter, and only "
                                                       "`okf_version`"})
        return
    if problem or meta is not None:
        what = "a concept" if meta and "type" in meta else "frontmatter"
        errors.append({"path": rel, "problem": f"log.md is a reserved name (an update log) and cannot hold {what}; "
                                               "rename the file"})
        return
    for line in body.splitlines():
        m = _DATE_HEADING.match(line)
        if m and not _ISO_DATE.match(m.group(1)):
            errors.append({"path": rel, "problem": f"log.md date heading {m.group(1)!r} is not YYYY-MM-DD"})
            return
