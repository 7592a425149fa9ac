"""An approved workflow as an agent skill: ``Skills/<name>/SKILL.md`` in the vault.

One agent's routine becomes every agent's: a ``pattern`` proposal that ``mine-patterns`` queued for a
workflow or routine (a ``procedure``), once the owner approved it (and, usually, applied it as a
``procedure`` memory with ``review apply``), is written in the Agent Skills format that Claude Code
and Codex load: YAML front matter with ``name`` (lower-case letters, digits and hyphens, at most 64,
the folder's name) and ``description`` (what it does and when to use it, at most 1,024 characters),
then the steps. Where it came from goes under ``metadata`` (the standard's place for a tool's own
keys), which is also how a later run knows the file is its own.

A skill is never written over one that hive-brain did not write from this proposal: the user's own
skills (and the ones the vault template ships) are theirs. The file is not indexed (``index.indexer``:
``SKIP_GLOBS``): recall finds the workflow once, as the procedure memory. Linking it into an agent's
skill folder is :mod:`hive_brain.agents.skills`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import Refused, UsageError
from ..store.fsutil import sha256_bytes
from ..store.notes import parse_text, render, slugify
from .layers import require_owner
from .store import MemoryStore

SKILLS_DIR = "Skills"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
NAME_OK = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
ORIGIN = "hive-brain"


def skill_path(name: str) -> str:
    return f"{SKILLS_DIR}/{name}/SKILL.md"


def check_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > MAX_NAME or not NAME_OK.fullmatch(name):
        raise UsageError(f"skill name {name!r} is not lower-case letters, digits and single hyphens (at most "
                         f"{MAX_NAME})", hint="e.g. --name deploy-web")
    return name


def default_name(meta: dict[str, Any]) -> str:
    key = str(meta.get("pattern") or "").split(":", 1)[-1] or str(meta.get("title") or "workflow")
    name = slugify(key.replace("->", " ").replace(".", " "), MAX_NAME).replace("_", "-")
    name = re.sub(r"[^a-z0-9-]+", "-", name.lower())
    return re.sub(r"-+", "-", name).strip("-")[:MAX_NAME].strip("-") or "workflow"


def _description(meta: dict[str, Any], body: str) -> str:
    steps = re.findall(r"^\s*\d+\.\s+`([^`]+)`", body, re.MULTILINE)
    title = str(meta.get("title") or "A routine")
    if steps:
        text = (f"{title}: the steps agents ran, in order, when doing {steps[0]}. Use when a task involves "
                f"{', '.join(steps)}.")
    else:
        key = str(meta.get("pattern") or "").split(":", 1)[-1]
        text = f"{title}. Use when a task involves {key or title}."
    text += " Mined from agents' operations by hive-brain and approved by the vault owner."
    return " ".join(text.split())[:MAX_DESCRIPTION]


def write_skill(store: MemoryStore, review_id: str, *, name: str | None = None,
                check: Callable[[Path], None] | None = None) -> dict[str, Any]:
    """Write an approved (or applied) workflow/routine proposal as ``Skills/<name>/SKILL.md``, in one unit
    of work. Rewriting the same proposal's skill is allowed (it may have been edited before approval);
    any other file at that path is refused. ``check(skill_dir)`` runs before anything is written (the
    links asked for must be free: a refused link leaves no skill behind)."""
    from .review import BrainReview

    require_owner(store.settings, "writing skills from Brain Review proposals", always=True)
    with store.transaction("review skill") as tx:
        p = BrainReview(store)._get(review_id)
        meta = p.meta
        if meta.get("kind") != "pattern" or str(meta.get("type") or "") != "procedure":
            raise Refused(f"{p.id} is a {meta.get('kind')} proposal of a {meta.get('type')}; only a workflow or "
                          "routine that mine-patterns proposed becomes a skill",
                          hint="list them with `hive-brain review list` (kind pattern, type procedure)")
        if p.status not in ("approved", "applied"):
            raise Refused(f"{p.id} is {p.status}; only an approved proposal becomes a skill",
                          hint=f"approve it first: `hive-brain review approve {p.id}`")
        skill = check_name(name) if name else default_name(meta)
        path = skill_path(skill)
        target = store.vault.abs(path)
        expect_old = ""
        if target.exists():
            raw = target.read_bytes()
            old = parse_text(path, raw.decode("utf-8", errors="replace"))
            ours = (old.meta.get("metadata") or {}) if isinstance(old.meta.get("metadata"), dict) else {}
            if ours.get("hive-brain-review") != p.id:
                raise Refused(f"{path} already exists and is not this proposal's skill; hive-brain never "
                              "overwrites a skill", hint="pick another name with --name")
            expect_old = sha256_bytes(raw)
        if check is not None:
            check(target.parent)
        front = {
            "name": skill,
            "description": _description(meta, p.body),
            "metadata": {"origin": ORIGIN, "hive-brain-review": p.id,
                         "hive-brain-pattern": str(meta.get("pattern") or ""),
                         "applied-memory": str(meta.get("applied_memory") or "")},
        }
        body = (f"# {meta.get('title') or skill}\n\n{p.body.strip()}\n\n"
                f"_Written by hive-brain from Brain Review proposal `{p.id}`"
                + (f" (memory `{meta['applied_memory']}`)" if meta.get("applied_memory") else "")
                + ". Change the workflow there; this file is rewritten from it._\n")
        tx.write(path, render(front, body), expect_old=expect_old or "")
    return {"status": "written", "proposal": p.id, "name": skill, "path": path, "dir": str(target.parent),
            "rewritten": bool(expect_old)}
