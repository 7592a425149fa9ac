"""The prompt hook as installed, on prompts a developer types: does it speak only when it helps?

    python -m benchmarks.prompt_hook --sizes 0,500,3000 --work /tmp/promptwork   # build once, rerun fast
    python -m benchmarks.prompt_hook --sizes 0 --split tune --every 2             # a small smoke
    python -m benchmarks.prompt_hook --full --build-only --work /tmp/promptwork   # build the vaults, stop
    cp -a /tmp/promptwork /tmp/mine && python -m benchmarks.prompt_hook --full --work /tmp/mine

``python -m benchmarks.run`` runs it as a smoke only (the memories alone, every other tune prompt).

The data (``benchmarks/prompts/``, written for this benchmark): ``memories.json``, 63 typed memories of
one made-up team (Ferrywise, a ferry-ticketing product), 9 of them later evolved (the old text is
written with ``remember``, then ``evolve``d: the old version must never be injected); ``prompts.json``,
prompts in eleven styles, each labelled with the memory keys it needs (none for most chit-chat,
generic coding and near-domain questions), follow-ups with the previous assistant reply, and a
tune/held split stratified by style.

Each size is the memories alone (``0``) or with that many reference notes of
:mod:`benchmarks.prompt_refs` (the standard library's own documentation as Markdown notes). Per size,
in ``--work DIR/<size>/`` (kept and reused: the vectors of 3,000 notes take long to compute here; a
folder copied with ``cp -a`` to another place works the same):

1. build (once): ``init``, the reference notes, the memories through the engine's ``remember`` and
   ``evolve``, ``rebuild`` with vectors (the embedding pack of ``$HIVE_BRAIN_MODEL_DIR`` or the
   default installed one) and the reranker's read-ahead into the embedding cache; an embedding cache
   of a sibling size is copied in first (the notes they share are not embedded twice);
2. ``hive-brain serve`` for the vault, waited on until ready with no passages left to embed and its
   read-ahead done;
3. a fresh ``HOME`` made here, ``hive-brain hooks install --agent claude-code`` into it, and the
   ``UserPromptSubmit`` command it wrote run through ``sh -c`` with Claude Code's stdin JSON for every
   prompt (follow-ups get a real Claude Code JSONL transcript, ``transcript_path``, holding the user
   turn and the assistant reply);
4. what the hook injected (``additionalContext``) parsed into notes (in order) and characters, and
   the hook's own mode from its status file; a prompt the hook answered without the server (it missed
   the deadline on a loaded machine and fell back to in-process lexical recall) is asked again, at
   most twice, and its fallbacks kept in the record;
5. the baselines over the same notes (current versions: a superseded note is left out of their
   corpus): BM25 alone (tantivy, whole notes) and e5 alone (the pack's embedder, best passage cosine
   per note); each injects its top 1..3 notes scoring at least a threshold, the threshold chosen on
   the prompts themselves to maximise the balanced score below (an **oracle threshold**: no real
   system gets to pick it after seeing the answers).

Metrics (:func:`metrics`), for split tune, held and all, overall and per style: ``right`` (a needed
memory was injected, on prompts that need one), ``first`` (the first injected note is a needed
memory), ``quiet`` (nothing injected on prompts that need none; ``quiet_chitchat`` for chit-chat
alone), ``items``/``chars`` injected on average when something is, ``chars_per_nomem`` (characters per
no-memory prompt), ``old_injected`` (old versions of evolved memories injected, a count),
``followup_resolved`` (follow-ups needing a memory that got it), and ``balanced`` = (right + quiet) / 2.

The server started and the temp HOME are removed whatever happens. Writes
``benchmarks/results/prompt_hook.json`` with one record per prompt and size.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .common import (
    BenchConfig,
    load_average,
    log,
    print_table,
    running_server,
    standalone_main,
    summary_row,
    temp_dir,
    vault_dir,
    wait_server_idle,
)

NAME = "prompt_hook"
DATA = Path(__file__).parent / "prompts"
FULL_SIZES = (0, 500, 3000)
QUICK_SIZES = (0,)
TARGETS = {"quiet": 0.90, "quiet_chitchat": 1.0, "right": 0.90, "first": 0.80, "items": 1.5,
           "followup_resolved": 0.90, "old_injected": 0}
STYLES = ("imperative", "question", "error", "filepath", "typo", "oneword", "chitchat", "followup", "mixed",
          "coding", "neardomain")
BASELINE_KS = (1, 2, 3)
HOOK_TIMEOUT_S = 30.0
SERVER_MODES = ("hybrid", "skipped")  # the server answered (or the hook rightly skipped a slash command)
RETRIES = 2
PROMPT_FILES = ("prompts.json", "prompts_confirm.json")
SPLITS = ("tune", "held", "fresh", "confirm")


# --------------------------------------------------------------------------- data


def load_data() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The memories and every prompt: ``prompts.json`` (splits ``tune`` and ``held``) and
    ``prompts_confirm.json``, written blind from ``memories.json`` alone in stop 41 (split ``fresh``,
    its odd-numbered prompts, looked at from then on; ``confirm``, the even ones, kept blind)."""
    memories = json.loads((DATA / "memories.json").read_text(encoding="utf-8"))
    prompts: list[dict[str, Any]] = []
    for f in PROMPT_FILES:
        some = json.loads((DATA / f).read_text(encoding="utf-8"))
        check_data(memories, some, f)
        prompts += some
    check_data(memories, prompts)  # ids unique across the files too
    return memories, prompts


