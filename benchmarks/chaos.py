"""Crash consistency at scale (issue 16): kill -9 during every kind of write, hundreds of times.

Each iteration runs one operation in its own process (the victim) against one growing real vault
(real tantivy, SQLite, LanceDB queue, journal, locks) and kills it with SIGKILL, either at a named
crash point (``HIVE_BRAIN_CRASH_AT``: every journal step of ``store.journal.STEPS`` and every index
publish point of ``index.indexer.CRASH_POINTS``) or after a random delay once the victim has opened
the engine (its imports done, so the kill lands in the work, not the interpreter's start). The
operations: remember, evolve, update, delete, batch, consolidate (conversation capture),
repair-conflicts (sync copies), rebuild-index, and the server's publish (``hive-brain serve``
indexing a note an editor saved).

After each kill the next command (``doctor``, in this process) recovers, and the checks run:

- **exactly once**: a write the victim acknowledged (printed its result) is there, once; one it did
  not is there once or absent, never half (an evolve both notes or neither, a batch all records or
  none, an update the old body or the new one, a repair every conflict or none); every earlier
  acknowledged memory still exists exactly once (no id twice), none acknowledged deleted came back;
- **no half state**: no broken note, no journal record or staged file left, one active head per key,
  every ``superseded_by``/``supersedes`` link answered by the other side;
- **index = notes**: the current generation names exactly the notes on disk with their SHA-256,
  tantivy holds exactly those paths, the vector queue nothing else, a lexical recall finds an
  acknowledged new memory and not a deleted one; every ``--embed-every`` iterations (and at the
  end) the queue is embedded (the real model) and no vector row belongs to a note that is gone.

    python -m benchmarks.chaos [--iterations 300] [--seed 16] [--embed-every 25]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

NAME = "chaos"
DEFAULT_ITERATIONS = 300
OPS = ("remember", "evolve", "update", "delete", "batch", "consolidate", "repair-conflicts", "rebuild-index",
       "server-publish")
# Ops that change notes through the journal's Transaction (all of its steps may be met); rebuild and the
# server's publish change only the index.
NOTE_OPS = OPS[:7]
RANDOM = "random"

# The victim: one operation, in-process, as the CLI would run it. "READY" once the engine is open,
# "ACK <json>" once the operation returned: an acknowledged write.
VICTIM = r"""
import json, sys
from pathlib import Path
from hive_brain.engine import Engine
from hive_brain.memory.model import MemoryInput
op, a = sys.argv[1], json.loads(sys.argv[2])
eng = Engine.open()
print("READY", flush=True)
m = eng.memory
if op == "remember":
    r = m.remember(MemoryInput(type="fact", title=a["title"], content=a["content"]))
elif op == "evolve":
    r = m.evolve(a["id"], a["content"])
elif op == "update":
    r = m.update(a["id"], content=a["content"])
elif op == "delete":
    r = m.delete(a["id"], confirm=True, force=True)
elif op == "batch":
    r = m.batch([{"type": "fact", "title": t, "content": c} for t, c in a["records"]])
elif op == "consolidate":
    from hive_brain.memory.conversations import consolidate
    r = consolidate(eng, from_dir=Path(a["dir"]), agent="claude-code")
elif op == "repair-conflicts":
    from hive_brain.memory.repair import repair_conflicts
    r = repair_conflicts(eng, confirm=True)
elif op == "rebuild-index":
    r = eng.rebuild(embed=False)
else:
    raise SystemExit("unknown op " + op)