def check_data(memories: Sequence[Mapping[str, Any]], prompts: Sequence[Mapping[str, Any]],
               source: str = "prompts") -> None:
    """Labels that point nowhere or a style nobody declared fail loudly, before any vault is built."""
    keys = {m["key"] for m in memories}
    if len(keys) != len(memories):
        raise ValueError("memories.json: duplicate keys")
    ids: set[str] = set()
    for p in prompts:
        if p["id"] in ids:
            raise ValueError(f"{source}: duplicate id {p['id']}")
        ids.add(p["id"])
        if p["style"] not in STYLES:
            raise ValueError(f"{source}: {p['id']} has unknown style {p['style']!r}")
        if p["split"] not in SPLITS:
            raise ValueError(f"{source}: {p['id']} has split {p['split']!r}")
        missing = set(p["needs"]) - keys
        if missing:
            raise ValueError(f"{source}: {p['id']} needs unknown memories {sorted(missing)}")
        if p["style"] == "followup" and not p.get("transcript"):
            raise ValueError(f"{source}: follow-up {p['id']} has no transcript")


# --------------------------------------------------------------------------- the vault


def memory_key(m: Mapping[str, Any]) -> str:
    return f"{m['type']}/{m['key']}"


def _copy_sqlite(src: Path, dst: Path) -> None:
    """A consistent copy of a (possibly WAL-mode) SQLite file."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(f"file:{src}?mode=ro", uri=True) as s, sqlite3.connect(dst) as d:
        s.backup(d)


def _seed_embcache(work: Path, size: int, state: Path) -> str | None:
    """Copy a sibling size's embedding cache in (embeddings are keyed by pack and text hash)."""
    ours = state / "embcache.sqlite"
    if ours.exists():
        return None
    for sib in sorted(work.parent.glob("*/state/*/embcache.sqlite"), key=lambda p: -p.stat().st_size):
        if sib.parent != state:
            _copy_sqlite(sib, ours)
            return str(sib)
    return None


def _drop_stale_states(state: Path) -> list[str]:
    """State dirs of an earlier vault built at this path (another vault id): its cache is copied in by
    now and nothing reads them again."""
    gone = []
    for d in sorted(state.parent.iterdir()):
        if d != state and d.is_dir() and (d / "catalog.sqlite").exists():
            shutil.rmtree(d)
            gone.append(d.name)
    return gone


def build_vault(work: Path, size: int, memories: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The vault of ``work`` (reference notes + memories, indexed with vectors); its maps (key -> head
    path, key -> old paths, note titles) are written to ``work/maps.json`` last, so a build stopped
    half-way is redone."""
    from hive_brain.engine import Engine
    from hive_brain.memory.model import MemoryInput

    from .prompt_refs import write_refs
    from .smallvault import read_ahead
    from .systems import make_vault

    vault = work / "vault"
    if vault.exists():
        shutil.rmtree(vault)
    t0 = time.perf_counter()
    make_vault(vault)
    refs = write_refs(vault, size)
    eng = Engine.open(vault)
    head: dict[str, str] = {}
    old: dict[str, list[str]] = {}
    ids: dict[str, str] = {}
    for m in memories:
        r = eng.memory.remember(MemoryInput(type=m["type"], title=m["title"], content=m["content"],
                                            tags=list(m.get("tags") or []), memory_key=memory_key(m)))
        head[m["key"]], ids[m["key"]] = r["path"], r["id"]
    for m in memories:
        if m.get("evolve"):
            r = eng.memory.evolve(ids[m["key"]], m["evolve"])
            old[m["key"]] = [head[m["key"]]]
            head[m["key"]] = r["path"]
    t_write = time.perf_counter() - t0
    seeded = _seed_embcache(work, size, eng.vault.state)
    _drop_stale_states(eng.vault.state)
    log(f"prompt_hook: {size}: {refs['count']} reference notes and {len(memories)} memories written in "
        f"{t_write:.1f} s; embedding{' (cache from ' + seeded + ')' if seeded else ''} ...")
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        if time.perf_counter() - last[0] > 30 or done == total:
            last[0] = time.perf_counter()
            log(f"prompt_hook: {size}: {stage} {done:,}/{total:,}")

    t1 = time.perf_counter()
    res = eng.rebuild(progress=progress, embed=True)
    t_embed = time.perf_counter() - t1
    t2 = time.perf_counter()
    view = eng.view()
    ahead = read_ahead(eng, view)
    t_ahead = time.perf_counter() - t2
    titles = {}
    for p in sorted(vault.rglob("*.md")):
        rel = p.relative_to(vault).as_posix()
        if not any(x.startswith(".") for x in rel.split("/")):
            titles[rel] = _title_of(p)
    info = {"size": size, "notes": len(titles), "memories": len(memories), "evolved": len(old),
            "refs": {k: v for k, v in refs.items() if k != "paths"}, "rebuild": _brief(res),
            "write_s": round(t_write, 1), "embed_s": round(t_embed, 1), "read_ahead_s": round(t_ahead, 1),
            "read_ahead_passages": ahead, "embcache_seeded_from": seeded, "built": time.strftime("%Y-%m-%d %H:%M:%S")}
    maps = {"head": head, "old": old, "ids": ids, "titles": titles, "info": info}
    (work / "maps.json").write_text(json.dumps(maps, indent=1, ensure_ascii=False), encoding="utf-8")
    return maps


def _brief(res: Any) -> Any:
    if isinstance(res, dict):
        return {k: v for k, v in res.items() if isinstance(v, int | float | str | dict) and k != "paths"}
    return str(res)


def _title_of(path: Path) -> str:
    """A note's title as the engine shows it: frontmatter ``title``, else the first ``# `` heading, else
    the file name."""
    text = path.read_text(encoding="utf-8")
    m = re.search(r"^title:\s*(.+)$", text.split("\n---", 1)[0], re.M) if text.startswith("---") else None
    if m:
        return m.group(1).strip().strip("'\"")
    h = re.search(r"^# (.+)$", text, re.M)
    return h.group(1).strip() if h else path.stem


def open_or_build(d: Path, size: int, memories: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    maps_file = d / "maps.json"
    if maps_file.exists():
        maps = json.loads(maps_file.read_text(encoding="utf-8"))
        if [m["key"] for m in memories] == list(maps["ids"]):
            maps["info"]["reused"] = True
            return dict(maps)
        log(f"prompt_hook: {d} was built from other memories: rebuilding")
    return build_vault(d, size, memories)


# --------------------------------------------------------------------------- the hook as installed


def hive_brain_cli() -> list[str]:
    exe = Path(sys.executable).with_name("hive-brain")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "hive_brain"]


def install_hook(home: Path, vault: Path) -> tuple[str, dict[str, str]]:
    """``hive-brain hooks install --agent claude-code`` into ``home``; (the UserPromptSubmit command it
    wrote, the ``env`` block it wrote, which Claude Code passes to hooks too)."""
    env = {**os.environ, "HOME": str(home), "HIVE_BRAIN_VAULT": str(vault), "HIVE_BRAIN_AUTOSTART": "0"}
    r = subprocess.run([*hive_brain_cli(), "hooks", "install", "--agent", "claude-code", "--json"], env=env,
                       capture_output=True, text=True, timeout=120, cwd=home)
    if r.returncode != 0:
        raise RuntimeError(f"hooks install failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    settings = json.loads((home / ".claude" / "settings.json").read_text(encoding="utf-8"))
    groups = settings["hooks"]["UserPromptSubmit"]
    cmds = [h["command"] for g in groups for h in g.get("hooks", []) if "hook prompt" in h.get("command", "")]
    if len(cmds) != 1:
        raise RuntimeError(f"hooks install wrote {len(cmds)} prompt hooks into {home}/.claude/settings.json")
    return cmds[0], {k: str(v) for k, v in (settings.get("env") or {}).items()}


def write_transcript(folder: Path, p: Mapping[str, Any]) -> Path:
    """A Claude Code session file: the user's turn, then the assistant's reply (text blocks)."""
    path = folder / f"{p['id']}.jsonl"
    sid = f"bench-{p['id']}"
    turns = [
        {"type": "user", "sessionId": sid, "uuid": f"{sid}-u", "cwd": str(folder), "timestamp": "2026-01-05T10:00:00Z",
         "message": {"role": "user", "content": p.get("previous") or "go ahead"}},
        {"type": "assistant", "sessionId": sid, "uuid": f"{sid}-a", "parentUuid": f"{sid}-u", "cwd": str(folder),
         "timestamp": "2026-01-05T10:00:30Z",
         "message": {"role": "assistant", "model": "claude", "type": "message",
                     "content": [{"type": "text", "text": p["transcript"]}]}},
    ]
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in turns), encoding="utf-8")
    return path


def payload(p: Mapping[str, Any], cwd: Path, transcript: Path | None) -> str:
    doc = {"session_id": f"bench-{p['id']}", "hook_event_name": "UserPromptSubmit", "prompt": p["prompt"],
           "cwd": str(cwd), "permission_mode": "default"}
    if transcript is not None:
        doc["transcript_path"] = str(transcript)
    return json.dumps(doc, ensure_ascii=False)


_ITEM = re.compile(r"^### (.+)$", re.M)


def parse_context(ctx: str) -> list[dict[str, str]]:
    """The notes an ``additionalContext`` quotes, in order: ``### Title (type, date, id) — path``."""
    out: list[dict[str, str]] = []
    for m in _ITEM.finditer(ctx):
        line = m.group(1).strip()
        title, _, path = line.rpartition(" — ")
        if not title:
            title, path = line, ""
        title = re.sub(r" \([^()]*\)$", "", title).strip()
        out.append({"title": title, "path": path.strip()})
    return out


class NoteMap:
    """Which memory (or old version, or reference note) a path or title is."""

    def __init__(self, maps: Mapping[str, Any], root: Path | None = None) -> None:
        self.root = root
        self._texts: dict[str, str] = {}
        self.key_of_head = {p: k for k, p in maps["head"].items()}
        self.key_of_old = {p: k for k, ps in maps["old"].items() for p in ps}
        self.titles = dict(maps["titles"])
        self.path_of_title: dict[str, str] = {}
        for p, t in self.titles.items():
            self.path_of_title.setdefault(t, p)

    def item(self, path: str, title: str = "") -> dict[str, Any]:
        if not path or path not in self.titles:
            path = self.path_of_title.get(title, path)
        return {"path": path, "title": title or self.titles.get(path, ""), "key": self.key_of_head.get(path),
                "old": path in self.key_of_old, "oldOf": self.key_of_old.get(path)}

    def text(self, path: str) -> str:
        """What a baseline injects for a note: its whole text."""
        if path not in self._texts:
            self._texts[path] = (self.root / path).read_text(encoding="utf-8") if self.root else ""
        return self._texts[path]


def last_status(state_root: Path) -> dict[str, Any]:
    """The prompt hook's own record of its last run (``<state dir>/hooks/status.json``): its mode
    (hybrid, lexical-server, timeout, ...), items and duration."""
    try:
        doc = json.loads((state_root / "hooks" / "status.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    last = (doc.get("last") or {}).get("prompt") or {}
    return {k: last.get(k) for k in ("mode", "items", "durationMs", "serverMs", "ok", "session_id")}


def run_hook(command: str, env: Mapping[str, str], p: Mapping[str, Any], folder: Path,
             notes: NoteMap) -> dict[str, Any]:
    transcript = write_transcript(folder, p) if p.get("transcript") else None
    t0 = time.perf_counter()
    r = subprocess.run(["sh", "-c", command], input=payload(p, folder, transcript), env=dict(env), cwd=folder,
                       capture_output=True, text=True, timeout=HOOK_TIMEOUT_S)
    ms = (time.perf_counter() - t0) * 1000
    ctx = ""
    if r.returncode == 0 and r.stdout.strip():
        doc = json.loads(r.stdout.strip().splitlines()[-1])
        ctx = str((doc.get("hookSpecificOutput") or {}).get("additionalContext") or "")
    items = [notes.item(x["path"], x["title"]) for x in parse_context(ctx)]
    st = last_status(Path(env["HIVE_BRAIN_STATE_DIR"]))
    if st.get("session_id") != f"bench-{p['id']}":
        st = {"mode": "unknown (no status record)"}
    return {"injected": items, "chars": len(ctx), "ms": round(ms, 1), "rc": r.returncode, "mode": st.get("mode"),
            "hook_ms": st.get("durationMs"), "server_ms": st.get("serverMs"),
            **({"stderr": r.stderr.strip()[-300:]} if r.returncode else {})}


@contextmanager
def fresh_home() -> Iterator[Path]:
    with temp_dir("hb-bench-prompt-home-") as home:
        (home / "project").mkdir()
        yield home


def hook_records(vault: Path, state_root: Path, prompts: Sequence[Mapping[str, Any]], notes: NoteMap,
                 model_dir: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every prompt through the installed hook, the server up; (records, what was run)."""
    with fresh_home() as home:
        command, settings_env = install_hook(home, vault)
        env = {k: v for k, v in os.environ.items() if k != "HIVE_BRAIN_VAULT"}
        env.update(settings_env)
        env.update(HOME=str(home), HIVE_BRAIN_MODEL_DIR=model_dir, HIVE_BRAIN_STATE_DIR=str(state_root))
        recs = []
        for p in prompts:
            rec = run_hook(command, env, p, home / "project", notes)
            fallbacks: list[dict] = []
            # On a loaded machine the server can miss the hook's deadline and the hook falls back to
            # in-process lexical recall: that measures the machine, not the gate. Such a prompt is asked
            # again (at most RETRIES times) and every fallback is kept in the record.
            while rec["mode"] not in SERVER_MODES and len(fallbacks) < RETRIES:
                fallbacks.append({k: rec[k] for k in ("mode", "hook_ms", "chars")})
                rec = run_hook(command, env, p, home / "project", notes)
            recs.append({**_label(p), **rec, "fallbacks": fallbacks})
        return recs, {"command": command.replace(str(home), "$HOME"), "home": "fresh, removed after",
                      "retried": sum(1 for r in recs if r["fallbacks"]),
                      "still_not_server": sum(1 for r in recs if r["mode"] not in SERVER_MODES)}


def _label(p: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": p["id"], "style": p["style"], "split": p["split"], "needs": list(p["needs"])}


# --------------------------------------------------------------------------- baselines


def baseline_corpus(vault: Path, notes: NoteMap) -> list[tuple[str, str]]:
    """(path, text) of the notes the engine indexes, without superseded versions (a baseline that
    only filters status is given that much)."""
    out = []
    for rel in sorted(notes.titles):
        if rel.startswith(("Skills/", "Operations/")) or rel in notes.key_of_old:
            continue
        out.append((rel, (vault / rel).read_text(encoding="utf-8")))
    return out


def bm25_scores(corpus: Sequence[tuple[str, str]], prompts: Sequence[Mapping[str, Any]], k: int = 10
                ) -> dict[str, list[tuple[str, float]]]:
    """tantivy BM25, default tokenizer, whole notes (as :class:`benchmarks.systems.BM25Retriever`),
    keeping the scores."""
    import tantivy

    from .systems import strip_query_syntax

    sb = tantivy.SchemaBuilder()
    sb.add_unsigned_field("uid", stored=True, indexed=False)
    sb.add_text_field("text", stored=False)
    index = tantivy.Index(sb.build())
    writer = index.writer(heap_size=64_000_000, num_threads=1)
    for i, (_p, text) in enumerate(corpus):
        writer.add_document(tantivy.Document(uid=i, text=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()
    out: dict[str, list[tuple[str, float]]] = {}
    for p in prompts:
        q = strip_query_syntax(p["prompt"])
        hits: list[tuple[str, float]] = []
        if q:
            parsed, _errors = index.parse_query_lenient(q, ["text"])
            for score, addr in searcher.search(parsed, k).hits:
                hits.append((corpus[searcher.doc(addr)["uid"][0]][0], float(score)))
        out[p["id"]] = hits
    return out


def e5_scores(vault: Path, keep: set[str], prompts: Sequence[Mapping[str, Any]], k: int = 10
              ) -> dict[str, list[tuple[str, float]]] | None:
    """Notes by their best passage cosine to the prompt (the pack's embedder and the vault's vectors)."""
    from hive_brain.engine import Engine
    from hive_brain.search.recall import KINDS_ALL, build_where

    view = Engine.open(vault).view()
    if view.embedder is None:
        return None
    out: dict[str, list[tuple[str, float]]] = {}
    qvs = view.embedder.embed_queries([p["prompt"] for p in prompts])
    for p, qv in zip(prompts, qvs, strict=True):
        best: dict[str, float] = {}
        for h in view.vectors.search(qv, where=build_where(agent=None, kinds=KINDS_ALL), limit=80):
            if h.note_path in keep:
                best[h.note_path] = max(best.get(h.note_path, -1.0), float(h.similarity))
        out[p["id"]] = sorted(best.items(), key=lambda x: -x[1])[:k]
    return out


def baseline_records(scores: Mapping[str, list[tuple[str, float]]], prompts: Sequence[Mapping[str, Any]],
                     notes: NoteMap, k: int, threshold: float) -> list[dict[str, Any]]:
    recs = []
    for p in prompts:
        hits = [(path, s) for path, s in scores[p["id"]] if s >= threshold][:k]
        items = [notes.item(path) for path, _s in hits]
        recs.append({**_label(p), "injected": items, "scores": [round(s, 4) for _p, s in hits],
                     "chars": sum(len(notes.text(path)) for path, _s in hits)})
    return recs


def oracle(scores: Mapping[str, list[tuple[str, float]]], prompts: Sequence[Mapping[str, Any]], notes: NoteMap,
           k: int) -> tuple[float, list[dict[str, Any]]]:
    """The threshold that maximises the balanced score on these very prompts (an oracle), and its records."""
    cands = sorted({s for hits in scores.values() for _p, s in hits[:k]} | {float("inf")})
    best: tuple[float, float, list[dict[str, Any]]] | None = None
    for t in cands:
        recs = baseline_records(scores, prompts, notes, k, t)
        b = metrics(recs)["balanced"] or 0.0
        if best is None or b > best[0]:
            best = (b, t, recs)
    assert best is not None
    return best[1], best[2]


# --------------------------------------------------------------------------- metrics


def _rate(xs: Sequence[bool]) -> float | None:
    return round(sum(xs) / len(xs), 3) if xs else None


def _avg(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 2) if xs else None


def metrics(recs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The benchmark's numbers over records ``{style, needs, injected: [{key, old}], chars}``."""
    need = [r for r in recs if r["needs"]]
    none = [r for r in recs if not r["needs"]]

    def right(r: Mapping[str, Any]) -> bool:
        return any(i["key"] in r["needs"] for i in r["injected"])

    def first(r: Mapping[str, Any]) -> bool:
        return bool(r["injected"]) and r["injected"][0]["key"] in r["needs"]

    spoke = [r for r in recs if r["injected"]]
    right_r, quiet_r = _rate([right(r) for r in need]), _rate([not r["injected"] for r in none])
    return {
        "n": len(recs), "n_need": len(need), "n_none": len(none),
        "right": right_r, "first": _rate([first(r) for r in need]),
        "quiet": quiet_r,
        "quiet_chitchat": _rate([not r["injected"] for r in none if r["style"] == "chitchat"]),
        "items": _avg([len(r["injected"]) for r in spoke]),
        "chars": _avg([r["chars"] for r in spoke]),
        "chars_per_nomem": _avg([r["chars"] for r in none]),
        "old_injected": sum(1 for r in recs for i in r["injected"] if i["old"]),
        "followup_resolved": _rate([right(r) for r in need if r["style"] == "followup"]),
        "balanced": round((right_r + quiet_r) / 2, 3) if right_r is not None and quiet_r is not None else None,
    }


def breakdown(recs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Metrics for each split and all, and per style (all splits)."""
    out: dict[str, Any] = {s: metrics([r for r in recs if r["split"] == s]) for s in SPLITS}
    out["all"] = metrics(recs)
    out["styles"] = {st: metrics([r for r in recs if r["style"] == st]) for st in STYLES
                     if any(r["style"] == st for r in recs)}
    return out


# --------------------------------------------------------------------------- the run


def select(prompts: Sequence[Mapping[str, Any]], split: str | None, every: int = 1) -> list[dict[str, Any]]:
    ps = [dict(p) for p in prompts if split in (None, "all") or p["split"] == split]
    return ps[::every]


def load_names(names: Path, memories: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The writer's names of ``names`` (``{key: {"aliases": [...], "questions": [...]}}``), checked
    before any vault is built: a file that cannot be read, or names a memory that does not exist, is
    one line and no run."""
    try:
        table = json.loads(names.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"--names {names}: cannot read it ({e}); pass a JSON file like "
                         "benchmarks/prompts/memory_names.json") from None
    if not isinstance(table, dict):
        raise SystemExit(f"--names {names}: expected an object of memory keys, like benchmarks/prompts/memory_names.json")
    missing = sorted(set(table) - {m["key"] for m in memories})
    if missing:
        raise SystemExit(f"--names {names}: names for unknown memory keys: {', '.join(missing)}")
    return table


def with_names(vault: Path, maps: Mapping[str, Any], memories: Sequence[Mapping[str, Any]],
               table: Mapping[str, Any] | None) -> int:
    """Give each memory's current note the writer's ``aliases`` and ``questions`` of ``table``
    (:func:`load_names`), or none: a frontmatter edit, as in Obsidian, that the server catches up on
    at its start. A kept vault asked again without names loses them. Returns how many memories carry
    names."""
    from .aliasvault import NAMES, add_names

    named = [{"key": m["key"], **{f: list(((table or {}).get(m["key"]) or {}).get(f) or []) for f in NAMES}}
             for m in memories]
    add_names(vault, maps["head"], named, NAMES if table is not None else ())
    return sum(1 for m in named if any(m[f] for f in NAMES))


def run(cfg: BenchConfig, sizes: Sequence[int] | None = None, work: Path | None = None, split: str | None = None,
        every: int | None = None, baselines: bool = True, names: Path | None = None) -> dict[str, Any]:
    from hive_brain.config import resolve
    from hive_brain.search.params import PARAMS

    from .common import embedding_pack

    memories, prompts = load_data()
    table = load_names(names, memories) if names else None
    # Called without sizes (by benchmarks.run, quick or full) this is the smoke: the memories alone and
    # every other tune prompt; the full sizes run alone (`python -m benchmarks.prompt_hook --full`).
    smoke = sizes is None
    sizes = tuple(sizes or QUICK_SIZES)
    split = split or ("tune" if smoke else "all")
    chosen = select(prompts, split, every or (2 if smoke else 1))
    pack, why = embedding_pack()
    out: list[dict[str, Any]] = []
    for size in sizes:
        with vault_dir(work, size, "hb-bench-prompt-hook-") as d:
            maps = open_or_build(d, size, memories)
            vault = d / "vault"
            n_named = with_names(vault, maps, memories, table)
            notes = NoteMap(maps, vault)
            settings = resolve(vault=str(vault))
            from hive_brain.store.vault import open_vault

            v = open_vault(settings)
            log(f"prompt_hook: {size}: {maps['info']['notes']} notes ({'reused' if maps['info'].get('reused') else 'built'}); "
                f"{len(chosen)} prompts; embedding pack {pack or why}")
            load0 = load_average()
            reset_usage(v.state)
            with running_server(v.root, v.state) as srv:
                t0 = time.perf_counter()
                st = wait_server_idle(v.state)
                log(f"prompt_hook: {size}: server pid {srv['pid']} ready, no passages to embed, read-ahead done "
                    f"({time.perf_counter() - t0:.1f} s after start; semantic {((st.get('semantic') or {}).get('on'))})")
                hook, ran = hook_records(vault, d / "state", chosen, notes, str(settings.model_dir))
            reset_usage(v.state)
            row: dict[str, Any] = {"size": size, "info": {**maps["info"], "named": n_named}, "load": [load0, load_average()],
                                   "server": {"start_s": srv["start_s"], "semantic": (st.get("semantic") or {})},
                                   "hook_run": ran, "hook": {"metrics": breakdown(hook), "records": hook}}
            modes: dict[str, int] = {}
            for r in hook:
                modes[str(r["mode"])] = modes.get(str(r["mode"]), 0) + 1
            row["hook"]["modes"] = modes
            row["hook"]["ms_p50"] = sorted(r["ms"] for r in hook)[len(hook) // 2] if hook else None
            log(f"prompt_hook: {size}: hook modes {modes} (asked again after a fallback: {ran['retried']}), "
                f"wall p50 {row['hook']['ms_p50']} ms")
            errors = [r for r in hook if r["rc"]]
            if errors:
                log(f"prompt_hook: {size}: {len(errors)} hook runs failed, e.g. {errors[0].get('stderr')}")
            if baselines:
                row["baselines"] = run_baselines(vault, notes, chosen)
            out.append(row)
            log(f"prompt_hook: {size}: hook {fmt_line(row['hook']['metrics']['all'])}")
    return {"sizes": list(sizes), "targets": TARGETS, "params": dict(PARAMS), "prompts": len(chosen),
            "split": split, "smoke": smoke, "embedding_pack": str(pack) if pack else why,
            "vaults": out}


def run_baselines(vault: Path, notes: NoteMap, prompts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    corpus = baseline_corpus(vault, notes)
    keep = {p for p, _t in corpus}
    systems: dict[str, Callable[[], dict[str, list[tuple[str, float]]] | None]] = {
        "bm25": lambda: bm25_scores(corpus, prompts),
        "e5": lambda: e5_scores(vault, keep, prompts),
    }
    out: dict[str, Any] = {}
    for name, fn in systems.items():
        scores = fn()
        if scores is None:
            out[name] = {"unavailable": "no embedding pack"}
            continue
        for k in BASELINE_KS:
            t, recs = oracle(scores, prompts, notes, k)
            out[f"{name} top-{k}"] = {"oracle_threshold": round(t, 4), "metrics": breakdown(recs), "records": recs,
                                      "no_threshold": metrics(baseline_records(scores, prompts, notes, k,
                                                                               float("-inf")))}
    return out


def fmt_line(m: Mapping[str, Any]) -> str:
    return (f"right {m['right']}, first {m['first']}, quiet {m['quiet']} (chit-chat {m['quiet_chitchat']}), "
            f"items {m['items']}, chars/no-mem {m['chars_per_nomem']}, old {m['old_injected']}, "
            f"follow-ups {m['followup_resolved']}")


# --------------------------------------------------------------------------- report

COLUMNS = ["vault", "system", "split", "right", "first", "quiet", "quiet chit-chat", "items", "chars", "chars/no-mem",
           "old", "follow-ups", "balanced"]


def rows(result: Mapping[str, Any]) -> list[list[Any]]:
    """A row per vault, system and split that has prompts (and all)."""
    out: list[list[Any]] = []
    for v in result["vaults"]:
        systems = [("hook (installed)", v["hook"]["metrics"], None)]
        for name, b in (v.get("baselines") or {}).items():
            if "metrics" in b:
                systems.append((f"{name}, oracle t={b['oracle_threshold']:g}", b["metrics"], b["oracle_threshold"]))
        for name, m, _t in systems:
            for s in [s for s in SPLITS if m.get(s, {}).get("n")] + ["all"]:
                x = m[s]
                out.append([f"{v['info']['notes']:,} notes", name, s, x["right"], x["first"], x["quiet"],
                            x["quiet_chitchat"], x["items"], x["chars"], x["chars_per_nomem"], x["old_injected"],
                            x["followup_resolved"], x["balanced"]])
    return out


def style_rows(result: Mapping[str, Any]) -> list[list[Any]]:
    out = []
    for v in result["vaults"]:
        for st, x in v["hook"]["metrics"]["styles"].items():
            out.append([f"{v['info']['notes']:,} notes", st, x["n"], x["n_need"], x["right"], x["first"], x["quiet"],
                        x["items"], x["chars_per_nomem"]])
    return out


def report(result: Mapping[str, Any], console: Any) -> None:
    print_table(f"prompt hook precision ({result['mode']}, {result['prompts']} prompts, split {result['split']}): "
                "targets right >= 0.90, first >= 0.80, quiet >= 0.90 (chit-chat 1.00), items <= 1.5, follow-ups >= "
                "0.90, old 0; baselines with an oracle threshold (chosen on these prompts)",
                COLUMNS, rows(result), console)
    for v in result["vaults"]:
        console.print(f"{v['info']['notes']:,} notes: hook modes {v['hook'].get('modes')} (asked again after a "
                      f"fallback: {v['hook_run'].get('retried')}), wall p50 "
                      f"{v['hook'].get('ms_p50')} ms, load {v.get('load')}")
    print_table("prompt hook by style (all splits)",
                ["vault", "style", "n", "need", "right", "first", "quiet", "items", "chars/no-mem"],
                style_rows(result), console)


def summary_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for v in result["vaults"]:
        m = v["hook"]["metrics"]["held"] if result["split"] == "all" else v["hook"]["metrics"]["all"]
        ok = all((m[k] or 0) >= TARGETS[k] for k in ("quiet", "right", "first"))
        out.append(summary_row(NAME, "hive-brain hook", f"quiet on no-memory prompts ({v['info']['notes']} notes)",
                               m["quiet"], target=f">= {TARGETS['quiet']}", status="pass" if ok else "FAIL",
                               note=fmt_line(m)))
    return out


def _args(ap: Any) -> None:
    ap.add_argument("--work", type=Path, default=None,
                    help="keep each size's vault and state in WORK/<size> and reuse them (a copy made with "
                         "`cp -a` works too); built when missing")
    ap.add_argument("--sizes", default=None, help="comma-separated reference-note counts (default: 0,500,3000 "
                                                  "with --full, 0 with --quick)")
    ap.add_argument("--split", choices=(*SPLITS, "all"), default=None,
                    help="which prompts (default: all with --full, tune with --quick)")
    ap.add_argument("--every", type=int, default=None, help="every n-th prompt only (default: all)")
    ap.add_argument("--no-baselines", action="store_true", help="the hook alone")
    ap.add_argument("--build-only", action="store_true", help="build (or check) the work dirs and stop")
    ap.add_argument("--names", type=Path, default=None,
                    help="give the memories the writer's aliases and questions of this file (e.g. "
                         "benchmarks/prompts/memory_names.json) before asking; without it they have none")


def _kwargs(args: Any) -> dict[str, Any]:
    default = FULL_SIZES if args.mode == "full" else QUICK_SIZES
    return {"work": args.work, "sizes": tuple(int(x) for x in args.sizes.split(",")) if args.sizes else default,
            "split": args.split, "every": args.every, "baselines": not args.no_baselines, "names": args.names}


def reset_usage(state: Path) -> list[str]:
    """Forget the usage the hook logged in an earlier run (it feeds ranking): every run of a kept work
    dir starts from none, as a new user's vault does."""
    gone = []
    for p in sorted(state.glob("usage-*")):
        if p.is_file():
            p.unlink()
            gone.append(p.name)
    return gone


def build_only(work: Path, sizes: Sequence[int]) -> None:
    memories, _prompts = load_data()
    for size in sizes:
        with vault_dir(work, size, "hb-bench-prompt-hook-") as d:
            maps = open_or_build(d, size, memories)
            log(f"prompt_hook: {size}: {maps['info']}")


if __name__ == "__main__":
    if "--build-only" in sys.argv:
        import argparse

        _ap = argparse.ArgumentParser()
        _args(_ap)
        _ns, _ = _ap.parse_known_args()
        if _ns.work is None:
            raise SystemExit("--build-only needs --work DIR")
        build_only(_ns.work, [int(x) for x in (_ns.sizes or "0,500,3000").split(",")])
        sys.exit(0)
    sys.exit(standalone_main(sys.modules[__name__], extra_args=_args, kwargs_from_args=_kwargs))