print("ACK " + json.dumps(r, default=str), flush=True)
"""


def points_for(op: str) -> list[str]:
    from hive_brain.index.indexer import CRASH_POINTS
    from hive_brain.store.journal import STEPS

    return [*STEPS, *CRASH_POINTS] if op in NOTE_OPS else list(CRASH_POINTS)


class Chaos:
    """One vault, one ledger of what must (and must not) exist, and the checks."""

    def __init__(self, vault: Path, *, seed: int, embed_every: int = 0, log: Callable[[str], None] = lambda s: None,
                 server_timeout: float = 60.0) -> None:
        self.vault = vault
        self.rng = random.Random(seed)
        self.embed_every = embed_every
        self.log = log
        self.server_timeout = server_timeout
        self.must_exist: set[str] = set()  # memory ids acknowledged (or found) written and not deleted since
        self.deleted: set[str] = set()  # memory ids acknowledged deleted: never to come back
        self.gone_paths: set[str] = set()  # note paths that existed once and are gone
        self.seen_paths: set[str] = set()
        self.conflicted: set[str] = set()  # heads given sync copies: their text is in the copies too
        self.work_s: dict[str, list[float]] = {}  # READY -> ACK times, for the random kills
        self.rows: list[dict[str, Any]] = []
        self.violations: list[str] = []
        self.counts: Counter[str] = Counter()
        self.n = 0
        self.tmp = vault.parent / "chaos-tmp"
        self.tmp.mkdir(exist_ok=True)

    # -- the vault as the checks see it -------------------------------------------------------------
    def engine(self) -> Any:
        from hive_brain.engine import Engine

        return Engine.open()

    def files(self) -> dict[str, bytes]:
        return {p.relative_to(self.vault).as_posix(): p.read_bytes() for p in self.vault.rglob("*.md")
                if ".hive-brain" not in p.relative_to(self.vault).parts}

    def memories(self) -> list[dict[str, Any]]:
        """Every memory note: its frontmatter plus path and body."""
        from hive_brain.store.notes import parse_text

        out = []
        for rel, data in self.files().items():
            if not rel.startswith("Memory/") or rel.startswith("Memory/Conversations/"):
                continue
            n = parse_text(Path(rel).name, data.decode("utf-8", "replace"))
            if n.meta.get("id"):
                out.append({**n.meta, "_path": rel, "_body": n.body.strip(), "_problem": n.problem})
        return out

    def heads(self) -> list[dict[str, Any]]:
        return [m for m in self.memories() if m.get("status") == "active" and not m.get("superseded_by")]

    def targets(self) -> list[dict[str, Any]]:
        """Heads to evolve, update or delete: acknowledged, and not one whose copies repair set aside."""
        return [h for h in self.heads() if h["id"] in self.must_exist and h["id"] not in self.conflicted]

    # -- one iteration ------------------------------------------------------------------------------
    def victim(self, op: str, args: dict[str, Any], point: str) -> dict[str, Any]:
        """Run ``op`` in a process and kill it at ``point``; what happened."""
        env = {**os.environ, "HIVE_BRAIN_USE_SERVER": "0", "HIVE_BRAIN_AUTOSTART": "0"}
        if point != RANDOM:
            env["HIVE_BRAIN_CRASH_AT"] = point
        else:
            env.pop("HIVE_BRAIN_CRASH_AT", None)
        proc = subprocess.Popen([sys.executable, "-c", VICTIM, op, json.dumps(args)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        ready = proc.stdout.readline().strip() == "READY"
        t_ready = time.perf_counter()
        delay = None
        if ready and point == RANDOM:
            est = sorted(self.work_s.get(op) or [0.6])[len(self.work_s.get(op) or [0.6]) // 2]
            delay = self.rng.uniform(0.0, est * 1.3)
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)  # our own child, by pid
        out, err = proc.communicate(timeout=600)
        ack = None
        for line in out.splitlines():
            if line.startswith("ACK "):
                ack = json.loads(line[4:])
        if ack is not None:
            self.work_s.setdefault(op, []).append(time.perf_counter() - t_ready)
        killed = proc.returncode == -signal.SIGKILL
        if not killed and ack is None:
            self.violate(f"{op} at {point}: exited {proc.returncode} without a result: {err.strip()[-400:]}")
        return {"killed": killed, "ack": ack, "delay": delay, "ready": ready}

    def server_victim(self, point: str) -> dict[str, Any]:
        """`hive-brain serve` indexing a note an editor saved (temp + rename), killed in its publish."""
        eng = self.engine()
        state = eng.vault.state
        env = {**os.environ, "HIVE_BRAIN_AUTOSTART": "0"}  # as configured: it embeds when a pack is installed
        if point != RANDOM:
            env["HIVE_BRAIN_CRASH_AT"] = point
        else:
            env.pop("HIVE_BRAIN_CRASH_AT", None)
        proc = subprocess.Popen([sys.executable, "-m", "hive_brain", "serve"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        ready_file = state / "server.ready"
        deadline = time.monotonic() + self.server_timeout
        while time.monotonic() < deadline and proc.poll() is None and not ready_file.exists():
            time.sleep(0.05)
        # The editor: a new note and a changed one, each saved atomically.
        k = self.n
        note = self.vault / "Projects" / f"chaos-edit-{k}.md"
        _atomic_save(note, f"# Edit {k}\n\nThe editor saved token zq{k}edit here.\n")
        olds = sorted(self.vault.glob("Projects/chaos-edit-*.md"))
        if len(olds) > 1:
            other = self.rng.choice(olds[:-1])
            _atomic_save(other, other.read_text(encoding="utf-8") + f"\nEdited again in iteration {k}.\n")
        delay = None
        if point == RANDOM:
            delay = self.rng.uniform(0.0, 2.5)
            time.sleep(delay)
        else:
            try:
                proc.wait(timeout=self.server_timeout)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        killed = proc.returncode == -signal.SIGKILL
        for leftover in ("server.ready", "server.sock", "server.json"):
            (state / leftover).unlink(missing_ok=True)  # what a killed server leaves; clients check it
        return {"killed": killed, "ack": None, "delay": delay, "ready": True}

    def prepare(self, op: str) -> dict[str, Any] | None:
        """The victim's arguments (and what the harness set up for it); None if it cannot run now."""
        k = self.n
        token = f"zq{k}x{self.rng.randrange(10**6)}"
        heads = self.targets()
        if op == "remember":
            return {"title": f"Chaos {k} remember", "content": f"Chaos memory {token} was remembered."}
        if op == "batch":
            return {"records": [[f"Chaos {k} batch {j}", f"Batch record {j} of {token}b{j}."] for j in range(3)]}
        if op in ("evolve", "update", "delete"):
            if len(heads) < 3:
                self.seed_memories(3)
                heads = self.targets()
            h = self.rng.choice(heads)
            return {"id": h["id"], "content": f"Chaos {op} {k}: now {token}.", "_before": h}
        if op == "consolidate":
            d = self.tmp / f"transcripts-{k}"
            d.mkdir()
            sid = f"sess-chaos-{k}"
            entries = [_turn("user", f"How do we rotate the {token} keys?", sid),
                       _turn("assistant", f"Rotate {token} keys monthly with the vault CLI.", sid)]
            (d / f"{sid}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
            return {"dir": str(d), "_token": token}
        if op == "repair-conflicts":
            if not heads:
                self.seed_memories(1)
                heads = self.targets()
            h = self.rng.choice(heads)
            self.conflicted.add(h["id"])
            src = self.vault / h["_path"]
            stem = src.name.removesuffix(".md")
            made = [src.with_name(f"{stem} 1.md"), src.with_name(f"{stem}.sync-conflict-20261130-101010-CHAOS{k}.md")]
            for p in made:
                shutil.copyfile(src, p)
            eng = self.engine()
            eng.doctor()  # the copies are known (as a sync tool leaves them) before the repair runs
            return {"_conflicts": len(self.conflicts(eng)), "_copies": [p.relative_to(self.vault).as_posix() for p in made]}
        return {}

    def seed_memories(self, n: int) -> None:
        from hive_brain.memory.model import MemoryInput

        eng = self.engine()
        for _ in range(n):
            r = eng.memory.remember(MemoryInput(type="fact", title=f"Chaos seed {len(self.must_exist)} {self.rng.randrange(10**9)}",
                                                content=f"Seed memory zqseed{self.rng.randrange(10**9)}."))
            self.must_exist.add(r["id"])

    def conflicts(self, eng: Any) -> list[dict[str, Any]]:
        from hive_brain.memory.conflicts import find

        eng.catalog.refresh()
        return find(eng.catalog, None)

    def iteration(self, op: str, point: str) -> None:
        self.n += 1
        args = self.prepare(op)
        before = self.files()
        t0 = time.perf_counter()
        if op == "server-publish":
            res = self.server_victim(point)
        else:
            assert args is not None
            res = self.victim(op, {k: v for k, v in args.items() if not k.startswith("_")}, point)
        took = time.perf_counter() - t0
        # The next commands recover: doctor (journal recovery, damaged files), then a recall (its
        # catch-up brings the index to the notes, whatever the publish was doing when it died).
        eng = self.engine()
        t1 = time.perf_counter()
        doc = eng.doctor()
        eng.recall("chaos recovery", semantic=False)
        recover_s = time.perf_counter() - t1
        eng = self.engine()
        bad_before = len(self.violations)
        if doc["problems"]:
            self.violate(f"{op} at {point}: broken notes after recovery: {doc['problems'][:3]}")
        if any(d["movedTo"].startswith("journal/damaged") for d in doc["damaged"]):
            self.violate(f"{op} at {point}: a journal record was quarantined: {doc['damaged']}")
        self.check_op(op, point, args or {}, res, before, eng)
        self.check_vault(op, point, eng)
        if self.embed_every and self.n % self.embed_every == 0:
            self.check_vectors(eng)
        outcome = "killed" if res["killed"] else "completed"
        self.counts[f"{op}|{point}|{outcome}"] += 1
        self.rows.append({"i": self.n, "op": op, "point": point, "killed": res["killed"], "acked": res["ack"] is not None,
                          "delay": None if res["delay"] is None else round(res["delay"], 3),
                          "victim_s": round(took, 3), "recover_s": round(recover_s, 3),
                          "recovered": [r.get("action") for r in doc.get("recovered") or []],
                          "violations": len(self.violations) - bad_before})

    # -- checks -------------------------------------------------------------------------------------
    def violate(self, msg: str) -> None:
        self.violations.append(f"#{self.n} {msg}")
        self.log(f"VIOLATION #{self.n} {msg}")

    def check_op(self, op: str, point: str, args: dict[str, Any], res: dict[str, Any], before: dict[str, bytes],
                 eng: Any) -> None:
        acked = res["ack"] is not None
        where = f"{op} at {point} ({'acked' if acked else 'not acked'})"
        mems = self.memories()
        by_title = Counter(m.get("title") for m in mems)
        if op == "remember":
            n = by_title[args["title"]]
            if n > 1 or (acked and n != 1):
                self.violate(f"{where}: {n} notes titled {args['title']!r}")
            self.note_created(mems, lambda m: m.get("title") == args["title"])
            if n == 1:
                path = next(m["_path"] for m in mems if m.get("title") == args["title"])
                if path not in self.recall_hits(eng, _token(args["content"])):
                    self.violate(f"{where}: recall does not find the new memory")
        elif op == "batch":
            ns = [by_title[t] for t, _c in args["records"]]
            if len(set(ns)) != 1 or ns[0] > 1 or (acked and ns[0] != 1):
                self.violate(f"{where}: batch records present {ns} (all or none, once)")
            titles = {t for t, _c in args["records"]}
            self.note_created(mems, lambda m: m.get("title") in titles)
        elif op == "evolve":
            old = args["_before"]
            new = [m for m in mems if m.get("supersedes") == old["id"]]
            cur = [m for m in mems if m["id"] == old["id"]]
            if len(cur) != 1:
                self.violate(f"{where}: the evolved memory {old['id']} is there {len(cur)} times")
            elif len(new) > 1 or (acked and len(new) != 1):
                self.violate(f"{where}: {len(new)} new versions")
            elif new and (cur[0].get("superseded_by") != new[0]["id"] or args["content"] not in new[0]["_body"]):
                self.violate(f"{where}: half an evolve: old {cur[0].get('status')}/{cur[0].get('superseded_by')}")
            elif not new and (cur[0].get("superseded_by") or cur[0].get("status") != "active"):
                self.violate(f"{where}: the old version changed but no new one exists")
            self.note_created(mems, lambda m: m.get("supersedes") == old["id"])
        elif op == "update":
            old = args["_before"]
            cur = [m for m in mems if m["id"] == old["id"]]
            if len(cur) != 1:
                self.violate(f"{where}: the updated memory is there {len(cur)} times")
            elif cur[0]["_body"] not in (old["_body"], args["content"]) or (acked and cur[0]["_body"] != args["content"]):
                self.violate(f"{where}: body is neither the old nor the new one: {cur[0]['_body'][:80]!r}")
        elif op == "delete":
            old = args["_before"]
            cur = [m for m in mems if m["id"] == old["id"]]
            if len(cur) > 1 or (acked and cur):
                self.violate(f"{where}: the deleted memory is there {len(cur)} times")
            elif cur and before.get(old["_path"]) != (self.vault / old["_path"]).read_bytes():
                # Undone: the very bytes it had (a chain relink may have touched neighbours, all or nothing).
                self.violate(f"{where}: not deleted, but changed")
            if not cur:
                self.must_exist.discard(old["id"])
                self.deleted.add(old["id"])
                if old["_path"] in self.recall_hits(eng, _token(old["_body"])):
                    self.violate(f"{where}: recall still finds the deleted memory")
        elif op == "consolidate":
            tok = args["_token"]
            conv = [r for r, b in self.files().items() if r.startswith("Memory/Conversations/") and tok.encode() in b]
            if len(conv) > 1 or (acked and len(conv) != 1):
                self.violate(f"{where}: {len(conv)} conversation notes for one transcript")
        elif op == "repair-conflicts":
            left = len(self.conflicts(eng))
            if acked and left:
                self.violate(f"{where}: {left} conflicts left after an acknowledged repair")
            elif left not in (0, args["_conflicts"]):
                self.violate(f"{where}: {left} of {args['_conflicts']} conflicts left: half a repair")
            if left:  # rolled back: repair now, so later iterations start clean
                from hive_brain.memory.repair import repair_conflicts

                repair_conflicts(eng, confirm=True)

    def note_created(self, mems: list[dict[str, Any]], match: Callable[[dict[str, Any]], bool]) -> None:
        for m in mems:
            if match(m):
                self.must_exist.add(m["id"])

    def recall_hits(self, eng: Any, token: str) -> list[str]:
        return [h["path"] for h in eng.recall(token, semantic=False, scope="full-vault")["hits"]]

    def check_vault(self, op: str, point: str, eng: Any) -> None:
        where = f"{op} at {point}"
        state = eng.vault.state
        jdir = state / "journal"
        left = [p.name for p in jdir.iterdir() if p.name != "damaged"] if jdir.exists() else []
        if left:
            self.violate(f"{where}: journal left behind: {left}")
        staged = list((self.vault / ".hive-brain/staging").glob("*/*"))
        if staged:
            self.violate(f"{where}: staging left behind: {staged[:3]}")
        mems = self.memories()
        ids = Counter(m["id"] for m in mems)
        twice = [i for i, c in ids.items() if c > 1]
        if twice:
            self.violate(f"{where}: ids present more than once: {twice[:3]}")
        missing = self.must_exist - set(ids)
        if missing:
            self.violate(f"{where}: acknowledged memories lost: {sorted(missing)[:3]}")
        back = self.deleted & set(ids)
        if back:
            self.violate(f"{where}: deleted memories came back: {sorted(back)[:3]}")
        heads = Counter(m.get("memory_key") for m in mems if m.get("status") == "active" and not m.get("superseded_by"))
        two = [k for k, c in heads.items() if c > 1]
        if two:
            self.violate(f"{where}: keys with two active heads: {two[:3]}")
        by_id = {m["id"]: m for m in mems}
        for m in mems:
            # A link never dangles, and a newer version's `supersedes` is answered by the older one's
            # `superseded_by` (a sync copy set aside by repair points at its head, without an answer).
            nxt, prev = m.get("superseded_by"), m.get("supersedes")
            if nxt and nxt not in by_id:
                self.violate(f"{where}: {m['id']} superseded_by {nxt}, which is no memory")
            if prev and (prev not in by_id or by_id[prev].get("superseded_by") != m["id"]):
                self.violate(f"{where}: {m['id']} supersedes {prev}, which does not point forward to it")
        # Index = notes.
        for problem in index_problems(eng, self.vault):
            self.violate(f"{where}: {problem}")
        _gid, man = eng.indexer.current_manifest()
        paths = set(man)
        self.gone_paths |= self.seen_paths - paths
        self.gone_paths -= paths
        self.seen_paths |= paths

    def check_vectors(self, eng: Any) -> None:
        if not eng.indexer.pack_key:
            return
        eng.indexer.embed_pending()
        ghosts = eng.indexer.vectors.rows_for(self.gone_paths)
        if ghosts:
            self.violate(f"vectors of notes that are gone: {sorted({g['note_path'] for g in ghosts})[:3]}")
        self.counts["vector checks"] += 1

    # -- the run ------------------------------------------------------------------------------------
    def run(self, iterations: int, *, ops: tuple[str, ...] = OPS) -> dict[str, Any]:
        self.seed_memories(4)
        # Round-robin over the operations (the first len(ops) iterations meet each one), each
        # walking its own shuffled list of crash points plus two random kills.
        lanes = {op: [*points_for(op), RANDOM, RANDOM] for op in ops}
        for lane in lanes.values():
            self.rng.shuffle(lane)
        plan = [(op, lanes[op][r % len(lanes[op])]) for r in range(max(map(len, lanes.values()))) for op in ops]
        t0 = time.perf_counter()
        for i in range(iterations):
            op, point = plan[i % len(plan)]
            self.iteration(op, point)
            if (i + 1) % 10 == 0:
                self.log(f"chaos: {i + 1}/{iterations} iterations, {len(self.violations)} violations")
        if self.embed_every:
            self.check_vectors(self.engine())
        return self.summary(time.perf_counter() - t0)

    def summary(self, seconds: float) -> dict[str, Any]:
        per_op: dict[str, dict[str, int]] = {}
        for r in self.rows:
            d = per_op.setdefault(r["op"], {"iterations": 0, "killed": 0, "killed_at_point": 0, "killed_random": 0,
                                            "completed": 0, "acked": 0, "violations": 0})
            d["iterations"] += 1
            d["killed"] += r["killed"]
            d["killed_at_point"] += r["killed"] and r["point"] != RANDOM
            d["killed_random"] += r["killed"] and r["point"] == RANDOM
            d["completed"] += not r["killed"]
            d["acked"] += r["acked"]
            d["violations"] += r["violations"]
        eng = self.engine()
        return {"iterations": len(self.rows), "killed": sum(r["killed"] for r in self.rows),
                "violations": self.violations, "per_op": per_op,
                "points": {k: v for k, v in sorted(self.counts.items())},
                "memories_acked_alive": len(self.must_exist), "deleted": len(self.deleted),
                "notes": len(self.files()), "generation": eng.indexer.gens.current_id(),
                "recover_s_p50": _median([r["recover_s"] for r in self.rows]),
                "victim_s_p50": _median([r["victim_s"] for r in self.rows]), "wall_s": round(seconds, 1)}


def index_problems(eng: Any, vault: Path) -> list[str]:
    """How the index differs from the notes on disk (empty: it equals them): ``current`` points at a
    generation whose receipt verifies, which names every indexable note with its SHA-256 and nothing else, tantivy holds exactly those notes,
    the vector queue none other. Run after a catch-up."""
    out = []
    gid, _now, todo, gone = eng.indexer.diff()
    if todo or gone:
        out.append(f"index behind the notes: {len(todo)} to index, {len(gone)} to remove")
    _gid, man = eng.indexer.current_manifest()
    if gid is not None and (eng.indexer.gens.pointer() != gid or not eng.indexer.gens.verify(gid)):
        out.append(f"`current` ({eng.indexer.gens.pointer()}) does not verify as generation {gid}")
    for rel, sha in man.items():
        p = vault / rel
        if not p.exists():
            out.append(f"generation {gid} names {rel}, which is no note")
        elif hashlib.sha256(p.read_bytes()).hexdigest() != sha:
            out.append(f"generation {gid} has another version of {rel}")
    paths = set(man)
    lex = eng.indexer.lexical.note_paths()
    if lex != paths:
        out.append(f"tantivy holds {sorted(lex - paths)[:3]} extra, misses {sorted(paths - lex)[:3]}")
    queued = {r[0] for r in eng.indexer.pending.execute("SELECT DISTINCT note_path FROM pending")}
    if queued - paths:
        out.append(f"the vector queue holds notes that are gone: {sorted(queued - paths)[:3]}")
    return out


def _token(text: str) -> str:
    """The iteration's unique word in a memory's text (every text the run writes holds one)."""
    import re

    m = re.search(r"zq[0-9a-z]+", text)
    return m.group(0) if m else text


def _median(xs: list[float]) -> float | None:
    return round(sorted(xs)[len(xs) // 2], 3) if xs else None


def _turn(role: str, text: str, sid: str) -> dict[str, Any]:
    content: Any = text if role == "user" else [{"type": "text", "text": text}]
    return {"type": role, "isSidechain": False, "sessionId": sid, "cwd": "/home/u/chaos",
            "timestamp": "2026-03-01T10:00:00Z", "message": {"role": role, "content": content}}


def _atomic_save(path: Path, text: str) -> None:
    """What an editor does: write a temp file beside the note, then rename it over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def run_chaos(vault: Path, *, iterations: int, seed: int, embed_every: int = 0, ops: tuple[str, ...] = OPS,
              log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """The whole run against an initialised vault (``HIVE_BRAIN_VAULT``/state already set)."""
    return Chaos(vault, seed=seed, embed_every=embed_every, log=log).run(iterations, ops=ops)


# -- the benchmark entry points (benchmarks.common conventions) ---------------------------------------

def run(cfg: Any, *, iterations: int = DEFAULT_ITERATIONS, seed: int = 16, embed_every: int = 25) -> dict[str, Any]:
    from hive_brain.config import resolve
    from hive_brain.store.vault import init_vault

    from .common import embedding_pack, load_average, log, temp_dir, temp_state_dir

    pack, _why = embedding_pack()
    with temp_state_dir("hive-brain-chaos-"), temp_dir("hive-brain-chaos-") as tmp:
        vault = tmp / "vault"
        os.environ["HIVE_BRAIN_VAULT"] = str(vault)
        os.environ["HIVE_BRAIN_AUTOSTART"] = "0"
        if pack is None:
            embed_every = 0
        init_vault(vault, resolve())
        load0 = load_average()
        res = run_chaos(vault, iterations=iterations, seed=seed, embed_every=embed_every, log=log)
        res.update(seed=seed, embed_every=embed_every, model=str(pack) if pack else None,
                   load_average_start=load0, load_average_end=load_average())
    return res


def report(result: dict[str, Any], console: Any) -> None:
    from .common import print_table

    rows = [[op, d["iterations"], d["killed_at_point"], d["killed_random"], d["completed"], d["acked"], d["violations"]]
            for op, d in result["per_op"].items()]
    rows.append(["all", result["iterations"], sum(d["killed_at_point"] for d in result["per_op"].values()),
                 sum(d["killed_random"] for d in result["per_op"].values()),
                 sum(d["completed"] for d in result["per_op"].values()),
                 sum(d["acked"] for d in result["per_op"].values()), len(result["violations"])])
    print_table(f"Chaos: kill -9 at every crash point and at random, seed {result['seed']} "
                f"({result['wall_s']} s, recovery p50 {result['recover_s_p50']} s, {result['notes']} notes at the end, "
                f"generation {result['generation']})",
                ["operation", "iterations", "killed at a point", "killed at random", "ran to the end", "acknowledged",
                 "violations"], rows, console)
    for v in result["violations"][:20]:
        console.print(f"[red]{v}[/]", markup=True)


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    from .common import summary_row

    return [summary_row(NAME, "kill -9 during writes", "violations", len(result["violations"]), target="0",
                        status="pass" if not result["violations"] else "FAIL")]


def _extra(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--embed-every", type=int, default=25, help="embed the queue and check vectors every N iterations")


if __name__ == "__main__":
    from .common import standalone_main

    sys.exit(standalone_main(sys.modules[__name__], extra_args=_extra,
                             kwargs_from_args=lambda a: {"iterations": a.iterations, "seed": a.seed,
                                                         "embed_every": a.embed_every}))
